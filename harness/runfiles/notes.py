"""The few history lines the columns leave out: nemesis operations and error messages.

The strict reader's columns (`HistoryScan`) keep what the safety checks need and
drop the nemesis's verbs and values and every `error` string. Availability needs
those, and they sit on few lines (a nemesis op every few seconds; a failed or
unknown client op), so this reader finds them by their field names in the raw
bytes (`"nemesis"`, `"error"`) and parses only those lines, with orjson, whole.
A 2.6 GB history is one memchr-speed pass, not a second parse of every line.
It assumes a history the strict reader has accepted (it judges nothing).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.runfiles.ops import NEMESIS, HistoryError

FINAL = "final"  # extra key of the harness's own final heal (HISTORY.md allows extra keys)


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """A client completion that carries an `error` (line numbered from 0)."""

    line: int
    time: int
    f: str
    type: str
    error: str


@dataclass(frozen=True, slots=True)
class Notes:
    """nemesis: each nemesis line as a dict (with `line`, its number from 0), in file
    order; errors: every client line with an `error` string, in file order."""

    nemesis: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ErrorLine] = field(default_factory=list)


def _hits(mm: mmap.mmap, needle: bytes) -> list[tuple[int, int, int]]:
    """(line number, start, end) of each line holding needle, in file order, once each."""
    out: list[tuple[int, int, int]] = []
    pos = line = counted = 0
    while (at := mm.find(needle, pos)) >= 0:
        start = mm.rfind(b"\n", 0, at) + 1
        end = mm.find(b"\n", at)
        end = len(mm) if end < 0 else end
        line += mm[counted:start].count(b"\n")
        counted = start
        out.append((line, start, end))
        pos = end + 1
    return out


def read_notes(path: Path | str) -> Notes:
    """The nemesis lines and the error strings of a history (see the module docstring)."""
    notes = Notes()
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, 2) == 0:
                return notes
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                for needle in (b'"nemesis"', b'"error"'):
                    for line, a, b in _hits(mm, needle):
                        try:
                            row = orjson.loads(mm[a:b])
                        except orjson.JSONDecodeError as e:
                            raise HistoryError(path, line + 1, f"not valid JSON: {e}") from None
                        if not isinstance(row, dict):
                            continue
                        if row.get("process") == NEMESIS:
                            if needle == b'"nemesis"':
                                notes.nemesis.append({**row, "line": line})
                        elif needle == b'"error"' and isinstance(row.get("error"), str):
                            notes.errors.append(ErrorLine(line, int(row.get("time", 0)),
                                                          str(row.get("f")), str(row.get("type")),
                                                          row["error"]))
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    return notes


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
