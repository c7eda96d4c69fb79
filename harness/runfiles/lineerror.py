"""The one kind of error a line's parser raises, and the integer check every parser shares.

Kept apart from `strict` so that the readers of other run files and the commit
grammar (`commits`) share them without importing each other.
"""

from __future__ import annotations

from typing import Any

import orjson

NO_OFFSET = -1  # a send whose completion gave no offset; a committed answer of null
_I64 = 2**63


class LineError(Exception):
    """A line's problem; the reader adds file and line number (HistoryError)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def checked_int(v: Any, what: str, *, nonneg: bool = False) -> int:
    """v when it is a (non-negative, if asked) 64-bit integer, else LineError naming `what`."""
    if type(v) is not int:
        raise LineError(f"{what} must be an integer, got {orjson.dumps(v).decode()[:60]}")
    if nonneg and v < 0:
        raise LineError(f"{what} must be non-negative, got {v}")
    if not -(2**63) <= v < 2**63:
        raise LineError(f"{what} out of 64-bit range: {v}")
    return v
