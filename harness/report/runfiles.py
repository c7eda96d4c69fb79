"""Read a run folder's files for the report: fast (orjson, one call per file) and tolerant.

The report is drawn from whatever the folder holds: only history.jsonl is
required; test.json, replicas.jsonl and results.json are optional. A line that
is not a JSON object is an input error naming the file and line (HistoryError);
deeper validation is the checkers' job, so the report never duplicates it.
"""

from __future__ import annotations

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


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file as a dict; blank lines are skipped.

    Parses the whole file in one orjson call (a JSON array of the lines), which is
    several times faster than one call per line; on failure it finds the bad line.
    """
    lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
    try:
        rows = orjson.loads(b"[" + b",".join(lines) + b"]")
    except orjson.JSONDecodeError:
        rows = None
    if rows is not None and all(type(r) is dict for r in rows):
        return rows  # type: ignore[no-any-return]
    # Slow path, only to name the offending line (counting blank lines too).
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise HistoryError(path, lineno, f"not valid JSON: {e}") from None
        if not isinstance(row, dict):
            raise HistoryError(path, lineno, f"expected a JSON object, got {type(row).__name__}")
    raise HistoryError(path, None, "could not be parsed")  # pragma: no cover


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
