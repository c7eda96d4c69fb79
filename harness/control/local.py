"""The local backend: broker processes on this machine, every link through the link proxy.

No Docker, no root. Each node gets nodes/<node>/ in the run folder (NODE.json,
data/, broker.log, clock_offset_ns) and a port on 127.0.0.1. Brokers dial each
other, and clients dial brokers, through the harness's link proxy, one port
per directed link; the harness itself (readiness, leaders, dumps) talks to
each broker directly, so the control plane is never partitioned.

Brokers die with the harness: each child sets PR_SET_PDEATHSIG=SIGKILL before
exec. That signal fires when the *thread* that forked the child ends, so every
broker is spawned from one launcher thread that lives as long as the backend.
Each process is also registered in harness.leftovers (pid + start time) and
carries UNDERTOW_RUN_ID in its environment, for `undertow heal`.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import db as brokerdb
from harness import leftovers
from harness.net import CLIENT, ProxyNet
from harness.protocols import Exec, Run
from harness.proxy import LinkProxy, Links
from harness.proxy_process import ProxyProcess

HOST = "127.0.0.1"
PROXY_ENV = "UNDERTOW_PROXY"
READY_TIMEOUT_S = 30.0
KILL_WAIT_S = 10.0
_PR_SET_PDEATHSIG = 1

_prctl: Any = None
with contextlib.suppress(OSError, AttributeError):  # not Linux: heal and teardown still kill
    _prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: SIGKILL this child when the forking thread ends (Linux only)."""

    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the harness died before prctl took effect
            os._exit(1)

    return preexec


