"""The tolerant reader: a run folder's files as plain dicts, for the report, the index,
the nightly and liveness.

Fast (orjson, one call per file) and forgiving: only history.jsonl is required;
test.json, replicas.jsonl and results.json are optional. A line that is not a
JSON object is an input error naming the file and line (HistoryError); deeper
validation is the strict reader's job (harness.runfiles.strict), never repeated here.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.runfiles.ops import HistoryError
from harness.runfiles.paths import HISTORY_JSONL, REPLICAS_JSONL, RESULTS_JSON, TEST_JSON


@dataclass(frozen=True, slots=True)
class RunFiles:
    """What a run folder holds, parsed; None where a file is absent."""

    run_dir: Path
    ops: list[dict[str, Any]]
    test: dict[str, Any] | None
    replicas: list[dict[str, Any]] | None
    results: dict[str, Any] | None


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic GC: building a million small dicts otherwise triggers it again and
    again (10x slower); these objects hold no cycles, so nothing is lost."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def iter_history(path: Path, *, having: bytes | None = None,
                 skip_torn: bool = False) -> Iterator[dict[str, Any]]:
    """Each line of a JSONL file (history.jsonl, replicas.jsonl) as a dict, streamed: the
    one pass over operations for whoever needs a few fields of each (liveness, the final
    reads' targets). Blank lines are skipped; a line that is not a JSON object raises
    HistoryError naming it, or with skip_torn is skipped (a history still being written
    may end in a torn line). With `having`, only lines containing those bytes are parsed
    (a cheap filter before the JSON parser)."""
    loads = orjson.loads
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below; a generator)
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if (having is not None and having not in raw) or raw.isspace():
                continue
            try:
                row = loads(raw)
            except orjson.JSONDecodeError as e:
                if skip_torn:
                    continue
                raise HistoryError(path, lineno, f"not valid JSON: {e}") from None
            if type(row) is not dict:
                if skip_torn:
                    continue
                raise HistoryError(path, lineno,
                                   f"expected a JSON object, got {type(row).__name__}")
            yield row


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file as a dict; blank lines are skipped; errors name the line."""
    with no_gc():
        return list(iter_history(path))


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file (test.json, results.json); None when absent; HistoryError when
    unreadable or not an object."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    except orjson.JSONDecodeError as e:
        raise HistoryError(path, None, f"not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise HistoryError(path, None, "expected a JSON object at the top level")
    return data


def read_results(run_dir: Path) -> dict[str, Any] | None:
    """run_dir/results.json, or None when the folder has none or it cannot be read."""
    try:
        return read_json(Path(run_dir) / RESULTS_JSON)
    except HistoryError:
        return None


def load_run(run_dir: Path) -> RunFiles:
    """Load the run folder; history.jsonl must exist, the rest is optional."""
    history = run_dir / HISTORY_JSONL
    if not history.is_file():
        raise HistoryError(history, None, "no such file: a run folder needs history.jsonl")
    replicas_path = run_dir / REPLICAS_JSONL
    return RunFiles(
        run_dir=run_dir,
        ops=read_jsonl(history),
        test=read_json(run_dir / TEST_JSON),
        replicas=read_jsonl(replicas_path) if replicas_path.is_file() else None,
        results=read_json(run_dir / RESULTS_JSON),
    )


def _tail_lines(history: Path, tail_bytes: int) -> list[bytes]:
    """The whole lines of the file's last `tail_bytes` ([] for a missing file)."""
    try:
        with open(history, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - tail_bytes))
            data = fh.read()
    except OSError:
        return []
    lines = data.split(b"\n")
    return lines[1:] if size > tail_bytes else lines  # the first is cut


def _sends(lines: Iterable[bytes], typ: str) -> Iterator[tuple[dict[str, Any], int]]:
    """Each send micro-op of the `typ` lines among `lines` (invoke, ok, ...), as its row
    and its key, in the order given; a torn or unreadable line is skipped."""
    token = f'"{typ}"'.encode()
    for raw in lines:
        if token not in raw or b'"send"' not in raw:
            continue
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(row, dict) or row.get("type") != typ:
            continue
        value = row.get("value")
        for micro in value if isinstance(value, list) else ():
            if isinstance(micro, list) and len(micro) == 3 and micro[0] == "send" and \
                    isinstance(micro[1], int):
                yield row, micro[1]


def recent_send_keys(history: Path, tail_bytes: int = 64 * 1024) -> list[int]:
    """The keys of the latest send invocations in history.jsonl as written so far, most
    recent first, each once: the keys being written now (the nemesis aims at them).

    Reads only the file's last `tail_bytes`; a torn or unreadable line is skipped, and a
    missing file gives []."""
    keys: list[int] = []
    for _, key in _sends(reversed(_tail_lines(history, tail_bytes)), "invoke"):
        if key not in keys:
            keys.append(key)
    return keys


def last_acked_send(history: Path, key: int, tail_bytes: int = 64 * 1024) -> int | None:
    """The index of the latest `ok` send completion on `key` in history.jsonl as written
    so far: the newest acknowledged write on that key (the nemesis times a fault just
    after one). None when the file's last `tail_bytes` hold none; a torn or unreadable
    line is skipped."""
    for row, k in _sends(reversed(_tail_lines(history, tail_bytes)), "ok"):
        if k == key and isinstance(row.get("index"), int):
            return int(row["index"])
    return None


def recent_send_counts(history: Path, tail_bytes: int = 1024 * 1024) -> dict[int, int]:
    """How many send invocations each key has in history.jsonl's last `tail_bytes`: of the
    keys being written now, the one with the fewest entered last (keys are written
    uniformly), so it has the most writes left before it is retired. A torn or unreadable
    line is skipped; a missing file gives {}."""
    counts: dict[int, int] = {}
    for _, key in _sends(_tail_lines(history, tail_bytes), "invoke"):
        counts[key] = counts.get(key, 0) + 1
    return counts
