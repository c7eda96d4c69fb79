"""The txn workload's client through Kafka's Java client: a transactional KafkaProducer.

The same transactions and completions as the librdkafka client
(systems/kafka/txn_client.py): each process has a transactional.id of its own and
initialises it once; a run of sends is sent and flushed, each send's offset from its
RecordMetadata (with `--txn-sends at-commit` sent and left, for commitTransaction to
flush); with `--sub-via subscribe` the group consumer's positions go into the
transaction with sendOffsetsToTransaction and its groupMetadata(). Completions:
- commitTransaction returned: `ok`;
- certainly not committed: `fail` (the commit was never attempted, or it failed and
  abortTransaction on the same producer then returned: an acknowledged abort);
- any other ending of a commit: `info` (one that timed out is tried again, as the Java
  client allows, COMMIT_TRIES times in all).
A producer that threw a fatal error (fenced, an epoch or sequence it lost, anything
abortTransaction cannot follow) is closed and the next transaction starts on a new one
with the same transactional.id, whose initTransactions fences the old.

KIP-890 part 2 (transaction version 2, the Java client from 4.0 on a cluster whose
transaction.version feature is 2) bumps the producer's epoch at every transaction end,
so a late write or marker of an earlier transaction is refused; the client negotiates
it itself, nothing here differs.
"""

from __future__ import annotations

import uuid
from typing import Any

from harness.runfiles import Op, OpType
from systems.kafka.java import jvm, outcomes
from systems.kafka.java.client import JavaQueueClient
from systems.kafka.java.group import JavaGroupClient, Member
from workloads.txn import run_transaction

TRANSACTION_TIMEOUT_MS = 10_000  # as the librdkafka client's
COMMIT_TRIES = 3
# errors after which the producer cannot go on (the Java client's fatal errors). Not
# InvalidProducerEpochException: its javadoc says to abort, which re-initialises the producer
# (KIP-588); an abort that fails drops the producer anyway
FATAL = frozenset({"ProducerFencedException",
                   "OutOfOrderSequenceException", "UnsupportedVersionException",
                   "AuthorizationException", "TransactionalIdAuthorizationException",
                   "UnknownProducerIdException", "InvalidTxnStateException",
                   "IllegalStateException", "FencedInstanceIdException"})


def fatal(e: Any) -> bool:
    return any(n in FATAL for n in outcomes.class_names(outcomes.unwrap(e)))


