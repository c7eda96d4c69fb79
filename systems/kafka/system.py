"""The `kafka` system: Apache Kafka in KRaft mode, jars from Maven Central, confluent-kafka clients.

Each node is a combined broker and controller; its client listener is the port the
backend gives the node, its controller listener one more free port. Kafka brokers
dial each other at the one address each advertises, so the local backend lets them
connect directly (`direct_links`), each in a network namespace of its own when the
run asks for partitions (root only); what Kafka cannot do on a backend is refused
by `check`, before anything starts. On docker each node is a container of its own
(systems/kafka/Dockerfile) with fixed ports, driven by shell commands (KafkaRemoteDB).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.control.local import free_port
from harness.image import NodeImage
from harness.protocols import DB, Client, LocalHost, NodeHost, ShellHost
from harness.spec import SpecError, TestSpec
from harness.test import Test
from systems.kafka import (
    config,
    coordinator_hunt,
    features,
    hunts,
    jars,
    java,
    kip101,
    releases,
    zk,
)
from systems.kafka import scenarios as kafka_scenarios
from systems.kafka.client import KafkaQueueClient
from systems.kafka.db import (
    VERSION_ENV_KEY,
    KafkaLocalDB,
    check_spec,
    controller_voters,
    release_of,
)
from systems.kafka.group_client import KafkaGroupClient
from systems.kafka.java.settings import client_of
from systems.kafka.options import KafkaOptions
from systems.kafka.remote import CONTROLLER_PORT, KafkaRemoteDB
from systems.kafka.txn_client import KafkaTxnClient
from systems.settings import AcksOption
from workloads import offsets
from workloads.options import QueueOptions, TxnOptions, partitions

CLIENT_PORT = 9092
JRE_PACKAGES = ("openjdk-17-jre-headless",)  # Debian's, debootstrapped into the node image


class KafkaSystem(AcksOption):
    """harness.protocols.System (and DirectLinks, HasNodeImage, HasSequences, SetsAcks)
    for Apache Kafka."""

    name = "kafka"
    port = CLIENT_PORT
    scenarios = {**kafka_scenarios.SCENARIOS, **hunts.SCENARIOS, **coordinator_hunt.SCENARIOS}
    # its fault sequences, as data: the nemesis reads them through harness.registry
    sequences = {**kafka_scenarios.SEQUENCES, **kip101.SEQUENCES,
                 **hunts.SEQUENCES,
                 coordinator_hunt.SEQUENCE.name: coordinator_hunt.SEQUENCE}
    release_key = VERSION_ENV_KEY
    options = KafkaOptions

    def resolve_release(self, release: str) -> str:
        """HasReleases: the release's jars in the cache (Maven fetches them once)."""
        try:
            return jars.resolve(release).version
        except jars.KafkaJarsError as e:
            first = str(e).splitlines()[0]
            raise SpecError(f"Kafka {release} did not resolve from Maven Central"
                            if "did not resolve" in first else first) from None

    def check(self, spec: TestSpec) -> None:
        check_spec(spec)
        if client_of(spec) == "java":
            java.check(spec, _broker_version(spec))
            return
        opts = QueueOptions.of(spec)
        if opts.subscribe and opts.assignor == "sticky":
            raise SpecError("--assignor sticky: librdkafka has no eager sticky assignor "
                            "(range or roundrobin)")

    def direct_links(self) -> bool:
        return True

    def db(self, test: Test, host: NodeHost) -> DB:
        spec = test.spec
        j = jars.resolve(KafkaOptions.of(spec).kafka_version)
        pool = partitions(spec)
        rel, mode = release_of(spec)
        asked = features.check(spec, jars.parse_version(j.version))
        fmt = tuple(features.format_args(asked))
        db: KafkaLocalDB | KafkaRemoteDB
        if isinstance(host, LocalHost):
            nodes = _nodes(spec, host.endpoints.listen, free_port)
            root = next(iter(host.dirs.values())).parent
            if mode == releases.ZOOKEEPER:
                from systems.kafka.zk_local import KafkaZkLocalDB

                db = KafkaZkLocalDB(j, nodes, root, KafkaOptions.of(spec), partitions=pool,
                                    launcher=host.launcher, release=rel,
                                    members=zk.make_members(nodes, free_port),
                                    prefixes=host.prefixes,
                                    controlled_shutdown=KafkaOptions.of(spec).controlled_shutdown)
                db.metadata_mode = mode
            else:
                db = KafkaLocalDB(j, nodes, root, KafkaOptions.of(spec), partitions=pool,
                                  launcher=host.launcher, prefixes=host.prefixes,
                                  format_args=fmt)
        elif isinstance(host, ShellHost):
            nodes = _nodes(spec, host.endpoints.listen, lambda: CONTROLLER_PORT)
            db = KafkaRemoteDB(host, j, nodes, KafkaOptions.of(spec), partitions=pool,
                               format_args=fmt)
        else:
            raise TypeError(f"kafka: no DB for a host of type {type(host).__name__}")
        db.asked_features = asked
        return db

    def node_image(self) -> NodeImage:
        """A Debian JRE and the newest cached 4.x's jars (another version is uploaded at
        setup)."""
        return NodeImage("undertow/kafka", Path(__file__).with_name("Dockerfile"),
                         {"libs": jars.resolve().libs}, packages=JRE_PACKAGES)

    def client(self, test: Test) -> Client:
        spec = test.spec
        if client_of(spec) == "java":
            out: Client = java.make_client(spec, offset_ops=offsets.enabled(spec, self))
            return out
        opts = QueueOptions.of(spec)
        own = KafkaOptions.of(spec)
        inner = KafkaQueueClient(keys=opts.keys, acks=own.acks,
                                 timeout_s=own.delivery_timeout_s,
                                 retries=own.retries,
                                 request_timeout_s=own.request_timeout_s,
                                 idempotence=idempotence(spec),
                                 max_in_flight=own.max_in_flight,
                                 max_poll_records=opts.max_poll_records)
        if spec.workload == "txn":
            isolation = opts.isolation.replace("-", "_")
            group = None
            if opts.subscribe:  # offsets are committed inside transactions only
                group = KafkaGroupClient(inner, partitions=partitions(spec),
                                         settings=replace(opts.consumer, commit="off"),
                                         isolation=isolation)
            return KafkaTxnClient(
                inner, isolation=isolation, group=group,
                transaction_timeout_ms=own.transaction_timeout_ms,
                sends=TxnOptions.of(spec).txn_sends)
        if opts.subscribe or opts.crash_client_interval_s is not None:
            return KafkaGroupClient(inner, partitions=partitions(spec), settings=opts.consumer,
                                    offset_ops=offsets.enabled(spec, self))
        return inner

    def speaks_offsets(self, spec: TestSpec) -> bool:
        """harness.protocols.SpeaksOffsets: both group clients (librdkafka's, the Java
        client's) commit and read the group's offsets as operations in the queue workload."""
        return spec.workload == "queue"

    def describe(self, spec: TestSpec) -> Mapping[str, Any]:
        """Until the broker runs: the version asked for (the running broker's own version
        replaces it in test.json once the cluster is ready)."""
        rel, mode = release_of(spec)
        if client_of(spec) == "java":
            client, safety = java.info(spec), java.safety(spec)
        else:
            client = _client_info()
            safety = {"producer": _safety_of(producer_settings(spec), PRODUCER_SAFETY),
                      "consumer": _safety_of(config.consumer_config("", timeout_s=1),
                                             CONSUMER_SAFETY)}
        return {"name": self.name, "version": KafkaOptions.of(spec).kafka_version or "newest 4.x",
                "metadata": mode, "release": release_facts(rel, spec),
                "client": client, "safety": safety,
                "safety_files": {"server.properties": [
                    k.replace("broker.", "zookeeper.") if mode == releases.ZOOKEEPER else k
                    for k in SERVER_SAFETY]}}


