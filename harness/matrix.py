"""`undertow matrix`: scenarios x releases x seeds, one ordinary run folder each, one page.

A column is a scenario (or its control: the scenario with its `fixed_by` options), a
row a release of the system the scenarios run (`--kafka-versions`); each cell runs
the same seeds. Every run is an `undertow run` in a child process whose results
folder is the cell's own (`<out>/cells/<release>/<column>/`), so a stopped matrix
starts again where it was: a seed whose run folder has a results.json that was not
interrupted is kept. The expectation of a cell comes from the scenario
(`Scenario.expected_on(release)`; a control must be valid); a cell *differs* when an
expected bug shows in fewer than half its runs, or when a cell expected valid has
any run that is not valid.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import registry
from harness.protocols import HasReleases
from harness.report.index import index_rows
from harness.report.trends import _ops_per_s, first_anomaly_s
from harness.runfiles import HistoryError, read_json
from harness.scenarios import Scenario, control_label, scenario
from harness.spec import SpecError

RUN_MARGIN_S = 600.0  # beyond a run's time limit: setup, final reads, check, report


@dataclass(frozen=True, slots=True)
class Column:
    scenario: str
    control: bool

    @property
    def label(self) -> str:
        return control_label(self.scenario) if self.control else self.scenario

    @property
    def slug(self) -> str:
        return f"{self.scenario}-control" if self.control else self.scenario


@dataclass(frozen=True, slots=True)
class Cell:
    release: str
    column: Column
    args: tuple[str, ...]        # the `undertow run` options of the cell (seed apart)
    expected: tuple[str, ...]    # anomaly types the checkers must report; () valid
    applies: bool = True
    why_not: str = ""

    def folder(self, out: Path) -> Path:
        return out / "cells" / _safe(self.release) / self.column.slug


@dataclass
class RunSummary:
    seed: int
    outcome: str                 # valid, unknown, or the anomaly types joined by +
    counts: dict[str, int]
    first_anomaly_s: float | None
    ops_per_s: float | None
    report: str                  # relative to the matrix folder
    path: str


@dataclass
class CellSummary:
    release: str
    column: str
    expected: tuple[str, ...]
    applies: bool
    why_not: str
    runs: list[RunSummary] = field(default_factory=list)

    @property
    def hits(self) -> int:
        """Runs that show what is expected (all the expected types; valid when none)."""
        if not self.expected:
            return sum(r.outcome == "valid" for r in self.runs)
        return sum(set(self.expected) <= set(r.counts) for r in self.runs)

    @property
    def differs(self) -> bool:
        if not self.applies or not self.runs:
            return False
        if not self.expected:
            return self.hits < len(self.runs)
        return 2 * self.hits < len(self.runs)

    @property
    def verdicts(self) -> str:
        """E.g. `lost-write 9/10`, then the other outcomes: `valid 1/10`."""
        n = len(self.runs)
        head = "+".join(self.expected) if self.expected else "valid"
        parts = [f"{head} {self.hits}/{n}"]
        others = Counter(r.outcome for r in self.runs
                         if not (set(self.expected) <= set(r.counts) if self.expected
                                 else r.outcome == "valid"))
        parts += [f"{o} {k}/{n}" for o, k in sorted(others.items())]
        return ", ".join(parts)

    @property
    def anomaly_counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for r in self.runs:
            total.update(r.counts)
        return dict(sorted(total.items()))

    @property
    def median_first_anomaly_s(self) -> float | None:
        xs = [r.first_anomaly_s for r in self.runs if r.first_anomaly_s is not None]
        return round(statistics.median(xs), 1) if xs else None

    @property
    def median_ops_per_s(self) -> float | None:
        xs = [r.ops_per_s for r in self.runs if r.ops_per_s is not None]
        return round(statistics.median(xs), 1) if xs else None

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "column": self.column, "expected": list(self.expected),
                "applies": self.applies, "why_not": self.why_not or None,
                "verdicts": self.verdicts if self.runs else None, "hits": self.hits,
                "runs_done": len(self.runs), "differs": self.differs,
                "anomaly_counts": self.anomaly_counts,
                "median_first_anomaly_s": self.median_first_anomaly_s,
                "median_ops_per_s": self.median_ops_per_s,
                "runs": [vars(r) for r in self.runs]}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def plan(scenarios: Sequence[str], releases: Sequence[str], *, control: bool,
         backend: str, time_limit_s: float | None = None,
         check: Callable[[Any], object] | None = None) -> tuple[list[str], list[Cell]]:
    """Every cell, checked before anything runs: (the releases as resolved, the cells).
    A SpecError (one line) for an unknown scenario, a release that does not resolve, a
    scenario that cannot run on a release; a control that cannot run on a release (the
    setting that fixes it is missing there) is a cell that does not apply."""
    from harness.core import check_startable

    check = check or check_startable
    if not scenarios:
        raise SpecError("--scenario: name at least one")
    if not releases:
        raise SpecError("--kafka-versions: name at least one release")
    found: list[Scenario] = [scenario(s) for s in scenarios]
    systems = {str(s.settings.get("system", "undertow")) for s in found}
    if len(systems) != 1:
        raise SpecError(f"--scenario: the scenarios run on different systems "
                        f"({', '.join(sorted(systems))}); a matrix's rows are one system's "
                        "releases")
    (system_name,) = systems
    system = registry.get("system", system_name)
    if not isinstance(system, HasReleases):
        raise SpecError(f"--kafka-versions: the scenarios run on {system_name}, which has no "
                        "releases to choose from")
    resolved = []
    for r in releases:
        got = system.resolve_release(r)
        if got in resolved:
            raise SpecError(f"--kafka-versions: {r} is named twice")
        resolved.append(got)
    cells: list[Cell] = []
    for release in resolved:
        for sc in found:
            for col in [Column(sc.name, False)] + ([Column(sc.name, True)] if control else []):
                if col.control and not sc.fixed_by:
                    cells.append(Cell(release, col, (), (), False, "no control"))
                    continue
                args = ("--scenario", sc.name, "--backend", backend,
                        "--extra", f"{system.release_key}={release}",
                        *(sc.fixed_by if col.control else ()),
                        *(("--time-limit", f"{time_limit_s:g}") if time_limit_s else ()))
                expected = () if col.control else sc.expected_on(release)
                try:
                    check(spec_of(args))
                except SpecError as e:
                    if not col.control:
                        raise SpecError(f"--scenario {sc.name} does not run on {release}: "
                                        f"{e}") from None
                    cells.append(Cell(release, col, args, (), False, str(e)))
                    continue
                cells.append(Cell(release, col, args, expected))
    return resolved, cells


def spec_of(args: Sequence[str], seed: int = 0) -> Any:
    """The TestSpec `undertow run ARGS --seed SEED` would run (nothing started)."""
    from harness.run_cli import build_run_spec, run

    ctx = run.make_context("run", [*args, "--seed", str(seed)])
    with ctx:
        return build_run_spec(ctx, dict(ctx.params))


def finished(folder: Path) -> dict[int, Path]:
    """seed -> the cell's finished run folder (results.json written, not interrupted)."""
    out: dict[int, Path] = {}
    for r in index_rows(folder) if folder.is_dir() else ():
        d = folder / r.path
        try:
            res = read_json(d / "results.json")
            test = read_json(d / "test.json")
        except (HistoryError, OSError):
            continue
        if res and test and not res.get("interrupted") and isinstance(test.get("seed"), int):
            out[int(test["seed"])] = d
    return out


