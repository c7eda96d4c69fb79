"""The spec's settings as Kafka's: one server.properties per node, client configs.

By default every node is a combined broker and controller (KRaft) in a static
quorum of all nodes; with `--kafka-controllers` K (KafkaOptions) the first K nodes
are dedicated controllers and the others brokers only, as KRaft is often run.
Settings that decide whether acknowledged writes survive come from
the spec; a spec setting that means nothing for Kafka is refused, not ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from harness.spec import SpecError
from systems.settings import LogOptions

TOPIC = "undertow"
CLUSTER_ID = "dW5kZXJ0b3dfa2Fma2EAAA"  # 22 characters of url-safe base64 (16 bytes)
HEARTBEAT_MS = 500  # below the spec's session timeout (Kafka needs heartbeat < session)

# Sized for several brokers on 2 cores and 24 GB: a small heap, few GC and JIT threads.
# C1 only (TieredStopAtLevel=1): C2's compiling competes with three brokers for the two
# cores for minutes, and a run is over before it pays off (bench.harness: several
# times the client ops/s over a run's first minute). Serial GC: a small broker's young
# collections take milliseconds, and it has none of G1's concurrent threads and costlier
# write barriers (bench.harness: more client ops/s at the same moment, docs/benchmarks.md).
JVM_OPTS = (
    "-Xms256m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS",
)


# A short-lived tool's JVM (StorageTool, DumpLogSegments): small and quick to start.
TOOL_OPTS = ("-Xmx512m", "-XX:TieredStopAtLevel=1")


def server_command(java: str, classpath: str, props: str,
                   jvm: Sequence[str] = ()) -> list[str]:
    """A node's broker/controller JVM; `jvm`: options added to JVM_OPTS (the release's
    class-data archive, systems.kafka.cds)."""
    return [java, *JVM_OPTS, *jvm, "-cp", classpath, "kafka.Kafka", props]


def format_command(java: str, classpath: str, props: str,
                   features: Sequence[str] = (), jvm: Sequence[str] = ()) -> list[str]:
    """Kafka's StorageTool formatting a node's log dirs for the run's cluster (once);
    `features`: its `--feature name=level` arguments (systems.kafka.features)."""
    return [java, *TOOL_OPTS, *jvm, "-cp", classpath, "kafka.tools.StorageTool", "format",
            "--cluster-id", CLUSTER_ID, "--config", props, "--ignore-formatted", *features]


@dataclass(frozen=True, slots=True)
class KafkaNode:
    """One node's identity and addresses (host:port)."""

    name: str
    node_id: int
    host: str
    broker_port: int
    controller_port: int
    roles: tuple[str, ...] = ("broker", "controller")

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def voter(self) -> str:
        return f"{self.node_id}@{self.host}:{self.controller_port}"


def node_id(name: str) -> int:
    """'n3' -> 3: Kafka's node.id, fixed by the node's name so runs read alike."""
    if not (name.startswith("n") and name[1:].isdigit() and int(name[1:]) > 0):
        raise SpecError(f"kafka: node name {name!r} is not n1, n2, ...")
    return int(name[1:])


def check_settings(b: LogOptions) -> None:
    """Refuse what Kafka cannot do, before anything starts. (High-watermark truncation,
    epoch fencing off and commits answered before they are replicated are our broker's
    options only: the kafka system has none of them, so --truncation and the rest are
    refused with --system kafka before this is asked.)"""
    if b.session_timeout_ms <= HEARTBEAT_MS:
        raise SpecError(f"session_timeout_ms {b.session_timeout_ms}: Kafka needs it above the "
                        f"broker heartbeat interval ({HEARTBEAT_MS} ms)")


def server_properties(node: KafkaNode, voters: Mapping[str, KafkaNode], data_dir: PurePath,
                      b: LogOptions, *, partitions: int) -> dict[str, str]:
    """The node's server.properties, from the spec's broker settings."""
    check_settings(b)
    rf = str(b.replication_factor)
    listeners = []
    if node.is_broker:
        listeners.append(f"PLAINTEXT://{node.host}:{node.broker_port}")
    if node.is_controller:
        listeners.append(f"CONTROLLER://{node.host}:{node.controller_port}")
    props: dict[str, Any] = {
        "process.roles": ",".join(node.roles),
        "node.id": node.node_id,
        "controller.quorum.voters": ",".join(v.voter for v in voters.values()
                                             if v.is_controller),
        "listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        **_broker_listeners(node),
        "num.partitions": partitions,
        "default.replication.factor": rf,
        "min.insync.replicas": b.min_insync_replicas,
        "unclean.leader.election.enable": str(b.unclean_leader_election).lower(),
        "replica.lag.time.max.ms": b.replica_lag_time_max_ms,
        "broker.session.timeout.ms": b.session_timeout_ms,
        "broker.heartbeat.interval.ms": HEARTBEAT_MS,
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 1,  # librdkafka's consumer wants a group coordinator
        "replica.high.watermark.checkpoint.interval.ms": 500,  # the dumps read HW from it
        # lose-unflushed cuts each log back to this file's recovery point: kept within
        # 500 ms of the flushes (Kafka's default writes it once a minute)
        "log.flush.offset.checkpoint.interval.ms": 500,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min(b.min_insync_replicas, b.replication_factor),
        "transaction.state.log.num.partitions": 1,  # the idempotent producer's first request
        "group.initial.rebalance.delay.ms": 0,
        "num.network.threads": 2,
        "num.io.threads": 4,
        "log.segment.bytes": 16 * 1024 * 1024,
    }
    if b.flush == "every-message":
        props["log.flush.interval.messages"] = 1
    return {k: str(v) for k, v in props.items()}


