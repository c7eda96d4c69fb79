"""One transactional.id on its transaction coordinator, in the shape of Kafka's.

Pure: no I/O and no clock of its own. Each request is a function of the state
the committed records left (`TxnMeta`) that answers with the state to write next
(the coordinator appends it as a record, acks=all, and it counts once committed)
and the reply, or an error. `replay` rebuilds every id from the records of the
coordinator's partition of the internal transaction-state topic.

- init: a producer id for the transactional.id (a new one, handed out by the
  controller, the first time) and its epoch bumped, which fences every older
  instance. An ongoing transaction is aborted first (PrepareAbort at the bumped
  epoch); the producer is told CONCURRENT_TRANSACTIONS and asks again.
- add-partitions: the partitions the transaction writes, before it writes
  them; the first one starts the transaction (Ongoing) and its timeout.
- end (commit or abort): Ongoing -> PrepareCommit or PrepareAbort, which decides
  the outcome once committed; the coordinator then writes a control marker into
  every partition of the transaction and, when all are written, CompleteCommit
  or CompleteAbort. A retried end that finds its own outcome is answered ok.
- timeout: an Ongoing transaction older than its timeout is aborted, at a
  bumped epoch (the producer that let it expire is fenced).
- fencing: a request with another producer id (INVALID_PRODUCER_ID_MAPPING) or
  another epoch (INVALID_PRODUCER_EPOCH) is refused; with `fencing` off an older
  epoch passes (only to show what a zombie producer does).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT)
PREPARING = (PREPARE_COMMIT, PREPARE_ABORT)

CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"  # retriable: a state change is under way
INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"    # fenced: a newer instance exists
INVALID_PRODUCER_ID_MAPPING = "INVALID_PRODUCER_ID_MAPPING"
INVALID_TXN_STATE = "INVALID_TXN_STATE"


def coordinator_partition(transactional_id: str, partitions: int) -> int:
    """The transaction-state partition (0-based) holding the id; its leader coordinates it."""
    return zlib.crc32(transactional_id.encode()) % partitions


@dataclass(frozen=True)
class TxnMeta:
    tid: str
    producer_id: int
    epoch: int
    state: str = EMPTY
    partitions: tuple[int, ...] = ()
    timeout_ms: int = 60000
    started_ms: int = 0  # when it became Ongoing (coordinator's clock; reset on replay)

    def record(self) -> dict[str, Any]:
        return {"type": "txn", "tid": self.tid, "producer_id": self.producer_id,
                "epoch": self.epoch, "state": self.state, "partitions": list(self.partitions),
                "timeout_ms": self.timeout_ms}


@dataclass(frozen=True)
class Step:
    """What a request leads to: a state to write (None: nothing), then the reply
    (`error` None for ok); `retry` says the producer is to ask again after the write."""

    write: TxnMeta | None
    error: str | None = None
    message: str = ""


def init(cur: TxnMeta | None, tid: str, timeout_ms: int, new_producer_id: int | None,
         now_ms: int) -> Step:
    """An InitProducerId with a transactional.id; `new_producer_id` is used if it has none."""
    if cur is None:
        if new_producer_id is None:
            raise ValueError("init: a new transactional.id needs a producer id")
        return Step(TxnMeta(tid, new_producer_id, 0, EMPTY, (), timeout_ms, now_ms))
    if cur.state in PREPARING:
        return Step(None, CONCURRENT_TRANSACTIONS, f"{tid}: {cur.state} under way")
    if cur.state == ONGOING:
        return Step(replace(cur, epoch=cur.epoch + 1, state=PREPARE_ABORT),
                    CONCURRENT_TRANSACTIONS, f"{tid}: aborting its ongoing transaction")
    return Step(replace(cur, epoch=cur.epoch + 1, state=EMPTY, partitions=(),
                        timeout_ms=timeout_ms))


def _fence(cur: TxnMeta | None, tid: str, producer_id: int, epoch: int,
           fencing: bool) -> Step | None:
    if cur is None or cur.producer_id != producer_id:
        return Step(None, INVALID_PRODUCER_ID_MAPPING,
                    f"{tid}: producer {producer_id} is not its producer")
    if epoch > cur.epoch or (epoch < cur.epoch and fencing):
        return Step(None, INVALID_PRODUCER_EPOCH,
                    f"{tid}: epoch {epoch} is not its epoch {cur.epoch}")
    return None


def add_partitions(cur: TxnMeta | None, tid: str, producer_id: int, epoch: int,
                   partitions: Iterable[int], now_ms: int, fencing: bool = True) -> Step:
    refused = _fence(cur, tid, producer_id, epoch, fencing)
    if refused is not None:
        return refused
    assert cur is not None
    if cur.state in PREPARING:
        return Step(None, CONCURRENT_TRANSACTIONS, f"{tid}: {cur.state} under way")
    have = set(cur.partitions) if cur.state == ONGOING else set()
    want = have | set(partitions)
    if cur.state == ONGOING and want == have:
        return Step(None)
    started = cur.started_ms if cur.state == ONGOING else now_ms
    return Step(replace(cur, state=ONGOING, partitions=tuple(sorted(want)), started_ms=started))


def end(cur: TxnMeta | None, tid: str, producer_id: int, epoch: int, commit: bool,
        fencing: bool = True) -> Step:
    refused = _fence(cur, tid, producer_id, epoch, fencing)
    if refused is not None:
        return refused
    assert cur is not None
    mine = (PREPARE_COMMIT, COMPLETE_COMMIT) if commit else (PREPARE_ABORT, COMPLETE_ABORT)
    if cur.state in mine:
        return Step(None)  # a retry that finds its own outcome
    if cur.state == ONGOING:
        return Step(replace(cur, state=PREPARE_COMMIT if commit else PREPARE_ABORT))
    if cur.state == EMPTY and not commit:
        return Step(None)  # nothing to abort
    return Step(None, INVALID_TXN_STATE,
                f"{tid}: cannot {'commit' if commit else 'abort'} in state {cur.state}")


def complete(cur: TxnMeta) -> TxnMeta:
    """Every marker is written: the transaction is over."""
    assert cur.state in PREPARING, cur.state
    done = COMPLETE_COMMIT if cur.state == PREPARE_COMMIT else COMPLETE_ABORT
    return replace(cur, state=done, partitions=())


def expired(metas: Iterable[TxnMeta], now_ms: int) -> list[TxnMeta]:
    """Ongoing transactions past their timeout, aborted at a bumped epoch."""
    return [replace(m, epoch=m.epoch + 1, state=PREPARE_ABORT) for m in metas
            if m.state == ONGOING and now_ms - m.started_ms > m.timeout_ms]


def replay(records: Sequence[Mapping[str, Any]], now_ms: int) -> dict[str, TxnMeta]:
    """Every transactional.id as the committed records leave it; an Ongoing transaction's
    timeout restarts from the replay (as a moved coordinator's does in Kafka)."""
    out: dict[str, TxnMeta] = {}
    for rec in records:
        if rec.get("type") != "txn" or rec.get("state") not in STATES:
            continue
        out[rec["tid"]] = TxnMeta(str(rec["tid"]), int(rec["producer_id"]), int(rec["epoch"]),
                                  str(rec["state"]), tuple(int(p) for p in rec["partitions"]),
                                  int(rec["timeout_ms"]), now_ms)
    return out
