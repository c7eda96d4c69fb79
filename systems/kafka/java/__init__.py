"""Kafka's own Java client (kafka-clients), run in the harness's process through JPype:
`--client java` of the kafka system. The system (systems/kafka/system.py) asks here for
the check, the client and the description when the spec names this client."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.spec import SpecError, TestSpec
from systems.kafka.java import jars, jvm, settings
from systems.kafka.options import KafkaOptions
from workloads.options import QueueOptions, TxnOptions, partitions


def client_jars(spec: TestSpec, broker_version: str | None) -> jars.ClientJars:
    """The client's jars at --kafka-client-version, else the broker's 4.x release, else the
    newest 4.x; a version that does not resolve is a SpecError (exit 2, nothing started)."""
    asked = KafkaOptions.of(spec).kafka_client_version
    version = asked if asked is not None else jars.default_version(broker_version)
    try:
        return jars.resolve(version)
    except jars.ClientJarsError as e:
        raise SpecError(str(e)) from e


def check(spec: TestSpec, broker_version: str | None) -> None:
    """Everything the Java client cannot do; its jars resolved and its JVM started (so a
    second version in the same process is refused here too)."""
    settings.check(spec)
    try:
        import jpype  # noqa: F401
    except ImportError as e:
        raise SpecError("--client java needs JPype1 (pip install JPype1)") from e
    j = client_jars(spec, broker_version)
    try:
        jvm.start(j)
    except jars.ClientJarsError as e:
        raise SpecError(str(e)) from e


def make_client(spec: TestSpec, *, offset_ops: bool = False) -> Any:
    """The harness.protocols.Client of the spec's workload on the Java client (`offset_ops`:
    commits and committed reads as operations, workloads/offsets.py)."""
    from systems.kafka.java.client import JavaQueueClient
    from systems.kafka.java.group import JavaGroupClient
    from systems.kafka.java.txn import JavaTxnClient

    opts = QueueOptions.of(spec)
    own = KafkaOptions.of(spec)
    isolation = opts.isolation.replace("-", "_")
    inner = JavaQueueClient(keys=opts.keys, acks=own.acks,
                            timeout_s=own.delivery_timeout_s,
                            retries=own.retries,
                            request_timeout_s=own.request_timeout_s,
                            idempotence=own.enable_idempotence,
                            max_in_flight=own.max_in_flight,
                            max_poll_records=opts.max_poll_records,
                            isolation=isolation if spec.workload == "txn" else "read_committed")
    if spec.workload == "txn":
        group = None
        if opts.subscribe:  # offsets are committed inside transactions only
            group = JavaGroupClient(inner, partitions=partitions(spec),
                                    settings=replace(opts.consumer, commit="off"),
                                    isolation=isolation)
            group.in_txn = True
        return JavaTxnClient(inner, isolation=isolation, group=group,
                             transaction_timeout_ms=own.transaction_timeout_ms,
                             sends=TxnOptions.of(spec).txn_sends)
    if opts.subscribe or opts.crash_client_interval_s is not None:
        return JavaGroupClient(inner, partitions=partitions(spec), settings=opts.consumer,
                               offset_ops=offset_ops)
    return inner


def info(spec: TestSpec) -> dict[str, str]:
    """test.json's client: the library and its version."""
    version = jvm.running_version() or (KafkaOptions.of(spec).kafka_client_version or "")
    return {"library": "kafka-clients (Kafka's Java client, JPype)", "version": version}


PRODUCER_SAFETY = ("acks", "enable.idempotence", "retries", "max.in.flight.requests.per.connection",
                   "delivery.timeout.ms", "request.timeout.ms")
CONSUMER_SAFETY = ("isolation.level", "auto.offset.reset", "enable.auto.commit")


def safety(spec: TestSpec) -> dict[str, dict[str, Any]]:
    """The clients' settings that decide whether acknowledged writes survive (Java names)."""
    producer, consumer = producer_settings(spec), settings.consumer("", timeout_s=1)
    return {"producer": {k: producer.get(k, "the Java client's default") for k in PRODUCER_SAFETY},
            "consumer": {k: consumer.get(k, "the Java client's default") for k in CONSUMER_SAFETY}}


def producer_settings(spec: TestSpec) -> dict[str, Any]:
    """The producer config the queue client runs with (bootstrap left out)."""
    own = KafkaOptions.of(spec)
    return settings.producer("", own.acks, timeout_s=own.delivery_timeout_s,
                             retries=own.retries, request_timeout_s=own.request_timeout_s,
                             idempotence=own.enable_idempotence,
                             max_in_flight=own.max_in_flight)
