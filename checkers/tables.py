"""The checked history as operation-level columns: what every check reads.

One row per client operation (its invoke line is its id), one per send
micro-op, one per record read, and the replicas' records; all numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from checkers.offsets import Registers, registers
from harness.runfiles import (
    F_CODES,
    NEMESIS_CODE,
    NO_OFFSET,
    Assigned,
    HistoryScan,
    Replicas,
    read_replicas,
)

OK, FAIL, INFO = 1, 2, 3
KIND_READ, KIND_SEND, KIND_REPLICA, KIND_SUMMARY = 0, 1, 2, 3
ENTRY_COLUMNS = ("kind", "key", "op", "process", "offset", "value", "seq", "status", "must",
                 "seg", "node", "hw")


@dataclass
class Tables:
    """Columns of one run (see module docstring); `op*` arrays are indexed by op row."""

    op: Any  # invoke line = operation id, ascending
    op_process: Any
    op_f: Any
    op_status: Any  # OK, FAIL, INFO (an invoke never completed is INFO)
    op_inv_time: Any
    op_cmp_time: Any  # int64 max when never completed
    op_n_sends: Any
    op_must: Any  # completed ok, or info and some poll read a value it sent
    op_seg: Any  # poll succession segment (changes at assign, subscribe, non-ok poll)
    entries: dict[str, Any]  # ENTRY_COLUMNS, one row per read, send, replica record/summary
    has_subscribe: bool
    has_replicas: bool
    nodes: list[str]
    lines: int
    sends: tuple[Any, Any] | None = None  # (op, key) of each send, kept when entries are dropped
    # with `sends`: each one's offset, then per poll and key it returned records of, the
    # key, completion time, highest offset and ok (checkers.availability's per-key polls)
    reads: tuple[Any, Any, Any, Any, Any] | None = None
    registers: Registers | None = None  # committed offsets, per group and key
    # per key an ok assign or subscribe gave: its completion time, process, key (None: the
    # reader kept none, and availability reads them from the history itself)
    assigned: Assigned | None = None


def narrowest_dtype(a: Any) -> Any:
    """The smallest integer type that holds all of a's values (a's own type when it is
    not a signed integer column or is empty): packed bytes shipped to Spark shrink."""
    if a.dtype.kind != "i" or not len(a):
        return a.dtype
    lo, hi = int(a.min()), int(a.max())
    return next(np.dtype(d) for d in (np.int8, np.int16, np.int32, np.int64)
                if np.iinfo(d).min <= lo and hi <= np.iinfo(d).max)


def load_tables(run_dir: Path, *, workers: int = 1, scan: HistoryScan | None = None) -> Tables:
    """Read (strictly) history.jsonl, unless `scan` is its reading already, and
    replicas.jsonl when present; build the columns."""
    from checkers.fastscan import scan_fast

    if scan is None:
        scan = scan_fast(run_dir / "history.jsonl", workers=workers)
    rpath = run_dir / "replicas.jsonl"
    replicas = read_replicas(rpath) if rpath.exists() else None
    return build_tables(scan, replicas)


def op_status(scan: HistoryScan) -> Any:
    """Per line, a client invoke's outcome: OK, FAIL or INFO (never completed: INFO);
    0 on every other line."""
    client = scan.process != NEMESIS_CODE
    status = np.zeros(scan.lines, dtype=np.int8)
    comp = np.flatnonzero((scan.pair >= 0) & client)
    status[scan.pair[comp]] = scan.type[comp]
    inv = np.flatnonzero((scan.type == 0) & client)
    status[inv[status[inv] == 0]] = INFO
    return status


def build_tables(scan: HistoryScan, replicas: Replicas | None,
                 read_values: Any = None, status: Any = None) -> Tables:
    """The columns of a checked scan. `read_values`: the values read that were sent by
    operations ended info (all values read will do), when the records read are not in
    `scan` (Spark holds them); else taken from the scan's records. `status`: op_status
    of the scan, when the caller has it already."""
    n = scan.lines
    client = scan.process != NEMESIS_CODE
    if status is None:
        status = op_status(scan)
    cmp_time = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    comp = np.flatnonzero((scan.pair >= 0) & client)
    cmp_time[scan.pair[comp]] = scan.time[comp]
    inv = np.flatnonzero((scan.type == 0) & client)

    # sends: invoke rows, with the offset their (non-fail) completion gave
    s_inv = scan.type[scan.send_line] == 0
    s_line = scan.send_line[s_inv]
    s_value = scan.send_value[s_inv]
    s_offset = np.full(len(s_line), NO_OFFSET, dtype=np.int64)
    c_rows = np.flatnonzero(~s_inv & (scan.send_offset >= 0)
                            & (scan.type[scan.send_line] != FAIL))
    if len(c_rows):
        by_value = np.argsort(s_value, kind="stable")
        pos = by_value[np.searchsorted(s_value[by_value], scan.send_value[c_rows])]
        s_offset[pos] = scan.send_offset[c_rows]
    s_status = status[s_line]
    s_offset[s_status == FAIL] = NO_OFFSET

    r_line = scan.read_line
    r_op = scan.pair[r_line]
    if read_values is None:
        rv = np.sort(scan.read_value)  # np.unique's hash path is seconds slower at 10M
        read_values = rv[np.r_[True, rv[1:] != rv[:-1]]] if len(rv) else rv
    must = status == OK
    info_sends = s_status == INFO
    hit = info_sends & np.isin(s_value, read_values)
    must[s_line[hit]] = True

    op = inv
    n_sends = np.bincount(s_line, minlength=n)[op]
    f = scan.f[op]
    proc = scan.process[op]
    has_poll = (scan.flags[op] & 2) != 0
    brk = (f == F_CODES["assign"]) | (f == F_CODES["subscribe"]) | (has_poll & (status[op] != OK))
    order = np.lexsort((op, proc))
    seg_sorted = np.cumsum(brk[order])
    seg = np.empty(len(op), dtype=np.int64)
    seg[order] = seg_sorted
    seg_by_line = np.zeros(n, dtype=np.int64)
    seg_by_line[op] = seg

    cols: dict[str, list[Any]] = {c: [] for c in ENTRY_COLUMNS}

    def add(kind: int, m: int, **vals: Any) -> None:
        for c in ENTRY_COLUMNS:
            v = vals.get(c)
            if c == "kind":
                v = np.full(m, kind, dtype=np.int8)
            elif v is None:
                v = np.zeros(m, dtype=np.bool_ if c == "must" else np.int64)
            cols[c].append(v)

    add(KIND_READ, len(r_line), key=scan.read_key, op=r_op, process=scan.process[r_line],
        offset=scan.read_offset, value=scan.read_value, seq=scan.read_seq,
        status=scan.type[r_line].astype(np.int64), must=must[r_op], seg=seg_by_line[r_op])
    add(KIND_SEND, len(s_line), key=scan.send_key[s_inv], op=s_line,
        process=scan.process[s_line], offset=s_offset, value=s_value,
        seq=scan.send_seq[s_inv], status=s_status.astype(np.int64), must=must[s_line])
    nodes: list[str] = []
    if replicas is not None:
        nodes = replicas.nodes
        add(KIND_REPLICA, len(replicas.rec_key), key=replicas.rec_key,
            offset=replicas.rec_offset, value=replicas.rec_value, node=replicas.rec_node)
        code = {nd: i for i, nd in enumerate(nodes)}
        sm = replicas.summaries
        add(KIND_SUMMARY, len(sm), key=np.array([s.key for s in sm], dtype=np.int64),
            offset=np.array([s.leo for s in sm], dtype=np.int64),
            node=np.array([code[s.node] for s in sm], dtype=np.int64),
            hw=np.array([s.hw for s in sm], dtype=np.int64))
    entries = {c: np.concatenate(v) for c, v in cols.items()}
    return Tables(op=op, op_process=proc, op_f=f, op_status=status[op],
                  op_inv_time=scan.time[op], op_cmp_time=cmp_time[op], op_n_sends=n_sends,
                  op_must=must[op], op_seg=seg,
                  entries=entries, has_subscribe=bool((f == F_CODES["subscribe"]).any()),
                  has_replicas=replicas is not None, nodes=nodes, lines=n,
                  registers=registers(scan, status, cmp_time), assigned=_assigned(scan))


def _assigned(scan: HistoryScan) -> Assigned | None:
    """Tables.assigned from the scan's (line, key) rows of ok assigns and subscribes."""
    if scan.assigned is None:
        return None
    line = scan.assigned[:, 0]
    return Assigned(scan.time[line], scan.process[line], scan.assigned[:, 1].copy())