class JavaTxnClient:
    """harness.protocols.Client for `txn`, `poll` and `assign` on Kafka; one per process."""

    def __init__(self, queue: JavaQueueClient, *, isolation: str = "read_committed",
                 transaction_timeout_ms: int | None = None,
                 group: JavaGroupClient | None = None, sends: str = "awaited") -> None:
        """transaction_timeout_ms: None keeps the librdkafka client's rule (10 s, or the
        delivery timeout and 1 s more); given, it is used as it is (Jepsen's 1000).
        sends: the workload's --txn-sends (workloads/txn.py `run_transaction`)."""
        self.queue = queue
        self.sends = sends
        self.futures: list[Any] = []  # the transaction's sends left to the producer
        self.group = group
        self.isolation = isolation
        self.timeout_ms = transaction_timeout_ms
        self.tid = ""
        self.producer: Any = None
        self.ready = False  # initTransactions done, no transaction left open
        self.rebalances = 0
        self.moved = False
        self.open_txn = False  # beginTransaction returned and no commit or abort followed

    def open(self, run: Any, node: str) -> JavaTxnClient:
        group = self.group.open(run, node) if self.group is not None else None
        q = group.inner if group is not None else self.queue.open(run, node, self.isolation,
                                                                   producer=False)
        out = JavaTxnClient(q, isolation=self.isolation, transaction_timeout_ms=self.timeout_ms,
                            group=group, sends=self.sends)
        out.tid = f"txn-{uuid.uuid4().hex[:12]}"
        return out

    def producer_settings(self) -> dict[str, Any]:
        q = self.queue
        timeout = self.timeout_ms if self.timeout_ms is not None else \
            max(TRANSACTION_TIMEOUT_MS, int(q.timeout_s * 1000) + 1000)
        return {**q.producer_settings(), "enable.idempotence": True,
                "transactional.id": self.tid, "transaction.timeout.ms": timeout}

    def invoke(self, run: Any, op: Op) -> Op:
        if op.f == "txn":
            return run_transaction(op, self, self.sends)
        done: Op = (self.group or self.queue).invoke(run, op)
        return done

    # -- the producer --------------------------------------------------------------------

    def _init(self) -> Any:
        if self.producer is not None and self.ready:
            return self.producer
        if self.producer is None:
            self.producer = jvm.cls("org.apache.kafka.clients.producer.KafkaProducer")(
                jvm.properties(self.producer_settings()))
        # a timeout leaves the producer as it is: initTransactions may be called again
        self.producer.initTransactions()
        self.ready = True
        return self.producer

    def _drop(self) -> None:
        if self.producer is not None:
            try:
                self.producer.close(jvm.duration_ms(0))
            except jvm.exception_type():
                pass
            self.producer = None
        self.ready = False

    def _after(self, e: Any) -> None:
        """A producer that cannot go on is replaced at the next begin."""
        if fatal(e):
            self._drop()
        else:
            self.ready = False

    def _abort(self) -> bool:
        """abortTransaction on the same producer; True when the coordinator aborted it."""
        if self.producer is None:
            return False
        try:
            self.producer.abortTransaction()
            self.ready = True
            return True
        except jvm.exception_type():
            self._drop()  # whatever it left open, the next producer's init aborts
            return False

    def _member(self) -> Member | None:
        return self.group.member if self.group is not None else None

    # -- workloads.txn.Transactional -------------------------------------------------------

    def begin(self, keys: set[int]) -> str | None:
        self.moved, self.futures = False, []
        m = self._member()
        try:
            if m is not None and m.behind:
                self._rewind(m)
            p = self._init()
            p.beginTransaction()
            self.open_txn = True
        except jvm.exception_type() as e:
            self._after(e)
            return outcomes.text(e)
        self.rebalances = m.rebalances if m is not None else 0
        return None

    def _rewind(self, m: Member) -> None:
        """Each assigned key back to the group's committed offset (the beginning where none)."""
        tps = m.consumer.assignment()
        if not tps.isEmpty():
            committed = m.consumer.committed(tps, jvm.duration_ms(int(self.queue.timeout_s
                                                                      * 1000)))
            for tp in tps:
                meta = committed.get(tp)
                if meta is None:
                    m.consumer.seekToBeginning(jvm.jlist([tp]))
                else:
                    m.consumer.seek(tp, meta.offset())
        m.behind = False

    def _rebalanced(self, m: Member) -> str | None:
        if m.rebalances != self.rebalances:
            return "REBALANCE: the group rebalanced during the transaction"
        return None

    def poll(self) -> tuple[list[Any], str | None]:
        m = self._member()
        if m is None or self.group is None:
            done = self.queue.invoke(None, Op("invoke", 0, "poll", [["poll"]]))
            micro = list(done.value[0])
            return (micro if len(micro) > 1 and micro[1] else ["poll"]), done.error
        read, error = self.group.fetch_batch()
        if self.moved and m.rebalances != self.rebalances:
            return ["poll"], self._rebalanced(m)
        if not (self.moved or read):
            self.rebalances = m.rebalances
        self.moved = self.moved or bool(read)
        return (["poll", read] if read else ["poll"]), error or self._rebalanced(m)

    def send_run(self, items: list[tuple[int, int]]) -> tuple[list[int | None], str | None]:
        p = self.producer
        futures: list[Any] = []
        error: str | None = None
        for key, value in items:
            try:
                futures.append(p.send(self.queue.record(key, value)))
            except jvm.exception_type() as e:
                error = outcomes.text(e)
                self._after(e)
                break
        offsets: list[int | None] = []
        for f in futures:
            try:
                meta = f.get()
                offsets.append(int(meta.offset()) if meta.hasOffset() else None)
            except jvm.exception_type() as e:
                offsets.append(None)
                if error is None:
                    error = outcomes.text(e)
        offsets += [None] * (len(items) - len(offsets))
        return offsets, error

    def send_async(self, items: list[tuple[int, int]]) -> str | None:
        for key, value in items:
            try:
                self.futures.append(self.producer.send(self.queue.record(key, value)))
            except jvm.exception_type() as e:
                self._after(e)
                return outcomes.text(e)
        return None

    def sent(self) -> list[int | None]:
        offsets: list[int | None] = []
        for f in self.futures:
            offset = None
            if f.isDone():
                try:
                    meta = f.get()
                    offset = int(meta.offset()) if meta.hasOffset() else None
                except jvm.exception_type():
                    pass
            offsets.append(offset)
        return offsets

    def send_offsets(self) -> str | None:
        m = self._member()
        if m is None or not self.moved:
            return None
        if (moved := self._rebalanced(m)) is not None:
            return moved
        try:
            positions = jvm.cls("java.util.HashMap")()
            meta = jvm.cls("org.apache.kafka.clients.consumer.OffsetAndMetadata")
            for tp in m.consumer.assignment():
                positions.put(tp, meta(m.consumer.position(tp)))
            self.producer.sendOffsetsToTransaction(positions, m.consumer.groupMetadata())
        except jvm.exception_type() as e:
            self._after(e)
            return outcomes.text(e)
        return None

    def commit(self) -> tuple[OpType, str | None]:
        p = self.producer
        self.open_txn = False
        last = ""
        for _ in range(COMMIT_TRIES):
            try:
                p.commitTransaction()
                return "ok", None
            except jvm.exception_type() as e:
                last = outcomes.text(e)
                if str(outcomes.unwrap(e).getClass().getSimpleName()) == "TimeoutException":
                    continue  # the Java client resumes a commit that timed out
                self._behind()
                if not fatal(e) and self._abort():
                    return "fail", f"aborted after {last}"
                break
        self._behind()
        self._drop()
        return "info", f"commit outcome unknown: {last}"

    def abort(self) -> None:
        self._behind()
        if self.open_txn:
            self.open_txn = False
            self._abort()

    def text(self, error: str) -> str:
        return error

    def extra(self) -> dict[str, Any]:
        m = self._member()
        if m is None:
            return {}
        try:
            return {"assignment": m.assignment()}
        except jvm.exception_type():
            return {}

    def _behind(self) -> None:
        m = self._member()
        if m is not None and self.moved:
            m.behind = True

    def close(self, run: Any) -> None:
        self._drop()
        if self.group is not None:
            self.group.close(run)
        else:
            self.queue.close(run)
