"""Apache Kafka on a shell host (docker containers, ssh hosts): the same commands drive both.

Each node's files live in its base dir: server.properties, data/ (Kafka's log dir,
formatted by StorageTool), kafka.log and kafka.pid. The jars are the node image's
(/opt/kafka/libs, put there by systems/kafka/Dockerfile) when it holds the version
asked for, else they are uploaded beside the node's files once. The JVM runs
detached (harness.control.shellproc): a kill is SIGKILL of its pid, a pause the
host's freezer (`docker pause`) or SIGSTOP. Replicas are read here, with Kafka's
DumpLogSegments, from a copy of each node's partition folders.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from harness.control.shell import NodeError, check_exec
from harness.control.shellproc import ShellProcess
from harness.protocols import ProcState, ShellHost
from systems.kafka import config, dump, unflushed
from systems.kafka.db import KafkaViews
from systems.kafka.jars import KafkaJars
from systems.settings import LogOptions

IMAGE_LIBS = "/opt/kafka/libs"  # where systems/kafka/Dockerfile puts the jars
CONTROLLER_PORT = 9093          # a node of its own listens for the quorum here
MARKER = "kafka.Kafka"          # in a node's JVM command line, and in no other process's
JAVA = "java"
FORMAT_TIMEOUT_S = 120.0


class KafkaRemoteDB(KafkaViews):
    """DB with Killable, Pausable, HasLogs, HasLeaders and DumpsReplicas over a ShellHost."""

    def __init__(self, host: ShellHost, jars: KafkaJars, nodes: Mapping[str, config.KafkaNode],
                 settings: LogOptions, *, partitions: int,
                 format_args: tuple[str, ...] = ()) -> None:
        config.check_settings(settings)
        self.host = host
        self.format_args = format_args  # StorageTool's --feature arguments
        self.jars = jars
        self.nodes = dict(nodes)
        self.settings = settings
        self.partitions = partitions
        self.proc = ShellProcess(host, name="kafka", marker=MARKER)
        self.libs: dict[str, str] = {}  # node -> the folder of its jars
        self._lock = threading.Lock()

    # -- files -----------------------------------------------------------------

    def base(self, node: str) -> str:
        return self.host.base_dirs[node]

    def data_dir(self, node: str) -> str:
        return f"{self.base(node)}/data"

    def props_path(self, node: str) -> str:
        return f"{self.base(node)}/server.properties"

    @property
    def brokers(self) -> tuple[str, ...]:
        return tuple(n for n, node in self.nodes.items() if node.is_broker)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[n].bootstrap for n in self.brokers)

    # -- DB --------------------------------------------------------------------

    def setup(self, run: Any, node: str) -> None:
        """Jars in place, server.properties written, storage formatted, the JVM started."""
        sh, q = self.proc.sh, shlex.quote
        java = sh(node, f"{JAVA} -version")
        if not java.ok:
            raise NodeError(f"kafka: no Java on {node} ({(java.stderr or java.stdout).strip()}"
                            "); Kafka needs a JRE 17 there (Debian: openjdk-17-jre-headless)")
        libs = self._install_jars(node)
        check_exec(sh(node, f"mkdir -p {q(self.data_dir(node))}"), node, "mkdir")
        props = config.server_properties(self.nodes[node], self.nodes,
                                         PurePosixPath(self.data_dir(node)), self.settings,
                                         partitions=self.partitions)
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "server.properties"
            p.write_text(config.render_properties(props))
            self.host.remote.upload(node, p, self.props_path(node))
        fmt = config.format_command(JAVA, f"{libs}/*", self.props_path(node), self.format_args)
        r = sh(node, f"cd {q(self.base(node))} && {shlex.join(fmt)}", timeout_s=FORMAT_TIMEOUT_S)
        if not r.ok:
            raise NodeError(f"{node}: StorageTool format exited {r.returncode}: "
                            f"{(r.stdout + r.stderr).strip()[-1500:]}")
        with self._lock:
            self.open_admin()
        self.start(run, node)

    def _install_jars(self, node: str) -> str:
        """The image's jars if they are the version asked for, else the uploaded ones."""
        version = self.jars.version
        if self.proc.sh(node, f"test -f {IMAGE_LIBS}/kafka_2.13-{version}.jar").ok:
            libs = IMAGE_LIBS
        else:
            libs = f"{self.base(node)}/kafka-{version}/libs"
            if not self.proc.sh(node, f"test -f {shlex.quote(libs)}/.complete").ok:
                self.host.remote.upload(node, self.jars.libs, libs)
        self.libs[node] = libs
        return libs

    def teardown(self, run: Any, node: str) -> None:
        self.proc.resume(node)
        self.proc.kill(node)

    def wait_ready(self, run: Any, timeout_s: float) -> None:
        """KafkaViews' readiness; when it times out, the nodes whose JVM is gone and how
        their logs end."""
        try:
            super().wait_ready(run, timeout_s)
        except TimeoutError as e:
            raise NodeError(f"{e}{self._why_down()}") from e

    def _why_down(self) -> str:
        down = []
        for node in self.nodes:
            if not self.proc.frozen(node) and not self.proc.running(node):
                log = shlex.quote(self.proc.log_file(node))
                tail = self.proc.sh(node, f"tail -n 5 {log} 2>&1", timeout_s=10).stdout.strip()
                down.append(f"\n{node}: the JVM is not running; kafka.log ends:\n{tail}")
        return "".join(down)

    # -- Killable / Pausable ---------------------------------------------------

    def start(self, run: Any, node: str) -> None:
        """Start the node's JVM; a running node stays as it is."""
        libs = self.libs.get(node)
        if libs is None:
            raise NodeError(f"kafka: start of {node} before its setup")
        self.proc.start(node, config.server_command(JAVA, f"{libs}/*", self.props_path(node)))

    def kill(self, run: Any, node: str) -> None:
        self.proc.kill(node)

    def stop(self, run: Any, node: str) -> None:
        self.proc.stop(node)

    def pause(self, run: Any, node: str) -> None:
        self.proc.pause(node)

    def lose_unflushed(self, run: Any, node: str) -> dict[str, int]:
        """The stopped node's log dir copied here, the cut planned on the copy
        (systems.kafka.unflushed) and applied there with truncate and rm."""
        if self.proc.running(node):
            raise NodeError(f"lose_unflushed: {node} is running; kill it first")
        with tempfile.TemporaryDirectory(prefix=f"undertow-kafka-cut-{node}-") as tmp:
            self.proc.fetch(node, self.data_dir(node), unflushed.fetch_patterns(), Path(tmp))
            cut = unflushed.plan(Path(tmp))
        cmds = unflushed.shell_commands(self.data_dir(node), cut)
        if cmds:
            check_exec(self.proc.sh(node, " && ".join(cmds)), node, "lose-unflushed")
        if run is not None:
            run.log.info("lose-unflushed %s: records dropped per partition %s", node,
                         cut.dropped or "none")
        return cut.cut_bytes

    def resume(self, run: Any, node: str) -> None:
        self.proc.resume(node)

    def is_running(self, node: str) -> bool:
        return self.proc.running(node)

    def process_state(self, run: Any, node: str) -> ProcState:
        return self.proc.state(node)

    # -- HasLogs ---------------------------------------------------------------

    def collect(self, run: Any, node: str, dest: Path) -> None:
        """The node's log and config into dest."""
        self.proc.fetch(node, self.base(node), ["kafka.log", "server.properties"], dest)

    # -- what KafkaViews reads ---------------------------------------------------

    def quorum_states(self) -> dict[str, dict[str, Any]]:
        """Each reachable node's quorum-state file (a frozen node is skipped)."""
        out: dict[str, dict[str, Any]] = {}
        for name in self.nodes:
            if self.proc.frozen(name):
                continue
            path = f"{self.data_dir(name)}/__cluster_metadata-0/quorum-state"
            r = self.proc.sh(name, f"cat {shlex.quote(path)}", timeout_s=5)
            if r.ok:
                with contextlib.suppress(ValueError):
                    out[name] = json.loads(r.stdout)
        return out

    def log_text(self, node: str) -> str:
        """The lines of the node's log that state Kafka's version (all the views need)."""
        log = shlex.quote(self.proc.log_file(node))
        r = self.proc.sh(node, f"grep -m1 'Kafka version' {log} || true", timeout_s=10)
        return r.stdout

    # -- DumpsReplicas -----------------------------------------------------------

    def dump_node(self, run: Any, node: str) -> list[dict[str, Any]]:
        """The node's replicas: its partition folders copied here, read by DumpLogSegments."""
        return self._dump([node])

    def dump_replicas(self, run: Any) -> list[dict[str, Any]]:
        """Every node's replicas: all partition folders copied here, one DumpLogSegments."""
        return self._dump(list(self.brokers))

    def _dump(self, nodes: list[str]) -> list[dict[str, Any]]:
        with tempfile.TemporaryDirectory(prefix="undertow-kafka-dump-") as tmp:
            local = {node: Path(tmp) / node for node in nodes}
            for node, folder in local.items():
                folder.mkdir()
                self.proc.fetch(node, self.data_dir(node),
                                ["replication-offset-checkpoint", f"{config.TOPIC}-*/*.log",
                                 f"{config.TOPIC}-*/leader-epoch-checkpoint"], folder)
            return dump.dump_nodes(local, self.jars.libs)
