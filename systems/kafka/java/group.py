"""The queue workload's consumer group through Kafka's Java client: its GroupPort.

The operations and their rules are workloads/groupops.py's. The Java client commits
inside poll(): `processed` is its auto-commit, which commits the positions of what
earlier polls handed over (so `auto`, a background commit, is refused: settings.check),
`off` commits nothing outside transactions. Rebalances are counted by a
ConsumerRebalanceListener (called inside poll(), on the polling thread). With offset
operations auto-commit is off and a `commit` is a commitSync of what it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.runfiles import Op, OpType
from systems.kafka.java import calls, jvm, outcomes, settings
from systems.kafka.java.client import POLL_WAIT_MS, JavaQueueClient
from workloads.groupops import Batch, GroupOps, Held, final_wait_s
from workloads.options import GROUP_ID, ConsumerSettings
from workloads.spares import Spares


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
    """harness.protocols.Client: the queue workload's ops with `subscribe` and `crash`
    (workloads/groupops.py's rules), and its GroupPort for the Java client; sends, assigns
    and assigned polls go to a JavaQueueClient."""

    crashed = "crashed: the consumer died before handing on its last batch"

    def __init__(self, inner: JavaQueueClient, *, partitions: int, settings: ConsumerSettings,
                 spares: Spares[Member] | None = None,
                 isolation: str = "read_committed", offset_ops: bool = False) -> None:
        self.inner = inner
        self.offset_ops = offset_ops
        self.partitions = partitions
        self.settings = settings
        self.isolation = isolation
        self.spares = spares if spares is not None else Spares(Member.close)
        self.ops = GroupOps(self, inner, self.spares, commit=settings.commit,
                            offset_ops=offset_ops)
        self.in_txn = False  # under a JavaTxnClient, whose producer sends

    @property
    def member(self) -> Member | None:
        return self.ops.member

    def open(self, run: Any, node: str) -> JavaGroupClient:
        out = JavaGroupClient(self.inner.open(run, node, self.isolation,
                                              producer=not self.in_txn),
                              partitions=self.partitions, settings=self.settings,
                              spares=self.spares, isolation=self.isolation,
                              offset_ops=self.offset_ops)
        out.in_txn = self.in_txn
        return out

    def invoke(self, run: Any, op: Op) -> Op:
        return self.ops.invoke(run, op)

    # -- workloads.groupops.GroupPort ----------------------------------------------------

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        return (jvm.exception_type(),)

    def text(self, error: BaseException) -> str:
        return outcomes.text(error)

    def join(self, op: Op) -> Member:
        props = settings.group(self.inner.bootstrap, self.settings,
                               timeout_s=self.inner.timeout_s, isolation=self.isolation,
                               max_poll_records=self.inner.max_poll_records,
                               offset_ops=self.offset_ops)
        m = Member(jvm.cls("org.apache.kafka.clients.consumer.KafkaConsumer")(
            jvm.properties(props)))
        m.subscribe(self.inner.topic)
        return m

    def hand_on(self, member: Member, handed: dict[int, int]) -> None:
        """Nothing: the Java client's auto-commit commits inside poll() what earlier polls
        handed over."""

    def held(self, member: Member) -> Held:
        return Held(None, member.assignment())

    def commit(self, member: Member, held: Held,
               offsets: dict[int, int]) -> tuple[OpType, str | None]:
        """commitSync (the client retries inside one call: an exception is `info`)."""
        jmap = jvm.cls("java.util.HashMap")()
        meta = jvm.cls("org.apache.kafka.clients.consumer.OffsetAndMetadata")
        for k, o in offsets.items():
            jmap.put(self.inner.partition(k), meta(o))
        member.consumer.commitSync(jmap, jvm.duration_ms(int(self.inner.timeout_s * 1000)))
        return "ok", None

    def committed_of(self, keys: Iterable[int], timeout_ms: int | None = None
                     ) -> dict[int, int]:
        """The group's committed offsets of those keys that have one, asked with the
        member's consumer, or a fresh one outside the group."""
        wait = jvm.duration_ms(int(self.inner.timeout_s * 1000) if timeout_ms is None
                               else timeout_ms)
        tps = jvm.cls("java.util.HashSet")(jvm.jlist([self.inner.partition(k) for k in keys]))
        if self.member is not None:
            got = self.member.consumer.committed(tps, wait)
        else:
            props = {**settings.consumer(self.inner.bootstrap, timeout_s=self.inner.timeout_s),
                     "group.id": GROUP_ID}
            c = jvm.cls("org.apache.kafka.clients.consumer.KafkaConsumer")(
                jvm.properties(props))
            try:
                got = c.committed(tps, wait)
            finally:
                c.close(jvm.duration_ms(0))
        return {int(tp.partition()): int(m.offset()) for tp, m in got.items()
                if m is not None and int(m.offset()) >= 0}

    def committed(self) -> dict[str, int]:
        """The group's committed offset of every key that has one."""
        got = self.committed_of(range(self.partitions),
                                int(final_wait_s(self.inner.timeout_s) * 1000))
        return {str(k): o for k, o in got.items()}

    def poll(self, member: Member) -> Batch:
        return Batch(*self.fetch_batch(member))

    def fetch_batch(self, member: Member | None = None
                    ) -> tuple[dict[str, list[list[int]]], str | None]:
        """One poll's records from the member (or `member`), and its error."""
        m = member if member is not None else self.member
        assert m is not None
        read: dict[str, list[list[int]]] = {}
        try:
            records = m.consumer.poll(jvm.duration_ms(POLL_WAIT_MS))
        except jvm.exception_type() as e:
            return read, outcomes.text(e)
        for key, offset, value in calls.records(records):
            read.setdefault(str(key), []).append([offset, value])
        return read, None

    def cover(self, member: Member, batch: Batch) -> None:
        """Nothing: `auto` is refused (settings.check)."""

    def die(self, member: Member | None) -> None:
        """The Java client cannot be abandoned (its heartbeat thread would keep the member
        alive): it is closed, which commits (with auto-commit) what it fetched, as the
        librdkafka client's crash does."""
        if member is not None:
            member.close()
        self.inner.close(None)

    def leave(self, member: Member, *, final: bool) -> None:
        """close commits what auto-commit holds (Kafka's own close)."""
        member.close()

    def close(self, run: Any) -> None:
        """After an `info` the worker's next process takes this member over."""
        self.ops.park()
        self.inner.close(run)
