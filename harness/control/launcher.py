"""Processes on this machine that die with the harness and are known to `undertow heal`.

Every process is spawned from one launcher thread that lives as long as the
backend: each child sets PR_SET_PDEATHSIG=SIGKILL before exec, and that signal
fires when the *thread* that forked it ends. util-linux's `setpriv --pdeathsig KILL`
sets it and execs the command, so no Python runs between fork and exec: Python code
there (a `preexec_fn`) can deadlock in a process with other threads, and did, in a
harness running Kafka's Java client (a JVM's threads) when a kill's restart forked
a broker. Without setpriv (not Linux, or util-linux before 2.33) a preexec_fn does it.
Each is also registered in harness.leftovers (pid + start time) and carries
UNDERTOW_RUN_ID, for `undertow heal`.
The local backend owns one Launcher; a system's DB starts its node processes through it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import leftovers

_PR_SET_PDEATHSIG = 1

_prctl: Any = None
with contextlib.suppress(OSError, AttributeError):  # not Linux: heal and teardown still kill
    _prctl = ctypes.CDLL(None, use_errno=True).prctl


@functools.cache
def setpriv() -> str | None:
    """setpriv, if it has --pdeathsig (asked once, at the first launch, not at import)."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in out.stdout else None


def die_with_parent(cmd: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """The command and preexec_fn that start `cmd` with PDEATHSIG=SIGKILL."""
    path = setpriv()
    if path is not None:
        return [path, "--pdeathsig", "KILL", "--", *cmd], None
    return list(cmd), _die_with_parent(os.getpid())


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: SIGKILL this child when the forking thread ends (Linux only)."""

    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the harness died before prctl took effect
            os._exit(1)

    return preexec


def wait_state(pid: int, *, stopped: bool, timeout_s: float = 2.0) -> None:
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


class Launcher:
    """Starts the processes of one run: they die with the harness and `undertow heal` knows them."""

    def __init__(self, run_id: str, env: Mapping[str, str] | None = None) -> None:
        self.run_id = run_id
        self.env = {**os.environ, **(env or {}), leftovers.RUN_ENV: run_id,
                    "PYTHONUNBUFFERED": "1"}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="undertow-launcher")
        self.closed = False

    def _popen(self, cmd: Sequence[str], cwd: Path, log_path: Path,
               pipes: bool) -> subprocess.Popen[bytes]:
        """Runs on the launcher thread, so PDEATHSIG is tied to a thread that lives on."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        argv, preexec = die_with_parent(cmd)
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                argv, cwd=cwd, env=self.env,
                stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipes else log,
                stderr=log if pipes else subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C goes to the harness, which tears down
                preexec_fn=preexec)

    def launch(self, name: str, cmd: Sequence[str], cwd: Path, log_path: Path, *,
               pipes: bool = False) -> tuple[subprocess.Popen[bytes], str]:
        """Start a process; returns it and its leftovers item (release it once it is gone)."""
        if self.closed:
            raise RuntimeError("the local backend is down")
        item = leftovers.register(self.run_id, "process", name=name, cmd=" ".join(cmd))
        try:
            proc = self._pool.submit(self._popen, cmd, cwd, log_path, pipes).result()
        except BaseException:
            leftovers.release(self.run_id, item)
            raise
        leftovers.update(self.run_id, item, pid=proc.pid,
                         start_time=leftovers.proc_start_time(proc.pid))
        return proc, item

    def release(self, item: str) -> None:
        leftovers.release(self.run_id, item)

    def close(self) -> None:
        """No more launches; end the launcher thread (children still alive get PDEATHSIG)."""
        self.closed = True
        self._pool.shutdown(wait=True)
