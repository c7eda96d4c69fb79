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

With `--sub-via subscribe` the polls are the run's consumer group's
(systems/undertow/group_consumer.py, committing nothing by itself), and the
transaction is the exactly-once loop of workloads/txn.py `run_transaction`: the
positions its polls reached go into the transaction with the generation and
member id they were read under (a rebalance after its polls consumed records
fails the next poll, and a fenced generation's offsets are refused: either way
it aborts; before any record, it takes the new generation); unless it
commits, the membership rewinds to the group's committed positions, read once
they are stable, before its next transaction. `subscribe` and the final `assign`s
are the group client's.
"""

from __future__ import annotations

import uuid
from typing import Any

from harness.protocols import Run
from harness.runfiles import Op, OpType
from systems.undertow.admin import TOPIC
from systems.undertow.client import ClientError
from systems.undertow.group_consumer import GroupQueueClient, GroupSession
from systems.undertow.group_member import fetch_committed
from systems.undertow.pipeline import produce_many
from systems.undertow.queue_client import QueueClient
from systems.undertow.txn_producer import Outcome, TxnProducer
from workloads.options import GROUP_ID
from workloads.txn import run_transaction

TRANSACTION_TIMEOUT_MS = 10_000


class TxnClient:
    """harness.protocols.Client for `txn`, `poll` and `assign` (and `subscribe` with a
    group); one per process. It is also the workload's `Transactional` for its `txn`s."""

    def __init__(self, queue: QueueClient, *,
                 transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS,
                 shared_ids: int | None = None, group: GroupQueueClient | None = None,
                 sends: str = "awaited") -> None:
        """shared_ids: clients take their transactional.id from this many, in turn, so
        several live instances share one (zombie-producer); None: one id per client.
        group: the consumer group's client (--sub-via subscribe), over `queue`.
        sends: the workload's --txn-sends (workloads/txn.py `run_transaction`); our producer
        sends synchronously, so the sends left to it wait in `pending` for the commit."""
        self.queue = queue
        self.sends = sends
        self.pending: list[tuple[int, int]] = []  # sends left for the commit to flush
        self.flushed: list[int | None] = []  # their offsets, once flushed
        self.group = group
        self.timeout_ms = transaction_timeout_ms
        self.shared_ids = shared_ids
        self.opened = 0
        self.producer: TxnProducer | None = None
        # the transaction's hold on the group: generation, member id, keys, positions
        self.held: tuple[int, str, tuple[int, ...], dict[int, int]] | None = None
        self.moved = False  # its polls moved the positions

    def open(self, run: Run, node: str) -> TxnClient:
        group = self.group.open(run, node) if self.group is not None else None
        q = group.inner if group is not None else self.queue.open(run, node)
        out = TxnClient(q, transaction_timeout_ms=self.timeout_ms, group=group,
                        sends=self.sends)
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
            return run_transaction(op, self, self.sends)
        if self.group is not None:
            return self.group.invoke(run, op)
        return self.queue.invoke(run, op)

    # -- workloads.txn.Transactional ------------------------------------------------------
    @property
    def _session(self) -> GroupSession | None:
        return self.group.session if self.group is not None else None

    def begin(self, keys: set[int]) -> ClientError | None:
        assert self.producer is not None, "open() first"
        s = self._session
        self.held, self.moved, self.pending, self.flushed = None, False, [], []
        try:
            if s is not None and s.behind:
                self._rewind(s)
            self.producer.begin()
            self.producer.add_partitions(keys)
        except ClientError as e:
            return e
        if s is not None:
            self.held = s.holding()
        return None

    def _rewind(self, s: GroupSession) -> None:
        gen, _member, keys, _positions = s.holding()
        if gen < 0:
            return  # rejoining: the join starts from the committed positions
        got = fetch_committed(self.queue.conn, GROUP_ID, [(TOPIC, k) for k in keys])
        s.rewind(gen, {p: o for (t, p), o in got.items() if t == TOPIC})

    def poll(self) -> tuple[list[Any], ClientError | None]:
        s = self._session
        if s is None or self.group is None:
            read, error = self.queue.poll_assigned()
            return (["poll", read] if read else ["poll"]), error
        assert self.held is not None
        gen, _keys, got, error = self.group.fetch_batch(s)
        if gen != self.held[0] and not self.moved:
            self.held = s.holding()  # nothing consumed yet: it takes the new generation
        if gen != self.held[0] or not s.consume(gen, got):
            return ["poll"], ClientError("REBALANCE", f"the group moved from generation "
                                         f"{self.held[0]} during the transaction",
                                         definite=True)
        positions = self.held[3]
        for k, rs in got.items():
            if rs:
                positions[k] = rs[-1][0] + 1
                self.moved = True
        read = {str(k): [[o, v] for o, v in rs] for k, rs in got.items() if rs}
        return (["poll", read] if read else ["poll"]), error

    def send_run(self, items: list[tuple[int, int]]
                 ) -> tuple[list[int | None], ClientError | None]:
        results = produce_many(self.queue.conn, items, "all")
        errors = [r for r in results if isinstance(r, ClientError)]
        return ([None if isinstance(r, ClientError) else r for r in results],
                errors[0] if errors else None)

    def send_async(self, items: list[tuple[int, int]]) -> ClientError | None:
        self.pending.extend(items)
        return None

    def sent(self) -> list[int | None]:
        return self.flushed + [None] * len(self.pending)

    def send_offsets(self) -> ClientError | None:
        if self.held is None or not self.moved:
            return None
        assert self.producer is not None
        gen, member, keys, positions = self.held
        try:
            self.producer.send_offsets(GROUP_ID, {(TOPIC, k): positions[k] for k in keys},
                                       generation=gen, member_id=member)
        except ClientError as e:
            return e
        return None

    def commit(self) -> tuple[OpType, str | None]:
        assert self.producer is not None
        if self.pending:  # the sends left to the producer go first, as a flush
            self.flushed, error = self.send_run(self.pending)
            self.pending = []
            if error is not None:
                self.abort()  # nothing was committed, whatever the abort's answer
                return "fail", f"aborted after {self.text(error)}"
        p = self.producer
        outcome = p.end(commit=True)
        if outcome is Outcome.COMMITTED:
            return "ok", None
        self._behind()
        if not p.ready:
            self._abort_now()
        if outcome is Outcome.ABORTED:
            return "fail", "aborted"
        return "info", "commit outcome unknown"

    def abort(self) -> None:
        assert self.producer is not None
        self._behind()
        if self.producer.ready:
            self.producer.end(commit=False)
        if not self.producer.ready:
            self._abort_now()  # never committed

    def text(self, error: ClientError) -> str:
        return f"{error.code}: {error}"

    def extra(self) -> dict[str, Any]:
        if self.held is None:
            return {}
        return {"generation": self.held[0], "assignment": list(self.held[2])}

    def _behind(self) -> None:
        s = self._session
        if s is not None and self.moved:
            s.behind = True

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
        if self.group is not None:
            self.group.close(run)
        else:
            self.queue.close(run)
