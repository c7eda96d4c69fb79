"""The spec's client settings under the Java client's names, and what it cannot do.

The producer: acks, retries, enable.idempotence and max.in.flight keep their names;
the delivery timeout is delivery.timeout.ms, one attempt's is request.timeout.ms (in
the Java client that is the client's own wait for an answer, librdkafka's
socket.timeout.ms); max.block.ms bounds send()'s wait for metadata by the delivery
timeout (its default, 60 s, would outlast every operation). The consumer: manual
assign, nothing committed, auto.offset.reset=none (an offset out of range is an
error the client turns into a failed poll and a restart from 0, as with librdkafka).
"""

from __future__ import annotations

from typing import Any

from harness.spec import SpecError, TestSpec
from systems.kafka.options import KafkaOptions
from workloads.options import GROUP_ID, ConsumerSettings, QueueOptions

ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
}
STRING_SERIALIZER = "org.apache.kafka.common.serialization.StringSerializer"
STRING_DESERIALIZER = "org.apache.kafka.common.serialization.StringDeserializer"
# No JMX reporter (4.x adds it by default) and no metrics pushed to the brokers (KIP-714): each
# assign re-registers the consumer's per-partition metrics, and both reporters' handling of
# that was up to a sixth of the Java client's CPU (JFR, bench.harness --client java);
# nothing reads them. Observability only: no setting that decides what a write or read does.
NO_REPORTERS = {"metric.reporters": "", "enable.metrics.push": False}


def client_of(spec: TestSpec) -> str:
    """`java` or `librdkafka`: --client (KafkaOptions refuses anything else)."""
    return KafkaOptions.of(spec).client


def check(spec: TestSpec) -> None:
    """What the Java client cannot do, as a SpecError before anything starts."""
    opts = QueueOptions.of(spec)
    if opts.subscribe and spec.workload == "queue" and opts.commit == "auto":
        raise SpecError("--commit auto: Kafka's Java client commits only inside poll(), "
                        "never in the background (its auto-commit is --commit processed)")


def producer(bootstrap: str, acks: str, *, timeout_s: float, retries: int | None = None,
             request_timeout_s: float | None = None, idempotence: bool | None = None,
             max_in_flight: int | None = None) -> dict[str, Any]:
    """The producer's settings; the same defaults as the librdkafka client's
    (systems/kafka/config.producer_config): idempotent with all retries for acks=all,
    no retries for 0 and 1."""
    ms = int(timeout_s * 1000)
    request_ms = ms - 100 if request_timeout_s is None else int(request_timeout_s * 1000)
    out: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": acks == "all" if idempotence is None else idempotence,
        "retries": (2_147_483_647 if acks == "all" else 0) if retries is None else retries,
        "delivery.timeout.ms": ms,
        "request.timeout.ms": max(500, min(request_ms, ms)),
        "max.block.ms": ms,
        "linger.ms": 0,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 500,
        "reconnect.backoff.max.ms": 500,
        "metadata.max.age.ms": 1000,
        "key.serializer": STRING_SERIALIZER,
        "value.serializer": STRING_SERIALIZER,
        **NO_REPORTERS,
    }
    if max_in_flight is not None:
        out["max.in.flight.requests.per.connection"] = max_in_flight
    return out


def consumer(bootstrap: str, *, timeout_s: float, isolation: str = "read_committed",
             max_poll_records: int = 500) -> dict[str, Any]:
    """A consumer with manual assign that commits nothing."""
    return {
        "bootstrap.servers": bootstrap,
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "auto.offset.reset": "none",
        "request.timeout.ms": max(1000, int(timeout_s * 1000)),
        "default.api.timeout.ms": max(1000, int(timeout_s * 1000)),
        "reconnect.backoff.max.ms": 500,
        "metadata.max.age.ms": 1000,
        "fetch.max.wait.ms": 100,
        "max.poll.records": max_poll_records,
        "key.deserializer": STRING_DESERIALIZER,
        "value.deserializer": STRING_DESERIALIZER,
        **NO_REPORTERS,
    }


def group(bootstrap: str, settings: ConsumerSettings, *, timeout_s: float,
          isolation: str = "read_committed", max_poll_records: int = 500,
          offset_ops: bool = False) -> dict[str, Any]:
    """A member of the run's group: `processed` is the Java client's auto-commit (inside
    poll(), of what earlier polls handed over), `off` commits nothing outside transactions;
    `offset_ops`: the commits are operations (workloads/offsets.py), never its own."""
    return {
        **consumer(bootstrap, timeout_s=timeout_s, isolation=isolation,
                   max_poll_records=max_poll_records),
        "group.id": GROUP_ID,
        "enable.auto.commit": settings.commit != "off" and not offset_ops,
        "auto.commit.interval.ms": settings.auto_commit_interval_ms,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": max(1, min(100, settings.session_timeout_ms // 3)),
        "partition.assignment.strategy": ASSIGNORS[settings.assignor],
    }
