"""The brokers of a local run as processes: start, SIGKILL, SIGSTOP/SIGCONT, clock, dumps.

Every process is spawned from one launcher thread that lives as long as the
backend: each child sets PR_SET_PDEATHSIG=SIGKILL before exec, and that signal
fires when the *thread* that forked it ends. Each is also registered in
harness.leftovers (pid + start time) and carries UNDERTOW_RUN_ID, for `undertow heal`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
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
from harness.protocols import Run

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
