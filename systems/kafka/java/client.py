"""The queue workload's client on Kafka through Kafka's own Java client (kafka-clients).

The same operations and completions as the librdkafka client (systems/kafka/client.py):
a producer made at the first send, each send waiting for its RecordMetadata (its
offset), and a consumer with manual assign, seek and poll that commits nothing.
Errors are judged by systems/kafka/java/outcomes.py. One client per process: each
worker thread drives its own producer and consumer (JPype attaches the thread).
"""

from __future__ import annotations

import threading
from typing import Any

from harness.runfiles import Op
from systems.kafka import config
from systems.kafka.client import WARMUP_TOPIC
from systems.kafka.java import calls, jvm, outcomes, settings
from workloads.options import MAX_POLL_RECORDS

# a poll waits this long for a first record (it returns at once when there is one). Longer
# than librdkafka's 0.2 s: the Java consumer fetches only inside poll(), so on a loaded
# machine a new consumer's metadata, connection and first fetch took more than 20 polls
# of 0.2 s, and the final reads gave up on keys that held acknowledged records (unseen)
POLL_WAIT_MS = 1000
WARM_UP_TIMEOUT_S = 20.0
_warm_lock = threading.Lock()
_warmed: set[str] = set()


def warm_up(bootstrap: str) -> None:
    """Once per cluster and process, as the cluster becomes ready (systems/kafka/db.py), before
    the workload's clients open: one idempotent send to
    the warm-up topic (systems/kafka/client.py's, made when the cluster became ready) and
    a read of it, so the JVM has compiled the paths every operation takes. Best effort."""
    cluster = ",".join(sorted(bootstrap.split(",")))
    with _warm_lock:
        if cluster in _warmed or not bootstrap:
            return
        _warmed.add(cluster)
        jvm.preloaded()
        _create_warm_up_topic(bootstrap)
        c = JavaQueueClient(keys=1, timeout_s=WARM_UP_TIMEOUT_S, bootstrap=bootstrap,
                            topic=WARMUP_TOPIC).open(None, "")
        try:
            c.produce(0, 0)
            c.invoke(None, Op("invoke", 0, "assign", [0]))
            c.invoke(None, Op("invoke", 0, "poll", [["poll"]]))
        except (jvm.exception_type(), ValueError):
            pass  # best effort: librdkafka's warm-up record ("warm-up") is no number
        finally:
            c.close(None)


def _create_warm_up_topic(bootstrap: str) -> None:
    """The warm-up topic, where the cluster has none yet (a run's cluster made it ready)."""
    admin = jvm.cls("org.apache.kafka.clients.admin.Admin").create(jvm.properties(
        {"bootstrap.servers": bootstrap, "request.timeout.ms": 10_000,
         "default.api.timeout.ms": 20_000}))
    try:
        topic = jvm.cls("org.apache.kafka.clients.admin.NewTopic")(
            WARMUP_TOPIC, 1, jvm.cls("java.lang.Short")(1))
        admin.createTopics(jvm.jlist([topic])).all().get()
    except jvm.exception_type():
        pass  # it exists (TopicExistsException), or the send below says what is wrong
    finally:
        admin.close(jvm.duration_ms(1000))


