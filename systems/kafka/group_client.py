"""The queue workload's consumer group on Kafka through librdkafka: its GroupPort.

The operations and their rules are workloads/groupops.py's; this is what librdkafka
does its own way. A `subscribe` makes a confluent-kafka consumer in the run's group
(workloads.options.GROUP_ID) subscribed to the topic: librdkafka joins, heartbeats and
rebalances in its own threads, and each newly assigned key starts at the group's
committed offset, else 0. Commit modes (workloads.options.ConsumerSettings): `auto` stores
each record's offset as poll hands it over and commits the stored offsets every
interval (librdkafka's default); `processed` stores a poll's offsets only once its
records were handed on, and auto-commit commits what is stored; `off` never commits.
librdkafka has no eager sticky assignor, so `sticky` is refused (systems/kafka/db.py).

A key whose committed offset librdkafka could not fetch when it was assigned (the
coordinator had moved: NOT_COORDINATOR) is never fetched until it is assigned again
(librdkafka #5586): the poll that meets the error fails with it and assigns the same
keys again.

With offset operations auto-commit is off; librdkafka names no generation, so a
`commit` names the keys its polls held. `committed` reads ask the member's consumer
(or a fresh one) at read_committed (stable offsets).

librdkafka cannot be abandoned without closing it (its threads would keep the member
alive), so a crashed consumer is closed: it commits what it stored and leaves at once
rather than timing out, which changes when the group rebalances, not what it reads.
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

from harness.runfiles import Op, OpType
from systems.kafka import config
from systems.kafka.client import POLL_WAIT_S, KafkaQueueClient, _rdkafka_logger
from workloads.groupops import Batch, GroupOps, Held, final_wait_s
from workloads.options import GROUP_ID, ConsumerSettings
from workloads.spares import Spares

# Members learn of a rebalance at their next heartbeat, so a rebalance takes about one
# interval plus a join and sync round: at librdkafka's usual third of the session
# timeout (2 s of 6 s) every rejoin of the workload (workloads/queue.py) left the group
# without assignments for about 2 s; at 100 ms, as our broker's members heartbeat,
# about 0.5 s (python -m bench.groups_kafka, docs/benchmarks.md).
GROUP_HEARTBEAT_MS = 100
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
    `crash` (workloads/groupops.py's rules), and its GroupPort for librdkafka; sends,
    assigns and assigned polls go to a KafkaQueueClient."""

    crashed = "crashed: the consumer died before handing on its last batch"
    errors = (KafkaException,)

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
        self.ops = GroupOps(self, inner, self.spares, commit=settings.commit,
                            offset_ops=offset_ops)

    @property
    def consumer(self) -> GroupConsumer | None:
        return self.ops.member

    @consumer.setter
    def consumer(self, c: GroupConsumer | None) -> None:
        self.ops.member = c

    def open(self, run: Any, node: str) -> KafkaGroupClient:
        return KafkaGroupClient(self.inner.open(run, node), partitions=self.partitions,
                                settings=self.settings, logger=_rdkafka_logger(run),
                                spares=self.spares, isolation=self.isolation,
                                offset_ops=self.offset_ops)

    def invoke(self, run: Any, op: Op) -> Op:
        return self.ops.invoke(run, op)

    # -- workloads.groupops.GroupPort ----------------------------------------------------

    def text(self, error: BaseException) -> str:
        return str(error)

    def join(self, op: Op) -> GroupConsumer:
        c = GroupConsumer({**group_config(self.inner.bootstrap, self.settings,
                                          timeout_s=self.inner.timeout_s,
                                          isolation=self.isolation, offset_ops=self.offset_ops),
                           "logger": self.logger})
        c.subscribe_counting([self.inner.topic])
        return c

    def hand_on(self, member: GroupConsumer, handed: dict[int, int]) -> None:
        """`processed`: the handed-on offsets are stored, for auto-commit to commit."""
        if handed:
            with contextlib.suppress(KafkaException):  # a key revoked meanwhile
                member.store_offsets(offsets=[TopicPartition(self.inner.topic, k, o)
                                              for k, o in handed.items()])

    def held(self, member: GroupConsumer) -> Held:
        return Held(None, sorted(tp.partition for tp in member.assignment()))

    def commit(self, member: GroupConsumer, held: Held,
               offsets: dict[int, int]) -> tuple[OpType, str | None]:
        """librdkafka retries a commit inside one call: any error is `info`."""
        out = member.commit(offsets=[TopicPartition(self.inner.topic, k, o)
                                     for k, o in offsets.items()], asynchronous=False)
        errors = [tp.error for tp in out or () if tp.error is not None]
        return ("info", str(errors[0])) if errors else ("ok", None)

    def committed_of(self, keys: Iterable[int], timeout_s: float | None = None
                     ) -> dict[int, int]:
        """The group's committed offsets of those keys that have one, asked with the
        member's consumer, or a fresh one outside the group."""
        tps = [TopicPartition(self.inner.topic, k) for k in keys]
        wait_s = self.inner.timeout_s if timeout_s is None else timeout_s
        if self.consumer is not None:
            got = self.consumer.committed(tps, timeout=wait_s)
        else:
            c = Consumer({**config.consumer_config(self.inner.bootstrap,
                                                   timeout_s=self.inner.timeout_s),
                          "group.id": GROUP_ID, "logger": self.logger})
            try:
                got = c.committed(tps, timeout=wait_s)
            finally:
                c.close()
        return {int(tp.partition): int(tp.offset) for tp in got if tp.offset >= 0}

    def committed(self) -> dict[str, int]:
        """The group's committed offset of every key that has one (read_committed: waits
        while a transaction a lost client left open holds offsets pending, until its abort
        at the transaction timeout)."""
        got = self.committed_of(range(self.partitions),
                                final_wait_s(self.inner.timeout_s))
        return {str(k): o for k, o in got.items()}

    def poll(self, member: GroupConsumer) -> Batch:
        return Batch(*self.fetch_batch(member))

    def fetch_batch(self, consumer: GroupConsumer | None = None
                    ) -> tuple[dict[str, list[list[int]]], str | None]:
        """One poll's records from the member's consumer (or `consumer`), and its error."""
        c = consumer if consumer is not None else self.consumer
        assert c is not None
        read: dict[str, list[list[int]]] = {}
        error: str | None = None
        stranded = False  # keys librdkafka will not fetch until assigned again
        try:
            first = c.poll(POLL_WAIT_S)
            msgs: list[Message] = [] if first is None else [first]
            if msgs and self.inner.max_poll_records > 1:
                msgs += c.consume(self.inner.max_poll_records - 1, timeout=0)
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
            _assign_again(c)
        return read, error

    def cover(self, member: GroupConsumer, batch: Batch) -> None:
        """Processing outlasts the interval: the background commit covers the batch."""
        end = time.monotonic() + 2 * self.settings.auto_commit_interval_ms / 1000
        while time.monotonic() < end:
            member.poll(0.05)  # serves librdkafka's callbacks, reads nothing
            # (a record polled here is one more never handed on)

    def die(self, member: GroupConsumer | None) -> None:
        """librdkafka cannot be abandoned (its threads would keep the member alive): the
        crashed consumer is closed."""
        if member is not None:
            member.close()
        self.inner.close(None)

    def leave(self, member: GroupConsumer, *, final: bool) -> None:
        """close commits what is stored (Kafka's own close)."""
        with contextlib.suppress(KafkaException, RuntimeError):
            member.close()

    def close(self, run: Any) -> None:
        """After an `info` the worker's next process takes this consumer over."""
        self.ops.park()
        self.inner.close(run)


def _assign_again(c: GroupConsumer) -> None:
    """librdkafka never fetches a newly assigned key whose committed-offset fetch failed (a
    coordinator that moved answers NOT_COORDINATOR) until it is assigned again (librdkafka
    #5586): assign the same keys again, each at its position, or at the group's committed
    offset, fetched anew, where it has none yet."""
    with contextlib.suppress(KafkaException, RuntimeError):  # the next poll's error retries
        positions = c.position(c.assignment())
        c.assign([TopicPartition(tp.topic, tp.partition,
                                 tp.offset if tp.offset >= 0 else OFFSET_STORED)
                  for tp in positions])
