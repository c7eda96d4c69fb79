"""Our broker on a local host: processes on this machine, started by the backend's launcher.

Each node's folder (nodes/<node>/ in the run folder) holds NODE.json, data/,
broker.log and clock_offset_ns. The processes die with the harness and are known
to `undertow heal` (harness.control.launcher). Admin requests (readiness, leaders,
dumps) go to each broker directly, so the control plane is never partitioned.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.control.processes import NodeProcesses
from harness.protocols import ClockReading, LocalHost, ProcState, Run
from systems.undertow import admin as brokerdb
from systems.undertow.client import admin_dump
from workloads.options import GROUP_ID, partitions


@dataclass(frozen=True, slots=True)
class LocalNode:
    """One broker node's files and address."""

    name: str
    dir: Path
    listen: str

    @property
    def config(self) -> Path:
        return self.dir / "NODE.json"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / "broker.log"

    @property
    def clock_file(self) -> Path:
        return self.dir / "clock_offset_ns"


class LocalBrokerDB:
    """The brokers of a local run: DB plus Killable, Pausable, HasLogs, HasLeaders,
    HasClock, LosesUnflushed and DumpsReplicas."""

    def __init__(self, host: LocalHost) -> None:
        self.host = host
        self.python = host.python
        self.nodes = {n: LocalNode(n, d, host.endpoints.listen[n]) for n, d in host.dirs.items()}
        self.procs = NodeProcesses(host.launcher, self.nodes)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._lock = threading.RLock()

    def node(self, name: str) -> LocalNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r}; nodes: {', '.join(self.nodes)}") from None

    # -- DB --------------------------------------------------------------------

    def setup(self, run: Run, node: str) -> None:
        """NODE.json from the spec and the host's addresses, then the broker."""
        n = self.node(node)
        n.data_dir.mkdir(parents=True, exist_ok=True)
        if not n.clock_file.exists():
            n.clock_file.write_text("0\n")
        peers = {m: (n.listen if m == node else addr)
                 for m, addr in self.host.endpoints.peers[node].items()}
        peers[node] = n.listen
        cfg = brokerdb.node_config(run.spec, node, n.listen, peers, n.data_dir, n.clock_file)
        brokerdb.write_node_json(n.config, cfg)
        self.start(run, node)

    def teardown(self, run: Run, node: str) -> None:
        self.resume(run, node)
        self.kill(run, node)

    def wait_ready(self, run: Run, timeout_s: float) -> None:
        """Every node answers and sees a leader per partition; a broker that exits fails fast."""
        def check() -> None:
            dead = [n for n in self.nodes.values() if not self.procs.is_running(n.name)]
            if dead:
                n = dead[0]
                code = self.procs.exit_code(n.name)
                raise RuntimeError(f"broker {n.name} exited with code {code}; "
                                   f"{n.log_path} ends with:\n{brokerdb.tail(n.log_path)}")

        brokerdb.wait_ready({n: ln.listen for n, ln in self.nodes.items()}, timeout_s,
                            partitions=partitions(run.spec), check=check)

    # -- Killable --------------------------------------------------------------

    def start(self, run: Run | None, node: str) -> None:
        n = self.node(node)
        self.procs.start(node, brokerdb.broker_command(self.python, str(n.config)), n.dir,
                         n.log_path)

    def kill(self, run: Run | None, node: str) -> None:
        self.procs.kill(node)

    def stop(self, run: Run | None, node: str) -> None:
        self.procs.stop(node)

    def is_running(self, node: str) -> bool:
        return self.procs.is_running(node)

    # -- Pausable --------------------------------------------------------------

    def pause(self, run: Run | None, node: str) -> None:
        self.procs.pause(node)

    def resume(self, run: Run | None, node: str) -> None:
        self.procs.resume(node)

    def is_paused(self, node: str) -> bool:
        return self.procs.is_paused(node)

    def process_state(self, run: Run | None, node: str) -> ProcState:
        return self.procs.state(node)

    # -- HasLogs ---------------------------------------------------------------

    def collect(self, run: Run | None, node: str, dest: Path) -> None:
        """Logs and config into dest (they already live in the node's folder)."""
        n = self.node(node)
        if dest.resolve() == n.dir.resolve():
            return
        dest.mkdir(parents=True, exist_ok=True)
        for p in (n.log_path, n.config, n.clock_file):
            if p.exists():
                shutil.copy2(p, dest / p.name)

    # -- HasLeaders ------------------------------------------------------------

    def admin_addrs(self, *, live_only: bool = True) -> list[tuple[str, str]]:
        return [(name, n.listen) for name, n in self.nodes.items()
                if not live_only or (self.is_running(name) and not self.is_paused(name))]

    def metadata(self) -> dict[str, Any] | None:
        """harness.protocols.HasMetadata: the first live node's answer, or None."""
        meta: dict[str, Any] | None = brokerdb.first_answer(
            self.admin_addrs(), lambda a: brokerdb.metadata(a, timeout_s=1.0))
        return meta

    def leader_of(self, run: Run | None, key: int) -> str | None:
        return brokerdb.leader_from(self.metadata(), key)

    def controller(self, run: Run | None) -> str | None:
        return brokerdb.controller_from(self.metadata())

    def coordinator(self, run: Run | None) -> str | None:
        return brokerdb.coordinator(self.admin_addrs(), GROUP_ID)

    # -- HasClock --------------------------------------------------------------

    def clock_offset_ns(self, node: str) -> int:
        try:
            return int(self.node(node).clock_file.read_text().strip() or 0)
        except FileNotFoundError:
            return 0

    def _write_clock(self, node: str, offset_ns: int) -> None:
        path = self.node(node).clock_file
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(f"{offset_ns}\n")
        os.replace(tmp, path)  # atomic: the broker never reads half a number

    def shift_clock(self, run: Run | None, node: str, delta_ns: int) -> None:
        with self._lock:
            self._write_clock(node, self.clock_offset_ns(node) + int(delta_ns))

    def reset_clock(self, run: Run | None, node: str) -> None:
        with self._lock:
            self._write_clock(node, 0)

    def read_clock(self, run: Run | None, node: str) -> ClockReading | None:
        return brokerdb.read_clock(self.node(node).listen)

    # -- LosesUnflushed --------------------------------------------------------

    def lose_unflushed(self, run: Run | None, node: str) -> dict[str, int]:
        n = self.node(node)
        if self.is_running(node):
            raise RuntimeError(f"lose_unflushed: {node} is running; kill it first "
                               "(an OS crash loses the page cache of a dead process)")
        cmd = brokerdb.lose_unflushed_command(self.python, str(n.data_dir))
        done = subprocess.run(cmd, cwd=n.dir, env=self.env, capture_output=True, text=True,
                              timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"lose_unflushed on {node} failed ({done.returncode}): "
                               f"{done.stderr.strip()[-500:]}")
        return brokerdb.parse_cut(done.stdout, f"lose_unflushed on {node}")

    # -- DumpsReplicas ---------------------------------------------------------

    def dump_node(self, run: Run | None, node: str) -> list[dict[str, Any]]:
        """A node's replicas: from the live broker, else offline from its data dir."""
        n = self.node(node)
        if self.is_running(node) and not self.is_paused(node):
            try:
                rows: list[dict[str, Any]] = admin_dump(n.listen, timeout_s=10.0)
                return rows
            except Exception:
                pass  # fall back to the files, as for a node that is down
        cmd = brokerdb.dump_command(self.python, str(n.data_dir), node)
        done = subprocess.run(cmd, cwd=n.dir, env=self.env, capture_output=True, text=True,
                              timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"dump of {node} failed ({done.returncode}): "
                               f"{done.stderr.strip()[-500:]}")
        return brokerdb.parse_dump(done.stdout, f"broker.tools dump of {node}")

    def dump_replicas(self, run: Run | None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for node in self.nodes:
            rows.extend(self.dump_node(run, node))
        return rows

    # -- teardown --------------------------------------------------------------

    def close(self) -> list[str]:
        """Resume and kill every broker; no more starts (the backend ends the launcher thread)."""
        return self.procs.close()
