"""The local backend: the system's processes on this machine, every link through the link proxy.

No Docker, no root. Each node gets nodes/<node>/ in the run folder and a port on
127.0.0.1 for the system's service. Nodes dial each other, and clients dial
nodes, through the harness's link proxy, one port per directed link; the
harness itself (readiness, leaders, dumps) talks to each node directly
(`Endpoints.admin`), so the control plane is never partitioned.

The proxy runs in its own process by default (UNDERTOW_PROXY=thread keeps it
in the harness): in the harness it shares the GIL with every client thread.
A system whose nodes advertise one address to everyone (`DirectLinks`: Kafka)
cannot sit behind per-link ports: its nodes dial each other directly, on
127.0.0.1, or, when the run asks for partitions, each in a network namespace of
its own (harness.netns, root only), where a partition is a blackhole route.

Every process dies with the harness (harness.control.launcher) and is
registered in harness.leftovers for `undertow heal`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness import leftovers, netns
from harness.control.launcher import Launcher
from harness.net import CLIENT, ProxyNet
from harness.protocols import DirectLinks, Endpoints, Exec, LocalHost, Run, System
from harness.proxy import LinkProxy, Links
from harness.proxy_process import ProxyProcess

HOST = "127.0.0.1"
PROXY_ENV = "UNDERTOW_PROXY"
READY_TIMEOUT_S = 30.0
_handed_out: set[int] = set()
_port_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = HOST) -> int:
    """A port free now, below the ephemeral range when possible.

    A broker binds its port only when it starts (and again after each restart), so
    the port must not be taken meanwhile: outgoing connections of every process on
    the machine draw from the ephemeral range, so a port below it stays free.
    """
    low = _ephemeral_low()
    with _port_lock:
        for _ in range(200):
            port = random.randrange(10_000, low) if low > 11_000 else 0
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                port = int(s.getsockname()[1])
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port found on {host}")


def run_id_for(run: Run) -> str:
    """The leftovers id of a run: its folder's name plus a hash of its full path."""
    if run.extra.get("run_id"):
        return str(run.extra["run_id"])
    root = str(run.paths.root.resolve())
    digest = hashlib.sha1(root.encode()).hexdigest()[:8]
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in run.paths.root.name)
    return f"{name[:60]}-{digest}"


