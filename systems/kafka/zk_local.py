"""A ZooKeeper-mode Kafka cluster on this machine: a ZooKeeper member and a broker per node.

Both JVMs of a node run under its prefix (its network namespace when the run has
partitions), through the backend's launcher, so they die with the harness and
`undertow heal` kills them after a crash. The kill and pause faults hit the broker;
a partition cuts the whole node, its ZooKeeper member with it; teardown stops both.
The controller is the broker that holds ZooKeeper's /controller, which is what a
ZooKeeper-era broker names as controller in its Metadata answers.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from harness.control.processes import NodeProcesses
from harness.protocols import Launches
from systems.kafka import config, zk
from systems.kafka.db import KafkaLocalDB
from systems.kafka.jars import KafkaJars
from systems.kafka.releases import Release
from systems.settings import LogOptions

ZK_READY_S = 90.0


class KafkaZkLocalDB(KafkaLocalDB):
    """KafkaLocalDB with ZooKeeper for metadata instead of KRaft."""

    def __init__(self, jars: KafkaJars, nodes: Mapping[str, config.KafkaNode], root: Path,
                 settings: LogOptions, *, partitions: int, launcher: Launches,
                 release: Release, members: Mapping[str, zk.ZkMember],
                 controlled_shutdown: bool,
                 prefixes: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__(jars, nodes, root, settings, partitions=partitions, launcher=launcher,
                         prefixes=prefixes)
        self.release = release
        self.controlled_shutdown = controlled_shutdown
        self.members = dict(members)
        self.zk_procs = NodeProcesses(launcher, self.nodes)

    def zk_dir(self, node: str) -> Path:
        return self.node_dir(node) / "zookeeper"

    def zk_log_path(self, node: str) -> Path:
        return self.node_dir(node) / "zookeeper.log"

    def log4j_path(self, node: str) -> Path:
        return self.node_dir(node) / "log4j.properties"

    def prepare(self) -> None:
        """Each node's zoo.cfg, myid, log4j.properties and server.properties (no format:
        a ZooKeeper-era broker makes its log dirs itself)."""
        connect = zk.connect_string(self.members)
        for name, node in self.nodes.items():
            d = self.node_dir(name)
            (self.zk_dir(name) / "data").mkdir(parents=True, exist_ok=True)
            (self.zk_dir(name) / "data" / "myid").write_text(f"{self.members[name].myid}\n")
            (self.zk_dir(name) / "zoo.cfg").write_text(
                zk.zoo_cfg(self.members[name], self.members, self.zk_dir(name) / "data"))
            self.log4j_path(name).write_text(zk.LOG4J)
            props = zk.broker_properties(node, connect, self.data_dir(name), self.settings,
                                         self.release, partitions=self.partitions,
                                         controlled_shutdown=self.controlled_shutdown)
            d.mkdir(parents=True, exist_ok=True)
            self.props_path(name).write_text(config.render_properties(props))

    def setup(self, run: Any, node: str) -> None:
        """Files once; then the node's ZooKeeper member, serving (in a quorum), then its
        broker. Every node's setup runs at once, so the members find their quorum."""
        with self._prepare_lock:
            if not self._prepared:
                self.prepare()
                self._prepared = True
                self.open_admin()
        self.start_zk(node)
        took = zk.wait_serving(self.members[node], ZK_READY_S)
        if run is not None:
            run.log.info("%s: ZooKeeper serving (%s) in %.1f s", node,
                         zk.mode(self.members[node]), took)
        self.start(run, node)

    def start_zk(self, node: str) -> None:
        cmd = [*self.prefixes.get(node, ()),
               *zk.zk_command(self.java, self.jars.classpath,
                              str(self.zk_dir(node) / "zoo.cfg"), str(self.log4j_path(node)))]
        self.zk_procs.start(node, cmd, self.zk_dir(node), self.zk_log_path(node))

    def start(self, run: Any, node: str) -> None:
        """The node's broker (a running one stays as it is); its ZooKeeper member too if a
        final heal finds it gone."""
        if not self.zk_procs.is_running(node):
            self.start_zk(node)
        cmd = config.server_command(self.java, self.jars.classpath, str(self.props_path(node)))
        if self.release.era.log4j1:
            cmd.insert(1, f"-Dlog4j.configuration=file:{self.log4j_path(node)}")
        self.procs.start(node, [*self.prefixes.get(node, ()), *cmd], self.node_dir(node),
                         self.log_path(node))

    def teardown(self, run: Any, node: str) -> None:
        self.kill(run, node)
        self.zk_procs.kill(node)

    def controller(self, run: Any) -> str | None:
        """The broker holding /controller, as the brokers' Metadata answers name it."""
        if self.admin is None:
            return None
        try:
            md = self.admin.client.list_topics(timeout=self.admin.timeout_s)
        except KafkaException:
            return None
        return self.names().get(md.controller_id) if md.controller_id >= 0 else None

    def zookeeper_leader(self) -> str | None:
        """The node whose member leads the ensemble now."""
        return next((n for n, m in self.members.items() if zk.mode(m) == "leader"), None)

    def collect(self, run: Any, node: str, dest: Path) -> None:
        super().collect(run, node, dest)
        d = self.node_dir(node)
        if dest.resolve() != d.resolve() and self.zk_log_path(node).exists():
            shutil.copy2(self.zk_log_path(node), dest / self.zk_log_path(node).name)

    def close(self) -> list[str]:
        return [*self.procs.close(), *self.zk_procs.close()]
