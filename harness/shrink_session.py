"""One shrink: its folder, its trials (ordinary runs), its progress lines and its outputs.

Trials run one after another in this process; a trial whose run was interrupted
(Ctrl-C: the run heals and tears down as any run does) ends the search, and no
further trial starts. Whatever ended it, the best plan so far is written out.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from harness import store
from harness.faultplan import Step
from harness.shrink_cli import Failing
from harness.shrink_page import render, stopped_text
from harness.spec import TestSpec
from nemesis import replay
from nemesis.shrink import Candidate, Progress, Shrinker, Shrunk, TrialResult
from nemesis.windows import Windowed, windows


@dataclass(frozen=True, slots=True)
class TrialRun:
    """The run a trial made, and what it found."""

    run_dir: Path
    valid: bool | str
    bad: tuple[str, ...]


def _rel(target: Path, start: Path) -> str:
    return os.path.relpath(target, start)


class Session:
    def __init__(self, failing: Failing, results_root: Path, *, tries: int,
                 budget_s: float | None, interrupted: Callable[[], bool]) -> None:
        self.failing = failing
        self.results_root = results_root
        self.tries = tries
        self.interrupted = interrupted
        self.started_s = time.monotonic()
        self.budget_s = budget_s
        spec = failing.spec
        assert spec.nemesis_plan is not None  # load_failing took it from test.json
        self.plan: Windowed = windows(replay.steps_from_json(spec.nemesis_plan,
                                                             str(failing.run_dir)))
        name = store.test_name(spec)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.dir = store.make_unique_dir(results_root / f"shrink-{name}", stamp)
        (self.dir / "trials").mkdir()
        store.link_atomically(results_root / f"shrink-{name}" / "latest", self.dir.name)

    # -- the search

    def steps(self, c: Candidate) -> tuple[Step, ...]:
        return self.plan.restrict(c.keep, c.scales(), c.shift_s)

    def spec_of(self, c: Candidate, seed: int) -> TestSpec:
        return replay.replaying(self.failing.spec, self.steps(c), c.time_limit_s, seed=seed,
                                results_dir=str(self.results_root))

    def _stop(self) -> str | None:
        return "interrupted" if self.interrupted() else None

    def _trial(self, c: Candidate, n: int) -> TrialResult:
        from harness import core
        from harness.run_cli import _progress

        watch = core.Watch()
        try:
            with _progress(watch):
                outcome = core.run(self.spec_of(c, self.failing.spec.seed + n), watch=watch)
        except Exception as e:  # a trial that cannot run: stop, keep the best so far
            click.echo(f"  -> the trial could not run: {type(e).__name__}: {e}", err=True)
            return TrialResult(False, stopped=True, error=f"{type(e).__name__}: {e}")
        bad = tuple(sorted(outcome.results.get("bad_anomaly_types") or ()))
        link = self.dir / "trials" / f"{n:03d}"
        os.symlink(_rel(outcome.run_dir, link.parent), link)
        hit = bool(set(bad) & self.failing.bad)
        verdict = "interrupted" if outcome.interrupted else (
            f"reproduced {', '.join(sorted(set(bad) & self.failing.bad))}" if hit
            else f"not reproduced ({', '.join(bad) or 'valid: ' + str(outcome.valid)})")
        click.echo(f"  -> {verdict}; {outcome.run_dir}", err=True)
        return TrialResult(hit, outcome.interrupted,
                           TrialRun(outcome.run_dir, outcome.valid, bad))

    def _progress(self, p: Progress) -> None:
        mins = (time.monotonic() - self.started_s) / 60
        click.echo(f"shrink: trial {p.n} of at most {p.at_most} [{p.stage}] "
                   f"{p.candidate.size} of {self.plan.count} windows, "
                   f"{p.candidate.time_limit_s:g} s; best so far {p.best.size} windows, "
                   f"{p.best.time_limit_s:g} s; {mins:.1f} min", err=True)

    def run(self) -> Shrunk:
        click.echo(f"undertow shrink: {self.failing.run_dir} found "
                   f"{', '.join(sorted(self.failing.bad))} with {self.plan.count} fault "
                   f"windows in {self.failing.spec.time_limit_s:g} s; trials link from "
                   f"{self.dir}", err=True)
        counter = iter(range(1, 1 << 30))
        limit = self.failing.spec.time_limit_s  # a step past it never ran: the final heal did
        spans = [(a, min(b, limit)) for a, b in self.plan.spans()]
        shrinker = Shrinker(spans, limit,
                            lambda c: self._trial(c, next(counter)), tries=self.tries,
                            should_stop=self._stop, on_progress=self._progress,
                            budget_s=self.budget_s)
        out = shrinker.run()
        self.write(out)
        return out

    # -- outputs

    def rows(self, c: Candidate) -> list[dict[str, Any]]:
        """The candidate's windows as the table shows them: fault, target, from, to."""
        out = []
        for w in c.keep:
            own = self.plan.restrict([w], c.scales(), c.shift_s)
            fault, target = self.plan.describe(w)
            out.append({"window": w, "fault": fault, "target": target,
                        "from_s": round(own[0].at_s, 2),
                        "to_s": round(min(own[-1].at_s, c.time_limit_s), 2)})
        return out

    def minimal_run(self, out: Shrunk) -> Path:
        """A run of the minimal plan that reproduced (the original when none did)."""
        hits = [t for t in out.runs_of(out.best) if t.result.reproduced]
        info = hits[-1].result.info if hits else None
        return info.run_dir if isinstance(info, TrialRun) else self.failing.run_dir

    def summary(self, out: Shrunk) -> dict[str, Any]:
        hits, runs = out.reproduced
        trials = []
        for t in out.trials:
            info = t.result.info
            trials.append({
                "n": t.n, "stage": t.stage, "windows": list(t.candidate.keep),
                "time_limit_s": t.candidate.time_limit_s, "reproduced": t.result.reproduced,
                "interrupted": t.result.stopped,
                "run": str(info.run_dir) if isinstance(info, TrialRun) else None,
                "bad_anomaly_types": list(info.bad) if isinstance(info, TrialRun) else []})
        found = sorted({b for t in out.runs_of(out.best) if isinstance(t.result.info, TrialRun)
                        for b in t.result.info.bad} & self.failing.bad)
        return {
            "original_run": str(self.failing.run_dir),
            "bad_anomaly_types": sorted(self.failing.bad),
            "original": {"windows": self.plan.count, "steps": len(self.plan.steps),
                         "time_limit_s": self.failing.spec.time_limit_s},
            "minimal": {"windows": out.best.size, "steps": len(self.steps(out.best)),
                        "time_limit_s": out.best.time_limit_s, "rows": self.rows(out.best),
                        "run": str(self.minimal_run(out)),
                        "reproduced": hits, "runs": runs, "found": found},
            "tries": self.tries, "trials": trials, "stopped": out.stopped,
            "minutes": round((time.monotonic() - self.started_s) / 60, 2),
        }

    def write(self, out: Shrunk) -> None:
        s = self.summary(out)
        (self.dir / "shrink.json").write_text(json.dumps(s, indent=1) + "\n")
        header = (f"Minimal fault plan of {self.failing.run_dir}:\n"
                  f"{out.best.size} of {self.plan.count} fault windows, failed as the original "
                  f"in {s['minimal']['reproduced']} of {s['minimal']['runs']} runs\n"
                  f"({', '.join(s['minimal']['found']) or 'none found'}).\n"
                  f"Replay: undertow run --config THIS_FILE")
        spec = self.spec_of(out.best, self.failing.spec.seed)
        (self.dir / "minimal.toml").write_text(
            replay.experiment_toml(spec, self.steps(out.best), header))
        (self.dir / "shrink.html").write_text(render(s, self.dir))

    def summary_text(self, out: Shrunk) -> str:
        s = self.summary(out)
        m = s["minimal"]
        lines = [f"{'fault':<22} {'target':<34} {'from':>8} {'to':>8}"]
        lines += [f"{r['fault']:<22} {r['target']:<34} {r['from_s']:>7.2f}s {r['to_s']:>7.2f}s"
                  for r in m["rows"]]
        why = stopped_text(out.stopped)
        lines.append(
            f"SHRUNK{why}: {s['original']['windows']} -> {m['windows']} fault windows, "
            f"{s['original']['time_limit_s']:g} -> {m['time_limit_s']:g} s; "
            f"{len(s['trials'])} trials in {s['minutes']:.1f} min; the minimal plan failed as "
            f"the original in {m['reproduced']} of {m['runs']} runs "
            f"({', '.join(m['found']) or 'none found'})")
        lines.append(f"shrink {self.dir / 'shrink.html'} replay "
                     f"{self.dir / 'minimal.toml'}")
        return "\n".join(lines)
