"""The txn workload's client on Apache Kafka: confluent-kafka's transactional producer.

One client per process, as systems/undertow/txn_client.py on our broker, with the
same micro-op shapes (HISTORY.md). Each process has a transactional.id of its own
and initialises it once; each `txn` operation is one transaction: runs of
consecutive sends are produced and flushed (each send's offset from its delivery
report; with `--txn-sends at-commit` produced and left, for commit_transaction to
flush, which raises an abortable error when one failed), each poll reads the
assigned keys through the queue client's consumer at the run's isolation.level.
Then commit, or abort when the invoke says `"abort": true`. Completions:
- commit_transaction returned: `ok`;
- certainly not committed: `fail`. Only a commit can commit a transaction, so one
  whose commit was never attempted is not committed (whatever it left open the next
  init_transactions, or the coordinator at the transaction timeout, aborts); nor is
  one whose commit failed and whose abort_transaction then succeeded (the
  coordinator refuses to abort what it is committing);
- a commit with any other ending: `info`.
After anything but a clean commit or abort the producer is replaced by a new one
with the same transactional.id, whose init_transactions fences the old and aborts
what it left open, as librdkafka requires after a fatal or abortable error. An
init_transactions that failed retriably (a timeout, a coordinator still loading) is
called again on the same producer, as librdkafka asks: a new producer would start a
second InitProducerId while the first is still aborting the old transaction, and be
refused with CONCURRENT_TRANSACTIONS, again and again under load.
send_offsets_to_transaction can block past its own timeout while the group's
coordinator is down (librdkafka #5456, #5511), so it runs in a thread waited for a
bounded time: a transaction stuck there fails (its commit was never attempted) and
the next begins on a new producer, which fences the stuck one.
`poll` and `assign` operations (the final reads) are the queue client's.

With `--sub-via subscribe` the polls are the run's consumer group's (a
KafkaGroupClient's consumer at the run's isolation.level, auto-commit off), and
the transaction is the exactly-once loop of workloads/txn.py `run_transaction`:
its polls' positions go into it with send_offsets_to_transaction and the
consumer's group metadata (a rebalance after its polls consumed records fails
it: it aborts);
unless it commits, the consumer seeks back to the group's committed offsets
(fetched once stable) before its next transaction. `subscribe` and the final
`assign`s are the group client's.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from harness.runfiles import Op, OpType
from systems.kafka import config
from systems.kafka.client import KafkaQueueClient, _rdkafka_logger
from systems.kafka.group_client import GroupConsumer, KafkaGroupClient
from workloads.txn import run_transaction

TRANSACTION_TIMEOUT_MS = 10_000  # as our broker's txn client: what a lost client holds open
STUCK_GRACE_S = 2.0  # past a call's own timeout: it is stuck (librdkafka #5456, #5511)
COMMIT_TRIES = 3  # a retriable commit error: commit_transaction may be called again


def _text(e: KafkaException | KafkaError | BufferError) -> str:
    """`NAME: description`, as the queue client's errors read in the history."""
    err = e.args[0] if isinstance(e, KafkaException) else e
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return f"_QUEUE_FULL: {err}" if isinstance(e, BufferError) else str(err)


def _within(deadline_s: float, call: Callable[[], None]) -> None:
    """call() in a thread of its own, waited for deadline_s: TimeoutError if it has not
    returned (a call into C cannot be interrupted: the daemon thread is left to it), and
    what it raised otherwise."""
    done: Future[None] = Future()

    def run() -> None:
        try:
            call()
        except BaseException as e:  # handed to the caller
            done.set_exception(e)
        else:
            done.set_result(None)

    threading.Thread(target=run, name="librdkafka-call", daemon=True).start()
    done.result(timeout=deadline_s)


def _retriable(e: KafkaException) -> bool:
    err = e.args[0]
    return isinstance(err, KafkaError) and bool(err.retriable())


