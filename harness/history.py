"""Run files of ../shared/HISTORY.md: the `Op` record, a durable writer, a strict reader.

The writer appends and flushes each operation as it happens, so a harness killed
mid-run still leaves a readable history. The reader rejects anything outside the
contract with an error naming the file, the line (from 1) and the problem.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import orjson

OpType = Literal["invoke", "ok", "fail", "info"]
OP_TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})
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
        from dataclasses import replace

        return replace(self, **changes)

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

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS


class HistoryError(ValueError):
    """An input that breaks the run-file contract: names file, line and problem."""

    def __init__(self, path: Path | str, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class HistoryWriter:
    """Appends ops to history.jsonl, assigning index; each line is flushed at once.

    Thread-safe: the interpreter's workers and the nemesis write concurrently.
    `fsync_every` > 0 also forces the file to disk every that many ops.
    """

    def __init__(self, path: Path, *, fsync_every: int = 0) -> None:
        self.path = path
        self._fh: IO[bytes] = open(path, "ab", buffering=0)  # noqa: SIM115
        self._lock = threading.Lock()
        self._next = 0
        self._last_time = 0
        self._fsync_every = fsync_every

    def append(self, op: Op) -> Op:
        """Write op (assigning index, and never letting time go backwards); return it."""
        with self._lock:
            t = max(op.time, self._last_time)
            written = op.with_(index=self._next, time=t)
            self._fh.write(orjson.dumps(written.to_json()) + b"\n")
            self._next += 1
            self._last_time = t
            if self._fsync_every and self._next % self._fsync_every == 0:
                os.fsync(self._fh.fileno())
            return written

    @property
    def count(self) -> int:
        return self._next

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                os.fsync(self._fh.fileno())
                self._fh.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(path: Path, rows: Iterator[Mapping[str, Any]] | list[Mapping[str, Any]]) -> int:
    """Write rows as JSON lines durably (temp file, fsync, rename); returns the count."""
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "wb") as fh:
        for row in rows:
            fh.write(orjson.dumps(row) + b"\n")
            n += 1
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return n