def _broker_listeners(node: KafkaNode) -> dict[str, str]:
    if not node.is_broker:
        return {}
    return {"advertised.listeners": f"PLAINTEXT://{node.bootstrap}",
            "inter.broker.listener.name": "PLAINTEXT"}


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def producer_config(bootstrap: str, acks: str, *, timeout_s: float, retries: int | None = None,
                    request_timeout_s: float | None = None,
                    idempotence: bool | None = None,
                    max_in_flight: int | None = None) -> dict[str, Any]:
    """librdkafka producer settings: the spec's acks; idempotence only where it is allowed.
    timeout_s is the delivery timeout (message.timeout.ms); retries None: all for acks=all,
    none for 0 and 1; request_timeout_s: one attempt's (None: the delivery timeout);
    idempotence None: on for acks=all; max_in_flight None: librdkafka's own."""
    ms = int(timeout_s * 1000)
    request_ms = ms - 100 if request_timeout_s is None else int(request_timeout_s * 1000)
    # librdkafka's request.timeout.ms is only the broker's wait for acks; the client gives up
    # on an unanswered ProduceRequest after socket.timeout.ms (or what is left of the
    # message's timeout), disconnects and, with retries, sends it again. So an attempt's
    # timeout is socket.timeout.ms; left at the delivery timeout, nothing is ever resent.
    socket_ms = max(1000, ms) if request_timeout_s is None else max(500, request_ms)
    more = {} if max_in_flight is None else \
        {"max.in.flight.requests.per.connection": max_in_flight}
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        # idempotence needs acks=all; with it, librdkafka's retries never duplicate
        "enable.idempotence": acks == "all" if idempotence is None else idempotence,
        "retries": (2_147_483_647 if acks == "all" else 0) if retries is None else retries,
        "message.timeout.ms": ms,
        "request.timeout.ms": max(500, request_ms),
        "linger.ms": 0,
        "socket.timeout.ms": socket_ms,
        "socket.nagle.disable": True,  # one small request at a time: no 40 ms Nagle waits
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 500,
        **more,
    }


def consumer_config(bootstrap: str, *, timeout_s: float,
                    isolation: str = "read_committed") -> dict[str, Any]:
    """librdkafka consumer settings: manual assign, no commits; isolation.level matters only
    to the txn workload (librdkafka's default, read_committed, for the others)."""
    return {
        "bootstrap.servers": bootstrap,
        "isolation.level": isolation,
        "group.id": "undertow-unused",  # librdkafka wants one; nothing is ever committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # an out-of-range position is an error the client turns into a failed poll and a
        # restart from 0 (a silent reset would read offsets going backwards with no seek)
        "auto.offset.reset": "error",
        "socket.timeout.ms": max(1000, int(timeout_s * 1000)),
        "socket.nagle.disable": True,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
        "fetch.wait.max.ms": 100,
        # fetch again only once the application has taken what was fetched (checked every
        # 10 ms), not at every record a waiting fetch returns: consumer fetches per send
        # fall from about 6.7 to 2, and the brokers' CPU per client op with them. Each check
        # wakes the consumer's broker thread; a process polls every 40 to 80 ms, so checking
        # every 5 ms woke it 8 to 16 times a poll for nothing
        "queued.min.messages": 1,
        "fetch.queue.backoff.ms": 10,
        "enable.partition.eof": True,
    }


def make_nodes(names: tuple[str, ...], host: str, port: Callable[[], int], *,
               controller_voters: int = 0) -> dict[str, KafkaNode]:
    """Each node's id (from its name) and two ports (broker, controller) from `port()`;
    with controller_voters K > 0 the first K are controllers only, the rest brokers only."""
    if not 0 <= controller_voters < len(names):
        raise SpecError(f"controller_voters {controller_voters}: must leave at least one of "
                        f"the {len(names)} nodes a broker")

    def roles(i: int) -> tuple[str, ...]:
        if not controller_voters:
            return ("broker", "controller")
        return ("controller",) if i < controller_voters else ("broker",)

    return {n: KafkaNode(n, node_id(n), host, port(), port(), roles(i))
            for i, n in enumerate(names)}
