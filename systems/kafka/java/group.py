"""The queue workload's consumer group through Kafka's Java client: `subscribe`, group polls,
`crash`.

As the librdkafka group client (systems/kafka/group_client.py), with the Java client's
commit: `processed` is its auto-commit, which commits inside poll() the positions of
what earlier polls handed over (so `auto`, a background commit, is refused:
settings.check), `off` commits nothing outside transactions. Rebalances are counted
by a ConsumerRebalanceListener (called inside poll(), on the polling thread). A
client closed after an `info` hands its consumer to the worker's next process, as
there. With offset operations the commits are `commit` operations, as there:
auto-commit off, a commitSync of what the operation names while the member holds
the keys its polls held (`ok` once acknowledged, `info` on any exception: the
client retries inside one call, `fail` when nothing was sent), and `committed`
operations read the group's offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from harness.runfiles import Op
from harness.spec import GROUP_ID, ConsumerSettings
from systems.kafka.java import jvm, outcomes, settings
from systems.kafka.java.client import POLL_WAIT_MS, JavaQueueClient
from workloads.offsets import commit_offsets, committed_keys, committed_value, moved_on
from workloads.spares import Spares

CRASH_FETCH_S = 2.0
COMMITTED_WAIT_MS = 20_000


class Member:
    """A Java consumer in the run's group, its rebalances counted; `behind`: its positions
    ran ahead of the group's commits (the txn workload rewinds it)."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.rebalances = 0
        self.behind = False

    def subscribe(self, topic: str) -> None:
        import jpype

        member = self

        @jpype.JImplements("org.apache.kafka.clients.consumer.ConsumerRebalanceListener")
        class Listener:
            @jpype.JOverride  # type: ignore[untyped-decorator]
            def onPartitionsRevoked(self, partitions: Any) -> None:
                member.rebalances += 1

            @jpype.JOverride  # type: ignore[untyped-decorator]
            def onPartitionsAssigned(self, partitions: Any) -> None:
                member.rebalances += 1

        self.listener = Listener()  # kept: the JVM holds only a proxy to it
        self.consumer.subscribe(jvm.jlist([topic]), self.listener)

    def assignment(self) -> list[int]:
        return sorted(int(tp.partition()) for tp in self.consumer.assignment())

    def close(self) -> None:
        try:
            self.consumer.close(jvm.duration_ms(5000))
        except jvm.exception_type():
            pass