class LocalRemote:
    """Remote over subprocess on this machine; relative paths are under the node's folder."""

    def __init__(self, node_dirs: Mapping[str, Path], env: Mapping[str, str] | None = None) -> None:
        self.node_dirs = dict(node_dirs)
        self.env = {**os.environ, **(env or {})}

    def _dir(self, node: str) -> Path:
        try:
            return self.node_dirs[node]
        except KeyError:
            raise KeyError(f"no node {node!r}; nodes: {', '.join(self.node_dirs)}") from None

    def path(self, node: str, remote: str) -> Path:
        p = Path(remote)
        return p if p.is_absolute() else self._dir(node) / p

    def exec(self, node: str, cmd: Sequence[str], *, timeout_s: float | None = None) -> Exec:
        cwd = self._dir(node)
        try:
            done = subprocess.run(list(cmd), cwd=cwd, env=self.env, capture_output=True,
                                  text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else ""
            return Exec(124, out, f"timed out after {timeout_s:g} s: {' '.join(cmd)}")
        except OSError as e:
            return Exec(127, "", f"{cmd[0]}: {e}")
        return Exec(done.returncode, done.stdout, done.stderr)

    def upload(self, node: str, local: Path, remote: str) -> None:
        dest = self.path(node, remote)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(local, dest)

    def download(self, node: str, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.path(node, remote), local)


class LocalBackend:
    """Backend: the system's processes on this machine, links through the harness's proxy."""

    name = "local"

    def __init__(self, *, python: str = sys.executable, proxy_mode: str | None = None) -> None:
        self.python = python
        # "process": the proxy in a child with its own GIL (default); "thread": in the harness.
        self.proxy_mode = proxy_mode or os.environ.get(PROXY_ENV, "process")
        self._proxy_item: str | None = None
        self.proxy: Links | None = None
        self.launcher: Launcher | None = None
        self.net: ProxyNet | None = None
        self.run_id: str | None = None
        self.nodes: tuple[str, ...] = ()
        self.listen: dict[str, str] = {}
        self.link_ports: dict[tuple[str, str], int] = {}
        self.proxied = True
        self.namespaces: netns.Namespaces | None = None

    def up(self, run: Run, system: System) -> LocalHost:
        """Folders, ports and the launcher; every link's port is chosen now, so the
        system's processes start while the proxy process starts (each takes ~0.5 s)."""
        self.nodes = nodes = tuple(run.nodes)
        self.run_id = run_id_for(run)
        run.extra["run_id"] = self.run_id
        self.launcher = Launcher(self.run_id)
        dirs = {n: run.paths.node_dir(n).resolve() for n in nodes}
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self.proxied = not (isinstance(system, DirectLinks) and system.direct_links())
        hosts = {n: HOST for n in nodes}
        prefixes: dict[str, list[str]] = {}
        if not self.proxied and run.cuts_links:
            self.namespaces = netns.Namespaces(self.run_id, nodes)
            hosts = self.namespaces.up()
            prefixes = {n: self.namespaces.prefix(n) for n in nodes}
        self.listen = {n: f"{hosts[n]}:{free_port()}" for n in nodes}
        if self.proxied:
            links = [(s, d) for s in nodes for d in nodes if s != d] + \
                [(CLIENT, d) for d in nodes]
            self.link_ports = {link: free_port() for link in links}
            peers = {n: {m: f"{HOST}:{self.link_ports[(n, m)]}" for m in nodes if m != n}
                     for n in nodes}
            clients = {n: f"{HOST}:{self.link_ports[(CLIENT, n)]}" for n in nodes}
        else:
            peers = {n: {m: a for m, a in self.listen.items() if m != n} for n in nodes}
            clients = dict(self.listen)
        endpoints = Endpoints(listen=dict(self.listen), peers=peers, clients=clients,
                              admin=dict(self.listen))
        run.remote = LocalRemote(dirs, {leftovers.RUN_ENV: self.run_id})
        return LocalHost(dirs=dirs, endpoints=endpoints, launcher=self.launcher,
                         python=self.python, prefixes=prefixes)

    def connect(self, run: Run) -> None:
        """The link proxy with every link; run.net and run.client_addrs through it (or,
        for a system that dials directly, no proxy and no Net: links cannot be cut)."""
        if not self.proxied:
            run.client_addrs = dict(self.listen)
            run.net = self.namespaces
            return
        proxy = self.proxy = self._start_proxy(run)
        for (src, dst), port in self.link_ports.items():
            proxy.add_link(src, dst, self.listen[dst], port=port)
        self.net = run.net = ProxyNet(proxy, self.nodes)
        run.client_addrs = {n: proxy.link(CLIENT, n).listen for n in self.nodes}
        run.log.info("local nodes: %s", ", ".join(f"{n}={a}" for n, a in self.listen.items()))

    def _start_proxy(self, run: Run) -> Links:
        if self.proxy_mode == "thread":
            return LinkProxy(HOST)
        if self.proxy_mode != "process":
            raise ValueError(f"{PROXY_ENV}={self.proxy_mode!r}: expected process or thread")
        launcher = self.launcher
        assert launcher is not None

        def spawn(cmd: Sequence[str]) -> subprocess.Popen[bytes]:
            proc, self._proxy_item = launcher.launch("proxy", cmd, run.paths.root,
                                                     run.paths.root / "proxy.log", pipes=True)
            return proc

        return ProxyProcess(HOST, spawn=spawn, python=self.python)

    def down(self, run: Run) -> None:
        """Stop the proxy and the launcher, release leftovers. Idempotent; never raises.

        The system's processes are the DB's to stop (the runner tears the DB down first);
        any it left die with the launcher thread (PDEATHSIG)."""
        problems: list[str] = []
        if self.net is not None:
            with contextlib.suppress(Exception):
                self.net.heal(run)
                self.net.fast(run)
        if self.proxy is not None:
            try:
                self.proxy.stop()
                if self._proxy_item is not None and self.launcher is not None:
                    self.launcher.release(self._proxy_item)
                    self._proxy_item = None
            except Exception as e:
                problems.append(f"proxy: {e}")
        if self.launcher is not None:
            try:
                self.launcher.close()
            except Exception as e:
                problems.append(f"launcher: {e}")
        if self.namespaces is not None:
            try:
                problems += self.namespaces.down()
            except Exception as e:
                problems.append(f"namespaces: {e}")
        if self.run_id is not None and not problems:
            with contextlib.suppress(Exception):
                leftovers.end_run(self.run_id)
        for p in problems:
            with contextlib.suppress(Exception):
                run.log.warning("local backend teardown: %s (run `undertow heal`)", p)