def summarize(out: Path, cell: Cell, seeds: Sequence[int]) -> CellSummary:
    s = CellSummary(cell.release, cell.column.label, cell.expected, cell.applies, cell.why_not)
    done = finished(cell.folder(out))
    for seed in seeds:
        d = done.get(seed)
        if d is None:
            continue
        res, test = read_json(d / "results.json") or {}, read_json(d / "test.json") or {}
        bad = {str(t) for t in res.get("bad_anomaly_types") or []}
        counts = {str(k): int(v) for k, v in (res.get("counts") or {}).items()
                  if str(k) in bad and int(v) > 0}
        valid = res.get("valid")
        if valid is True:
            outcome = "valid"
        elif valid is False:
            outcome = "+".join(sorted(bad)) or "invalid"
        else:
            outcome = "unknown"
        s.runs.append(RunSummary(
            seed, outcome, counts, first_anomaly_s(d, res) if counts else None,
            _ops_per_s(res, test), str((d / "report.html").relative_to(out)),
            str(d.relative_to(out))))
    return s


def run_cells(out: Path, cells: Sequence[Cell], seeds: Sequence[int], *,
              say: Callable[[str], None], stop: Callable[[], bool],
              runner: Callable[[Sequence[str]], int] | None = None) -> int:
    """Run every missing (cell, seed) in order; returns how many ran. A run that ends
    interrupted (exit 130) stops the matrix."""
    runner = runner or _undertow
    ran = 0
    for cell in cells:
        if not cell.applies:
            continue
        folder = cell.folder(out)
        for seed in seeds:
            if stop():
                return ran
            if seed in finished(folder):
                continue
            folder.mkdir(parents=True, exist_ok=True)
            say(f"matrix: {cell.release} x {cell.column.label}, seed {seed}")
            code = runner([*cell.args, "--seed", str(seed), "--results-dir", str(folder)])
            ran += 1
            if code == 130:
                return ran
    return ran


def _undertow(args: Sequence[str]) -> int:
    cmd = [sys.executable, "-m", "harness.cli", "run", *args]
    try:
        return subprocess.run(cmd, check=False, timeout=None).returncode
    except KeyboardInterrupt:
        return 130


def matrix_json(releases: Sequence[str], columns: Sequence[str], seeds: Sequence[int],
                summaries: Sequence[CellSummary]) -> dict[str, Any]:
    return {"releases": list(releases), "columns": list(columns), "seeds": list(seeds),
            "differs": any(c.differs for c in summaries),
            "complete": all(len(c.runs) == len(seeds) for c in summaries if c.applies),
            "cells": [c.to_json() for c in summaries]}


def grid(releases: Sequence[str], columns: Sequence[str],
         summaries: Sequence[CellSummary]) -> list[tuple[str, list[CellSummary]]]:
    """The summaries as rows (release) of cells (column), in the order asked."""
    at: Mapping[tuple[str, str], CellSummary] = {(c.release, c.column): c for c in summaries}
    return [(r, [at[(r, c)] for c in columns]) for r in releases]
