"""The transaction coordinator's rules (broker/txn.py) and a replica's transaction index
(broker/txnindex.py), pure: no broker, no clock."""

from __future__ import annotations

from pathlib import Path

from broker import txn
from broker.log import PartitionLog
from broker.txnindex import TxnIndex, is_aborted, marker_value, parse_marker


def started(now: int = 0) -> txn.TxnMeta:
    meta = txn.init(None, "t", 1000, 7, now).write
    assert meta is not None and (meta.producer_id, meta.epoch, meta.state) == (7, 0, txn.EMPTY)
    return meta


def test_a_transaction_commits_through_prepare_and_complete() -> None:
    m = started()
    add = txn.add_partitions(m, "t", 7, 0, [3, 1], now_ms=5)
    assert add.error is None and add.write is not None
    m = add.write
    assert (m.state, m.partitions, m.started_ms) == (txn.ONGOING, (1, 3), 5)
    assert txn.add_partitions(m, "t", 7, 0, [1], now_ms=6).write is None  # already there
    m = txn.add_partitions(m, "t", 7, 0, [2], now_ms=6).write or m
    assert m.partitions == (1, 2, 3) and m.started_ms == 5
    prep = txn.end(m, "t", 7, 0, commit=True)
    assert prep.write is not None and prep.write.state == txn.PREPARE_COMMIT
    m = prep.write
    assert txn.end(m, "t", 7, 0, commit=True) == txn.Step(None)  # a retry is answered ok
    assert txn.end(m, "t", 7, 0, commit=False).error == txn.INVALID_TXN_STATE
    assert txn.add_partitions(m, "t", 7, 0, [1], 9).error == txn.CONCURRENT_TRANSACTIONS
    done = txn.complete(m)
    assert (done.state, done.partitions) == (txn.COMPLETE_COMMIT, ())
    assert txn.end(done, "t", 7, 0, commit=True) == txn.Step(None)
    again = txn.add_partitions(done, "t", 7, 0, [4], now_ms=20).write
    assert again is not None and (again.state, again.partitions, again.epoch) == (
        txn.ONGOING, (4,), 0)


def test_init_bumps_the_epoch_fences_the_old_one_and_aborts_what_it_left_open() -> None:
    m = txn.add_partitions(started(), "t", 7, 0, [1], 0).write
    assert m is not None
    step = txn.init(m, "t", 1000, None, 10)
    assert step.error == txn.CONCURRENT_TRANSACTIONS and step.write is not None
    assert (step.write.epoch, step.write.state, step.write.partitions) == (
        1, txn.PREPARE_ABORT, (1,))
    aborted = txn.complete(step.write)
    assert txn.end(aborted, "t", 7, 0, commit=True).error == txn.INVALID_PRODUCER_EPOCH
    assert txn.add_partitions(aborted, "t", 7, 0, [2], 11).error == txn.INVALID_PRODUCER_EPOCH
    assert txn.add_partitions(aborted, "t", 8, 1, [2], 11).error == \
        txn.INVALID_PRODUCER_ID_MAPPING
    fresh = txn.init(aborted, "t", 1000, None, 12).write
    assert fresh is not None and (fresh.epoch, fresh.state) == (2, txn.EMPTY)
    # with fencing off (zombie-producer's broker setting) the older epoch passes
    assert txn.add_partitions(fresh, "t", 7, 0, [2], 13, fencing=False).error is None


def test_a_transaction_past_its_timeout_is_aborted_at_a_bumped_epoch() -> None:
    m = txn.add_partitions(started(), "t", 7, 0, [1], now_ms=100).write
    assert m is not None
    assert txn.expired([m], now_ms=1100) == []
    (late,) = txn.expired([m], now_ms=1101)
    assert (late.epoch, late.state) == (1, txn.PREPARE_ABORT)


def test_replay_keeps_each_ids_last_committed_state() -> None:
    m = started()
    m2 = txn.add_partitions(m, "t", 7, 0, [1], 0).write
    assert m2 is not None
    other = txn.init(None, "u", 500, 9, 0).write
    assert other is not None
    got = txn.replay([m.record(), {"type": "offsets"}, m2.record(), other.record()], 42)
    assert got["t"] == txn.TxnMeta("t", 7, 0, txn.ONGOING, (1,), 1000, 42)
    assert got["u"].producer_id == 9


def test_the_index_knows_open_transactions_the_lso_and_aborted_ranges() -> None:
    idx = TxnIndex()
    idx.observe(0, 10, None, False)  # a plain record
    idx.observe(1, 11, 5, True)      # producer 5 opens
    idx.observe(2, 12, 6, True)      # producer 6 opens
    idx.observe(3, 13, 5, True)
    assert idx.lso(hw=4) == 1 and idx.lso(hw=0) == 0
    idx.observe(4, marker_value(5, 0, commit=False), None, False)
    assert idx.lso(hw=5) == 2
    idx.observe(5, marker_value(6, 0, commit=True), None, False)
    assert idx.lso(hw=6) == 6 and idx.open == {}
    ranges = idx.aborted_from(0)
    assert ranges == {5: [(1, 4)]}
    assert is_aborted(ranges, 5, 3) and not is_aborted(ranges, 6, 2)
    assert idx.aborted_from(5) == {}
    assert parse_marker(marker_value(5, 2, True)) == (5, 2, True)
    assert parse_marker('{"type":"group"}') is None and parse_marker(3) is None


def test_the_log_keeps_transactional_flags_and_markers_across_a_reload(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p")
    log.append([(0, 1), (0, 2)], [(5, 0, 0), (5, 0, 1)], [True, True])
    log.append([(0, marker_value(5, 1, commit=False))])
    assert log.txn_index.aborted_from(0) == {5: [(0, 2)]}
    assert log.producers.entries[5].epoch == 1  # the marker fenced epoch 0
    log.close()
    again = PartitionLog(tmp_path / "p")
    assert [r.txn for r in again.read(0, 10)] == [True, True, False]
    assert again.txn_index.aborted_from(0) == {5: [(0, 2)]}
    assert again.producers.entries[5].epoch == 1
    assert [r["value"] for r in again.dump_rows("n1", 0, 0)[1:]] == [1, 2]  # no marker
    again.truncate(2)
    assert again.txn_index.open == {5: 0} and again.txn_index.aborted == []
