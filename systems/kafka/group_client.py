"""The queue workload's consumer group on Kafka: `subscribe`, group polls, `crash`.

A `subscribe` makes a confluent-kafka consumer in the run's group (harness.spec.GROUP_ID)
subscribed to the topic: librdkafka joins, heartbeats and rebalances in its own
threads, and each newly assigned key starts at the group's committed offset, else 0.
Commit modes (harness.spec.ConsumerSettings): `auto` stores each record's offset
as poll hands it over and commits the stored offsets every interval
(enable.auto.commit with enable.auto.offset.store, librdkafka's default);
`processed` stores a poll's offsets only at the process's next operation, once
the poll's records were handed on (written to the history), and auto-commit
commits what is stored; `off` never commits. librdkafka has no eager sticky
assignor, so `sticky` is refused (systems/kafka/db.py's check).

A key whose committed offset librdkafka could not fetch when it was assigned (the
coordinator had moved: NOT_COORDINATOR) is never fetched until it is assigned again
(librdkafka #5586): the poll that meets the error fails with it and assigns the same
keys again.

A client closed after an `info` hands its consumer to the worker's next process
(its first `subscribe` takes it over; a rejoin takes it and leaves), as on our broker.

With offset operations (workloads/offsets.py: `processed` or `off`), the group's
commits are the workload's `commit` operations instead: auto-commit is off, and
each commit is a synchronous `commit()` of the offsets the operation names, sent
only while the consumer still holds the keys its polls held (`"held"`); `ok`
once acknowledged, `info` on any error the cluster gave (librdkafka retries a
commit inside one call, so a refusal may follow an attempt that landed), `fail`
when nothing was sent. `committed` operations read the group's offsets with the
member's consumer (or a fresh one), at read_committed (stable offsets).

A `crash` fetches a batch and dies before handing it on: with `auto`, after one
commit interval, so the background commit covered the batch. librdkafka cannot
be abandoned without closing it (its threads would keep the member alive), so
the crashed consumer is closed: it commits what it stored and leaves at once
rather than timing out, which changes when the group rebalances, not what it
reads.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import (
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from harness.runfiles import Op
from harness.spec import GROUP_ID, ConsumerSettings
from systems.kafka import config
from systems.kafka.client import POLL_WAIT_S, KafkaQueueClient, _rdkafka_logger
from workloads.offsets import commit_offsets, committed_keys, committed_value, moved_on
from workloads.spares import Spares

# Members learn of a rebalance at their next heartbeat, so a rebalance takes about one
# interval plus a join and sync round: at librdkafka's usual third of the session
# timeout (2 s of 6 s) every rejoin of the workload (workloads/queue.py) left the group
# without assignments for about 2 s; at 100 ms, as our broker's members heartbeat,
# about 0.5 s (python -m bench.groups_kafka, docs/benchmarks.md).
GROUP_HEARTBEAT_MS = 100
CRASH_FETCH_S = 2.0  # a crash waits this long at most for a batch to die holding
COMMITTED_WAIT_S = 20.0  # the final committed offsets (see committed())
# how librdkafka's consumer errors begin when an assignment's committed offsets could not
# be fetched, for the whole request or for one key (src/rdkafka_assignment.c)
OFFSET_FETCH_FAILED = "Failed to fetch committed offset"


class GroupConsumer(Consumer):
    """A member of the run's group that counts its rebalances (a transaction that reads
    across one must abort) and remembers when its positions ran ahead of the group's
    commits (the txn workload rewinds it); both travel with it to a spare's next process."""

    rebalances = 0
    behind = False

    def subscribe_counting(self, topics: list[str]) -> None:
        self.subscribe(topics, on_assign=_rebalanced, on_revoke=_rebalanced)


def _rebalanced(consumer: Consumer, _partitions: list[TopicPartition]) -> None:
    """on_assign and on_revoke (confluent-kafka assigns or unassigns after them)."""
    if isinstance(consumer, GroupConsumer):
        consumer.rebalances += 1


