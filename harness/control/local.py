"""The local backend: broker processes on this machine, every link through the link proxy.

No Docker, no root. Each node gets nodes/<node>/ in the run folder (NODE.json,
data/, broker.log, clock_offset_ns) and a port on 127.0.0.1. Brokers dial each
other, and clients dial brokers, through the harness's link proxy, one port
per directed link; the harness itself (readiness, leaders, dumps) talks to
each broker directly, so the control plane is never partitioned.

The proxy runs in its own process by default (UNDERTOW_PROXY=thread keeps it
in the harness): in the harness it shares the GIL with every client thread.
Brokers and the proxy die with the harness (PDEATHSIG, see local_db.py) and are
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

from harness import db as brokerdb
from harness import leftovers

# re-exported: the local DB lives in its own module
from harness.control.local_db import LocalBrokerDB, LocalNode
from harness.net import CLIENT, ProxyNet
from harness.protocols import Exec, Run
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
    """Backend: brokers as local processes, links through the harness's proxy."""

    name = "local"

    def __init__(self, *, python: str = sys.executable,
                 ready_timeout_s: float = READY_TIMEOUT_S, proxy_mode: str | None = None) -> None:
        self.python = python
        self.ready_timeout_s = ready_timeout_s
        # "process": the proxy in a child with its own GIL (default); "thread": in the harness.
        self.proxy_mode = proxy_mode or os.environ.get(PROXY_ENV, "process")
        self._proxy_item: str | None = None
        self.proxy: Links | None = None
        self.db: LocalBrokerDB | None = None
        self.net: ProxyNet | None = None
        self.run_id: str | None = None

    def up(self, run: Run) -> None:
        try:
            self._up(run)
        except BaseException:
            self.down(run)
            raise

    def _up(self, run: Run) -> None:
        spec = run.spec
        nodes = tuple(run.nodes)
        self.run_id = run_id_for(run)
        run.extra["run_id"] = self.run_id
        local = {n: LocalNode(n, run.paths.node_dir(n).resolve(), f"{HOST}:{free_port()}")
                 for n in nodes}
        db = self.db = LocalBrokerDB(self.run_id, local, python=self.python)
        # Every link's port is chosen first, so the brokers start while the proxy
        # process starts (each takes ~0.5 s; brokers retry their peers meanwhile).
        links = [(s, d) for s in nodes for d in nodes if s != d] + [(CLIENT, d) for d in nodes]
        port = {link: free_port() for link in links}
        for n in nodes:
            ln = local[n]
            ln.data_dir.mkdir(parents=True, exist_ok=True)
            if not ln.clock_file.exists():
                ln.clock_file.write_text("0\n")
            peers = {m: (ln.listen if m == n else f"{HOST}:{port[(n, m)]}") for m in nodes}
            cfg = brokerdb.node_config(spec, n, ln.listen, peers, ln.data_dir, ln.clock_file)
            brokerdb.write_node_json(ln.config, cfg)
        run.remote = LocalRemote({n: local[n].dir for n in nodes}, db.env)
        run.db = db
        run.extra["admin_addrs"] = {n: local[n].listen for n in nodes}
        for n in nodes:
            db.start(run, n)
        proxy = self.proxy = self._start_proxy(run, db)
        for src, dst in links:
            proxy.add_link(src, dst, local[dst].listen, port=port[(src, dst)])
        self.net = run.net = ProxyNet(proxy, nodes)
        run.client_addrs = {n: proxy.link(CLIENT, n).listen for n in nodes}

        def check() -> None:
            dead = [n for n in nodes if not local[n].running]
            if dead:
                n = dead[0]
                proc = local[n].proc
                code = proc.returncode if proc is not None else None
                raise RuntimeError(f"broker {n} exited with code {code} while starting; "
                                   f"{local[n].log_path} ends with:\n"
                                   f"{brokerdb.tail(local[n].log_path)}")

        brokerdb.wait_ready({n: local[n].listen for n in nodes}, self.ready_timeout_s,
                            partitions=spec.keys, check=check)
        run.log.info("local cluster ready: %s", ", ".join(
            f"{n}={local[n].listen}" for n in nodes))

    def _start_proxy(self, run: Run, db: LocalBrokerDB) -> Links:
        if self.proxy_mode == "thread":
            return LinkProxy(HOST)
        if self.proxy_mode != "process":
            raise ValueError(f"{PROXY_ENV}={self.proxy_mode!r}: expected process or thread")

        def spawn(cmd: Sequence[str]) -> subprocess.Popen[bytes]:
            proc, self._proxy_item = db.launch("proxy", cmd, run.paths.root,
                                               run.paths.root / "proxy.log", pipes=True)
            return proc

        return ProxyProcess(HOST, spawn=spawn, python=self.python)

    def wait_ready(self, run: Run, timeout_s: float) -> None:
        """Every node answers and sees a leader per partition (e.g. after a final heal)."""
        assert self.db is not None
        brokerdb.wait_ready({n: ln.listen for n, ln in self.db.nodes.items()}, timeout_s,
                            partitions=run.spec.keys)

    def collect(self, run: Run) -> None:
        """Logs and data already live in run.paths.node_dir(n); nothing to copy."""
        if self.db is None:
            return
        for n in self.db.nodes:
            self.db.collect(run, n, run.paths.node_dir(n))

    def down(self, run: Run) -> None:
        """Resume, kill, stop the proxy, release leftovers. Idempotent; never raises."""
        problems: list[str] = []
        if self.db is not None:
            try:
                problems += self.db.kill_all()
            except Exception as e:
                problems.append(f"brokers: {e}")
        if self.net is not None:
            with contextlib.suppress(Exception):
                self.net.heal(run)
                self.net.fast(run)
        if self.proxy is not None:
            try:
                self.proxy.stop()
                if self._proxy_item is not None and self.db is not None:
                    self.db.release(self._proxy_item)
                    self._proxy_item = None
            except Exception as e:
                problems.append(f"proxy: {e}")
        if self.db is not None:
            try:
                problems += self.db.close()
            except Exception as e:
                problems.append(f"launcher: {e}")
        if self.run_id is not None and not problems:
            with contextlib.suppress(Exception):
                leftovers.end_run(self.run_id)
        for p in problems:
            with contextlib.suppress(Exception):
                run.log.warning("local backend teardown: %s (run `undertow heal`)", p)
