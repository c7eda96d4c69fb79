"""The strict reader of history.jsonl: columns checked against every rule of the contract.

One line at a time is checked for shape (in parallel for big files); the checks
across lines (index order, time, invoke/completion pairing, values sent once)
run vectorised over the whole file afterwards, in `check_lines` and
`check_sends`, which the checkers' DuckDB reader runs on its own columns too.
Anything outside the contract raises HistoryError naming file, line and problem.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.runfiles.commits import (
    COMMIT_COLUMNS,
    DEFAULT_GROUP,
    commit_micro_op,
    committed_micro_op,
    merge_commits,
)
from harness.runfiles.lineerror import _I64, NO_OFFSET, LineError, checked_int

__all__ = ["CLIENT_FS", "F_CODES", "F_NEMESIS", "NEMESIS_CODE", "NO_OFFSET", "TYPE_CODES",
           "TYPE_NAMES", "HistoryScan", "LineError", "check_lines", "check_sends",
           "checked_int", "parse_chunk", "parse_commit_lines", "read_history",
           "scan_history"]
from harness.runfiles.crosslines import check_lines, check_sends
from harness.runfiles.ops import NEMESIS, HistoryError, Op
from harness.runfiles.vocab import (
    CLIENT_FS,
    F_CODES,
    F_NEMESIS,
    NEMESIS_CODE,
    TYPE_CODES,
    TYPE_NAMES,
)

_F_TXN, _F_COMMIT, _F_COMMITTED = F_CODES["txn"], F_CODES["commit"], F_CODES["committed"]
_T_OK = TYPE_CODES["ok"]


@dataclass
class HistoryScan:
    """history.jsonl as columns, checked against the contract.

    Per line: index, time, type code, process (-1 = nemesis), f code, and
    `flags` (bit 0: seek_to_beginning; bit 1: holds a poll micro-op).
    `pair[i]` is the line of the invoke a completion i answers (-1 for invokes).
    Send micro-ops of every line are in `send_*` (offset NO_OFFSET when not
    given), records read in `read_*`; `*_seq` is the micro-op/record order inside its line.
    `commit` holds the rows of `commit` and `committed` micro-ops (COMMIT_COLUMNS; an
    answer of null has offset NO_OFFSET), their group a position in `groups`; they are
    few (an operation, not a record, each), so they stay rows. `assigned` holds a row
    (line, key) per key of each `ok` assign or subscribe (None: this reader did not
    keep them).
    """

    path: str
    time: Any  # numpy int64 arrays from here on
    type: Any
    process: Any
    f: Any
    flags: Any
    pair: Any
    send_line: Any
    send_key: Any
    send_value: Any
    send_offset: Any
    send_seq: Any
    read_line: Any
    read_key: Any
    read_offset: Any
    read_value: Any
    read_seq: Any
    commit: Any = None  # (n, 5) int64 rows; None: none
    groups: tuple[str, ...] = (DEFAULT_GROUP,)
    assigned: Any = None  # (n, 2) int64 rows: line, key; None: not read

    def __post_init__(self) -> None:
        if self.commit is None:
            import numpy as np

            self.commit = np.zeros((0, len(COMMIT_COLUMNS)), np.int64)

    @property
    def lines(self) -> int:
        return len(self.time)


class _Cols:
    """Column buffers one parser fills (plain lists: fastest to append)."""

    def __init__(self) -> None:
        self.head: list[int] = []  # flat: index, time, type, process, f, flags
        self.send: list[int] = []  # flat: line, key, value, offset, seq
        self.read: list[int] = []  # flat: line, key, offset, value, seq
        self.commit: list[int] = []  # flat: COMMIT_COLUMNS
        self.assigned: list[int] = []  # flat: line, key (ok assigns and subscribes)
        self.groups: dict[str, int] = {DEFAULT_GROUP: 0}
        self.has_poll = False  # the line being parsed holds a poll micro-op


def _micro_ops(value: Any, line: int, completion: bool, cols: _Cols, fc: int = 0,
               group: int = 0) -> None:
    if value is None and completion:
        return
    if type(value) is not list:
        raise LineError("value must be a list of micro-operations")
    seq = 0
    rseq = 0
    for m in value:
        if type(m) is not list or not m:
            shown = orjson.dumps(m).decode()[:60]
            raise LineError(f"micro-op must be a non-empty list, got {shown}")
        kind = m[0]
        if fc >= _F_COMMIT and kind != CLIENT_FS[fc]:
            shown = orjson.dumps(kind).decode()[:40]
            raise LineError(f"a {CLIENT_FS[fc]} operation holds only {CLIENT_FS[fc]} "
                            f"micro-ops, not {shown}")
        if kind == "send":
            if len(m) != 3:
                raise LineError("send micro-op must be [\"send\", key, value]")
            key = m[1]
            if not (type(key) is int and 0 <= key < _I64):
                checked_int(key, "send key", nonneg=True)
            v = m[2]
            offset = NO_OFFSET
            if type(v) is list:
                if not completion:
                    raise LineError("a send in an invoke must be [\"send\", key, value]")
                if len(v) != 2:
                    raise LineError("a completed send must be [\"send\", key, [offset, value]]")
                if v[0] is not None:
                    offset = checked_int(v[0], "send offset", nonneg=True)
                v = v[1]
            if not (type(v) is int and -_I64 <= v < _I64):
                checked_int(v, "sent value")
            cols.send.extend((line, key, v, offset, seq))
            seq += 1
        elif kind == "poll":
            cols.has_poll = True
            if len(m) == 1:
                continue
            if not completion:
                raise LineError("a poll in an invoke must be [\"poll\"]")
            if len(m) != 2 or type(m[1]) is not dict:
                raise LineError("a completed poll must be [\"poll\", {key: [[offset, value]]}]")
            for ks, recs in m[1].items():
                if not ks.isdigit():
                    raise LineError(f"poll key must be a non-negative integer string, got {ks!r}")
                key = int(ks)
                if type(recs) is not list:
                    raise LineError(f"poll records of key {ks} must be a list")
                append = cols.read.extend
                for r in recs:
                    if type(r) is list and len(r) == 2:
                        o, v = r
                        if type(o) is int and type(v) is int and 0 <= o < _I64 \
                                and -_I64 <= v < _I64:
                            append((line, key, o, v, rseq))
                            rseq += 1
                            continue
                    if type(r) is not list or len(r) != 2:
                        raise LineError(f"poll record of key {ks} must be [offset, value]")
                    checked_int(r[0], "read offset", nonneg=True)
                    checked_int(r[1], "read value")
        elif kind == "commit" and fc in (_F_TXN, _F_COMMIT):
            commit_micro_op(m, line, group, cols.commit)
        elif kind == "committed" and fc == _F_COMMITTED:
            committed_micro_op(m, line, completion, group, cols.commit)
        elif kind == "commit":
            raise LineError("a commit micro-op belongs in a commit or txn operation")
        elif kind == "committed":
            raise LineError("a committed micro-op belongs in a committed operation")
        else:
            raise LineError(f"unknown micro-op {orjson.dumps(kind).decode()[:40]}")


def _parse_line(raw: bytes, line: int, cols: _Cols) -> None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise LineError(f"invalid JSON (truncated line?): {e}") from None
    if type(obj) is not dict:
        raise LineError("not a JSON object")
    try:
        index, time, typ, p, f, value = (obj["index"], obj["time"], obj["type"],
                                         obj["process"], obj["f"], obj["value"])
    except KeyError as e:
        raise LineError(f"missing field {e.args[0]!r}") from None
    if not (type(index) is int and 0 <= index < _I64):
        checked_int(index, "index", nonneg=True)
    if not (type(time) is int and 0 <= time < _I64):
        checked_int(time, "time", nonneg=True)
    t = TYPE_CODES.get(typ) if type(typ) is str else None
    if t is None:
        raise LineError(f"unknown type {orjson.dumps(typ).decode()[:40]}")
    if type(f) is not str:
        raise LineError("f must be a string")
    flags = 1 if obj.get("seek_to_beginning") is True else 0
    if p == NEMESIS:
        pc, fc = NEMESIS_CODE, F_NEMESIS
        if type(value) is not dict and not (t != 0 and value is None):
            raise LineError("a nemesis value must be an object")
    else:
        pc = p if type(p) is int and 0 <= p < _I64 else checked_int(p, "process", nonneg=True)
        fc = F_CODES.get(f, -1)
        if fc < 0:
            raise LineError(f"unknown client f {f!r}")
        if fc <= 2 or fc >= _F_COMMIT:
            cols.has_poll = False
            group = 0
            if fc == _F_TXN or fc >= _F_COMMIT:
                g = obj.get("group", DEFAULT_GROUP)
                if type(g) is not str:
                    raise LineError(f"group must be a string, got {orjson.dumps(g).decode()[:40]}")
                group = cols.groups.setdefault(g, len(cols.groups))
            _micro_ops(value, line, t != 0, cols, fc, group)
            flags |= 2 if cols.has_poll else 0
        elif fc <= 4:
            if not (value is None and t != 0):
                if type(value) is not list:
                    raise LineError(f"{f} value must be a list of keys")
                for k in value:
                    checked_int(k, f"{f} key", nonneg=True)
                if t == _T_OK:
                    for k in value:
                        cols.assigned.extend((line, k))
        elif value is not None:
            raise LineError("crash value must be null")
    cols.head.extend((index, time, t, pc, fc, flags))


BLOCK_LINES = 250_000  # lines parsed before their Python lists become numpy arrays


def parse_chunk(path: str, start: int, end: int, first_line: int) -> tuple[Any, ...]:
    """Parse bytes [start, end) of the file, whose first line is number first_line (0-based).

    The lines in the common shapes are parsed by compiled code (`fastlines`); every
    other line by `_parse_line` here, which alone decides what is wrong. Returns (error
    or None, index, time, type, process, f, flags, send rows, read rows, commit rows,
    group names, assigned rows), the columns covering the lines before the first error;
    commit rows (COMMIT_COLUMNS) name groups by their position in this chunk's group
    names; assigned rows are (line, key) of the keys of ok assigns and subscribes.
    """
    import numpy as np

    from harness.runfiles.fastlines import scan_lines

    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    head, send, read, commit, assigned, declined = scan_lines(data)
    del data
    err: tuple[int, str] | None = None
    groups: list[str] = [DEFAULT_GROUP]  # the compiled parser's rows are all in it
    if declined:
        err, slow_send, slow_read, slow_commit, groups, slow_assigned = _parse_declined(
            declined, head)
        send = _merge_rows(send, slow_send)
        read = _merge_rows(read, slow_read)
        commit = _merge_rows(commit, slow_commit)
        assigned = _merge_rows(assigned, slow_assigned)
    if err is not None:  # the columns cover the lines before it
        cut = err[0]
        head, send, read = head[:cut], send[send[:, 0] < cut], read[read[:, 0] < cut]
        commit, assigned = commit[commit[:, 0] < cut], assigned[assigned[:, 0] < cut]
    for rows in (send, read, commit, assigned):
        rows[:, 0] += first_line
    if err is not None:
        err = (err[0] + first_line, err[1])
    return (err, head[:, 0].copy(), head[:, 1].copy(), head[:, 2].astype(np.int8),
            head[:, 3].copy(), head[:, 4].astype(np.int8), head[:, 5].astype(np.int8), send,
            read, commit, groups, assigned)


def _parse_declined(declined: list[tuple[int, bytes]], head: Any) -> tuple[Any, ...]:
    """The lines the compiled parser left, by the per-line code: their heads written into
    `head`, their rows returned; (error or None, send, read, commit, group names,
    assigned), lines
    numbered as given, up to the first line in error (its rows may be partly there).
    In blocks of BLOCK_LINES with the cyclic GC off: millions of live Python ints (a
    history in shapes the compiled code declines) otherwise make it superlinear."""
    import gc

    import numpy as np

    sends: list[Any] = [np.empty((0, 5), np.int64)]
    reads: list[Any] = [np.empty((0, 5), np.int64)]
    commits: list[Any] = [np.empty((0, len(COMMIT_COLUMNS)), np.int64)]
    assigned: list[Any] = [np.empty((0, 2), np.int64)]
    groups: dict[str, int] = {DEFAULT_GROUP: 0}
    err: tuple[int, str] | None = None
    enabled = gc.isenabled()
    gc.disable()
    try:
        for b0 in range(0, len(declined), BLOCK_LINES):
            cols = _Cols()
            cols.groups = groups
            lines: list[int] = []
            for line, raw in declined[b0:b0 + BLOCK_LINES]:
                if not raw.strip():
                    err = (line, "empty line")
                    break
                try:
                    _parse_line(raw, line, cols)
                except LineError as e:
                    err = (line, e.problem)
                    break
                lines.append(line)
            if lines:
                head[lines] = np.array(cols.head, np.int64).reshape(-1, 6)
            sends.append(np.fromiter(cols.send, np.int64, len(cols.send)).reshape(-1, 5))
            reads.append(np.fromiter(cols.read, np.int64, len(cols.read)).reshape(-1, 5))
            commits.append(np.fromiter(cols.commit, np.int64, len(cols.commit))
                           .reshape(-1, len(COMMIT_COLUMNS)))
            assigned.append(np.fromiter(cols.assigned, np.int64, len(cols.assigned))
                            .reshape(-1, 2))
            if err is not None:
                break
    finally:
        if enabled:
            gc.enable()
    return (err, np.concatenate(sends), np.concatenate(reads), np.concatenate(commits),
            list(groups), np.concatenate(assigned))


def parse_commit_lines(raws: list[bytes]) -> tuple[list[int], Any, tuple[str, ...]] | None:
    """The commit rows of whole lines given apart from the rest of the file (a faster
    reader's lines that hold commit or committed micro-ops), numbered by their `index`:
    (each line's index, rows, group names), or None when some line breaks the contract
    (the caller then lets `scan_history` name it). The compiled parser takes the lines
    it can; the per-line code the others."""
    import numpy as np

    from harness.runfiles.fastlines import scan_lines

    if any(b"\n" in raw for raw in raws):
        return None
    head, _, _, fast, _, declined = scan_lines(b"".join(raw + b"\n" for raw in raws))
    cols = _Cols()
    for line, raw in declined:
        n = len(cols.commit)
        try:
            _parse_line(raw, -1, cols)
        except LineError:
            return None
        head[line, 0] = cols.head[-6]
        for i in range(n, len(cols.commit), len(COMMIT_COLUMNS)):
            cols.commit[i] = line
    slow = np.array(cols.commit, np.int64).reshape(-1, len(COMMIT_COLUMNS))
    rows = _merge_rows(fast, slow)
    rows[:, 0] = head[rows[:, 0], 0]  # each line's index
    return head[:, 0].tolist(), rows, tuple(cols.groups)


def _merge_rows(fast: Any, slow: Any) -> Any:
    """Rows of both parsers in line order (each line's rows come from one of them, in
    their own order)."""
    import numpy as np

    if not len(slow):
        return fast
    rows = np.concatenate([fast, slow])
    return rows[np.argsort(rows[:, 0], kind="stable")]


def _chunks(path: str, parts: int) -> list[tuple[int, int, int]]:
    """Split the file at line ends into (start, end, first_line) ranges."""
    import mmap

    size = os.path.getsize(path)
    if size == 0:
        return [(0, 0, 0)]  # no operation: a history with nothing to judge (unknown)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        bounds = [0]
        for i in range(1, parts):
            cut = mm.find(b"\n", max(bounds[-1], size * i // parts))
            if cut < 0 or cut + 1 >= size:
                break
            bounds.append(cut + 1)
        bounds.append(size)
        out = []
        line = 0
        for a, b in itertools.pairwise(bounds):
            out.append((a, b, line))
            line += mm[a:b].count(b"\n") if parts > 1 else 0
    return out


def scan_history(path: Path | str, *, workers: int = 1) -> HistoryScan:
    """Read and check history.jsonl into columns; raise HistoryError on any breach.

    `workers` > 1 parses ranges of the file in that many processes (fork).
    """
    import numpy as np

    path = str(path)
    try:
        chunks = _chunks(path, max(1, workers) if os.path.getsize(path) > 1 << 22 else 1)
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    if len(chunks) > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(len(chunks)) as pool:
            parts = pool.starmap(parse_chunk, [(path, *c) for c in chunks])
    else:
        parts = [parse_chunk(path, *c) for c in chunks]
    for part in parts:
        if part[0] is not None:
            raise HistoryError(path, part[0][0] + 1, part[0][1])
    cat = [np.concatenate([p[i] for p in parts]) for i in range(1, 9)]
    index, time, typ, proc, f, flags, send, read = cat
    commit, groups = merge_commits([(p[9], p[10]) for p in parts])
    pair = check_lines(path, index, time, typ, proc, f)
    check_sends(path, send, typ, pair)
    return HistoryScan(path, time, typ, proc, f, flags, pair,
                       send[:, 0], send[:, 1], send[:, 2], send[:, 3], send[:, 4],
                       read[:, 0], read[:, 1], read[:, 2], read[:, 3], read[:, 4],
                       commit, groups, np.concatenate([p[11] for p in parts]))


def read_history(path: Path | str) -> list[Op]:
    """Every line of a checked history.jsonl as an Op (extra keys kept in `extra`)."""
    scan_history(path)
    ops: list[Op] = []
    base = {"index", "time", "type", "process", "f", "value", "error"}
    with open(path, "rb") as fh:
        for raw in fh:
            o = orjson.loads(raw)
            err = o.get("error")
            ops.append(Op(type=o["type"], process=o["process"], f=o["f"], value=o["value"],
                          time=o["time"], index=o["index"],
                          error=None if err is None else str(err),
                          extra={k: v for k, v in o.items() if k not in base}))
    return ops
