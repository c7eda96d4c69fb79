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

from checkers.register import INF, RegOp, prune_mask, read_classes, stale_reads
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


W_CALL, W_RET, W_VALUE, W_OP, W_PROCESS = range(5)  # columns of a register's rows


@dataclass(frozen=True, slots=True)
class Registers:
    """Every register's operations: (group, key) -> (writes, reads), each an (n, 5)
    int64 array of call, ret, value, invoke index and process (a read of null has
    value NO_OFFSET; a write's ret is INF unless it was acknowledged)."""

    ops: dict[tuple[int, int], tuple[Any, Any]]
    groups: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.ops


def registers(scan: HistoryScan, status: Any, cmp_time: Any) -> Registers:
    """The register operations of a checked scan (`status`: tables.op_status of it;
    `cmp_time`: each invoke line's completion time, INF when it has none).

    Writes come from the invokes' `commit` micro-ops (the last one per operation and
    key), reads from the `ok` completions' answers; a completion's rows take its
    invoke's group. All in numpy: a history holds a row per commit and key."""
    rows = scan.commit
    if not len(rows):
        return Registers({}, scan.groups)
    line, kind = rows[:, 0], rows[:, 4]
    typ = scan.type[line]
    comp = typ != 0
    # the rows that are writes or answers (a committed invoke's keys asked only lend
    # their group to its completion)
    w = np.flatnonzero((kind == COMMIT_WRITE) & ~comp)
    r = np.flatnonzero((kind == COMMIT_ANSWERED) & comp & (typ == OK))
    inv_lines, first = np.unique(line[~comp], return_index=True)
    inv_group = rows[~comp, 1][first]
    sel = rows[np.concatenate([w, r])]  # writes first, then answers
    line, group, key, off = (sel[:, i] for i in range(4))
    nw = len(w)
    inv = np.where(np.arange(len(sel)) >= nw, scan.pair[line], line)
    st = status[inv]
    call, ret = scan.time[inv], cmp_time[inv]
    if len(inv_lines) and len(sel) > nw:  # an answer takes its invoke's group, if any
        at = np.minimum(np.searchsorted(inv_lines, inv[nw:]), len(inv_lines) - 1)
        group[nw:] = np.where(inv_lines[at] == inv[nw:], inv_group[at], group[nw:])
    txn_ok = (st == OK) & (scan.f[inv] == F_CODES["txn"])
    w_call = np.where(txn_ok, ret, call)  # a transaction's commit: at its completion
    w_ret = np.where(st == OK, ret, INF)
    w = np.flatnonzero((np.arange(len(sel)) < nw) & (st != FAIL))
    w = w[np.lexsort((w, key[w], group[w], inv[w]))]
    if len(w):  # an operation's last commit of a key (in the order written)
        w = w[np.r_[(inv[w][1:] != inv[w][:-1]) | (group[w][1:] != group[w][:-1])
                    | (key[w][1:] != key[w][:-1]), True]]
    r = np.arange(nw, len(sel))
    proc = scan.process[inv]
    table = np.concatenate([
        np.stack([np.zeros(len(w), np.int64), group[w], key[w], w_call[w], w_ret[w], off[w],
                  inv[w], proc[w]], axis=1),
        np.stack([np.ones(len(r), np.int64), group[r], key[r], call[r], scan.time[line[r]],
                  off[r], inv[r], proc[r]], axis=1)])
    table = table[np.lexsort((table[:, 0], table[:, 2], table[:, 1]))]
    cut = np.flatnonzero(np.r_[True, (table[1:, 1] != table[:-1, 1])
                               | (table[1:, 2] != table[:-1, 2]), True])
    ops: dict[tuple[int, int], tuple[Any, Any]] = {}
    for a, b in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        part = table[a:b]
        reads = part[:, 0] == 1
        ops[(int(part[0, 1]), int(part[0, 2]))] = (part[~reads, 3:], part[reads, 3:])
    return Registers(ops, scan.groups)


def _regops(rows: Any, write: bool) -> list[RegOp]:
    return [RegOp(c, t, write, None if v == NO_OFFSET and not write else v, op)
            for c, t, v, op, _ in rows.tolist()]


def check_offsets(reg: Registers, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """{"count", "examples", "unknown" (registers whose search ran out), "registers",
    "check_s"}: the stale reads of every register, counted by HISTORY.md's rule."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    count = 0
    examples: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    for (g, k), (w, r) in sorted(reg.ops.items()):
        if not len(r):
            continue
        keep = prune_mask(w[:, W_CALL], w[:, W_RET], w[:, W_VALUE], r[:, W_CALL],
                          r[:, W_RET], r[:, W_VALUE])
        kept = w[keep]
        rep = read_classes(kept[:, W_CALL], kept[:, W_RET], r[:, W_CALL], r[:, W_RET],
                           r[:, W_VALUE])
        alone = rep == np.arange(len(r))
        stale, finished = stale_reads(_regops(kept, True), _regops(r[alone], False),
                                      deadline)
        if not finished:
            unknown.append({"group": reg.groups[g], "key": k})
        if stale and not alone.all():  # each read counted with those it stands for
            of = np.isin(r[rep, W_OP], [read.op for read in stale])
            stale = sorted(_regops(r[of], False), key=lambda read: (read.ret, read.op))
        count += len(stale)
        for read in stale[:max(0, EXAMPLES - len(examples))]:
            examples.append(_example(reg.groups[g], k, read, w, r))
    return {"count": count, "examples": examples, "unknown": unknown,
            "registers": len(reg.ops), "check_s": round(time.monotonic() - t0, 3)}


def _example(group: str, k: int, read: RegOp, w: Any, r: Any) -> dict[str, Any]:
    """The read, what it returned, and the acknowledged commit real time forced before it
    (the last one to complete before the read was invoked), when there is one."""
    got = NO_OFFSET if read.value is None else read.value
    ex: dict[str, Any] = {"group": group, "key": k, "index": read.op,
                          "process": int(r[r[:, W_OP] == read.op][0, W_PROCESS]),
                          "returned": read.value, "asked_ns": read.call,
                          "answered_ns": read.ret,
                          "written_ever": bool((w[:, W_VALUE] == got).any())}
    before = np.flatnonzero((w[:, W_RET] != INF) & (w[:, W_RET] < read.call))
    if len(before):
        last = w[before[np.lexsort((w[before, W_OP], w[before, W_RET]))[-1]]]
        ex.update(writer_index=int(last[W_OP]), writer_process=int(last[W_PROCESS]),
                  committed=int(last[W_VALUE]), acknowledged_ns=int(last[W_RET]))
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
