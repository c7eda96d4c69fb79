"""Our broker's client for the txn workload: each `txn` operation is one transaction.

Its micro-ops run in order: the keys of its sends are added to the transaction
first (one request), each run of consecutive sends goes out as the queue's sends
do (idempotent and transactional), each poll reads the assigned keys at the
consumer's isolation level. Then the transaction commits, or aborts when the
operation says `"abort": true` (the generator's coin). Completions follow
HISTORY.md and systems/undertow/txn_producer.py:
- committed: `ok`, with every send's offset and every poll's records;
- certainly not committed (aborted, or a failure before the commit was sent):
  `fail`; its polls' records and sends' offsets stay in it, as reads that
  really happened and sends that did not;
- a commit whose outcome is unknown: `info`.
`poll` and `assign` operations (the final reads) are the queue client's.
"""

from __future__ import annotations

import uuid
from typing import Any

from harness.protocols import Run
from harness.runfiles import Op
from systems.undertow.client import ClientError
from systems.undertow.pipeline import produce_many
from systems.undertow.queue_client import QueueClient
from systems.undertow.txn_producer import Outcome, TxnProducer
from workloads.txn import run_micro_ops

TRANSACTION_TIMEOUT_MS = 10_000


class TxnClient:
    """harness.protocols.Client for `txn`, `poll` and `assign`; one per process."""

    def __init__(self, queue: QueueClient, *,
                 transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS,
                 shared_ids: int | None = None) -> None:
        """shared_ids: clients take their transactional.id from this many, in turn, so
        several live instances share one (zombie-producer); None: one id per client."""
        self.queue = queue
        self.timeout_ms = transaction_timeout_ms
        self.shared_ids = shared_ids
        self.opened = 0
        self.producer: TxnProducer | None = None

    def open(self, run: Run, node: str) -> TxnClient:
        q = self.queue.open(run, node)
        out = TxnClient(q, transaction_timeout_ms=self.timeout_ms)
        # one transactional.id per client: a process that ended `info` never comes back, and
        # what it left open the coordinator aborts at the transaction timeout
        tid = f"txn-{uuid.uuid4().hex[:12]}"
        if self.shared_ids:
            tid = f"txn-shared-{self.opened % self.shared_ids}"
        self.opened += 1
        out.producer = TxnProducer(q.conn, tid, transaction_timeout_ms=self.timeout_ms)
        return out

    def invoke(self, run: Run, op: Op) -> Op:
        if op.f == "txn":
            return self._txn(op)
        return self.queue.invoke(run, op)

    def _txn(self, op: Op) -> Op:
        assert self.producer is not None, "open() first"
        p = self.producer
        micro = [list(m) for m in op.value]
        try:
            p.begin()
            p.add_partitions({int(m[1]) for m in micro if m[0] == "send"})
        except ClientError as e:
            self._abort_now()
            return op.complete("fail", error=f"{e.code}: {e}")
        done, error = run_micro_ops(micro, self._poll, self._send_run)
        if error is not None:
            self._abort_now()  # never committed
            return op.complete("fail", done, error=f"{error.code}: {error}")
        outcome = p.end(commit=not op.extra.get("abort"))
        if outcome is Outcome.COMMITTED:
            return op.complete("ok", done)
        if not p.ready:
            self._abort_now()
        if outcome is Outcome.ABORTED:
            return op.complete("fail", done, error="aborted")
        return op.complete("info", done, error="commit outcome unknown")

    def _poll(self) -> tuple[list[Any], ClientError | None]:
        read, error = self.queue.poll_assigned()
        return (["poll", read] if read else ["poll"]), error

    def _send_run(self, items: list[tuple[int, int]]
                  ) -> tuple[list[int | None], ClientError | None]:
        results = produce_many(self.queue.conn, items, "all")
        errors = [r for r in results if isinstance(r, ClientError)]
        return ([None if isinstance(r, ClientError) else r for r in results],
                errors[0] if errors else None)

    def _abort_now(self) -> None:
        """Initialise again at once, which aborts what this producer left open (a commit
        already prepared still completes): its partitions' last stable offsets move on now,
        not at the transaction timeout. Best effort: the next transaction tries again."""
        assert self.producer is not None
        self.producer.abandon()
        try:
            self.producer.init()
        except ClientError:
            pass

    def close(self, run: Run) -> None:
        self.queue.close(run)
