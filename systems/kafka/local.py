"""A KRaft cluster as JVM processes on this machine: format, start, SIGKILL, SIGSTOP/SIGCONT.

Processes are started through a `Launcher` (the local backend's: each JVM dies
with the harness and is registered in harness.leftovers, so `undertow heal`
kills it after a crash). Each node's files live under <root>/<node>/:
server.properties, data/ (log.dirs, formatted by Kafka's StorageTool), kafka.log.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness.control.processes import NodeProcesses
from harness.jvm_cds import log_option
from harness.protocols import Launches, ProcState
from systems.kafka import cds, config, dump, releases, unflushed
from systems.kafka.jars import KafkaJars
from systems.settings import LogOptions

FORMAT_TIMEOUT_S = 120.0


class KafkaError(RuntimeError):
    """A Kafka node could not be prepared or started: names the node and the tool's output."""


class LocalKafka:
    """The nodes of one local Kafka cluster: DB plus kill/start, pause/resume, collect."""

    def __init__(self, jars: KafkaJars, nodes: Mapping[str, config.KafkaNode], root: Path,
                 settings: LogOptions, *, partitions: int, launcher: Launches,
                 java: str = "java",
                 prefixes: Mapping[str, Sequence[str]] | None = None,
                 format_args: Sequence[str] = ()) -> None:
        config.check_settings(settings)
        if not nodes:
            raise ValueError("LocalKafka: no nodes")
        self.jars = jars
        self.nodes = dict(nodes)
        self.root = root
        self.settings = settings
        self.partitions = partitions
        self.format_args = tuple(format_args)  # StorageTool's --feature arguments
        self.java = shutil.which(java) or java
        # what a node's JVM is started under (e.g. `ip netns exec NS` for its own network)
        self.prefixes = {n: list(p) for n, p in (prefixes or {}).items()}
        self.procs = NodeProcesses(launcher, self.nodes)
        self._prepare_lock = threading.Lock()  # the setups of one run's nodes may run at once
        self.jvm: tuple[str, ...] = ()  # the release's class-data archive, from prepare()

    # -- files -----------------------------------------------------------------

    def node_dir(self, node: str) -> Path:
        if node not in self.nodes:
            raise KeyError(f"no node {node!r}; nodes: {', '.join(self.nodes)}")
        return self.root / node

    def data_dir(self, node: str) -> Path:
        return self.node_dir(node) / "data"

    def props_path(self, node: str) -> Path:
        return self.node_dir(node) / "server.properties"

    def log_path(self, node: str) -> Path:
        return self.node_dir(node) / "kafka.log"

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(n for n, node in self.nodes.items() if node.is_broker)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[n].bootstrap for n in self.brokers)

    def prepare(self) -> None:
        """Write each node's server.properties and format its storage (once, before start):
        the nodes' StorageTool JVMs at once (each is mostly a JVM's start), all of this
        cluster's JVMs on the release's class-data archive (built at its first use)."""
        self.jvm = cds.options(self.java, self.jars)
        todo = []
        for name, node in self.nodes.items():
            d = self.node_dir(name)
            d.mkdir(parents=True, exist_ok=True)
            props = config.server_properties(node, self.nodes, self.data_dir(name),
                                             self.settings, partitions=self.partitions)
            self.props_path(name).write_text(config.render_properties(props))
            if not (self.data_dir(name) / "meta.properties").exists():
                todo.append(name)
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            for problem in pool.map(self._format, todo):
                if problem:
                    raise KafkaError(problem)

    def _format(self, name: str) -> str:
        """Format one node's storage; the problem in words, or "" when it is formatted."""
        cmd = config.format_command(self.java, self.jars.classpath,
                                    str(self.props_path(name)), self.format_args, self.jvm)
        done = subprocess.run(cmd, cwd=self.node_dir(name), capture_output=True, text=True,
                              timeout=FORMAT_TIMEOUT_S, check=False)
        if done.returncode != 0:
            return (f"{name}: StorageTool format exited {done.returncode}: "
                    f"{(done.stdout + done.stderr).strip()[-1500:]}")
        return ""

    # -- DB --------------------------------------------------------------------

    def setup(self, run: Any, node: str) -> None:
        self.start(run, node)

    def teardown(self, run: Any, node: str) -> None:
        self.kill(run, node)

    # -- Killable --------------------------------------------------------------

    def cds_log(self, node: str) -> Path:
        """Where the node's JVM writes whether it mapped the release's archive, and why not."""
        return self.node_dir(node) / "cds.log"

    def start(self, run: Any, node: str) -> None:
        """Start the node's JVM; a running node stays as it is."""
        jvm = (*self.jvm, log_option(self.cds_log(node))) if self.jvm else ()
        cmd = [*self.prefixes.get(node, ()),
               *config.server_command(self.java, self.jars.classpath,
                                      str(self.props_path(node)), jvm)]
        self.procs.start(node, cmd, self.node_dir(node), self.log_path(node))

    def kill(self, run: Any, node: str) -> None:
        self.procs.kill(node)

    def stop(self, run: Any, node: str) -> None:
        self.procs.stop(node)

    def is_running(self, node: str) -> bool:
        return self.procs.is_running(node)

    def pid(self, node: str) -> int | None:
        return self.procs.pid(node)

    # -- LosesUnflushed ---------------------------------------------------------

    def lose_unflushed(self, run: Any, node: str) -> dict[str, int]:
        """Cut the stopped node's logs back to their recovery points (systems.kafka.unflushed)."""
        if self.is_running(node):
            raise KafkaError(f"lose_unflushed: {node} is running; kill it first (a power loss "
                             "takes the process with the page cache)")
        cut = unflushed.lose_unflushed(self.data_dir(node))
        if run is not None:
            run.log.info("lose-unflushed %s: records dropped per partition %s", node,
                         cut.dropped or "none")
        return cut.cut_bytes

    # -- Pausable --------------------------------------------------------------

    def pause(self, run: Any, node: str) -> None:
        self.procs.pause(node)

    def resume(self, run: Any, node: str) -> None:
        self.procs.resume(node)

    def is_paused(self, node: str) -> bool:
        return self.procs.is_paused(node)

    def process_state(self, run: Any, node: str) -> ProcState:
        return self.procs.state(node)

    # -- HasLogs ---------------------------------------------------------------

    def collect(self, run: Any, node: str, dest: Path) -> None:
        """The node's log and config into dest (they already live in its folder)."""
        d = self.node_dir(node)
        if dest.resolve() == d.resolve():
            return
        dest.mkdir(parents=True, exist_ok=True)
        for p in (self.log_path(node), self.props_path(node)):
            if p.exists():
                shutil.copy2(p, dest / p.name)

    # -- the quorum, from each node's own files --------------------------------

    def quorum_states(self) -> dict[str, dict[str, Any]]:
        """Each node's __cluster_metadata-0/quorum-state (leader id and epoch as it knows them)."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.nodes:
            path = self.data_dir(name) / "__cluster_metadata-0" / "quorum-state"
            with contextlib.suppress(OSError, ValueError):
                out[name] = json.loads(path.read_text())
        return out

    # -- DumpsReplicas ---------------------------------------------------------

    def dump_node(self, run: Any, node: str) -> list[dict[str, Any]]:
        """The node's replicas, read from its data dir with Kafka's DumpLogSegments."""
        return self._dump([node])

    def dump_replicas(self, run: Any) -> list[dict[str, Any]]:
        """Every node's replicas (after the final heal; HW is checkpointed every 500 ms), in
        one DumpLogSegments JVM."""
        return self._dump(list(self.brokers))

    def _dump(self, nodes: list[str]) -> list[dict[str, Any]]:
        return dump.dump_nodes({node: self.data_dir(node) for node in nodes}, self.jars.libs,
                               java=self.java, jvm=self.jvm,
                               fmt=releases.release(self.jars.version).era.dump_format)

    # -- teardown --------------------------------------------------------------

    def close(self) -> list[str]:
        """Resume and kill every node; no more starts. Returns problems."""
        return self.procs.close()