class JavaQueueClient:
    """harness.protocols.Client for the queue workload on Kafka; one per process."""

    def __init__(self, *, keys: int, acks: str = "all", timeout_s: float = 3.0,
                 bootstrap: str = "", topic: str = config.TOPIC, retries: int | None = None,
                 request_timeout_s: float | None = None, idempotence: bool | None = None,
                 max_in_flight: int | None = None, max_poll_records: int = MAX_POLL_RECORDS,
                 isolation: str = "read_committed") -> None:
        self.keys = keys
        self.acks = acks
        self.timeout_s = timeout_s
        self.bootstrap = bootstrap
        self.topic = topic
        self.retries_setting = retries
        self.request_timeout_s = request_timeout_s
        self.idempotence = idempotence
        self.max_in_flight = max_in_flight
        self.max_poll_records = max_poll_records
        self.isolation = isolation
        self.producer: Any = None  # made at the first send (reads need none)
        self.consumer: Any = None
        self.assigned: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}

    def _copy(self, bootstrap: str, isolation: str | None = None) -> JavaQueueClient:
        return JavaQueueClient(keys=self.keys, acks=self.acks, timeout_s=self.timeout_s,
                               bootstrap=bootstrap, topic=self.topic,
                               retries=self.retries_setting,
                               request_timeout_s=self.request_timeout_s,
                               idempotence=self.idempotence, max_in_flight=self.max_in_flight,
                               max_poll_records=self.max_poll_records,
                               isolation=isolation or self.isolation)

    def producer_settings(self) -> dict[str, Any]:
        return settings.producer(self.bootstrap, self.acks, timeout_s=self.timeout_s,
                                 retries=self.retries_setting,
                                 request_timeout_s=self.request_timeout_s,
                                 idempotence=self.idempotence, max_in_flight=self.max_in_flight)

    def open(self, run: Any, node: str, isolation: str | None = None,
             producer: bool = True) -> JavaQueueClient:
        """A fresh client; bootstrap from the run's client addresses, the slot's node first.
        producer: made now (not at the first send), so its metadata and producer id are
        fetched in its own thread before a send's delivery timeout starts (on a loaded
        machine they took most of a 3 s timeout); the txn client makes its own."""
        addrs = dict(getattr(run, "client_addrs", None) or {})
        bootstrap = self.bootstrap
        if addrs:
            first = [addrs.pop(node)] if node in addrs else []
            bootstrap = ",".join([*first, *addrs.values()])
        c = self._copy(bootstrap, isolation)
        c.consumer = jvm.cls("org.apache.kafka.clients.consumer.KafkaConsumer")(
            jvm.properties(settings.consumer(bootstrap, timeout_s=self.timeout_s,
                                             isolation=c.isolation,
                                             max_poll_records=self.max_poll_records)))
        if producer:
            c.producer = jvm.cls("org.apache.kafka.clients.producer.KafkaProducer")(
                jvm.properties(c.producer_settings()))
        return c

    def invoke(self, run: Any, op: Op) -> Op:
        if op.f == "send":
            return self._send(op)
        if op.f == "poll":
            return self._poll(op)
        if op.f == "assign":
            return self._assign(op)
        return op.complete("fail", error=f"unknown f {op.f!r}")

    # -- send --------------------------------------------------------------------

    def record(self, key: int, value: int) -> Any:
        return jvm.cls("org.apache.kafka.clients.producer.ProducerRecord")(
            self.topic, jvm.cls("java.lang.Integer")(int(key)), None, str(value))

    def produce(self, key: int, value: int) -> int | None:
        """Send one record and wait for its metadata: its offset (None for acks=0).
        Raises the Java client's exception (an ExecutionException wraps the cause)."""
        if self.producer is None:
            self.producer = jvm.cls("org.apache.kafka.clients.producer.KafkaProducer")(
                jvm.properties(self.producer_settings()))
        return calls.send(self.producer, self.topic, key, value)

    def _send(self, op: Op) -> Op:
        done: list[Any] = []
        try:
            for micro in op.value:
                _, key, value = micro
                offset = self.produce(int(key), int(value))
                done.append(["send", key, [offset, value]])
        except jvm.exception_type() as e:
            if outcomes.outcome(e) == outcomes.FAIL and not done:
                return op.complete("fail", error=outcomes.text(e))
            return op.complete("info", [*done, *op.value[len(done):]], error=outcomes.text(e))
        return op.complete("ok", done)

    # -- assign / poll -------------------------------------------------------------

    def partition(self, key: int) -> Any:
        return jvm.cls("org.apache.kafka.common.TopicPartition")(self.topic, int(key))

    def _assign(self, op: Op) -> Op:
        assert self.consumer is not None, "open() first"
        keys = tuple(int(k) for k in op.value)
        if op.extra.get("seek_to_beginning"):
            self.positions.update({k: 0 for k in keys})
        try:
            calls.assign(self.consumer, self.topic, keys, self.positions)
            self.assigned = keys
        except jvm.exception_type() as e:
            return op.complete("fail", error=outcomes.text(e))
        return op.complete("ok")

    def fetch(self) -> tuple[dict[str, list[list[int]]], str | None]:
        """One poll of the assigned keys: records by key, and the error that ended it."""
        read: dict[str, list[list[int]]] = {}
        if not self.assigned:
            return read, None
        try:
            polled = calls.poll(self.consumer, POLL_WAIT_MS)
        except jvm.exception_type() as err:
            e: Any = err
            name = str(e.getClass().getSimpleName())
            if name == "OffsetOutOfRangeException":
                # the log was cut below our position (a new leader holds less): those keys
                # start over from 0, and this poll fails
                for tp in e.offsetOutOfRangePartitions().keySet():
                    self.positions[int(tp.partition())] = 0
                    self.consumer.seek(tp, 0)
            return read, outcomes.text(e)
        for key, offset, value in calls.records(polled):
            if key not in self.assigned or offset < self.positions.get(key, 0):
                continue
            read.setdefault(str(key), []).append([offset, value])
            self.positions[key] = offset + 1
        return read, None

    def _poll(self, op: Op) -> Op:
        assert self.consumer is not None, "open() first"
        read, error = self.fetch()
        if error is not None:
            return op.complete("fail", [["poll", read]] if read else [["poll"]], error=error)
        return op.complete("ok", [["poll", read]])

    def close(self, run: Any) -> None:
        if self.producer is not None:
            # what is still unacknowledged is abandoned, as librdkafka's purge
            self.producer.close(jvm.duration_ms(0))
            self.producer = None
        if self.consumer is not None:
            self.consumer.close(jvm.duration_ms(0))
            self.consumer = None