class KafkaTxnClient:
    """harness.protocols.Client for `txn`, `poll` and `assign` on Kafka; one per process."""

    def __init__(self, queue: KafkaQueueClient, *, isolation: str = "read_committed",
                 transaction_timeout_ms: int | None = None,
                 group: KafkaGroupClient | None = None, sends: str = "awaited") -> None:
        """isolation: the consumers' isolation.level (read_committed, read_uncommitted);
        sends: the workload's --txn-sends (workloads/txn.py `run_transaction`);
        group: the consumer group's client (--sub-via subscribe), over `queue`;
        transaction_timeout_ms: None, TRANSACTION_TIMEOUT_MS or the delivery timeout and
        1 s more; given, used as it is, and librdkafka's message.timeout.ms is cut to it
        (librdkafka refuses a message timeout above the transaction timeout)."""
        self.queue = queue
        self.group = group
        self.sends = sends
        # the transaction's sends left to the producer: how many, and their delivery reports
        self.handed = 0
        self.reports: dict[int, tuple[KafkaError | None, Message]] = {}
        self.current: Producer | None = None  # the ongoing transaction's producer
        self.rebalances = 0  # the group consumer's count when the transaction began
        self.moved = False  # its polls moved the group consumer's positions
        self.isolation = isolation
        self.timeout_ms = transaction_timeout_ms
        self.tid = ""
        self.producer_config: dict[str, Any] = {}
        self.producer: Producer | None = None
        self.ready = False  # init_transactions done, no transaction left open
        self.resume_init = False  # init_transactions failed retriably: call it again

    def open(self, run: Any, node: str) -> KafkaTxnClient:
        group = self.group.open(run, node) if self.group is not None else None
        q = group.inner if group is not None else self.queue.open(run, node)
        assert q.consumer is not None
        q.consumer.close()  # the queue client's, at librdkafka's default isolation
        q.consumer = Consumer({**config.consumer_config(q.bootstrap, timeout_s=q.timeout_s,
                                                        isolation=self.isolation),
                               "logger": _rdkafka_logger(run)})
        out = KafkaTxnClient(q, isolation=self.isolation, transaction_timeout_ms=self.timeout_ms,
                             group=group, sends=self.sends)
        out.tid = f"txn-{uuid.uuid4().hex[:12]}"
        # the delivery timeout bounds each send; a transaction outlives its sends
        out.producer_config = {**q.producer_config, "enable.idempotence": True,
                               "transactional.id": out.tid,
                               "transaction.timeout.ms": max(TRANSACTION_TIMEOUT_MS,
                                                             int(q.timeout_s * 1000) + 1000)}
        if self.timeout_ms is not None:
            message_ms = min(int(q.producer_config["message.timeout.ms"]), self.timeout_ms)
            out.producer_config.update({"transaction.timeout.ms": self.timeout_ms,
                                        "message.timeout.ms": message_ms,
                                        "socket.timeout.ms": min(
                                            int(q.producer_config["socket.timeout.ms"]),
                                            message_ms)})
        return out

    def invoke(self, run: Any, op: Op) -> Op:
        if op.f == "txn":
            return run_transaction(op, self, self.sends)
        done: Op = (self.group or self.queue).invoke(run, op)
        return done

    # -- the producer --------------------------------------------------------------------

    @property
    def _wait_s(self) -> float:
        return self.queue.timeout_s + 2.0

    @property
    def offsets_deadline_s(self) -> float:
        """How long send_offsets waits for librdkafka's call, which may outlive its timeout."""
        return self._wait_s + STUCK_GRACE_S

    def _init(self) -> Producer:
        """The producer, initialised; a new one (fencing the old) after a failure."""
        if self.producer is not None and self.ready:
            return self.producer
        if self.producer is None or not self.resume_init:
            self._drop()
            self.producer = Producer(self.producer_config)
        try:
            self.producer.init_transactions(self._wait_s)
        except KafkaException as e:
            err = e.args[0]
            self.resume_init = (isinstance(err, KafkaError) and not err.fatal()
                                and _retriable(e))
            raise
        self.resume_init = False
        self.ready = True
        return self.producer

    def _drop(self) -> None:
        """Give the producer up: what it had queued is purged, and its handle is closed on
        a thread of its own (close() first aborts what it left open, which may wait on a
        stopped coordinator). Left to the garbage collector, dropped handles outlived
        their clients: 275 of them, each still reconnecting to the brokers of finished
        runs, in one process after 20 runs of the late-marker hunt."""
        if self.producer is not None:
            with contextlib.suppress(KafkaException):  # raised again by a fatal producer
                self.producer.purge()
                self.producer.flush(0)
            threading.Thread(target=self.producer.close, name="drop-producer",
                             daemon=True).start()
            self.producer = None
        self.ready = False
        self.resume_init = False

    def _abort(self, p: Producer) -> bool:
        """abort_transaction; True when the coordinator aborted it."""
        try:
            p.abort_transaction(self._wait_s)
            return True
        except KafkaException:
            self.ready = False
            return False

    # -- one transaction -----------------------------------------------------------------

    def _send_all(self, p: Producer, items: list[tuple[int, int]]
                  ) -> tuple[list[Message | None], str | None]:
        """Produce a run of sends and wait for their delivery reports: each one's message
        (None without a report) and the first error."""
        reports: dict[int, tuple[KafkaError | None, Message]] = {}
        error: str | None = None

        for i, (key, value) in enumerate(items):
            try:
                p.produce(self.queue.topic, value=str(value).encode(), partition=key,
                          on_delivery=_reporter(reports, i))
            except (KafkaException, BufferError) as e:
                error = _text(e)
                break
        p.flush(self._wait_s)
        out: list[Message | None] = []
        for i in range(len(items)):
            err, msg = reports.get(i, (None, None))
            if msg is None or err is not None:
                if error is None:
                    error = _text(err) if err is not None else "_MSG_TIMED_OUT: no delivery report"
                out.append(None)
            else:
                out.append(msg)
        return out, error

    # -- workloads.txn.Transactional -------------------------------------------------------

    def _consumer(self) -> GroupConsumer | None:
        return self.group.consumer if self.group is not None else None

    def begin(self, keys: set[int]) -> str | None:
        self.current, self.moved, self.handed, self.reports = None, False, 0, {}
        c = self._consumer()
        if c is not None and c.behind:
            try:
                self._rewind(c)
            except KafkaException as e:
                return f"rewind: {_text(e)}"
        try:
            p = self._init()
            p.begin_transaction()
        except KafkaException as e:
            self.ready = False
            return _text(e)
        self.current = p
        self.rebalances = c.rebalances if c is not None else 0
        return None

    def _rewind(self, c: GroupConsumer) -> None:
        """Seek each assigned key back to the group's committed offset (the beginning where
        none), fetched once stable; an unassigned consumer starts there anyway."""
        tps = c.assignment()
        if tps:
            for tp in c.committed(tps, timeout=self._wait_s):
                c.seek(TopicPartition(tp.topic, tp.partition,
                                      tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
        c.behind = False

    def _rebalanced(self, c: GroupConsumer) -> str | None:
        if c.rebalances != self.rebalances:
            return "REBALANCE: the group rebalanced during the transaction"
        return None

    def poll(self) -> tuple[list[Any], str | None]:
        c = self._consumer()
        if c is None or self.group is None:
            done = self.queue.invoke(None, Op("invoke", 0, "poll", [["poll"]]))
            micro = list(done.value[0])
            return (micro if len(micro) > 1 and micro[1] else ["poll"]), done.error
        read, error = self.group.fetch_batch()
        if self.moved and c.rebalances != self.rebalances:
            # the group rebalanced after this transaction consumed records (librdkafka
            # serves the rebalance inside the fetch): it aborts, and this fetch read from
            # the new assignment's committed positions, which may lie below what it read
            # before. Kept out of the operation, whose reads would seem to go backwards.
            return ["poll"], self._rebalanced(c)
        if not (self.moved or read):
            self.rebalances = c.rebalances  # nothing consumed yet: a rebalance costs nothing
        self.moved = self.moved or bool(read)
        return (["poll", read] if read else ["poll"]), error or self._rebalanced(c)

    def send_run(self, items: list[tuple[int, int]]) -> tuple[list[int | None], str | None]:
        assert self.current is not None
        msgs, error = self._send_all(self.current, items)
        return [_offset(m) for m in msgs], error

    def send_async(self, items: list[tuple[int, int]]) -> str | None:
        assert self.current is not None
        reports = self.reports

        for key, value in items:
            try:
                self.current.produce(self.queue.topic, value=str(value).encode(),
                                     partition=key, on_delivery=_reporter(reports, self.handed))
            except (KafkaException, BufferError) as e:
                return _text(e)
            self.handed += 1
        self.current.poll(0)
        return None

    def sent(self) -> list[int | None]:
        if self.producer is not None:
            self.producer.poll(0)  # the delivery reports the commit or abort left queued
        out: list[int | None] = []
        for i in range(self.handed):
            err, msg = self.reports.get(i, (None, None))
            out.append(None if msg is None or err is not None else _offset(msg))
        return out

    def send_offsets(self) -> str | None:
        c = self._consumer()
        if c is None or not self.moved:
            return None
        assert self.current is not None
        if (moved := self._rebalanced(c)) is not None:
            return moved
        p = self.current
        try:
            positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
            group = c.consumer_group_metadata()
            _within(self.offsets_deadline_s,
                    lambda: p.send_offsets_to_transaction(positions, group, self._wait_s))
        except KafkaException as e:
            return _text(e)
        except TimeoutError:
            # left to the thread still inside it: the next begin's producer fences it
            self.current, self.producer, self.ready = None, None, False
            return (f"_TIMED_OUT: send_offsets_to_transaction had not returned after "
                    f"{self.offsets_deadline_s:.0f} s (librdkafka #5456); a new producer follows")
        return None

    def commit(self) -> tuple[OpType, str | None]:
        assert self.current is not None
        p = self.current
        last = ""
        for _ in range(COMMIT_TRIES):
            try:
                p.commit_transaction(self._wait_s)
                return "ok", None
            except KafkaException as e:
                last = _text(e)
                err = e.args[0]
                if isinstance(err, KafkaError) and err.txn_requires_abort():
                    self._behind()
                    if self._abort(p):
                        return "fail", f"aborted after {last}"
                    break
                if not _retriable(e):
                    break
        self._behind()
        self._drop()
        return "info", f"commit outcome unknown: {last}"

    def abort(self) -> None:
        self._behind()
        if self.current is not None and not self._abort(self.current):
            self._drop()  # never committed, whether or not the abort went through

    def text(self, error: str) -> str:
        return error

    def extra(self) -> dict[str, Any]:
        c = self._consumer()
        if c is None:
            return {}
        try:
            return {"assignment": sorted(tp.partition for tp in c.assignment())}
        except (KafkaException, RuntimeError):
            return {}

    def _behind(self) -> None:
        c = self._consumer()
        if c is not None and self.moved:
            c.behind = True

    def close(self, run: Any) -> None:
        self._drop()
        if self.group is not None:
            self.group.close(run)
        else:
            self.queue.close(run)


def _reporter(reports: dict[int, tuple[KafkaError | None, Message]], i: int
              ) -> Callable[[KafkaError | None, Message], None]:
    """A delivery callback that files send i's report in `reports`."""
    return lambda err, msg: reports.__setitem__(i, (err, msg))


def _offset(m: Message | None) -> int | None:
    """A delivered message's offset; None when it was not acknowledged."""
    offset = None if m is None else m.offset()
    return offset if offset is not None and offset >= 0 else None
