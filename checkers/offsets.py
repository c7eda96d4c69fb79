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

from checkers.register import INF, RegOp, prune, stale_reads
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


def registers(scan: HistoryScan, status: Any, cmp_time: Any) -> Registers:
    """The register operations of a checked scan (`status`: tables.op_status of it;
    `cmp_time`: each invoke line's completion time, INF when it has none).

    Writes come from the invokes' `commit` micro-ops (the last one per operation and
    key), reads from the `ok` completions' answers; a completion's rows take its
    invoke's group."""
    rows = scan.commit
    if not len(rows):
        return Registers({}, scan.groups, {}, {})
    line, group, key, off, kind = (rows[:, i] for i in range(5))
    typ = scan.type[line]
    comp = typ != 0
    inv = np.where(comp, scan.pair[line], line)
    st = status[inv]
    call, ret = scan.time[inv], cmp_time[inv]
    is_w = (kind == COMMIT_WRITE) & ~comp & (st != FAIL)
    txn_ok = (st == OK) & (scan.f[inv] == F_CODES["txn"])
    w_call = np.where(txn_ok, ret, call)  # a transaction's commit: at its completion
    w_ret = np.where(st == OK, ret, INF)
    is_r = (kind == COMMIT_ANSWERED) & comp & (typ == OK)
    inv_group = dict(zip(line[~comp].tolist(), group[~comp].tolist(), strict=True))
    ops: dict[tuple[int, int], tuple[list[RegOp], list[RegOp]]] = {}
    last: dict[tuple[int, int, int], RegOp] = {}
    w = np.flatnonzero(is_w)
    for i, g, k, o, c, r in zip(inv[w].tolist(), group[w].tolist(), key[w].tolist(),
                                off[w].tolist(), w_call[w].tolist(), w_ret[w].tolist(),
                                strict=True):
        last[(i, g, k)] = RegOp(c, r, True, o, i)  # the last of an operation's commits
    for (_, g, k), op in last.items():
        ops.setdefault((g, k), ([], []))[0].append(op)
    r_ = np.flatnonzero(is_r)
    for i, g, k, o, c, r in zip(inv[r_].tolist(), group[r_].tolist(), key[r_].tolist(),
                                off[r_].tolist(), call[r_].tolist(), scan.time[line[r_]].tolist(),
                                strict=True):
        ops.setdefault((inv_group.get(i, g), k), ([], []))[1].append(
            RegOp(c, r, False, None if o == NO_OFFSET else o, i))
    used = np.flatnonzero(is_w | is_r)
    process = dict(zip(inv[used].tolist(), scan.process[inv[used]].tolist(), strict=True))
    acked_w = w[st[w] == OK]
    acked = dict(zip(inv[acked_w].tolist(), ret[acked_w].tolist(), strict=True))
    return Registers(ops, scan.groups, process, acked)


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
        stale, finished = stale_reads(prune(writes, reads), reads, deadline)
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
    ex: dict[str, Any] = {"group": reg.groups[g], "key": k, "index": read.op,
                          "process": reg.process.get(read.op), "returned": read.value,
                          "asked_ns": read.call, "answered_ns": read.ret,
                          "written_ever": any(w.value == read.value for w in writes)}
    before = [w for w in writes if w.op in reg.acked and w.ret < read.call]
    if before:
        w = max(before, key=lambda x: (x.ret, x.op))
        ex.update(writer_index=w.op, writer_process=reg.process.get(w.op),
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