def group_config(bootstrap: str, settings: ConsumerSettings, *, timeout_s: float,
                 isolation: str = "read_committed", offset_ops: bool = False
                 ) -> dict[str, Any]:
    """librdkafka settings of a member of the run's group (read_committed: its committed
    offsets are fetched once stable, librdkafka's require_stable); `offset_ops`: commits
    are operations, never librdkafka's own."""
    return {
        **config.consumer_config(bootstrap, timeout_s=timeout_s, isolation=isolation),
        "group.id": GROUP_ID,
        "enable.auto.commit": settings.commit != "off" and not offset_ops,
        "auto.commit.interval.ms": settings.auto_commit_interval_ms,
        "enable.auto.offset.store": settings.commit == "auto",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": settings.session_timeout_ms,
        # at most a third of the session timeout (Kafka needs it below the timeout)
        "heartbeat.interval.ms": max(1, min(GROUP_HEARTBEAT_MS, settings.session_timeout_ms // 3)),
        "partition.assignment.strategy": settings.assignor,
        "enable.partition.eof": False,
    }


def close_spare(c: GroupConsumer) -> None:
    """A parked consumer at the run's end: closed, whatever the cluster answers."""
    with contextlib.suppress(KafkaException, RuntimeError):
        c.close()


class KafkaGroupClient:
    """harness.protocols.Client: the queue workload's ops on Kafka with `subscribe` and
    `crash`; sends, assigns and assigned polls go to a KafkaQueueClient."""

    def __init__(self, inner: KafkaQueueClient, *, partitions: int,
                 settings: ConsumerSettings, logger: Any = None,
                 spares: Spares[GroupConsumer] | None = None,
                 isolation: str = "read_committed", offset_ops: bool = False) -> None:
        self.inner = inner
        self.offset_ops = offset_ops
        self.isolation = isolation
        self.spares = spares if spares is not None else Spares(close_spare)
        self.partitions = partitions
        self.settings = settings
        self.logger = logger
        self.consumer: GroupConsumer | None = None
        self.handed: list[TopicPartition] = []  # the last poll's next offsets, to store

    def open(self, run: Any, node: str) -> KafkaGroupClient:
        return KafkaGroupClient(self.inner.open(run, node), partitions=self.partitions,
                                settings=self.settings, logger=_rdkafka_logger(run),
                                spares=self.spares, isolation=self.isolation,
                                offset_ops=self.offset_ops)

    def invoke(self, run: Any, op: Op) -> Op:
        self._processed()
        if op.f == "commit":
            return self._commit(op)
        if op.f == "committed":
            return self._committed(op)
        if op.f == "subscribe":
            if self.consumer is None:  # a predecessor's membership, if one waits: kept,
                # or left by a rejoin (else it would stay in the group, polled by no one,
                # and hold up every rebalance: a member rejoins only once polled)
                self.consumer = self.spares.take()
                if self.consumer is not None and not op.extra.get("rejoin"):
                    return op.complete("ok")
            self._end()
            self.consumer = GroupConsumer({**group_config(self.inner.bootstrap, self.settings,
                                                          timeout_s=self.inner.timeout_s,
                                                          isolation=self.isolation,
                                                          offset_ops=self.offset_ops),
                                           "logger": self.logger})
            self.consumer.subscribe_counting([self.inner.topic])
            return op.complete("ok")
        if op.f == "assign":
            self._end()
            if op.extra.get("fetch_committed") or not op.value:
                self.spares.close_all()
            extra: dict[str, Any] = {}
            if op.extra.get("fetch_committed"):
                try:
                    extra["committed"] = self.committed()
                except KafkaException as e:
                    return op.complete("fail", error=f"committed offsets: {e}")
            done: Op = self.inner.invoke(run, op)
            return done.with_(extra={**done.extra, **extra}) if extra else done
        if op.f == "poll" and self.consumer is not None:
            return self._poll(op)
        if op.f == "crash":
            self._crash()
            return op.complete("info", error="crashed: the consumer died before handing on "
                                             "its last batch")
        out: Op = self.inner.invoke(run, op)
        return out

    def _processed(self) -> None:
        """The last poll's records were handed on: `processed` stores their offsets now."""
        if self.handed and self.consumer is not None and self.settings.commit == "processed" \
                and not self.offset_ops:
            with contextlib.suppress(KafkaException):  # a key revoked meanwhile
                self.consumer.store_offsets(offsets=self.handed)
        self.handed = []

    def _commit(self, op: Op) -> Op:
        """A `commit` operation: the offsets it names, committed synchronously while the
        consumer holds the keys its polls held."""
        if self.consumer is None:
            return op.complete("fail", error="not subscribed: no membership to commit for")
        try:
            now = sorted(tp.partition for tp in self.consumer.assignment())
        except KafkaException as e:
            return op.complete("fail", error=f"assignment: {e}: nothing sent")
        if (why := moved_on(op, now)) is not None:
            return op.complete("fail", error=why)
        offsets = [TopicPartition(self.inner.topic, k, o) for k, o in commit_offsets(op).items()]
        try:
            out = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            return op.complete("info", error=str(e))
        errors = [tp.error for tp in out or () if tp.error is not None]
        if errors:
            return op.complete("info", error=str(errors[0]))
        return op.complete("ok")

    def _committed(self, op: Op) -> Op:
        """A `committed` operation: the group's committed offsets of its keys (a read: an
        error is a `fail`)."""
        keys = committed_keys(op)
        try:
            got = self.committed_of(keys, self.inner.timeout_s)
        except KafkaException as e:
            return op.complete("fail", error=f"committed offsets: {e}")
        return op.complete("ok", committed_value(keys, got))

    def fetch_batch(self) -> tuple[dict[str, list[list[int]]], str | None]:
        assert self.consumer is not None
        read: dict[str, list[list[int]]] = {}
        error: str | None = None
        stranded = False  # keys librdkafka will not fetch until assigned again
        try:
            first = self.consumer.poll(POLL_WAIT_S)
            msgs: list[Message] = [] if first is None else [first]
            if msgs and self.inner.max_poll_records > 1:
                msgs += self.consumer.consume(self.inner.max_poll_records - 1, timeout=0)
        except KafkaException as e:
            return read, str(e)
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    error = f"{err.name()}: {err.str()}"
                stranded = stranded or err.str().startswith(OFFSET_FETCH_FAILED)
                continue
            key, offset, value = m.partition(), m.offset(), m.value()
            if key is None or offset is None or value is None:
                continue
            read.setdefault(str(key), []).append([offset, int(value)])
        if stranded:
            self._assign_again()
        return read, error

    def _assign_again(self) -> None:
        """librdkafka never fetches a newly assigned key whose committed-offset fetch
        failed (a coordinator that moved answers NOT_COORDINATOR) until it is assigned
        again (librdkafka #5586): assign the same keys again, each at its position, or
        at the group's committed offset, fetched anew, where it has none yet."""
        assert self.consumer is not None
        with contextlib.suppress(KafkaException, RuntimeError):  # the next poll's error retries
            positions = self.consumer.position(self.consumer.assignment())
            self.consumer.assign([TopicPartition(tp.topic, tp.partition,
                                                 tp.offset if tp.offset >= 0 else OFFSET_STORED)
                                  for tp in positions])

    def _poll(self, op: Op) -> Op:
        assert self.consumer is not None
        read, error = self.fetch_batch()
        self.handed = [TopicPartition(self.inner.topic, int(k), rs[-1][0] + 1)
                       for k, rs in read.items()]
        try:
            assignment = sorted(tp.partition for tp in self.consumer.assignment())
        except KafkaException:
            assignment = []
        if error is not None:
            return op.complete("fail", [["poll", read]] if read else [["poll"]], error=error,
                               assignment=assignment)
        return op.complete("ok", [["poll", read]], assignment=assignment)

    def _crash(self) -> None:
        if self.consumer is not None:
            deadline = time.monotonic() + CRASH_FETCH_S
            read: dict[str, list[list[int]]] = {}
            while not read and time.monotonic() < deadline:
                read, _ = self.fetch_batch()
            if read and self.settings.commit == "auto":
                # processing outlasts the interval: the background commit covers the batch
                end = time.monotonic() + 2 * self.settings.auto_commit_interval_ms / 1000
                while time.monotonic() < end:
                    self.consumer.poll(0.05)  # serves librdkafka's callbacks, reads nothing
                    # (a record polled here is one more never handed on)
            self.consumer.close()
            self.consumer = None
        self.inner.close(None)

    def committed(self) -> dict[str, int]:
        """The group's committed offset of every key that has one (read_committed: waits
        while a transaction a lost client left open holds offsets pending, until its abort
        at the transaction timeout)."""
        got = self.committed_of(range(self.partitions),
                                max(COMMITTED_WAIT_S, self.inner.timeout_s * 3))
        return {str(k): o for k, o in got.items()}

    def committed_of(self, keys: Iterable[int], timeout_s: float) -> dict[int, int]:
        """The group's committed offsets of those keys that have one, asked with the
        member's consumer, or a fresh one outside the group."""
        tps = [TopicPartition(self.inner.topic, k) for k in keys]
        if self.consumer is not None:
            got = self.consumer.committed(tps, timeout=timeout_s)
        else:
            c = Consumer({**config.consumer_config(self.inner.bootstrap,
                                                   timeout_s=self.inner.timeout_s),
                          "group.id": GROUP_ID, "logger": self.logger})
            try:
                got = c.committed(tps, timeout=timeout_s)
            finally:
                c.close()
        return {int(tp.partition): int(tp.offset) for tp in got if tp.offset >= 0}

    def _end(self) -> None:
        """Leave the group: close commits what is stored (Kafka's own close)."""
        if self.consumer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                self.consumer.close()
            self.consumer = None

    def close(self, run: Any) -> None:
        """After an `info` the worker's next process takes this consumer over (Kafka's
        subscribe() of the same topics changes nothing): no rebalance for a send that timed
        out."""
        if self.consumer is not None:
            self.spares.put(self.consumer)
            self.consumer = None
        self.inner.close(run)
