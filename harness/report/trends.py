"""Nights side by side: every run folder under a results folder, a row per scenario.

A row is a scenario on one system, release and backend; a column is a run's time
(its folder's stamp), and a cell its verdict, anomaly counts, first anomaly's time
and operations per second, linked to its report. Runs of a row whose settings are
the same apart from the seed (and what the seed draws: the fault plan) but whose
verdicts differ make the row unstable: the seeds that replay each outcome are listed.
Only small files are read (test.json, results.json), plus, for an anomalous run, the
history's lines up to its first anomaly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.report.index import IndexRow, index_rows
from harness.runfiles import RESULTS_JSON, TEST_JSON, HistoryError, line_times, read_json

# test.json keys that are not settings: the seed and what it draws, where the run was
# written, and what the machine and the running system reported; which Spark checked
# (an old test.json's top-level keys, a new one's `options.checkers`: NOT_SETTINGS_PARTS)
NOT_SETTINGS = frozenset({"seed", "nemesis_plan", "run_id", "results_dir", "nodes", "versions",
                          "system_info", "fault_kinds", "nemesis_phases", "name", "test_count",
                          "spark", "spark_master", "spark_remote"})
NOT_SETTINGS_PARTS = frozenset({"checkers"})  # test.json's `options` of those parts


@dataclass(frozen=True, slots=True)
class Cell:
    column: int
    time: str
    verdict: str
    css: str
    counts: dict[str, int]
    first_anomaly_s: float | None
    ops_per_s: float | None
    seed: str
    link: str
    path: str
    settings: str  # a digest of the settings apart from the seed


@dataclass
class Row:
    scenario: str
    system: str
    release: str
    backend: str
    cells: list[Cell] = field(default_factory=list)
    unstable: bool = False
    outcomes: dict[str, list[str]] = field(default_factory=dict)  # verdict -> seeds
    settings_changed: bool = False

    def by_column(self, columns: int) -> list[list[Cell]]:
        """The row's cells under each column (most hold one run or none)."""
        out: list[list[Cell]] = [[] for _ in range(columns)]
        for c in self.cells:
            out[c.column].append(c)
        return out


def settings_digest(test: Mapping[str, Any]) -> str:
    """What a run was asked to do apart from its seed, as a short digest."""
    kept = {k: v for k, v in test.items() if k not in NOT_SETTINGS}
    if isinstance(options := kept.get("options"), Mapping):
        kept["options"] = {k: v for k, v in options.items() if k not in NOT_SETTINGS_PARTS}
    return hashlib.sha256(orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]


def _release(test: Mapping[str, Any]) -> str:
    info = test.get("system_info")
    if isinstance(info, Mapping) and info.get("version"):
        return str(info["version"])
    return ""


def first_anomaly_s(run_dir: Path, results: Mapping[str, Any] | None) -> float | None:
    """The time of the earliest operation an anomaly example names; None when there is
    none (valid, or examples that name no operation) or the history cannot be read."""
    from harness.runfiles.walk import anomaly_refs

    anomalies = (results or {}).get("anomalies")
    if not isinstance(anomalies, dict) or not anomalies:
        return None
    indices, _ = anomaly_refs(anomalies)
    first = min((i for i in indices if i >= 0), default=None)
    if first is None:
        return None
    try:  # time never decreases down the file: the first line named is the earliest
        times = line_times(run_dir / "history.jsonl", {first})
    except HistoryError:
        return None
    return round(times[first] / 1e9, 3) if first in times else None


def _ops_per_s(results: Mapping[str, Any] | None, test: Mapping[str, Any]) -> float | None:
    ops = ((results or {}).get("stats") or {}).get("ops")
    av = (results or {}).get("availability")
    span = av.get("end_s") if isinstance(av, Mapping) else None
    span = span or test.get("time_limit_s")
    if not isinstance(ops, int) or not isinstance(span, int | float) or span <= 0:
        return None
    return round(ops / span, 1)


def _json(path: Path) -> dict[str, Any]:
    try:
        return read_json(path) or {}
    except HistoryError:
        return {}


def trends(results_dir: Path) -> tuple[list[str], list[Row]]:
    """The columns (run times, oldest first) and the rows (by scenario, system, release,
    backend) of every run folder under results_dir."""
    runs: list[tuple[IndexRow, dict[str, Any], dict[str, Any]]] = []
    for r in index_rows(results_dir):
        d = results_dir / r.path
        runs.append((r, _json(d / TEST_JSON), _json(d / RESULTS_JSON)))
    columns = sorted({r.time for r, _, _ in runs})
    col = {t: i for i, t in enumerate(columns)}
    rows: dict[tuple[str, str, str, str], Row] = {}
    for r, test, results in sorted(runs, key=lambda x: x[0].time):
        scenario = str(test.get("scenario") or r.test)
        key = (scenario, str(test.get("system") or ""), _release(test),
               str(test.get("backend") or ""))
        row = rows.setdefault(key, Row(*key))
        anomalous = bool(results.get("counts"))
        row.cells.append(Cell(
            column=col[r.time], time=r.time, verdict=r.verdict, css=r.css,
            counts={name: n for name, n, _ in r.counts},
            first_anomaly_s=first_anomaly_s(results_dir / r.path, results) if anomalous
            else None,
            ops_per_s=_ops_per_s(results, test), seed=r.seed, link=r.link, path=r.path,
            settings=settings_digest(test)))
    for row in rows.values():
        _judge(row)
    return columns, sorted(rows.values(), key=lambda x: (x.scenario, x.system, x.release,
                                                          x.backend))


def _judge(row: Row) -> None:
    """Unstable: some settings gave more than one verdict (only the seed differed)."""
    by_settings: dict[str, dict[str, list[str]]] = {}
    for c in row.cells:
        if c.verdict in ("valid", "invalid", "unknown"):
            seeds = by_settings.setdefault(c.settings, {}).setdefault(c.verdict, [])
            if c.seed not in seeds:
                seeds.append(c.seed)
    row.settings_changed = len({c.settings for c in row.cells}) > 1
    for outcomes in by_settings.values():
        if len(outcomes) > 1:
            row.unstable = True
            for v, seeds in outcomes.items():
                listed = row.outcomes.setdefault(v, [])
                listed += [s for s in seeds if s not in listed]


def trends_json(results_dir: Path, columns: list[str], rows: list[Row]) -> dict[str, Any]:
    return {"results_dir": str(results_dir), "columns": columns,
            "rows": [asdict(r) for r in rows]}
