"""`undertow shrink RUN_DIR`: rerun a failing run with smaller fault plans until none is smaller.

The search is nemesis.shrink's; here each trial is an ordinary run (core.run) of
the run's own spec replaying a candidate plan, judged by whether it reports one
of the original run's bad anomaly types. The shrink's folder,
results/shrink-<test>/<timestamp>/, links every trial's run folder (trials/NNN),
and ends with shrink.json, shrink.html and minimal.toml (the minimal plan as an
experiment file that `undertow run --config` replays).
"""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

from harness.run_cli import BadUsage
from harness.spec import TestSpec

EXIT_INTERRUPTED = 130


@dataclass(frozen=True, slots=True)
class Failing:
    """What a shrink starts from: the run's folder, spec, recorded plan and bad types."""

    run_dir: Path
    spec: TestSpec
    bad: frozenset[str]


def load_failing(run_dir: Path) -> Failing:
    """The failing run in run_dir, or BadUsage saying why it cannot be shrunk."""
    from harness.runfiles import RESULTS_JSON, TEST_JSON, read_json, read_test_json
    from harness.spec import load_test_json

    test, results = run_dir / TEST_JSON, run_dir / RESULTS_JSON
    if not run_dir.is_dir():
        raise BadUsage(f"{run_dir}: no such run folder")
    if not test.is_file():
        raise BadUsage(f"{run_dir}: no test.json; not a run folder")
    if not results.is_file():
        raise BadUsage(f"{run_dir}: no results.json; the run was never checked "
                       f"(`undertow check {run_dir}` checks it)")
    try:
        res = read_json(results) or {}
        plan = (read_test_json(test) or {}).get("nemesis_plan")
        spec = load_test_json(test)
    except ValueError as e:  # HistoryError (unreadable JSON) and SpecError
        raise BadUsage(f"{run_dir}: cannot read the run: {e}") from e
    if not plan:
        raise BadUsage(f"{test}: no nemesis_plan (the run had no faults, or was made before "
                       f"runs recorded their plan): nothing to shrink")
    bad = frozenset(res.get("bad_anomaly_types") or ())
    if res.get("valid") is True or not bad:
        raise BadUsage(f"{run_dir}: the run is valid ({results} names no bad anomaly type, "
                       f"valid: {json.dumps(res.get('valid'))}): nothing to shrink; shrink "
                       f"starts from a run that found one")
    # `latest` moves to each trial's run: the shrink names the run the link points to now
    return Failing(run_dir.resolve(), spec, bad)


class _Interrupts:
    """Between trials, Ctrl-C asks the shrink to stop after the current trial (during a
    trial, the run's own handler stops and heals that run, which ends the shrink too)."""

    def __init__(self) -> None:
        self.requested = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def __enter__(self) -> _Interrupts:
        self.old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)


@click.command("shrink")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--tries", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs of a candidate plan; it is kept when one of them fails as the "
                   "original did.")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), metavar="MINUTES",
              help="End within this long: stop searching while the best plan's "
                   "confirmation runs still fit, then confirm it.")
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where trials and the shrink's folder go (default: the run's own).")
def shrink(run_dir: Path, tries: int, budget: float | None, results_dir: Path | None) -> None:
    """Shrink a failing run's fault plan to the smallest one that still fails."""
    from harness.shrink_session import Session

    failing = load_failing(run_dir.absolute())
    root = (results_dir or failing.run_dir.parents[1]).absolute()
    with _Interrupts() as stop:
        session = Session(failing, root, tries=tries, budget_s=None if budget is None
                          else budget * 60.0, interrupted=lambda: stop.requested)
        out = session.run()
    click.echo(session.summary_text(out))
    sys.exit(EXIT_INTERRUPTED if out.stopped == "interrupted" else 0)

