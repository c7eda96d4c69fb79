"""The idempotent producer's state on a replica: duplicates, sequence order, epochs, and the
state kept with the log (rebuilt on reload and after truncation). No processes: the rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker.log import PartitionLog
from broker.producers import ProducerStates
from broker.protocol import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    ProtocolError,
    producer_tag,
)


def _refused(states: ProducerStates, tag: tuple[int, int, int]) -> str:
    with pytest.raises(ProtocolError) as e:
        states.check(tag)
    return e.value.code


def test_duplicates_answer_the_original_offset_and_gaps_are_refused() -> None:
    s = ProducerStates()
    assert s.check((7, 0, 0)) is None          # a new producer
    s.observe((7, 0, 0), 10)
    s.observe((7, 0, 1), 12)
    assert s.check((7, 0, 1)) == 12 and s.check((7, 0, 0)) == 10
    assert s.check((7, 0, 2)) is None          # the next one
    assert _refused(s, (7, 0, 3)) == OUT_OF_ORDER_SEQUENCE_NUMBER
    for seq in range(2, 8):
        s.observe((7, 0, seq), 20 + seq)
    # only the last five are remembered, as a leader keeps five batches per producer
    assert s.check((7, 0, 3)) == 23
    assert _refused(s, (7, 0, 1)) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert s.check((8, 0, 5)) is None          # other producers are independent


def test_epochs_fence_older_producers_and_restart_sequences() -> None:
    s = ProducerStates()
    s.observe((3, 1, 0), 0)
    assert _refused(s, (3, 0, 1)) == INVALID_PRODUCER_EPOCH
    assert _refused(s, (3, 2, 4)) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert s.check((3, 2, 0)) is None
    s.observe((3, 2, 0), 1)
    assert _refused(s, (3, 1, 1)) == INVALID_PRODUCER_EPOCH


def test_the_state_is_kept_with_the_log(tmp_path: Path) -> None:
    lg = PartitionLog(tmp_path, segment_bytes=64)
    lg.append([(1, 100), (1, 101)], [(5, 0, 0), None])
    lg.append([(1, 102), (1, 103)], [(5, 0, 1), (6, 0, 0)])
    assert lg.producers.check((5, 0, 1)) == 2
    assert [r.producer for r in lg.read(0, 10)] == [(5, 0, 0), None, (5, 0, 1), (6, 0, 0)]
    lg.close()
    again = PartitionLog(tmp_path, segment_bytes=64)  # a restart reads it back from disk
    assert again.values == [100, 101, 102, 103]
    assert again.producers.check((5, 0, 1)) == 2 and again.producers.check((6, 0, 0)) == 3
    again.truncate(2)  # the records a new leader never had go, and their producers' state
    assert again.producers.check((5, 0, 1)) is None
    assert again.producers.check((6, 0, 0)) is None
    assert again.producers.check((5, 0, 0)) == 0
    again.close()
    assert PartitionLog(tmp_path).producers.check((5, 0, 1)) is None


def test_a_produce_names_all_three_producer_fields_or_none() -> None:
    assert producer_tag({"partition": 0}) is None
    assert producer_tag({"producer_id": 1, "producer_epoch": 0, "sequence": 4}) == (1, 0, 4)
    with pytest.raises(ProtocolError, match="'sequence' must be a non-negative integer"):
        producer_tag({"producer_id": 1, "producer_epoch": 0})
    with pytest.raises(ProtocolError, match="'producer_epoch'"):
        producer_tag({"producer_id": 1, "producer_epoch": -1, "sequence": 0})


def test_one_batch_with_several_records_of_a_producer(tmp_path: Path) -> None:
    """Produces of one event-loop tick are one append; each record is judged after the
    producer's earlier records of the batch, as if they had come one at a time."""
    from broker.config import Settings
    from broker.metadata import PartitionMeta
    from broker.partition import Done, Partition

    p = Partition(node="n1", pid=0, log=PartitionLog(tmp_path), settings=Settings())
    p.become_leader(PartitionMeta(0, ("n1",), "n1", 1, 1, ("n1",)), now_ms=0)
    got: list[tuple[int, int | None, str | None]] = []

    def done(i: int) -> Done:
        return lambda offset, err: got.append((i, offset, err.code if err else None))

    for i, (value, seq) in enumerate([(10, 0), (11, 1), (11, 1), (13, 3), (12, 2)]):
        p.pending.append((value, (4, 0, seq), False, done(i)))
    assert p.append_pending() == 3
    assert got == [(0, 0, None), (1, 1, None), (2, 1, None),
                   (3, None, OUT_OF_ORDER_SEQUENCE_NUMBER), (4, 2, None)]
    assert p.log.values == [10, 11, 12]


def test_a_marker_fences_an_older_epoch_queued_behind_it_in_one_batch(tmp_path: Path) -> None:
    """An abort marker at a bumped epoch, then a late produce of the old epoch in the same
    batch: the produce is refused, never appended after the marker as a new transaction."""
    from broker.config import Settings
    from broker.metadata import PartitionMeta
    from broker.partition import Done, Partition
    from broker.protocol import INVALID_PRODUCER_EPOCH
    from broker.txnindex import marker_value

    p = Partition(node="n1", pid=0, log=PartitionLog(tmp_path), settings=Settings())
    p.become_leader(PartitionMeta(0, ("n1",), "n1", 1, 1, ("n1",)), now_ms=0)
    got: list[tuple[int, int | None, str | None]] = []

    def done(i: int) -> Done:
        return lambda offset, err: got.append((i, offset, err.code if err else None))

    p.pending.append((10, (4, 0, 0), True, done(0)))
    assert p.append_pending() == 1
    p.pending.append((marker_value(4, 1, commit=False), None, False, done(1)))
    p.pending.append((11, (4, 0, 1), True, done(2)))
    assert p.append_pending() == 1
    assert got == [(0, 0, None), (1, 1, None), (2, None, INVALID_PRODUCER_EPOCH)]
    assert p.log.txn_index.open == {} and p.log.txn_index.aborted == [(1, 4, 0)]
