"""The runs under a results folder, for index.html: results/<test>/<timestamp>/ folders.

Only small files are read (test.json, results.json), never a history, so the
index of hundreds of runs renders at once. `latest` links are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.sections import verdict
from harness.report.verdictbox import headline
from harness.runfiles import RESULTS_JSON, TEST_JSON, HistoryError, read_json

_STAMP = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")


@dataclass(frozen=True, slots=True)
class IndexRow:
    test: str
    time: str  # sortable, human-readable
    verdict: str
    css: str
    counts: list[tuple[str, int, bool]]  # anomaly type, count, bad
    link: str  # relative to the results folder
    has_report: bool
    path: str
    seed: str = ""  # the run's seed (test.json), to replay it
    headline: str = ""  # system, version, verdict, amount lost: as the report's title


def _json(path: Path) -> dict[str, Any] | None:
    """A small JSON file of a run folder; None when absent or unreadable (the index
    lists every run, whatever state its folder is in)."""
    try:
        return read_json(path)
    except HistoryError:
        return None


def run_dirs(results_dir: Path) -> list[Path]:
    """Folders holding a history.jsonl, one or two levels down; symlinks skipped."""
    found = []
    for first in sorted(results_dir.iterdir()):
        if first.is_symlink() or not first.is_dir():
            continue
        if (first / "history.jsonl").is_file():
            found.append(first)
            continue
        for second in sorted(first.iterdir()):
            if not second.is_symlink() and (second / "history.jsonl").is_file():
                found.append(second)
    return found


def _when(run_dir: Path) -> str:
    m = _STAMP.match(run_dir.name)
    if m:
        y, mo, d, h, mi, s = m.groups()
        return f"{y}-{mo}-{d} {h}:{mi}:{s}"
    return run_dir.name


def index_rows(results_dir: Path) -> list[IndexRow]:
    rows = []
    for d in run_dirs(results_dir):
        test = _json(d / TEST_JSON) or {}
        results = _json(d / RESULTS_JSON)
        v = verdict(results)
        bad = set((results or {}).get("bad_anomaly_types") or [])
        counts = [(str(k), int(n), k in bad)
                  for k, n in sorted(((results or {}).get("counts") or {}).items())
                  if isinstance(n, int)]
        rel = d.relative_to(results_dir)
        has_report = (d / "report.html").is_file()
        name = test.get("name") if isinstance(test.get("name"), str) else None
        rows.append(IndexRow(
            test=name or (d.parent.name if d.parent != results_dir else d.name),
            time=_when(d), verdict=v.label, css=v.css, counts=counts,
            link=f"./{rel.as_posix()}/report.html" if has_report else f"./{rel.as_posix()}/",
            has_report=has_report, path=rel.as_posix(),
            seed=str(test["seed"]) if isinstance(test.get("seed"), int) else "",
            headline=headline(test, results, v.label)))
    rows.sort(key=lambda r: r.time, reverse=True)
    return rows