# The settings that decide whether acknowledged writes survive, as Kafka names them: the
# report reads the brokers' from each node's written server.properties (a key not
# written there has Kafka's default), the clients' from their librdkafka config.
SERVER_SAFETY = ("default.replication.factor", "min.insync.replicas",
                 "unclean.leader.election.enable", "log.flush.interval.messages",
                 "replica.lag.time.max.ms", "broker.session.timeout.ms")
PRODUCER_SAFETY = ("acks", "enable.idempotence", "retries", "max.in.flight.requests.per.connection",
                   "message.timeout.ms", "request.timeout.ms")
CONSUMER_SAFETY = ("isolation.level", "auto.offset.reset", "enable.auto.commit")


def idempotence(spec: TestSpec) -> bool | None:
    """The spec's idempotence; None (on for acks=all) becomes off on releases without it."""
    asked = KafkaOptions.of(spec).enable_idempotence
    if asked is None and not release_of(spec)[0].era.idempotence:
        return False
    return asked


def release_facts(rel: releases.Release, spec: TestSpec) -> dict[str, Any]:
    """What the release decides that the spec does not say (test.json's record of it)."""
    era = rel.era
    return {"artifact": f"org.apache.kafka:{rel.artifact}:{rel.version}",
            "metadata_modes": list(era.modes),
            "truncation": "leader epoch (KIP-101)" if era.leader_epochs
            else "high watermark (before KIP-101, 0.11.0)",
            "unclean.leader.election.enable": {
                "set": KafkaOptions.of(spec).unclean_leader_election,
                "release_default": era.unclean_default},
            "idempotence": era.idempotence, "dump_format": era.dump_format,
            "extra_jars": list(era.extra_jars)}