def _wait_state(pid: int, *, stopped: bool, timeout_s: float = 2.0) -> None:
    """Return once /proc says the process is (not) stopped: signals are delivered async."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        state = stat[stat.rindex(")") + 2]
        if state in "ZX" or (state in "Tt") == stopped:
            return
        time.sleep(0.002)


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


@dataclass(slots=True)
class LocalNode:
    """One broker node's files, address and process."""

    name: str
    dir: Path
    listen: str
    proc: subprocess.Popen[bytes] | None = None
    item: str | None = None  # leftovers item of the running process
    paused: bool = False

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

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LocalBrokerDB:
    """The brokers of a local run: DB plus Killable, Pausable, HasLogs, HasLeaders,
    HasClock, LosesUnflushed and DumpsReplicas."""

    def __init__(self, run_id: str, nodes: Mapping[str, LocalNode], *,
                 python: str = sys.executable) -> None:
        self.run_id = run_id
        self.nodes = dict(nodes)
        self.python = python
        self.env = {**os.environ, leftovers.RUN_ENV: run_id, "PYTHONUNBUFFERED": "1"}
        self._lock = threading.RLock()
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="undertow-launcher")
        self._closed = False

    def node(self, name: str) -> LocalNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r}; nodes: {', '.join(self.nodes)}") from None

    # -- DB --------------------------------------------------------------------

    def setup(self, run: Run, node: str) -> None:
        self.start(run, node)

    def teardown(self, run: Run, node: str) -> None:
        self.kill(run, node)

    # -- Killable --------------------------------------------------------------

    def _popen(self, cmd: Sequence[str], cwd: Path, log_path: Path,
               pipes: bool) -> subprocess.Popen[bytes]:
        """Runs on the launcher thread, so PDEATHSIG is tied to a thread that lives on."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                list(cmd), cwd=cwd, env=self.env,
                stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipes else log,
                stderr=log if pipes else subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C goes to the harness, which tears down
                preexec_fn=_die_with_parent(os.getpid()))

    def launch(self, name: str, cmd: Sequence[str], cwd: Path, log_path: Path, *,
               pipes: bool = False) -> tuple[subprocess.Popen[bytes], str]:
        """Start a process that dies with the harness and is known to `undertow heal`.

        Returns the process and its leftovers item (release it once the process is gone).
        """
        if self._closed:
            raise RuntimeError("the local backend is down")
        item = leftovers.register(self.run_id, "process", name=name, cmd=" ".join(cmd))
        try:
            proc = self._launcher.submit(self._popen, cmd, cwd, log_path, pipes).result()
        except BaseException:
            leftovers.release(self.run_id, item)
            raise
        leftovers.update(self.run_id, item, pid=proc.pid,
                         start_time=leftovers.proc_start_time(proc.pid))
        return proc, item

    def release(self, item: str) -> None:
        leftovers.release(self.run_id, item)

    def start(self, run: Run | None, node: str) -> None:
        n = self.node(node)
        with self._lock:
            if self._closed:
                raise RuntimeError("the local backend is down")
            if n.running:
                return
            self._forget(n)
            cmd = brokerdb.broker_command(self.python, str(n.config))
            proc, item = self.launch(node, cmd, n.dir, n.log_path)
            n.proc, n.item, n.paused = proc, item, False

    def kill(self, run: Run | None, node: str) -> None:
        n = self.node(node)
        with self._lock:
            if n.proc is not None and n.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    n.proc.send_signal(signal.SIGKILL)
                    n.proc.send_signal(signal.SIGCONT)  # a stopped process dies on SIGKILL too
                n.proc.wait(timeout=KILL_WAIT_S)
            self._forget(n)

    def _forget(self, n: LocalNode) -> None:
        """The process has exited: release its leftovers item."""
        if n.proc is not None and n.proc.poll() is not None and n.item is not None:
            leftovers.release(self.run_id, n.item)
            n.item = None
        n.paused = False

    def is_running(self, node: str) -> bool:
        return self.node(node).running

    # -- Pausable --------------------------------------------------------------

    def pause(self, run: Run | None, node: str) -> None:
        n = self.node(node)
        with self._lock:
            if n.running and n.proc is not None:
                n.proc.send_signal(signal.SIGSTOP)
                n.paused = True
                _wait_state(n.proc.pid, stopped=True)

    def resume(self, run: Run | None, node: str) -> None:
        n = self.node(node)
        with self._lock:
            if n.running and n.proc is not None:
                n.proc.send_signal(signal.SIGCONT)
                _wait_state(n.proc.pid, stopped=False)
            n.paused = False

    def is_paused(self, node: str) -> bool:
        return self.node(node).paused

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
                if not live_only or (n.running and not n.paused)]

    def metadata(self, timeout_s: float = 1.0) -> dict[str, Any] | None:
        """The first live node's metadata answer, or None."""
        meta: dict[str, Any] | None = brokerdb.first_answer(
            self.admin_addrs(), lambda a: brokerdb.metadata(a, timeout_s=timeout_s))
        return meta

    def leader_of(self, run: Run | None, key: int) -> str | None:
        return brokerdb.leader_from(self.metadata(), key)

    def controller(self, run: Run | None) -> str | None:
        return brokerdb.controller_from(self.metadata())

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

    # -- LosesUnflushed --------------------------------------------------------

    def lose_unflushed(self, run: Run | None, node: str) -> None:
        n = self.node(node)
        if n.running:
            raise RuntimeError(f"lose_unflushed: {node} is running; kill it first "
                               "(an OS crash loses the page cache of a dead process)")
        cmd = brokerdb.lose_unflushed_command(self.python, str(n.data_dir))
        done = subprocess.run(cmd, cwd=n.dir, env=self.env, capture_output=True, text=True,
                              timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"lose_unflushed on {node} failed ({done.returncode}): "
                               f"{done.stderr.strip()[-500:]}")

    # -- DumpsReplicas ---------------------------------------------------------

    def dump_node(self, node: str) -> list[dict[str, Any]]:
        """A node's replicas: from the live broker, else offline from its data dir."""
        n = self.node(node)
        if n.running and not n.paused:
            try:
                from workloads.client import admin_dump

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
            rows.extend(self.dump_node(node))
        return rows

    # -- teardown --------------------------------------------------------------

    def kill_all(self) -> list[str]:
        """Resume and kill every broker; no more starts. Returns problems."""
        problems: list[str] = []
        with self._lock:
            self._closed = True
            for name in self.nodes:
                try:
                    self.resume(None, name)
                    self.kill(None, name)
                except Exception as e:
                    problems.append(f"killing {name}: {e}")
        return problems

    def close(self) -> list[str]:
        """kill_all, then end the launcher thread (children left would get PDEATHSIG)."""
        problems = self.kill_all()
        self._launcher.shutdown(wait=True)
        return problems


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
