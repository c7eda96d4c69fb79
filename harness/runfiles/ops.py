"""The `Op` record (one line of history.jsonl) and `HistoryError`, the one input error.

Every reader and writer of the run files shares these two: the harness builds
`Op`s, the writer numbers and writes them, and every reader (strict or tolerant)
raises `HistoryError` naming the file, the line (from 1) and the problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

OpType = Literal["invoke", "ok", "fail", "info"]
NEMESIS = "nemesis"
Process = int | str


@dataclass(frozen=True, slots=True)
class Op:
    """One line of history.jsonl: an invocation or a completion."""

    type: OpType
    process: Process
    f: str
    value: Any = None
    time: int = 0  # ns since the test started
    index: int = -1  # assigned by the writer
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. seek_to_beginning

    def with_(self, **changes: Any) -> Op:
        """A copy with some fields replaced (dataclasses.replace, typed)."""
        return replace(self, **changes)

    def at(self, time: int) -> Op:
        """A copy at another time: the constructor directly, as it runs for every event
        (dataclasses.replace costs several times more)."""
        return Op(self.type, self.process, self.f, self.value, time, self.index, self.error,
                  self.extra)

    def complete(self, type: OpType, value: Any = None, error: str | None = None,
                 **extra: Any) -> Op:
        """The completion of this invocation: same process and f."""
        return Op(type=type, process=self.process, f=self.f,
                  value=self.value if value is None else value,
                  error=error, extra={**self.extra, **extra})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "time": self.time, "type": self.type,
                               "process": self.process, "f": self.f, "value": self.value}
        if self.error is not None:
            out["error"] = self.error
        for k, v in self.extra.items():
            if k not in out:
                out[k] = v
        return out


class HistoryError(ValueError):
    """An input that breaks the run-file contract: names file, line and problem."""

    def __init__(self, path: Path | str, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")
