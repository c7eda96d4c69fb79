"""One long-running process per node of a ShellHost (a container or an ssh host).

A system's server runs detached in the node's base dir (nohup, its pid in
`<name>.pid`, its output in `<name>.log`), as `ShellHost` promises `undertow heal`.
A kill is SIGKILL of that pid (the node, its files and its iptables rules stay);
a pause is the host's freezer where it has one (`docker pause`: the whole node
stops, as a VM pause would) and SIGSTOP otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.control.processes import KILL_WAIT_S, STOP_GRACE_S
from harness.control.procstate import from_shell, shell_script
from harness.control.shell import NodeError, check_exec
from harness.protocols import Exec, ProcState, ShellHost

_NAME = re.compile(r"[A-Za-z0-9._*?-][A-Za-z0-9._*?/-]*")


class ShellProcess:
    """Start, SIGKILL, pause and resume one named process on each node of `host`.

    `marker` is a string of the process's command line that tells it from any other
    process on the node (the freezer finds frozen processes by it)."""

    def __init__(self, host: ShellHost, *, name: str, marker: str,
                 timeout_s: float = 30.0) -> None:
        self.host = host
        self.remote = host.remote
        self.freezer = host.freezer
        self.name = name
        self.marker = marker
        self.timeout_s = timeout_s

    def sh(self, node: str, script: str, *, timeout_s: float | None = None) -> Exec:
        argv = ["sh", "-c", script]
        if self.host.sudo:
            argv = ["sudo", "-n", *argv]
        return self.remote.exec(node, argv, timeout_s=timeout_s or self.timeout_s)

    def base(self, node: str) -> str:
        return self.host.base_dirs[node]

    def pid_file(self, node: str) -> str:
        return f"{self.base(node)}/{self.name}.pid"

    def log_file(self, node: str) -> str:
        return f"{self.base(node)}/{self.name}.log"

    def _pid_expr(self, node: str) -> str:
        return f"$(cat {shlex.quote(self.pid_file(node))} 2>/dev/null || echo 0)"

    def frozen(self, node: str) -> bool:
        return self.freezer is not None and self.freezer.frozen(node)

    def running(self, node: str) -> bool:
        """The pid in the pid file is alive, not a zombie, and is this process."""
        if self.freezer is not None and self.freezer.frozen(node):
            return bool(self.freezer.pids(node, self.marker))  # docker top works when frozen
        marker = shlex.quote(self.marker)
        r = self.sh(node, f'p={self._pid_expr(node)}; [ "$p" -gt 0 ] && s=$(ps -o stat= -p "$p") '
                          f'&& [ "${{s#Z}}" = "$s" ] && tr "\\0" " " </proc/$p/cmdline '
                          f"| grep -qF -- {marker}")
        return r.ok

    def state(self, node: str) -> ProcState:
        """The process as the node's /proc shows it now (a fault's evidence); a frozen
        container's processes are all stopped by its cgroup, whatever their letters say."""
        try:
            if self.freezer is not None and self.freezer.frozen(node):
                pids = self.freezer.pids(node, self.marker)
                if pids:
                    return ProcState(pids[0], True, f"pid {pids[0]}, cgroup frozen")
                return ProcState(None, True, f"cgroup frozen, no live process on {node}")
            return from_shell(self.sh(node, shell_script(self._pid_expr(node)),
                                      timeout_s=10).stdout, node)
        except Exception as e:  # an observation never fails the fault it judges
            return ProcState(None, False,
                             f"state unreadable on {node} ({type(e).__name__}: {e})")

    def start(self, node: str, argv: Sequence[str], *,
              env: Mapping[str, str] | None = None) -> None:
        """Start argv detached in the base dir; a running process stays as it is."""
        if self.frozen(node):
            if self.running(node):
                return  # running, only frozen: a resume is what ends that
            self.resume(node)
        if self.running(node):
            return
        q = shlex.quote
        envs = "".join(f"{k}={q(v)} " for k, v in (env or {}).items())
        script = (f"cd {q(self.base(node))} && {envs}nohup {shlex.join(argv)} "
                  f">>{q(self.log_file(node))} 2>&1 </dev/null & echo $! > "
                  f"{q(self.pid_file(node))}")
        check_exec(self.sh(node, script), node, f"starting {self.name}")

    def kill(self, node: str) -> None:
        """SIGKILL, no grace; returns once the process is gone."""
        if self.freezer is not None and self.freezer.frozen(node):
            # SIGKILL from the host lands when the node thaws, before another instruction
            for pid in self.freezer.pids(node, self.marker):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            self.resume(node)
        if not self.running(node):
            return
        check_exec(self.sh(node, f"kill -KILL {self._pid_expr(node)}"), node, "kill -KILL")
        if not self._gone_within(node, KILL_WAIT_S):
            raise NodeError(f"{self.name} on {node} survived SIGKILL for {KILL_WAIT_S:g} s")

    def stop(self, node: str, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, so the server shuts itself down; SIGKILL if it is still there after
        grace_s (a frozen node is thawed first: it cannot shut down frozen)."""
        if self.frozen(node):
            self.resume(node)
        if not self.running(node):
            return
        pid = self._pid_expr(node)
        check_exec(self.sh(node, f"p={pid}; kill -TERM $p; r=$?; kill -CONT $p 2>/dev/null; "
                                 "exit $r"), node, "kill -TERM")
        if not self._gone_within(node, grace_s):
            self.kill(node)

    def _gone_within(self, node: str, wait_s: float) -> bool:
        """Whether the node's process is gone within wait_s (polled every 50 ms)."""
        deadline = time.monotonic() + wait_s
        while self.running(node):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def pause(self, node: str) -> None:
        if self.freezer is not None:
            self.freezer.freeze(node)
        elif self.running(node):
            check_exec(self.sh(node, f"kill -STOP {self._pid_expr(node)}"), node, "kill -STOP")

    def resume(self, node: str) -> None:
        if self.freezer is not None:
            self.freezer.thaw(node)
            return
        self.sh(node, f"kill -CONT {self._pid_expr(node)} 2>/dev/null; true")

    def fetch(self, node: str, cwd: str, names: Sequence[str], dest: Path) -> None:
        """The files and folders `names` (shell globs allowed) under cwd on the node, those
        that exist, into dest: tar on the node, one download, untar here."""
        bad = [n for n in names if not _NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"fetch: {bad} are not plain file names or globs")
        q = shlex.quote
        tar = f"/tmp/undertow-fetch-{self.name}-{node}-{os.getpid()}.tar"
        # files a live server writes may change while tar reads them: exit 1 says only that
        check_exec(self.sh(node, f"cd {q(cwd)} && {{ tar -cf {tar} --ignore-failed-read "
                                 "--warning=no-file-changed --warning=no-file-shrank "
                                 f"-T /dev/null $(ls -d {' '.join(names)} 2>/dev/null); "
                                 "[ $? -le 1 ]; }", timeout_s=120),
                   node, f"tar of {', '.join(names)}")
        dest.mkdir(parents=True, exist_ok=True)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                local = Path(tmp) / "fetch.tar"
                self.remote.download(node, tar, local)
                with tarfile.open(local) as tf:
                    tf.extractall(dest, filter="data")
        finally:
            self.sh(node, f"rm -f {tar}")