def producer_settings(spec: TestSpec) -> dict[str, Any]:
    """The librdkafka producer config the queue client runs with (bootstrap left out)."""
    own = KafkaOptions.of(spec)
    return config.producer_config("", own.acks,
                                  timeout_s=own.delivery_timeout_s,
                                  retries=own.retries,
                                  request_timeout_s=own.request_timeout_s,
                                  idempotence=idempotence(spec),
                                  max_in_flight=own.max_in_flight)


def _safety_of(conf: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: conf.get(k, "librdkafka's default") for k in keys}


def _client_info() -> dict[str, str]:
    import confluent_kafka

    def first(v: Any) -> str:  # version() is a (str, int) pair in some releases, a str in others
        return str(v[0] if isinstance(v, tuple) else v)

    return {"library": "confluent-kafka (librdkafka)", "version": first(confluent_kafka.version()),
            "librdkafka": first(confluent_kafka.libversion())}


def _broker_version(spec: TestSpec) -> str | None:
    """The broker's release as asked, else the newest cached 4.x (None: none cached)."""
    version = KafkaOptions.of(spec).kafka_version
    if version is not None:
        return version
    cached = jars.newest_cached()
    return cached.version if cached is not None else None


def _nodes(spec: TestSpec, listen: Mapping[str, str],
           controller_port: Callable[[], int]) -> dict[str, config.KafkaNode]:
    """Each node at the address the backend gave it; its controller port from
    `controller_port()` (a free one locally, a fixed one on a node of its own)."""
    where = {n: a.rsplit(":", 1) for n, a in listen.items()}
    ports = iter(p for n in spec.nodes for p in (int(where[n][1]), controller_port()))
    nodes = config.make_nodes(tuple(spec.nodes), "127.0.0.1", lambda: next(ports),
                              controller_voters=controller_voters(spec))
    return {n: replace(node, host=where[n][0]) for n, node in nodes.items()}


system = KafkaSystem()