class JavaGroupClient:
    """harness.protocols.Client: the queue workload's ops with `subscribe` and `crash`;
    sends, assigns and assigned polls go to a JavaQueueClient."""

    def __init__(self, inner: JavaQueueClient, *, partitions: int, settings: ConsumerSettings,
                 spares: Spares[Member] | None = None,
                 isolation: str = "read_committed", offset_ops: bool = False) -> None:
        self.inner = inner
        self.offset_ops = offset_ops
        self.partitions = partitions
        self.settings = settings
        self.isolation = isolation
        self.spares = spares if spares is not None else Spares(Member.close)
        self.member: Member | None = None
        self.in_txn = False  # under a JavaTxnClient, whose producer sends

    def open(self, run: Any, node: str) -> JavaGroupClient:
        out = JavaGroupClient(self.inner.open(run, node, self.isolation,
                                              producer=not self.in_txn),
                              partitions=self.partitions, settings=self.settings,
                              spares=self.spares, isolation=self.isolation,
                              offset_ops=self.offset_ops)
        out.in_txn = self.in_txn
        return out

    def _new_member(self) -> Member:
        props = settings.group(self.inner.bootstrap, self.settings,
                               timeout_s=self.inner.timeout_s, isolation=self.isolation,
                               max_poll_records=self.inner.max_poll_records,
                               offset_ops=self.offset_ops)
        m = Member(jvm.cls("org.apache.kafka.clients.consumer.KafkaConsumer")(
            jvm.properties(props)))
        m.subscribe(self.inner.topic)
        return m

    def invoke(self, run: Any, op: Op) -> Op:
        if op.f == "commit":
            return self._commit(op)
        if op.f == "committed":
            return self._committed(op)
        if op.f == "subscribe":
            if self.member is None:
                self.member = self.spares.take()
                if self.member is not None and not op.extra.get("rejoin"):
                    return op.complete("ok")
            self._end()
            self.member = self._new_member()
            return op.complete("ok")
        if op.f == "assign":
            self._end()
            if op.extra.get("fetch_committed") or not op.value:
                self.spares.close_all()
            extra: dict[str, Any] = {}
            if op.extra.get("fetch_committed"):
                try:
                    extra["committed"] = self.committed()
                except jvm.exception_type() as e:
                    return op.complete("fail", error=f"committed offsets: {outcomes.text(e)}")
            done: Op = self.inner.invoke(run, op)
            return done.with_(extra={**done.extra, **extra}) if extra else done
        if op.f == "poll" and self.member is not None:
            return self._poll(op)
        if op.f == "crash":
            self._crash()
            return op.complete("info", error="crashed: the consumer died before handing on "
                                             "its last batch")
        out: Op = self.inner.invoke(run, op)
        return out

    def _commit(self, op: Op) -> Op:
        """A `commit` operation: commitSync of the offsets it names while the member holds
        the keys its polls held."""
        if self.member is None:
            return op.complete("fail", error="not subscribed: no membership to commit for")
        try:
            now = self.member.assignment()
        except jvm.exception_type() as e:
            return op.complete("fail", error=f"assignment: {outcomes.text(e)}: nothing sent")
        if (why := moved_on(op, now)) is not None:
            return op.complete("fail", error=why)
        offsets = jvm.cls("java.util.HashMap")()
        meta = jvm.cls("org.apache.kafka.clients.consumer.OffsetAndMetadata")
        for k, o in commit_offsets(op).items():
            offsets.put(self.inner.partition(k), meta(o))
        try:
            self.member.consumer.commitSync(offsets, jvm.duration_ms(
                int(self.inner.timeout_s * 1000)))
        except jvm.exception_type() as e:
            return op.complete("info", error=outcomes.text(e))
        return op.complete("ok")

    def _committed(self, op: Op) -> Op:
        """A `committed` operation: the group's committed offsets of its keys (a read: an
        exception is a `fail`)."""
        keys = committed_keys(op)
        try:
            got = self.committed_of(keys, int(self.inner.timeout_s * 1000))
        except jvm.exception_type() as e:
            return op.complete("fail", error=f"committed offsets: {outcomes.text(e)}")
        return op.complete("ok", committed_value(keys, got))

    def fetch_batch(self) -> tuple[dict[str, list[list[int]]], str | None]:
        assert self.member is not None
        read: dict[str, list[list[int]]] = {}
        try:
            records = self.member.consumer.poll(jvm.duration_ms(POLL_WAIT_MS))
        except jvm.exception_type() as e:
            return read, outcomes.text(e)
        for r in records:
            read.setdefault(str(int(r.partition())), []).append(
                [int(r.offset()), int(str(r.value()))])
        return read, None

    def _poll(self, op: Op) -> Op:
        assert self.member is not None
        read, error = self.fetch_batch()
        try:
            assignment = self.member.assignment()
        except jvm.exception_type():
            assignment = []
        if error is not None:
            return op.complete("fail", [["poll", read]] if read else [["poll"]], error=error,
                               assignment=assignment)
        return op.complete("ok", [["poll", read]], assignment=assignment)

    def _crash(self) -> None:
        """Fetch a batch and die before handing it on. The Java client cannot be abandoned
        (its heartbeat thread would keep the member alive): it is closed, which commits
        (with auto-commit) what it fetched, as the librdkafka client's crash does."""
        if self.member is not None:
            deadline = time.monotonic() + CRASH_FETCH_S
            read: dict[str, list[list[int]]] = {}
            while not read and time.monotonic() < deadline:
                read, _ = self.fetch_batch()
            self.member.close()
            self.member = None
        self.inner.close(None)

    def committed(self) -> dict[str, int]:
        """The group's committed offset of every key that has one."""
        got = self.committed_of(range(self.partitions),
                                max(COMMITTED_WAIT_MS, int(self.inner.timeout_s * 3000)))
        return {str(k): o for k, o in got.items()}

    def committed_of(self, keys: Iterable[int], timeout_ms: int) -> dict[int, int]:
        """The group's committed offsets of those keys that have one, asked with the
        member's consumer, or a fresh one outside the group."""
        tps = jvm.cls("java.util.HashSet")(jvm.jlist([self.inner.partition(k) for k in keys]))
        if self.member is not None:
            got = self.member.consumer.committed(tps, jvm.duration_ms(timeout_ms))
        else:
            props = {**settings.consumer(self.inner.bootstrap, timeout_s=self.inner.timeout_s),
                     "group.id": GROUP_ID}
            c = jvm.cls("org.apache.kafka.clients.consumer.KafkaConsumer")(
                jvm.properties(props))
            try:
                got = c.committed(tps, jvm.duration_ms(timeout_ms))
            finally:
                c.close(jvm.duration_ms(0))
        return {int(tp.partition()): int(m.offset()) for tp, m in got.items()
                if m is not None and int(m.offset()) >= 0}

    def _end(self) -> None:
        """Leave the group (close commits what auto-commit holds, Kafka's own close)."""
        if self.member is not None:
            self.member.close()
            self.member = None

    def close(self, run: Any) -> None:
        """After an `info` the worker's next process takes this member over."""
        if self.member is not None:
            self.spares.put(self.member)
            self.member = None
        self.inner.close(run)
