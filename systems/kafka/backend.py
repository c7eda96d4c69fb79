"""Apache Kafka on the local backend: JVMs on this machine, the queue workload's client on them.

The nodes listen on 127.0.0.1 with two ports each (broker, controller). Kafka
brokers dial each other at the one address each advertises, so the harness's
per-link proxy cannot cut single links: when partitions are asked for, each
node runs in its own network namespace (harness.netns, root only) and a
partition is a blackhole route there. Slow and lossy links, clock and
lose-unflushed are refused before anything starts.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import netns
from harness.spec import SpecError, TestSpec
from systems.kafka import config, jars
from systems.kafka.admin import KafkaAdmin, active_controller
from systems.kafka.client import KafkaQueueClient, warm_up
from systems.kafka.local import LocalKafka

FAULTS = ("kill", "pause", "partition")
READY_TIMEOUT_S = 60.0
VERSION_ENV_KEY = "kafka_version"  # spec.extra key: the release to run (default: newest 4.x)
_VERSION_LINE = re.compile(r"Kafka version: (\S+)")


def controller_voters(spec: TestSpec) -> int:
    """spec.extra's controller_voters: that many dedicated controllers (0: combined nodes)."""
    return int(spec.extra.get("controller_voters", 0))


def needs_namespaces(spec: TestSpec) -> bool:
    return "partition" in spec.nemesis


def check_spec(spec: TestSpec) -> None:
    """Everything Kafka on this backend cannot do, as a SpecError, before anything starts."""
    config.check_settings(spec.broker)
    if spec.backend != "local":
        raise SpecError(f"--backend {spec.backend}: Kafka runs on the local backend only, "
                        "for now")
    from systems.kafka.scenarios import SEQUENCES

    unsupported = [f for f in spec.nemesis if f not in FAULTS and f not in SEQUENCES]
    if unsupported:
        raise SpecError(f"--nemesis {','.join(unsupported)}: unsupported for Kafka on the local "
                        f"backend (it has {', '.join(FAULTS)})")
    if needs_namespaces(spec) and (why := netns.supported()) is not None:
        raise SpecError(f"--nemesis partition: unsupported for Kafka here ({why}; each node "
                        "needs its own network namespace); kill and pause still work")
    if spec.workload != "queue":
        raise SpecError(f"--workload {spec.workload}: Kafka runs the queue workload")
    version = spec.extra.get(VERSION_ENV_KEY)
    if version is not None:
        jars.parse_version(str(version))
    k = controller_voters(spec)
    config.make_nodes(spec.nodes, "127.0.0.1", lambda: 0, controller_voters=k)
    if spec.broker.replication_factor > len(spec.nodes) - k:
        raise SpecError(f"--replication-factor {spec.broker.replication_factor} exceeds the "
                        f"{len(spec.nodes) - k} brokers ({k} of {len(spec.nodes)} nodes are "
                        "dedicated controllers)")


class KafkaLocalDB(LocalKafka):
    """LocalKafka plus HasLeaders (the Admin API, the quorum-state files)."""

    admin: KafkaAdmin | None = None

    def names(self) -> dict[int, str]:
        return {n.node_id: n.name for n in self.nodes.values()}

    def leader_of(self, run: Any, key: int) -> str | None:
        return self.admin.leader_of(key) if self.admin is not None else None

    def controller(self, run: Any) -> str | None:
        return active_controller(self.quorum_states(), self.names())

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
                for line in self.log_path(n).read_text(errors="replace").splitlines():
                    if m := _VERSION_LINE.search(line):
                        return m[1]
        return None


