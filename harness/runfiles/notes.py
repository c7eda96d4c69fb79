"""The few history lines the columns leave out: nemesis operations and error messages
(and, when asked, the keys that `ok` assigns and subscribes gave their processes).

The strict reader's columns (`HistoryScan`) keep what the safety checks need and
drop the nemesis's verbs and values and every `error` string. Availability needs
those, and they sit on few lines (a nemesis op every few seconds; a failed or
unknown client op), so this reader finds them by their field names in the raw
bytes (`"nemesis"`, `"error"`) and parses only those lines, with orjson, whole.
A 2.6 GB history costs two fast substring searches (in parallel ranges), not a
second parse of every line. The keys of assigns (`"assign"`, `"subscribe"`: an
operation in ten) the strict reader keeps itself; a reader that does not (DuckDB's,
checkers.fastscan) has them read here, at about 3 s of CPU per 10M lines.
It assumes a history the strict reader has accepted (it judges nothing).
"""

from __future__ import annotations

import itertools
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from harness.runfiles.ops import NEMESIS, HistoryError

FINAL = "final"  # extra key of the harness's own final heal (HISTORY.md allows extra keys)


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """A client completion that carries an `error` (`index`: its line, from 0)."""

    index: int
    time: int
    f: str
    type: str
    error: str


_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True)
class Assigned:
    """The keys `ok` assigns and subscribes gave, a row per key: from `time[i]` (the
    completion) on, `process[i]` reads `key[i]` (HISTORY.md: an assign replaces the
    process's set) until its next assign or subscribe or its end."""

    time: Any = field(default_factory=lambda: _EMPTY)  # numpy int64 arrays
    process: Any = field(default_factory=lambda: _EMPTY)
    key: Any = field(default_factory=lambda: _EMPTY)

    def __len__(self) -> int:
        return len(self.time)

    @staticmethod
    def join(parts: Sequence[Assigned]) -> Assigned:
        return Assigned(*(np.concatenate([getattr(p, c) for p in parts]) if parts else _EMPTY
                          for c in ("time", "process", "key")))


@dataclass(frozen=True, slots=True)
class Notes:
    """nemesis: each nemesis line as a dict, in file order; errors: every client line
    with an `error` string, in file order; assigned: every ok assign and subscribe."""

    nemesis: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ErrorLine] = field(default_factory=list)
    assigned: Assigned = field(default_factory=Assigned)


PARALLEL_BYTES = 64 << 20  # from this size the ranges are searched in parallel


_GROUP_FS = (b'"assign"', b'"subscribe"')


def _range_notes(path: str, a: int, b: int, assigned: bool) -> Notes:
    """The notes of the lines that start in bytes [a, b) of the file."""
    nemesis: list[dict[str, Any]] = []
    errors: list[ErrorLine] = []
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for needle in (b'"nemesis"', b'"error"'):
            for row in _rows(path, _lines(mm, needle, a, b)):
                if row.get("process") == NEMESIS:
                    if needle == b'"nemesis"':
                        nemesis.append(row)
                elif needle == b'"error"' and isinstance(row.get("error"), str):
                    errors.append(ErrorLine(int(row.get("index", -1)), int(row.get("time", 0)),
                                            str(row.get("f")), str(row.get("type")),
                                            row["error"]))
        keys = Assigned.join([_assigned(path, mm, needle, a, b) for needle in _GROUP_FS]
                             if assigned else [])
    return Notes(nemesis, errors, keys)


def _lines(mm: mmap.mmap, needle: bytes, a: int, b: int,
           also: bytes = b"") -> list[tuple[int, bytes]]:
    """(byte offset, line) of the lines starting in [a, b) that hold `needle` (and
    `also`, when given)."""
    out = []
    find, rfind, pos = mm.find, mm.rfind, a
    while (at := find(needle, pos, b)) >= 0:
        start = rfind(b"\n", 0, at) + 1
        end = find(b"\n", at)
        end = len(mm) if end < 0 else end
        pos = end + 1
        if not also or find(also, start, end) >= 0:
            out.append((start, mm[start:end]))
    return out


def _rows(path: str, lines: list[tuple[int, bytes]]) -> list[Any]:
    """The lines parsed, all at once (one orjson call; on an error, one by one to name
    the line's byte offset)."""
    try:
        rows = orjson.loads(b"[" + b",".join(raw for _, raw in lines) + b"]")
    except orjson.JSONDecodeError:
        for start, raw in lines:
            try:
                orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise HistoryError(path, None, f"not valid JSON at byte {start}: {e}") \
                    from None
        raise HistoryError(path, None, "not valid JSON") from None
    return [r for r in rows if isinstance(r, dict)]


def _assigned(path: str, mm: mmap.mmap, needle: bytes, a: int, b: int) -> Assigned:
    """The ok completions of the lines' `f` (needle: `"assign"` or `"subscribe"`)."""
    f = needle.decode().strip('"')
    rows = [r for r in _rows(path, _lines(mm, needle, a, b, also=b'"ok"'))
            if r.get("f") == f and r.get("type") == "ok" and isinstance(r.get("value"), list)]
    n = len(rows)
    count = np.fromiter((len(r["value"]) for r in rows), np.int64, n)
    return Assigned(np.repeat(np.fromiter((r.get("time", 0) for r in rows), np.int64, n), count),
                    np.repeat(np.fromiter((r.get("process", -1) for r in rows), np.int64, n),
                              count),
                    np.fromiter((k for r in rows for k in r["value"]), np.int64,
                                int(count.sum())))


def _ranges(path: str, size: int, parts: int) -> list[tuple[str, int, int]]:
    """[a, b) byte ranges cut at line starts, so that each line lies in one of them."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        cuts = [0]
        for i in range(1, parts):
            nl = mm.find(b"\n", size * i // parts)
            if nl < 0:
                break
            cuts.append(nl + 1)
        cuts.append(size)
    return [(path, x, y) for x, y in itertools.pairwise(cuts) if y > x]


def read_notes(path: Path | str, *, workers: int = 1, assigned: bool = False) -> Notes:
    """The nemesis lines and the error strings of a history (see the module docstring),
    and with `assigned` the keys of its ok assigns and subscribes (the strict reader
    keeps those too: ask here only when the history was read another way); `workers`
    > 1 searches that many byte ranges of a big file in parallel (fork)."""
    p = str(path)
    try:
        size = os.path.getsize(p)
        if size == 0:
            return Notes()
        ranges = [(*r, assigned) for r in _ranges(p, size,
                                                   workers if size >= PARALLEL_BYTES else 1)]
        if len(ranges) > 1:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(len(ranges)) as pool:
                parts = pool.starmap(_range_notes, ranges)
        else:
            parts = [_range_notes(*ranges[0])]
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    return Notes([r for p in parts for r in p.nemesis], [e for p in parts for e in p.errors],
                 Assigned.join([p.assigned for p in parts]))


def line_times(path: Path | str, lines: set[int]) -> dict[int, int]:
    """The `time` of each of these lines (numbered from 0) that the file has: read up to
    the last one asked for, parsing only those (a first anomaly's time, for trends)."""
    out: dict[int, int] = {}
    if not lines:
        return out
    last = max(lines)
    try:
        with open(path, "rb") as fh:
            for i, raw in enumerate(fh):
                if i in lines:
                    try:
                        row = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(row, dict) and type(row.get("time")) is int:
                        out[i] = row["time"]
                if i >= last:
                    break
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    return out
