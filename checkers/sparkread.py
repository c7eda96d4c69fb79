"""Spark reads history.jsonl itself: the driver never holds the records read.

On a classic session (local, or a standalone cluster whose executors see the
file at the same path), in four steps:
1. ranges: each task takes a byte range of the file (SPLIT_BYTES) and moves both ends
   to line starts (a range owns the lines that begin in it);
2. parse: each task parses its lines with the strict reader (`harness.runfiles.strict`:
   the same rules, the same `file:line: problem`), its line numbers counted from its
   range's first line (the driver adds the lines of the ranges before, when it has
   their heads: no pass that only counts lines), and writes its items into one
   shuffle by key: the records read (packed per key) stay on the executors; the driver
   reads each range's fixed-width line heads, send micro-ops, committed-offset rows
   (few: operations, not records), distinct values read, and per poll and key the
   (line, key, highest offset) of the records it returned (availability's per-key
   polls: one per poll and key, not per record);
3. the driver runs the cross-line checks (the same `check_lines` and `check_sends`)
   and builds the operation columns (which sends of operations ended info were read
   decides what must have happened);
4. that shuffle's partitions, joined with the driver's send and replica rows split
   the same way, bring each key's records and rows together; the facts of the
   operations records belong to travel as a broadcast of compact arrays over the
   completions that polled; `check_key` answers counts, examples and edges.

Driver memory: about 40 bytes per line (heads, pairing, operation columns) plus the
send and replica rows and a triple per poll and key read, never the records read, so
it does not grow with poll sizes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from checkers.logcheck import OUT_COLUMNS, check_key, in_sorted
from checkers.pollwaits import runs
from checkers.tables import (
    ENTRY_COLUMNS,
    INFO,
    KIND_READ,
    KIND_SEND,
    OK,
    Tables,
    build_tables,
    narrowest_dtype,
    op_status,
)
from harness.runfiles import (
    HistoryError,
    HistoryScan,
    check_lines,
    check_sends,
    merge_commits,
    read_replicas,
)

SPLIT_BYTES = 64 << 20  # one task's share of the file
MIN_BYTES = 256 << 20  # below this the driver reads faster than a job starts
HEAD = ("index", "time", "type", "process", "f", "flags")
SEND = ("line", "key", "value", "offset", "seq")
READ = ("line", "key", "offset", "value", "seq")


def narrow(a: Any) -> Any:
    """a in the smallest integer type that holds its values (bytes shipped shrink)."""
    return a.astype(narrowest_dtype(a), copy=False)


def pack(a: Any) -> tuple[bytes, str, int]:
    """a as (bytes, type, base): an integer column less its least value (the base), in
    the smallest type that holds the rest, so values near 10**17 travel in 4 bytes."""
    a = np.ascontiguousarray(a)
    base = 0
    if a.dtype.kind == "i" and len(a):
        lo, hi = int(a.min()), int(a.max())
        if hi - lo < 2**63:  # else the differences would not fit
            base = lo
    a = narrow(a - base if base else a)
    return a.tobytes(), a.dtype.str, base


def unpack(p: tuple[bytes, str, int], dtype: Any = np.int64) -> Any:
    v = np.frombuffer(p[0], dtype=p[1]).astype(dtype)
    return v + p[2] if p[2] else v


# -- executor side ---------------------------------------------------------------------


def _line_start(fh: Any, pos: int, size: int) -> int:
    """The first line start at or after pos (pos itself when a line begins there)."""
    if pos <= 0:
        return 0
    if pos >= size:
        return size
    fh.seek(pos - 1)
    at = pos - 1
    while block := fh.read(1 << 16):
        i = block.find(b"\n")
        if i >= 0:
            return at + int(i) + 1
        at += len(block)
    return size


def parse_range(path: str, chunk: int, start: int, end: int) -> Iterator[Any]:
    """One range parsed by the strict reader, its lines numbered from 0 (error and send
    lines included): ("h", chunk, heads, sends, error, values read, commits, groups,
    the (line, key, highest offset) of each poll's records of each key, the (line, key)
    of each key an ok assign or subscribe gave) for the driver,
    then ("r", key, chunk, columns) per key of the records read.
    The values read, once each (a few sends' worth: each record is read by many polls),
    let the driver tell which info sends happened without another pass."""
    from harness.runfiles.strict import parse_chunk

    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        a, b = _line_start(fh, start, size), _line_start(fh, end, size)
    err, index, t, typ, proc, f, flags, send, read, commit, groups, assigned = parse_chunk(
        path, a, b, 0)
    yield ("h", chunk, [pack(c) for c in (index, t, typ, proc, f, flags)],
           [pack(send[:, i]) for i in range(len(SEND))], err, _seen(read).tobytes(), commit,
           groups, [pack(c) for c in runs(read[:, 0], read[:, 1], read[:, 2])],
           [pack(assigned[:, i]) for i in range(2)])
    if err is not None or not len(read):
        return
    # stable, and a radix sort when the keys fit 16 bits (numpy's choice for them)
    order = np.argsort(narrow(read[:, 1]), kind="stable")
    read = read[order]
    keys = read[:, 1]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist()
    for s, e in zip(starts, [*starts[1:], len(keys)], strict=True):
        part = read[s:e]
        yield ("r", int(keys[s]), chunk, {c: pack(part[:, i]) for i, c in enumerate(READ)
                                          if c != "key"})


def _seen(read: Any) -> Any:
    """A range's values read, once each and sorted (for the info-send lookup)."""
    v = np.sort(read[:, 3])
    return v[np.r_[True, v[1:] != v[:-1]]] if len(v) else v


def read_entries(ctx: dict[str, Any], cols: dict[str, Any]) -> dict[str, Any]:
    """Entry columns (ENTRY_COLUMNS) of records read, as `build_tables` makes them:
    op, process, status, must and seg from the context of their lines (`read_context`)."""
    at = np.searchsorted(ctx["line"], cols["line"])
    n = len(at)
    zeros = np.zeros(n, np.int64)
    return {"kind": np.full(n, KIND_READ, np.int8), "key": cols["key"],
            "op": ctx["pair"][at].astype(np.int64),
            "process": ctx["process"][at].astype(np.int64),
            "offset": cols["offset"], "value": cols["value"], "seq": cols["seq"],
            "status": ctx["type"][at].astype(np.int64), "must": ctx["must"][at],
            "seg": ctx["seg"][at].astype(np.int64), "node": zeros, "hw": zeros.copy()}


def check_group(key: int, rows: Iterable[Any], ctx: dict[str, Any], dtypes: dict[str, str],
                has_replicas: bool, nodes: list[str]) -> dict[str, list[Any]]:
    """One key's records (from the ranges, in file order) and its send and replica rows
    (from the driver, in order): check_key's answer as columns."""
    from checkers.spark import out_frame

    reads = sorted((r for r in rows if r[0] == "r"), key=lambda r: r[2])
    ents = [r for r in rows if r[0] == "e"]
    parts: list[dict[str, Any]] = []
    if reads:
        cols = {c: np.concatenate([unpack(r[3][c]) for r in reads])
                for c in READ if c not in ("key", "line")}
        cols["line"] = np.concatenate([unpack(r[3]["line"]) + ctx["first"][r[2]]
                                       for r in reads])
        cols["key"] = np.full(len(cols["line"]), key, np.int64)
        parts.append(read_entries(ctx, cols))
    for r in ents:
        parts.append({c: unpack(r[3][c], dtypes[c]) for c in ENTRY_COLUMNS})
    e = {c: np.concatenate([p[c] for p in parts]).astype(dtypes[c], copy=False)
         for c in ENTRY_COLUMNS}
    return out_frame(key, check_key(key, e, has_replicas, nodes))


# -- driver side -----------------------------------------------------------------------


def read_by_any(values: Any, ranges: list[Any]) -> Any:
    """Which of `values` some range read, given each range's distinct values read,
    sorted: a binary search per value and range, instead of sorting every range's
    values together (tens of millions at 10M lines) as np.isin would."""
    hit = np.zeros(len(values), bool)
    for v in ranges:
        hit |= in_sorted(values, v)
    return hit


def read_context(scan: HistoryScan, t: Tables, first: Any) -> dict[str, Any]:
    """What the records read on a line need of their operation, for the lines that can
    hold records (completions with a poll: a fifth of a typical history's lines), in
    compact arrays: every Python worker gets a copy. `first`: each range's first line."""
    line = np.flatnonzero(((scan.flags & 2) != 0) & (scan.type != 0))
    must = np.zeros(scan.lines, bool)
    must[t.op] = t.op_must
    seg = np.zeros(scan.lines, np.int64)
    seg[t.op] = t.op_seg
    pair = scan.pair[line]
    op = np.maximum(pair, 0)
    return {"first": first, "line": narrow(line), "pair": narrow(pair),
            "process": narrow(scan.process[line]), "type": scan.type[line], "must": must[op],
            "seg": narrow(seg[op])}


def _ranges(path: str, split_bytes: int) -> list[tuple[int, int, int]]:
    """(chunk, start, end) per range of bytes (a task moves both ends to line starts)."""
    size = os.path.getsize(path)
    cuts = list(range(0, size, split_bytes)) or [0]
    return [(i, c, min(size, c + split_bytes)) for i, c in enumerate(cuts)]


class KeyPartitions:
    """Where an item of the parse goes in its one shuffle: a key's records to partition
    key % keys (several keys a partition), every range's head to the last partition,
    which the driver alone reads. One instance serves both sides of the per-key job's
    union: Spark keeps that union partitioned (no second shuffle) only when both sides
    were split by the same function object."""

    def __init__(self, keys: int) -> None:
        self.keys = keys
        self.total = keys + 1

    def __call__(self, key: int) -> int:
        return self.keys if key < 0 else key % self.keys


def _keyed(item: Any) -> tuple[int, Any]:
    """A parse item with its shuffle key: the record's key, or -1 for a range's head."""
    return (item[1] if item[0] == "r" else -1), item


def load_and_check(spark: Any, run_dir: Path, *,
                   split_bytes: int = SPLIT_BYTES) -> tuple[Tables, dict[str, Any],
                                                            dict[str, float]]:
    """Tables (operation columns only) and the log job's answer, Spark reading the
    history; HistoryError for bad input, exactly as the strict reader raises it.

    The parse tasks write their items straight into the shuffle by key (KeyPartitions):
    the driver's job reads only the heads' partition, and the per-key job reuses the
    same shuffle files, so the records read cross from Python to the JVM and back once.
    """
    t0 = time.monotonic()
    sc = spark.sparkContext
    path = str(Path(run_dir) / "history.jsonl")
    try:
        ranges = _ranges(path, split_bytes)
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    parts = KeyPartitions(8 * sc.defaultParallelism)
    parsed = sc.parallelize(ranges, len(ranges)).flatMap(
        lambda r: map(_keyed, parse_range(path, *r))).partitionBy(parts.total, parts)
    heads = sorted(sc.runJob(parsed, lambda it: [v for _, v in it], [parts.keys]),
                   key=lambda h: h[1])
    t1 = time.monotonic()
    sizes = [len(np.frombuffer(h[2][0][0], h[2][0][1])) for h in heads]
    first = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    for h, line in zip(heads, first.tolist(), strict=True):
        if h[4] is not None:
            raise HistoryError(path, line + h[4][0] + 1, h[4][1])
    cols = [np.concatenate([unpack(h[2][i]) for h in heads]) for i in range(len(HEAD))]
    index, tm, typ, proc, f, flags = cols
    typ, f, flags = typ.astype(np.int8), f.astype(np.int8), flags.astype(np.int8)
    send = np.stack(_line_rows(heads, 3, len(SEND), first), axis=1)
    read = [np.frombuffer(h[5], np.int64) for h in heads]
    polls = _line_rows(heads, 8, 3, first)
    commit, groups = merge_commits([(h[6] + [first[k], 0, 0, 0, 0], h[7])
                                    for k, h in enumerate(heads)])
    assigned = np.stack(_line_rows(heads, 9, 2, first), axis=1)
    del heads, cols
    pair = check_lines(path, index, tm, typ, proc, f)
    check_sends(path, send, typ, pair)
    empty = np.zeros(0, np.int64)
    scan = HistoryScan(path, tm, typ, proc, f, flags, pair, send[:, 0], send[:, 1],
                       send[:, 2], send[:, 3], send[:, 4], empty, empty, empty, empty,
                       empty, commit, groups, assigned)
    del index, send
    rpath = Path(run_dir) / "replicas.jsonl"
    replicas = read_replicas(rpath) if rpath.exists() else None
    status = op_status(scan)
    info = np.unique(scan.send_value[status[scan.send_line] == INFO])
    hits = info[read_by_any(info, read)]
    del read
    t = build_tables(scan, replicas, read_values=hits, status=status)
    t2 = time.monotonic()
    log = _log_job(sc, parsed, parts, scan, t, first)
    # the send rows were the job's input; the verdict reads the operation columns
    sends = t.entries["kind"] == KIND_SEND  # availability reads their keys
    t.sends = (t.entries["op"][sends], t.entries["key"][sends])
    line, key, top = polls
    t.reads = (t.entries["offset"][sends], key.astype(np.int64), scan.time[line],
               top.astype(np.int64), scan.type[line] == OK)
    t.entries = {c: v[:0] for c, v in t.entries.items()}
    t3 = time.monotonic()
    return t, log, {"parse_s": round(t1 - t0, 3), "driver_s": round(t2 - t1, 3),
                    "spark_job_s": round(t3 - t2, 3)}


def _line_rows(heads: list[Any], slot: int, n: int, first: Any) -> list[Any]:
    """The n packed columns at `slot` of every range's head, joined, the first (a line
    numbered from its range's start) renumbered from the file's start."""
    return [np.concatenate([unpack(h[slot][i]) + (first[k] if i == 0 else 0)
                            for k, h in enumerate(heads)]) for i in range(n)]


def check_partition(items: Iterable[tuple[int, Any]], ctx: dict[str, Any],
                    dtypes: dict[str, str], has_replicas: bool,
                    nodes: list[str]) -> Iterator[tuple[int, dict[str, list[Any]]]]:
    """One partition of the per-key job: its items grouped by key (heads skipped), each
    key checked by check_group."""
    by_key: dict[int, list[Any]] = {}
    for key, item in items:
        if key >= 0:
            by_key.setdefault(key, []).append(item)
    for key in sorted(by_key):
        yield key, check_group(key, by_key.pop(key), ctx, dtypes, has_replicas, nodes)


def _log_job(sc: Any, parsed: Any, parts: KeyPartitions, scan: HistoryScan, t: Tables,
             first: Any) -> dict[str, Any]:
    """The per-key job on the parse's shuffle, joined by partition with the driver's
    rows of each key; the answer in key order."""
    from checkers.spark import key_slices

    dtypes = {c: t.entries[c].dtype.str for c in ENTRY_COLUMNS}
    ents = [(key, ("e", key, 0, {c: pack(t.entries[c][idx]) for c in ENTRY_COLUMNS}))
            for key, idx in key_slices(t)]
    ctx = sc.broadcast(read_context(scan, t, first))
    has_replicas, nodes = t.has_replicas, list(t.nodes)
    try:
        given = sc.parallelize(ents, max(1, min(sc.defaultParallelism, len(ents))))
        del ents
        joined = parsed.union(given.partitionBy(parts.total, parts))
        if joined.getNumPartitions() != parts.total:  # Spark would have to keep them apart
            raise RuntimeError("the per-key job's union lost its partitioning")
        answers = joined.mapPartitions(
            lambda it: check_partition(it, ctx.value, dtypes, has_replicas, nodes)).collect()
    finally:
        ctx.destroy()
    out: dict[str, list[Any]] = {c: [] for c in OUT_COLUMNS}
    for _, part in sorted(answers, key=lambda a: a[0]):
        for c in OUT_COLUMNS:
            out[c] += part[c]
    return out


def wants_spark_read(run_dir: Path, reader: str = "auto") -> bool:
    """Whether Spark should read this history (`reader`, see harness.spec.READERS):
    always for "spark", never for "driver", for "auto" when it has MIN_BYTES or more.
    It can only on a classic session (`classic`)."""
    if reader == "driver":
        return False
    try:
        size = (Path(run_dir) / "history.jsonl").stat().st_size
    except OSError:
        return False
    return reader == "spark" or size >= MIN_BYTES


def classic(spark: Any) -> bool:
    """A classic session (Spark Connect has no broadcast: there the driver reads)."""
    from pyspark.sql import SparkSession

    return isinstance(spark, SparkSession)