class KafkaLocalBackend:
    """Backend: a KRaft cluster of combined broker+controller JVMs on this machine."""

    name = "local"

    def __init__(self) -> None:
        self.db: KafkaLocalDB | None = None
        self.launcher: Any = None
        self.namespaces: netns.Namespaces | None = None
        self.run_id: str | None = None

    def up(self, run: Any) -> None:
        try:
            self._up(run)
        except BaseException:
            self.down(run)
            raise

    def _up(self, run: Any) -> None:
        from harness.control.local import HOST, free_port, run_id_for
        from harness.control.local_db import LocalBrokerDB

        spec: TestSpec = run.spec
        check_spec(spec)
        version = spec.extra.get(VERSION_ENV_KEY)
        j = jars.resolve(None if version is None else str(version),
                         progress=lambda m: run.log.info("%s", m))
        self.run_id = run_id_for(run)
        run.extra["run_id"] = self.run_id
        self.launcher = LocalBrokerDB(self.run_id, {})
        nodes = config.make_nodes(tuple(run.nodes), HOST, free_port,
                                  controller_voters=controller_voters(spec))
        prefixes: dict[str, list[str]] = {}
        if needs_namespaces(spec):
            ns = self.namespaces = netns.Namespaces(self.run_id, tuple(run.nodes))
            addrs = ns.up()
            nodes = {n: replace(node, host=addrs[n]) for n, node in nodes.items()}
            prefixes = {n: ns.prefix(n) for n in nodes}
            run.net = ns
        db = self.db = KafkaLocalDB(j, nodes, run.paths.root / "nodes", spec.broker,
                                    partitions=spec.keys, launcher=self.launcher,
                                    prefixes=prefixes)
        db.prepare()
        run.db = db
        run.client_addrs = {n: nodes[n].bootstrap for n in db.brokers}
        for n in nodes:
            db.start(run, n)
        db.admin = KafkaAdmin(db.bootstrap, db.names())
        took = db.admin.wait_ready(len(db.brokers), spec.keys, spec.broker.replication_factor,
                                   spec.broker.min_insync_replicas, timeout_s=READY_TIMEOUT_S)
        warm_up(db.bootstrap, db.admin)
        kafka_version = db.version() or j.version
        run.extra["system"] = {"name": "kafka", "version": kafka_version}
        _add_to_test_json(run.paths.test_json, {"system": "kafka",
                                                 "system_version": kafka_version})
        run.log.info("Kafka %s ready in %.1f s: %s", kafka_version, took, db.bootstrap)

    def wait_ready(self, run: Any, timeout_s: float) -> None:
        assert self.db is not None and self.db.admin is not None
        spec: TestSpec = run.spec
        self.db.admin.wait_ready(len(self.db.brokers), spec.keys, spec.broker.replication_factor,
                                 spec.broker.min_insync_replicas, timeout_s=timeout_s)

    def collect(self, run: Any) -> None:
        """Logs and data already live in the run's nodes/<node>/ folders."""

    def down(self, run: Any) -> None:
        """Resume and kill every JVM, end the launcher. Idempotent; never raises."""
        problems: list[str] = []
        if self.db is not None:
            try:
                problems += self.db.close()
            except Exception as e:
                problems.append(f"kafka: {e}")
        if self.launcher is not None:
            try:
                problems += self.launcher.close()
            except Exception as e:
                problems.append(f"launcher: {e}")
        if self.namespaces is not None:
            try:
                problems += self.namespaces.down()
            except Exception as e:
                problems.append(f"namespaces: {e}")
        if self.run_id is not None and not problems:
            from harness import leftovers

            with contextlib.suppress(Exception):
                leftovers.end_run(self.run_id)
        for p in problems:
            with contextlib.suppress(Exception):
                run.log.warning("kafka teardown: %s (run `undertow heal`)", p)


def _add_to_test_json(path: Path, more: dict[str, Any]) -> None:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({**data, **more}, indent=1, default=str) + "\n")
        tmp.replace(path)


def workload(spec: TestSpec) -> Any:
    """The queue workload with its client on Kafka."""
    from workloads.queue import QueueWorkload, generator

    client = KafkaQueueClient(keys=spec.keys, acks=spec.broker.acks)
    return QueueWorkload(client, generator(spec), spec)  # type: ignore[arg-type]
