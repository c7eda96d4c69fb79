"""The few history lines the columns leave out: nemesis operations and error messages.

The strict reader's columns (`HistoryScan`) keep what the safety checks need and
drop the nemesis's verbs and values and every `error` string. Availability needs
those, and they sit on few lines (a nemesis op every few seconds; a failed or
unknown client op), so this reader finds them by their field names in the raw
bytes (`"nemesis"`, `"error"`) and parses only those lines, with orjson, whole.
A 2.6 GB history costs two fast substring searches (in parallel ranges), not a
second parse of every line.
It assumes a history the strict reader has accepted (it judges nothing).
"""

from __future__ import annotations

import itertools
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Notes:
    """nemesis: each nemesis line as a dict, in file order; errors: every client line
    with an `error` string, in file order."""

    nemesis: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ErrorLine] = field(default_factory=list)


PARALLEL_BYTES = 64 << 20  # from this size the ranges are searched in parallel


def _range_notes(path: str, a: int, b: int) -> tuple[list[dict[str, Any]], list[ErrorLine]]:
    """The notes of the lines that start in bytes [a, b) of the file."""
    nemesis: list[dict[str, Any]] = []
    errors: list[ErrorLine] = []
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for needle in (b'"nemesis"', b'"error"'):
            pos = a
            while (at := mm.find(needle, pos, b)) >= 0:
                start = mm.rfind(b"\n", 0, at) + 1
                end = mm.find(b"\n", at)
                end = len(mm) if end < 0 else end
                pos = end + 1
                try:
                    row = orjson.loads(mm[start:end])
                except orjson.JSONDecodeError as e:
                    raise HistoryError(path, None, f"not valid JSON at byte {start}: {e}") \
                        from None
                if not isinstance(row, dict):
                    continue
                if row.get("process") == NEMESIS:
                    if needle == b'"nemesis"':
                        nemesis.append(row)
                elif needle == b'"error"' and isinstance(row.get("error"), str):
                    errors.append(ErrorLine(int(row.get("index", -1)), int(row.get("time", 0)),
                                            str(row.get("f")), str(row.get("type")),
                                            row["error"]))
    return nemesis, errors


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


def read_notes(path: Path | str, *, workers: int = 1) -> Notes:
    """The nemesis lines and the error strings of a history (see the module docstring);
    `workers` > 1 searches that many byte ranges of a big file in parallel (fork)."""
    p = str(path)
    try:
        size = os.path.getsize(p)
        if size == 0:
            return Notes()
        ranges = _ranges(p, size, workers if size >= PARALLEL_BYTES else 1)
        if len(ranges) > 1:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(len(ranges)) as pool:
                parts = pool.starmap(_range_notes, ranges)
        else:
            parts = [_range_notes(*ranges[0])]
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    return Notes([r for n, _ in parts for r in n], [e for _, er in parts for e in er])


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
