"""The on-disk log: append, reload, torn tails, truncation, epochs, flushed position."""

from __future__ import annotations

from pathlib import Path

from broker.log import PartitionLog, lose_unflushed, read_int


def test_append_reload_and_read(tmp_path: Path) -> None:
    lg = PartitionLog(tmp_path, segment_bytes=64)
    lg.assign_epoch(1, 0)
    for v in range(20):
        assert lg.append([(1, v)]) == v
    lg.hw = 15
    lg.checkpoint_hw()
    lg.close()
    assert len(list(tmp_path.glob("*.log"))) > 1           # rolled segments
    again = PartitionLog(tmp_path, segment_bytes=64)
    assert again.leo == 20 and again.hw == 15
    assert [r.value for r in again.read(5, 3)] == [5, 6, 7]
    assert [r.value for r in again.read(14, 10, upto=again.hw)] == [14]
    assert again.epoch_cache == [(1, 0)]


def test_json_values_of_an_internal_topic_survive_a_reload(tmp_path: Path) -> None:
    """A group record is JSON with spaces, beside integer values with and without a tag."""
    lg = PartitionLog(tmp_path)
    rec = '{"type": "group", "members": {"a b": [1, 2]}}'
    lg.append([(1, rec), (1, 7), (1, 8)], [None, None, (5, 0, 0)])
    lg.close()
    again = PartitionLog(tmp_path)
    assert [(r.value, r.producer) for r in again.read(0, 10)] == [
        (rec, None), (7, None), (8, (5, 0, 0))]


def test_torn_tail_is_dropped_on_load(tmp_path: Path) -> None:
    lg = PartitionLog(tmp_path)
    lg.append([(0, 1), (0, 2)])
    lg.close()
    seg = next(tmp_path.glob("*.log"))
    with open(seg, "ab") as f:
        f.write(b"2 0 3")   # a crash mid-line
    again = PartitionLog(tmp_path)
    assert again.leo == 2
    again.append([(0, 9)])
    again.close()
    assert PartitionLog(tmp_path).values == [1, 2, 9]


def test_truncate_drops_records_epochs_and_clamps_hw(tmp_path: Path) -> None:
    lg = PartitionLog(tmp_path, segment_bytes=40)
    lg.assign_epoch(1, 0)
    lg.append([(1, v) for v in range(5)])
    lg.assign_epoch(3, 5)
    lg.append([(3, v) for v in range(5, 10)])
    lg.hw = 8
    assert lg.end_offset_for_epoch(1) == (1, 5)
    assert lg.end_offset_for_epoch(2) == (1, 5)
    assert lg.end_offset_for_epoch(3) == (3, 10)
    assert lg.end_offset_for_epoch(0) == (-1, -1)
    assert lg.truncate(4) == 6
    assert lg.leo == 4 and lg.hw == 4 and lg.epoch_cache == [(1, 0)]
    lg.append([(4, 42)])
    lg.close()
    again = PartitionLog(tmp_path)
    assert again.values == [0, 1, 2, 3, 42]
    assert again.epoch_cache == [(1, 0)]


def test_flush_records_the_durable_offset_and_lose_unflushed_cuts_back(tmp_path: Path) -> None:
    lg = PartitionLog(tmp_path)
    lg.assign_epoch(1, 0)
    lg.append([(1, 1), (1, 2)])
    lg.flush()
    lg.append([(1, 3)])
    lg.hw = 3
    lg.checkpoint_hw()
    lg.assign_epoch(2, 3)
    lg.close()
    assert read_int(tmp_path / "flushed") == 2
    assert lose_unflushed(tmp_path) == 1
    again = PartitionLog(tmp_path)
    assert again.values == [1, 2] and again.hw == 2 and read_int(tmp_path / "hw") == 2
    assert again.epoch_cache == [(1, 0)]
    assert lose_unflushed(tmp_path) == 0   # idempotent


def test_never_flushed_log_loses_everything(tmp_path: Path) -> None:
    lg = PartitionLog(tmp_path)
    lg.append([(0, 1)])
    lg.close()
    assert lose_unflushed(tmp_path) == 1
    assert PartitionLog(tmp_path).leo == 0
