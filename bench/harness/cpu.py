"""CPU time spent during a benchmark window, by who spent it, from /proc (Linux).

Ops per second on a shared machine move with the other work on it. The cores
the run's own processes used say whether the run had the machine (all of it:
the figure is CPU-bound, and only a lower cost per operation raises it; a
fraction: other work starved it), and the CPU time per operation, at full
speed, says which side that cost is on. At low rates the servers' steady
background work (replication and consumer fetches that wait, metadata
refreshes) inflates the time per operation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench import proctree


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """CPU seconds (user + system) so far: this process with all its threads (the
    harness, its workers and the client libraries' threads), and its descendant
    processes (the system's servers on the local backend)."""

    harness: float
    servers: float


def sample(root: int | None = None) -> CpuTimes:
    """CPU seconds of root (default: this process) and of its live descendants."""
    me = os.getpid() if root is None else root
    procs = proctree.snapshot()
    return CpuTimes(harness=procs[me].cpu_s if me in procs else 0.0,
                    servers=sum(procs[p].cpu_s for p in proctree.descendants(procs, me)))


def _spent(before: CpuTimes, after: CpuTimes) -> dict[str, float]:
    spent = {"servers": after.servers - before.servers,
             "harness": after.harness - before.harness}
    spent["total"] = spent["servers"] + spent["harness"]
    return spent


def per_op(before: CpuTimes, after: CpuTimes, *, ops: int, seconds: float,
           idle: tuple[CpuTimes, CpuTimes, float] | None = None) -> dict[str, float]:
    """CPU milliseconds per operation and cores used, each side and in total. A server
    that exits inside the window takes its time with it (no faults here: none does).

    idle: (before, after, seconds) of a window with the clients open and no ops; the
    cores used then are taken out of the window's time as well (`*_busy_ms_per_op`):
    what one more operation costs, without the servers' steady background work."""
    spent = _spent(before, after)
    n = max(ops, 1)
    out = {f"{k}_ms_per_op": 1000 * v / n for k, v in spent.items()}
    out |= {f"{k}_cores": v / seconds for k, v in spent.items()}
    if idle is not None:
        idle_cores = {k: v / idle[2] for k, v in _spent(idle[0], idle[1]).items()}
        out |= {f"{k}_idle_cores": v for k, v in idle_cores.items()}
        out |= {f"{k}_busy_ms_per_op": 1000 * (spent[k] - idle_cores[k] * seconds) / n
                for k in spent}
    return out
