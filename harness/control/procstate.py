"""Reading a node's process state off its host: is it alive, and is every thread stopped?

A fault's evidence (HISTORY.md's `landed`) rests on this reading, made after the fault
acted: a kill is seen when the process is gone, a pause when every thread of it is in
state `T` (`/proc/<pid>/task/*/stat`), a start when a new pid serves. The same reading is
made here for a local process and, through one shell script, on a container or an SSH
host, so the two cannot drift apart.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from harness.protocols import ProcState

STOPPED = frozenset("Tt")  # stopped by a signal, or by a tracer
GONE = frozenset("ZX")     # a zombie or a dead task is no live process


def thread_state(stat_line: str) -> str:
    """The state letter of a `/proc/<pid>/task/<tid>/stat` line (the name may hold
    spaces and parentheses: the state is the first field after the last ')')."""
    rest = stat_line.rsplit(")", 1)[-1].split()
    return rest[0] if rest else ""


def from_states(pid: int | None, states: list[str], where: str) -> ProcState:
    """A ProcState from the state letters of a pid's threads (none: the pid is gone)."""
    live = [s for s in states if s and s not in GONE]
    if pid is None or pid <= 0 or not live:
        return ProcState(None, False, f"no live process on {where}" +
                         (f" (pid {pid} gone)" if pid and pid > 0 else ""))
    stopped = sum(s in STOPPED for s in live)
    every = stopped == len(live)
    return ProcState(pid, every, f"pid {pid}, {stopped} of {len(live)} threads stopped")


def local_state(pid: int | None, where: str = "host") -> ProcState:
    """The state of a process of this machine."""
    if pid is None:
        return ProcState(None, False, f"no live process on {where}")
    states: list[str] = []
    with contextlib.suppress(OSError):
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            with contextlib.suppress(OSError):
                states.append(thread_state(stat.read_text(errors="replace")))
    return from_states(pid, states, where)


def shell_script(pid_expr: str) -> str:
    """A POSIX sh script printing the pid on its first line, then one thread state per line
    (nothing when no such process): the remote half of `local_state`."""
    return (f'p={pid_expr}; echo "$p"; [ "$p" -gt 0 ] 2>/dev/null || exit 0; '
            f'for f in /proc/$p/task/*/stat; do [ -r "$f" ] && '
            f"sed -e 's/.*) //' -e 's/ .*//' \"$f\" 2>/dev/null; done; true")


def from_shell(out: str, where: str) -> ProcState:
    """Parse what `shell_script` printed."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    try:
        pid = int(lines[0]) if lines else 0
    except ValueError:
        return ProcState(None, False, f"unreadable process state on {where}: {out[:80]!r}")
    return from_states(pid, lines[1:], where)
