"""Read a run folder's files for the report: fast (orjson, one call per file) and tolerant.

The report is drawn from whatever the folder holds: only history.jsonl is
required; test.json, replicas.jsonl and results.json are optional. A line that
is not a JSON object is an input error naming the file and line (HistoryError);
deeper validation is the checkers' job, so the report never duplicates it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.history import HistoryError


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


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file as a dict; blank lines are skipped; errors name the line."""
    rows: list[dict[str, Any]] = []
    loads = orjson.loads
    with no_gc():
        for lineno, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
            if not raw or raw.isspace():
                continue
            try:
                row = loads(raw)
            except orjson.JSONDecodeError as e:
                raise HistoryError(path, lineno, f"not valid JSON: {e}") from None
            if type(row) is not dict:
                raise HistoryError(path, lineno,
                                   f"expected a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise HistoryError(path, None, f"not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise HistoryError(path, None, "expected a JSON object at the top level")
    return data


def load_run(run_dir: Path) -> RunFiles:
    """Load the run folder; history.jsonl must exist, the rest is optional."""
    history = run_dir / "history.jsonl"
    if not history.is_file():
        raise HistoryError(history, None, "no such file: a run folder needs history.jsonl")
    replicas_path = run_dir / "replicas.jsonl"
    return RunFiles(
        run_dir=run_dir,
        ops=read_jsonl(history),
        test=_read_json(run_dir / "test.json"),
        replicas=read_jsonl(replicas_path) if replicas_path.is_file() else None,
        results=_read_json(run_dir / "results.json"),
    )
