"""Writing run files: history.jsonl as it happens, replicas.jsonl and results.json whole.

The history writer appends and flushes each operation as it happens, so a
harness killed mid-run still leaves a readable history. Whole files are written
to a temporary name, forced to disk and renamed, so a reader sees the old file
or the new one, never half of one. results.json has this one writer.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from harness.runfiles.ops import Op
from harness.runfiles.paths import RESULTS_JSON


class HistoryWriter:
    """Appends ops to history.jsonl, assigning index; each line is flushed at once.

    Thread-safe: the interpreter's workers and the nemesis write concurrently.
    `fsync_every` > 0 also forces the file to disk every that many ops. Each of
    `observers` is called with each op as written, in file order (under the lock, so
    keep them cheap; they must not raise): what a checker learns this way it need not
    read from the file again.
    """

    def __init__(self, path: Path, *, fsync_every: int = 0,
                 observers: Sequence[Callable[[Op], None]] = ()) -> None:
        self.path = path
        self._observers = tuple(observers)
        self._fh: IO[bytes] = open(path, "ab", buffering=0)  # noqa: SIM115
        self._lock = threading.Lock()
        self._next = 0
        self._last_time = 0
        self._fsync_every = fsync_every

    def append(self, op: Op) -> Op:
        """Write op (assigning index, and never letting time go backwards); return it."""
        with self._lock:
            t = op.time if op.time > self._last_time else self._last_time
            # the constructor directly: dataclasses.replace costs several times more
            written = Op(op.type, op.process, op.f, op.value, t, self._next, op.error, op.extra)
            self._fh.write(orjson.dumps(written.to_json()) + b"\n")
            self._next += 1
            self._last_time = t
            for observe in self._observers:
                observe(written)
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


def replace_durably(path: Path, data: bytes) -> None:
    """path holds data or its old content, never half: a temporary file, forced to disk, renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_results(run_dir: Path, results: Mapping[str, Any]) -> Path:
    """Write run_dir/results.json (indented, keys in the order given); return its path."""
    path = Path(run_dir) / RESULTS_JSON
    replace_durably(path, orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n")
    return path
