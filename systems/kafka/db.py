"""Apache Kafka's DB: what it refuses, what every host shares (`KafkaViews`), and the
local host's (KRaft JVMs on this machine, started by the backend's launcher).

Locally the nodes listen on 127.0.0.1 with two ports each (broker, controller). Kafka
brokers dial each other at the one address each advertises, so the harness's
per-link proxy cannot cut single links: when partitions are asked for, each
node runs in its own network namespace (harness.netns, root only) and a
partition is a blackhole route there. Slow and lossy links and clock are refused
before anything starts; lose-unflushed cuts a stopped node's logs back to their
recovery points (systems.kafka.unflushed).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from harness import netns
from harness.faultkinds import KILL, LOSE_UNFLUSHED, LOSSY, PARTITION, PAUSE, SLOW, FaultKind
from harness.faultplan import fault_kinds
from harness.runfiles import amend_test_json
from harness.spec import SpecError, TestSpec
from systems.kafka import config, features, jars, releases
from systems.kafka.admin import TXN_STATE_TOPIC, KafkaAdmin, active_controller
from systems.kafka.client import warm_up
from systems.kafka.jars import KafkaJars
from systems.kafka.java.client import warm_up as java_warm_up
from systems.kafka.java.settings import client_of
from systems.kafka.local import LocalKafka
from systems.kafka.options import KafkaOptions
from systems.settings import check_brokers
from workloads.options import QueueOptions, partitions

# the fault kinds Kafka takes, whatever the sequence
FAULTS = (KILL, PAUSE, PARTITION, LOSE_UNFLUSHED)
# slow and lossy links where the backend's Net shapes a node's traffic on the client port
# (docker: iptables and a packet delayer in each container's namespace); the local
# backend's nodes dial each other directly, and the ssh hosts have no netem and no delayer
LINK_FAULTS = {"docker": (SLOW, LOSSY)}
BACKENDS = ("local", "docker", "ssh")
WORKLOADS = ("queue", "txn")
VERSION_ENV_KEY = "kafka_version"  # KafkaOptions: the release to run (`undertow matrix` rows)
_VERSION_LINE = re.compile(r"Kafka version ?: (\S+)")  # 0.10 to 2.x print "version : V"
# JVMs restarted together (a final heal after a majority was killed) take tens of seconds
# to register and fill the ISRs again on a loaded machine: never wait less for readiness.
MIN_READY_S = 90.0


def faults(backend: str) -> tuple[FaultKind, ...]:
    """The fault kinds Kafka takes on that backend."""
    return FAULTS + LINK_FAULTS.get(backend, ())


def controller_voters(spec: TestSpec) -> int:
    """--kafka-controllers: that many dedicated controllers (0: combined nodes)."""
    return KafkaOptions.of(spec).controller_voters


def release_of(spec: TestSpec) -> tuple[releases.Release, str]:
    """The release asked for (--kafka-version; default the newest 4.x cached, else 4.x) and
    its metadata mode (--kafka-metadata; default the release's own)."""
    opts = KafkaOptions.of(spec)
    asked = opts.kafka_version
    try:
        if asked is None:
            newest = jars.newest_cached()
            rel = releases.release(newest.version if newest is not None else "4.0.0")
        else:
            rel = releases.release(str(asked))
        return rel, rel.metadata_mode(opts.kafka_metadata)
    except releases.ReleaseError as e:
        raise SpecError(str(e)) from None


def needs_namespaces(spec: TestSpec) -> bool:
    return spec.backend == "local" and PARTITION in fault_kinds(spec.nemesis)


def check_spec(spec: TestSpec) -> None:
    """Everything Kafka on this backend cannot do, as a SpecError, before anything starts."""
    config.check_settings(KafkaOptions.of(spec))
    if spec.backend not in BACKENDS:
        raise SpecError(f"--backend {spec.backend}: Kafka runs on the "
                        f"{', '.join(BACKENDS)} backends")
    kinds = faults(spec.backend)
    unsupported = [f for f in spec.nemesis if not fault_kinds([f]) <= set(kinds)]
    if unsupported:
        raise SpecError(f"--nemesis {','.join(unsupported)}: unsupported for Kafka on the "
                        f"{spec.backend} backend (it has {', '.join(k.start for k in kinds)})")
    if needs_namespaces(spec) and (why := netns.supported()) is not None:
        raise SpecError(f"--nemesis partition: unsupported for Kafka here ({why}; each node "
                        "needs its own network namespace); kill and pause still work")
    if spec.workload not in WORKLOADS:
        raise SpecError(f"--workload {spec.workload}: Kafka runs the "
                        f"{', '.join(WORKLOADS)} workloads")
    rel, mode = release_of(spec)
    if mode != releases.ZOOKEEPER and not KafkaOptions.of(spec).controlled_shutdown:
        raise SpecError("--no-kafka-controlled-shutdown: ZooKeeper mode only (a KRaft broker "
                        "always shuts down through its controller)")
    if mode == releases.ZOOKEEPER:
        if controller_voters(spec):
            raise SpecError("controller_voters: KRaft controllers; in ZooKeeper mode the "
                            "controller is a broker elected through ZooKeeper")
        if spec.backend != "local":
            raise SpecError(f"--kafka-metadata zookeeper: runs on the local backend only "
                            f"(not {spec.backend} yet)")
    try:
        if spec.workload == "txn":
            rel.require("transactions")
        if KafkaOptions.of(spec).enable_idempotence:
            rel.require("idempotence")
    except releases.ReleaseError as e:
        raise SpecError(str(e)) from None
    if KafkaOptions.of(spec).kafka_version is not None:
        try:  # an unresolvable release is said now, not once the nodes are up
            jars.resolve(rel.version)
        except jars.KafkaJarsError as e:
            raise SpecError(str(e).splitlines()[0]) from None
    features.check(spec, jars.parse_version(rel.version))
    k = controller_voters(spec)
    config.make_nodes(spec.nodes, "127.0.0.1", lambda: 0, controller_voters=k)
    check_brokers(spec, len(spec.nodes) - k,
                  f"{k} of {len(spec.nodes)} nodes are dedicated controllers" if k else "")


class KafkaViews:
    """What every Kafka DB shares, whatever the host: readiness through the Admin API,
    leaders, the active controller (from the nodes' quorum-state files), Kafka's own
    version (from the first node log that states it).

    A subclass gives `nodes`, `jars`, `brokers`, `bootstrap`, `quorum_states()` and
    `log_text(node)`."""

    nodes: dict[str, config.KafkaNode]
    jars: KafkaJars
    admin: KafkaAdmin | None = None
    asked_features: dict[str, int] = {}  # set per instance by the system
    metadata_mode = releases.KRAFT
    _warm = False

    @property
    def brokers(self) -> tuple[str, ...]:
        raise NotImplementedError

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def quorum_states(self) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    def log_text(self, node: str) -> str:
        raise NotImplementedError

    def open_admin(self) -> KafkaAdmin:
        if self.admin is None:
            self.admin = KafkaAdmin(self.bootstrap, self.names())
        return self.admin

    def wait_ready(self, run: Any, timeout_s: float) -> None:
        """Every broker registered, the topic made, every partition led with a full ISR;
        Kafka's own version then goes into test.json."""
        admin = self.open_admin()
        spec: TestSpec = run.spec
        timeout_s = max(timeout_s, MIN_READY_S)
        own = KafkaOptions.of(spec)
        took = admin.wait_ready(len(self.brokers), partitions(spec), own.replication_factor,
                                own.min_insync_replicas, timeout_s=timeout_s)
        rel = releases.release(self.jars.version)
        if not self._warm:  # once: the producer-id machinery, before the workload's first send
            if rel.era.idempotence:
                warm_up(self.bootstrap, admin)
            if client_of(spec) == "java":  # and the Java client's classes, compiled
                java_warm_up(self.bootstrap)
            self._warm = True
        version = self.version() or self.jars.version
        mode = self.metadata_mode
        feats = features.describe(self.asked_features, jars.parse_version(self.jars.version))
        amend_test_json(run.paths.test_json, {"system_info": {
            "name": "kafka", "version": version, "metadata": mode, "features": feats}},
            merge=True)
        run.log.info("Kafka %s (%s) ready in %.1f s: %s", version, mode, took, self.bootstrap)

    def names(self) -> dict[int, str]:
        return {n.node_id: n.name for n in self.nodes.values()}

    def leader_of(self, run: Any, key: int) -> str | None:
        return self.admin.leader_of(key) if self.admin is not None else None

    def controller(self, run: Any) -> str | None:
        return active_controller(self.quorum_states(), self.names())

    def coordinator(self, run: Any) -> str | None:
        """The group coordinator; in a txn run without a group (--sub-via assign), the
        transaction coordinator, the one its clients talk to."""
        if self.admin is None:
            return None
        spec = getattr(run, "spec", None)
        if spec is not None and spec.workload == "txn" and not QueueOptions.of(spec).subscribe:
            return self.admin.coordinator(TXN_STATE_TOPIC)
        return self.admin.coordinator()

    def metadata(self) -> dict[str, Any] | None:
        """Leaders, replicas and ISR per key, in the shape nemesis.targets reads."""
        if self.admin is None:
            return None
        try:
            parts = self.admin.partitions()
        except Exception:
            return None
        return {"controller": self.controller(None),
                "partitions": {str(k): {"leader": v.leader, "replicas": list(v.replicas),
                                        "isr": list(v.isr)} for k, v in parts.items()}}

    def version(self) -> str | None:
        """Kafka's own version string, from the first node log that states it."""
        for n in self.nodes:
            with contextlib.suppress(OSError):
                if m := _VERSION_LINE.search(self.log_text(n)):
                    return m[1]
        return None


class KafkaLocalDB(LocalKafka, KafkaViews):
    """LocalKafka plus KafkaViews (HasLeaders, readiness).

    Storage is formatted once, by the first node's setup (StorageTool needs every
    node's server.properties); each setup then starts its node's JVM."""

    _prepared = False

    def setup(self, run: Any, node: str) -> None:
        with self._prepare_lock:
            if not self._prepared:
                self.prepare()
                self._prepared = True
                self.open_admin()
        self.start(run, node)

    def log_text(self, node: str) -> str:
        return self.log_path(node).read_text(errors="replace")
