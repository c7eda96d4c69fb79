"""Every live process's parent, name, CPU time and RSS in one pass over /proc (Linux).

The benches' one reader of /proc: `bench.harness.cpu` sums CPU time over the run's
process tree, `bench.checker` sums memory over the checker's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class ProcStat:
    ppid: int
    name: str  # the command name, as /proc/PID/stat gives it (e.g. "java")
    cpu_s: float  # user + system seconds so far, all threads
    rss_bytes: int


def _stat(pid: int) -> ProcStat | None:
    """One process's figures; None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    close = text.rindex(")")  # the command name may hold spaces and parentheses
    fields = text[close + 2:].split()
    return ProcStat(ppid=int(fields[1]), name=text[text.index("(") + 1:close],
                    cpu_s=(int(fields[11]) + int(fields[12])) / _TICKS,
                    rss_bytes=int(fields[21]) * _PAGE)


def snapshot() -> dict[int, ProcStat]:
    """Every live process now, by pid."""
    out = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            out[int(entry.name)] = st
    return out


def descendants(procs: Mapping[int, ProcStat], root: int) -> Iterator[int]:
    """root's live descendants (not root itself), children before grandchildren."""
    children: dict[int, list[int]] = {}
    for pid, st in procs.items():
        children.setdefault(st.ppid, []).append(pid)
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        yield pid
        todo += children.get(pid, ())
