"""`stale-committed-offset`: committed offsets checked as one register per group and key.

HISTORY.md's register: each `commit` of a key is a write of its offset, each `ok`
`committed` answer a read, the register starts at null. A write takes effect
inside its operation (`ok`), at its transaction's `ok` completion (a `commit`
micro-op in a `txn`), any time after its invoke or never (`info`), or never
(`fail`); a read between its invoke and its completion. `checkers.register`
searches each register (Wing and Gong with Lowe's memo) and counts stale reads.

This runs in the driver, not in the per-key Spark job, on purpose: commits and
committed reads are operations (a few per consumer and second), not records,
so the rows fit the driver many times over; split per group and key first,
each search is small, and the whole pass costs less than shipping a new entry
kind through every key's packed columns would cost the log job (whose 10M-line
budget has no room for wider rows). The searches share one time budget; one that
runs out makes the verdict at most "unknown".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from checkers.register import INF, RegOp, stale_reads
from harness.runfiles import (
    COMMIT_ANSWERED,
    COMMIT_WRITE,
    F_CODES,
    NO_OFFSET,
    HistoryScan,
)

STALE = "stale-committed-offset"
BUDGET_S = 60.0  # all registers' searches together
EXAMPLES = 32
OK, FAIL, INFO = 1, 2, 3


@dataclass(frozen=True, slots=True)
class Registers:
    """Every register's operations: (group, key) -> (writes, reads), with what the
    examples name (process, invoke and completion times) by history index."""

    ops: dict[tuple[int, int], tuple[list[RegOp], list[RegOp]]]
    groups: tuple[str, ...]
    process: dict[int, int]  # invoke index -> process
    acked: dict[int, int]  # an ok write's invoke index -> when it completed (ns)

    @property
    def empty(self) -> bool:
        return not self.ops


def registers(scan: HistoryScan, status: Any) -> Registers:
    """The register operations of a checked scan (`status`: tables.op_status of it).

    Writes come from the invokes' `commit` micro-ops (the last one per operation and
    key), reads from the `ok` completions' answers; a completion's rows take its
    invoke's group."""
    rows = scan.commit
    if not len(rows):
        return Registers({}, scan.groups, {}, {})
    line, group, key, off, kind = (rows[:, i] for i in range(5))
    typ = scan.type[line]
    comp = typ != 0
    inv_line = np.where(comp, scan.pair[line], line)
    inv_group = dict(zip(line[~comp].tolist(), group[~comp].tolist(), strict=True))
    cmp_time = np.full(scan.lines, INF, np.int64)
    done = np.flatnonzero(scan.pair >= 0)
    cmp_time[scan.pair[done]] = scan.time[done]
    ops: dict[tuple[int, int], tuple[list[RegOp], list[RegOp]]] = {}
    process: dict[int, int] = {}
    acked: dict[int, int] = {}
    txn = F_CODES["txn"]
    seen: dict[tuple[int, int, int], RegOp] = {}
    for ln, g, k, o, kd, c, inv in zip(line.tolist(), group.tolist(), key.tolist(),
                                       off.tolist(), kind.tolist(), comp.tolist(),
                                       inv_line.tolist(), strict=True):
        st = int(status[inv])
        if kd == COMMIT_WRITE and not c:
            if st == FAIL:
                continue
            ret = int(cmp_time[inv])
            call = int(scan.time[inv])
            if st == OK and int(scan.f[inv]) == txn:
                call = ret  # takes effect at the transaction's commit
            if st != OK:
                ret = INF
            else:
                acked[inv] = int(cmp_time[inv])
            seen[(inv, g, k)] = RegOp(call, ret, True, o, inv)
        elif kd == COMMIT_ANSWERED and c and int(scan.type[ln]) == OK:
            g = inv_group.get(inv, g)
            ops.setdefault((g, k), ([], []))[1].append(
                RegOp(int(scan.time[inv]), int(scan.time[ln]), False,
                      None if o == NO_OFFSET else o, inv))
        else:
            continue
        process[inv] = int(scan.process[inv])
    for (_, g, k), w in seen.items():
        ops.setdefault((g, k), ([], []))[0].append(w)
    return Registers(ops, scan.groups, process, acked)


def _prune(writes: list[RegOp], reads: list[RegOp]) -> list[RegOp]:
    """Writes that may never happen (info) and whose value no read returned: dropping one
    from a valid order leaves every read's last write as it was."""
    read_values = {r.value for r in reads}
    return [w for w in writes if w.ret != INF or w.value in read_values]


def check_offsets(reg: Registers, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """{"count", "examples", "unknown" (registers whose search ran out), "registers",
    "check_s"}: the stale reads of every register, counted by HISTORY.md's rule."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    count = 0
    examples: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    for (g, k), (writes, reads) in sorted(reg.ops.items()):
        if not reads:
            continue
        stale, finished = stale_reads(_prune(writes, reads), reads, deadline)
        if not finished:
            unknown.append({"group": reg.groups[g], "key": k})
        count += len(stale)
        for r in stale[:max(0, EXAMPLES - len(examples))]:
            examples.append(_example(reg, g, k, r, writes))
    return {"count": count, "examples": examples, "unknown": unknown,
            "registers": len(reg.ops), "check_s": round(time.monotonic() - t0, 3)}


def _example(reg: Registers, g: int, k: int, read: RegOp,
             writes: list[RegOp]) -> dict[str, Any]:
    """The read, what it returned, and the acknowledged commit real time forced before it
    (the last one to complete before the read was invoked), when there is one."""
    ex: dict[str, Any] = {"group": reg.groups[g], "key": k, "index": read.index,
                          "process": reg.process.get(read.index), "returned": read.value,
                          "asked_ns": read.call, "answered_ns": read.ret,
                          "written_ever": any(w.value == read.value for w in writes)}
    before = [w for w in writes if w.index in reg.acked and w.ret < read.call]
    if before:
        w = max(before, key=lambda x: (x.ret, x.index))
        ex.update(writer_index=w.index, writer_process=reg.process.get(w.index),
                  committed=w.value, acknowledged_ns=w.ret)
    return ex


def offset_results(reg: Registers, budget_s: float | None = None) -> dict[str, Any]:
    """check_offsets in results.json's terms: counts, anomalies, whether it is unknown,
    and its stats (merged into the verdict by checkers.api); BUDGET_S unless given."""
    if reg.empty:
        return {"counts": {}, "anomalies": {}, "unknown": False, "stats": {}}
    got = check_offsets(reg, BUDGET_S if budget_s is None else budget_s)
    stats: dict[str, Any] = {"offset_registers": got["registers"],
                             "offset_check_s": got["check_s"]}
    if got["unknown"]:
        stats["offset_registers_unknown"] = got["unknown"][:EXAMPLES]
    counts = {STALE: got["count"]} if got["count"] else {}
    return {"counts": counts, "anomalies": {STALE: got["examples"]} if counts else {},
            "unknown": bool(got["unknown"]), "stats": stats}
