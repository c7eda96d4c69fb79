"""The one process of each node of a local cluster: start, SIGKILL, SIGTERM, SIGSTOP/SIGCONT,
close.

Every system's local DB holds one `NodeProcesses` and says only *what* to run;
how a process is started (through the backend's launcher, so it dies with the
harness and `undertow heal` knows it), killed without grace, frozen and thawed,
and forgotten once it has exited lives here, once.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.control.launcher import wait_state
from harness.control.procstate import local_state
from harness.protocols import Launches, ProcState

KILL_WAIT_S = 10.0
STOP_GRACE_S = 30.0  # a server's own shutdown, then SIGKILL


@dataclass(slots=True)
class _Proc:
    proc: subprocess.Popen[bytes] | None = None
    item: str | None = None  # the launcher's leftovers item of the running process
    paused: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class NodeProcesses:
    """At most one live process per node; after close(), nothing starts again."""

    def __init__(self, launcher: Launches, nodes: Iterable[str]) -> None:
        self.launcher = launcher
        self._procs = {name: _Proc() for name in nodes}
        self._lock = threading.RLock()
        self._closed = False

    def _get(self, node: str) -> _Proc:
        try:
            return self._procs[node]
        except KeyError:
            raise KeyError(f"no node {node!r}; nodes: {', '.join(self._procs)}") from None

    def start(self, node: str, cmd: Sequence[str], cwd: Path, log_path: Path) -> None:
        """Run cmd as the node's process; a node whose process runs stays as it is."""
        p = self._get(node)
        with self._lock:
            if self._closed:
                raise RuntimeError("the cluster is closed: no node starts again")
            if p.running:
                return
            self._forget(p)
            p.proc, p.item = self.launcher.launch(node, cmd, cwd, log_path)
            p.paused = False

    def kill(self, node: str) -> None:
        """SIGKILL, no grace (a stopped process is woken so that it dies)."""
        self._end(node, signal.SIGKILL, KILL_WAIT_S)

    def stop(self, node: str, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, so the server shuts itself down (its shutdown hooks run); SIGKILL if it
        is still there after grace_s."""
        self._end(node, signal.SIGTERM, grace_s)

    def _end(self, node: str, sig: signal.Signals, wait_s: float) -> None:
        """sig (a stopped process is woken so that it can act on it), then wait for the
        process to go; SIGKILL if it is still there after wait_s."""
        p = self._get(node)
        with self._lock:
            if p.proc is not None and p.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.proc.send_signal(sig)
                    p.proc.send_signal(signal.SIGCONT)
                try:
                    p.proc.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    if sig == signal.SIGKILL:
                        raise
                    with contextlib.suppress(ProcessLookupError):
                        p.proc.send_signal(signal.SIGKILL)
                    p.proc.wait(timeout=KILL_WAIT_S)
            self._forget(p)

    def _forget(self, p: _Proc) -> None:
        """The process has exited: release its leftovers item."""
        if p.proc is not None and p.proc.poll() is not None and p.item is not None:
            self.launcher.release(p.item)
            p.item = None
        p.paused = False

    def pause(self, node: str) -> None:
        p = self._get(node)
        with self._lock:
            if p.running and p.proc is not None:
                p.proc.send_signal(signal.SIGSTOP)
                p.paused = True
                wait_state(p.proc.pid, stopped=True)

    def resume(self, node: str) -> None:
        p = self._get(node)
        with self._lock:
            if p.running and p.proc is not None:
                p.proc.send_signal(signal.SIGCONT)
                wait_state(p.proc.pid, stopped=False)
            p.paused = False

    def is_running(self, node: str) -> bool:
        return self._get(node).running

    def is_paused(self, node: str) -> bool:
        return self._get(node).paused

    def pid(self, node: str) -> int | None:
        p = self._get(node)
        return p.proc.pid if p.running and p.proc is not None else None

    def state(self, node: str) -> ProcState:
        """The node's process as /proc shows it now (a fault's evidence)."""
        return local_state(self.pid(node), node)

    def exit_code(self, node: str) -> int | None:
        """The code the node's last process exited with (None while it runs or never ran)."""
        p = self._get(node)
        return p.proc.returncode if p.proc is not None and not p.running else None

    def close(self) -> list[str]:
        """Resume and kill every node; no more starts. Returns problems."""
        problems: list[str] = []
        with self._lock:
            self._closed = True
            for name in self._procs:
                try:
                    self.resume(name)
                    self.kill(name)
                except Exception as e:
                    problems.append(f"killing {name}: {e}")
        return problems
