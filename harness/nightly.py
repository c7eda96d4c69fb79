"""The nightly chaos matrix: run every named scenario, fail when a verdict is wrong.

`just nightly` (and the nightly CI workflow) runs `python -m harness.nightly`:
each scenario of MATRIX goes through `undertow run --scenario NAME` on the
docker backend, as a separate process (so one crashed run cannot take the rest
down), then its results.json is judged:

- `safe` (a scenario with no expected anomaly) must be valid; invalid or unknown fails;
- an unsafe scenario must be invalid and report every anomaly type it expects
  (`--require any`: at least one of them); anything less is a bug gone undetected;
- with `--controls` (the default), each unsafe scenario runs once more with the
  options that fix its bug (`undertow scenarios` shows them) and must then be
  valid: the same faults, the setting fixed, nothing lost.

Each night draws a fresh seed from the date and the run number (printed, and kept
in nightly.json, the JUnit file and the index), so night after night new
interleavings are tried and any one can be replayed with `--seed`.

The runs are checked on the Spark that `--spark` picks (checkers.spark_server's rule:
the warm server of `undertow spark start` when it is up, else a cold local session);
`--warm-spark` starts a warm server for the night when none is up, and stops it after.

Whatever happens, `undertow heal` runs at the end, the trends page (every run
folder under the results folder, earlier nights' too: `undertow trends`) and the
results index are refreshed, and results/nightly.json plus results/nightly-junit.xml
say what was judged and why.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from harness.junit import Case, suite_tree, write_tree
from harness.runfiles import EXIT_INVALID, EXIT_MEANING, EXIT_VALID, read_results
from harness.spec import SPARK_CHOICES

# The documented matrix: every known bug, and the safe settings that must stay clean, on
# our broker and on Apache Kafka.
MATRIX: tuple[str, ...] = ("kip101-loss", "kip101-divergence", "isr-shrink-2013",
                           "unclean-election", "last-replica-standing", "safe",
                           "kafka-unclean-election", "kafka-acks-1", "kafka-safe",
                           "kafka-read-uncommitted", "kafka-retries-without-idempotence")
TIMED_OUT = 124  # the exit code of a run the nightly stopped (as timeout(1) gives)
RUN_MARGIN_S = 600.0  # setup, final reads, Spark check and report on top of the time limit


@dataclass(frozen=True, slots=True)
class Judgement:
    scenario: str
    passed: bool
    reason: str
    valid: Any  # the run's `valid` (True, False, "unknown"), or None when it has none
    anomaly_types: tuple[str, ...]
    expected: tuple[str, ...]
    run_dir: str | None
    exit_code: int | None
    duration_s: float


def judge(scenario: str, expected: Sequence[str], results: Mapping[str, Any] | None,
          *, require: str = "all") -> tuple[bool, str]:
    """Whether a scenario's results are what it must give, and why (pure; the core rule)."""
    if results is None:
        return False, "no results.json: the run did not get as far as checking"
    valid = results.get("valid")
    found = {str(t) for t in results.get("anomaly_types") or []}
    if not expected:
        if valid is True:
            return True, "valid, as safe settings must be"
        if valid is False:
            bad = ", ".join(map(str, results.get("bad_anomaly_types") or [])) or "?"
            return False, f"INVALID under safe settings: {bad}"
        return False, f"verdict {valid!r}: the checkers could not decide " \
                      f"({results.get('error') or 'no error given'})"
    if valid is not False:
        return False, f"bug undetected: verdict {valid!r}, expected {', '.join(expected)}"
    missing = [t for t in expected if t not in found]
    if require == "all" and missing:
        return False, f"partly undetected: missing {', '.join(missing)} " \
                      f"(found {', '.join(sorted(found)) or 'nothing'})"
    if require == "any" and len(missing) == len(expected):
        return False, f"bug undetected: none of {', '.join(expected)} " \
                      f"(found {', '.join(sorted(found)) or 'nothing'})"
    return True, f"detected: {', '.join(t for t in expected if t in found)}"


def _latest(results_dir: Path, scenario: str) -> Path | None:
    link = results_dir / scenario / "latest"
    return link.resolve() if link.exists() else None


def undertow(*args: str, timeout_s: float | None = None) -> int:
    """Run the undertow CLI in a child process with this interpreter; its exit code."""
    cmd = [sys.executable, "-m", "harness.cli", *args]
    click.echo(f"nightly: $ undertow {' '.join(args)}", err=True)
    try:
        return subprocess.run(cmd, timeout=timeout_s, check=False).returncode
    except subprocess.TimeoutExpired:
        click.echo(f"nightly: undertow {args[0]} timed out after {timeout_s:.0f} s", err=True)
        return TIMED_OUT


def run_scenario(name: str, expected: Sequence[str], *, backend: str, results_dir: Path,
                 seed: int, time_limit_s: float | None, scenario_time_s: float,
                 require: str, fixed_by: Sequence[str] = (), spark: str = "auto") -> Judgement:
    """One run of a scenario, judged; with fixed_by (its fix's options) it must be valid."""
    from harness.scenarios import control_label

    label = control_label(name) if fixed_by else name
    if fixed_by:
        expected = ()
    before = _latest(results_dir, name)
    args = ["run", "--scenario", name, "--backend", backend, "--results-dir", str(results_dir),
            "--seed", str(seed), "--spark", spark, *fixed_by]
    if time_limit_s is not None:
        args += ["--time-limit", f"{time_limit_s:g}"]
    t0 = time.monotonic()
    code = undertow(*args, timeout_s=(time_limit_s or scenario_time_s) + RUN_MARGIN_S)
    after = _latest(results_dir, name)
    run_dir = after if after is not None and after != before else None
    results = None if run_dir is None else read_results(run_dir)
    passed, reason = judge(name, expected, results, require=require)
    if run_dir is None:
        meaning = "timed out" if code == TIMED_OUT else EXIT_MEANING.get(code, "crashed")
        reason = f"no new run folder under {results_dir / name} (exit {code}: {meaning}); " \
            + reason
    return Judgement(label, passed, reason, None if results is None else results.get("valid"),
                     tuple(map(str, (results or {}).get("anomaly_types") or [])),
                     tuple(expected), None if run_dir is None else str(run_dir), code,
                     round(time.monotonic() - t0, 1))


def nightly_seed(date: datetime.date, run_number: int) -> int:
    """The night's seed: the same date and run number always give the same one."""
    digest = hashlib.sha256(f"{date.isoformat()}#{run_number}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


def write_summary(results_dir: Path, judgements: Sequence[Judgement], *, seed: int | None = None,
                  seed_from: str = "") -> None:
    """results/nightly.json and results/nightly-junit.xml (one test case per scenario)."""
    (results_dir / "nightly.json").write_text(json.dumps(
        {"passed": all(j.passed for j in judgements), "seed": seed, "seed_from": seed_from,
         "scenarios": [asdict(j) for j in judgements]}, indent=1, default=str) + "\n")
    cases = [Case(j.scenario, "passed", text=f"{j.reason}; run {j.run_dir}", time_s=j.duration_s)
             if j.passed else
             Case(j.scenario, "failure", j.reason, time_s=j.duration_s,
                  text=f"run {j.run_dir}; exit {j.exit_code}; found {', '.join(j.anomaly_types)}")
             for j in judgements]
    write_tree(suite_tree("undertow-nightly", "undertow.nightly", cases, suites="undertow-nightly",
                          properties={"seed": str(seed), "seed_from": seed_from}),
               results_dir / "nightly-junit.xml")


@click.command("nightly")
@click.option("--backend", type=click.Choice(["docker", "local"]), default="docker",
              show_default=True, help="CI uses docker; local runs the same logic without it.")
@click.option("--scenario", "scenarios", multiple=True,
              help=f"Only these scenarios (repeat); default the matrix: {', '.join(MATRIX)}.")
@click.option("--results-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("results"), show_default=True)
@click.option("--seed", type=int, default=None,
              help="Seed of every run, to replay a night (default: drawn from the date and "
                   "the run number, printed).")
@click.option("--run-number", type=int, default=None,
              help="This night's run number (default: $GITHUB_RUN_NUMBER, else 0).")
@click.option("--time-limit", "time_limit_s", type=float, default=None,
              help="Override each scenario's time limit (seconds).")
@click.option("--require", type=click.Choice(["all", "any"]), default="all", show_default=True,
              help="An unsafe scenario must report all its expected anomaly types, or any.")
@click.option("--controls/--no-controls", default=True, show_default=True,
              help="Also run each known bug with the options that fix it; it must be valid.")
@click.option("--heal/--no-heal", default=True, show_default=True,
              help="Run `undertow heal` at the end (always, even after a failure).")
@click.option("--spark", type=click.Choice(SPARK_CHOICES), default="auto", show_default=True,
              help="Which Spark checks each run (as `undertow run --spark`).")
@click.option("--warm-spark", is_flag=True,
              help="Start a warm Spark (`undertow spark start`) for the night if none is up; "
                   "stop it at the end.")
def main(backend: str, scenarios: tuple[str, ...], results_dir: Path, seed: int | None,
         run_number: int | None, time_limit_s: float | None, require: str, controls: bool,
         heal: bool, spark: str, warm_spark: bool) -> None:
    """Run the nightly matrix of scenarios and judge each verdict; exit 1 on any failure."""
    from harness.scenarios import all_scenarios

    SCENARIOS = all_scenarios()


    names = scenarios or MATRIX
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: not a scenario; known: "
                                 f"{', '.join(sorted(SCENARIOS))}", param_hint="--scenario")
    if seed is None:
        if run_number is None:
            run_number = int(os.environ.get("GITHUB_RUN_NUMBER") or 0)
        today = datetime.datetime.now(datetime.UTC).date()
        seed, seed_from = nightly_seed(today, run_number), f"{today} run {run_number}"
    else:
        seed_from = "--seed"
    click.echo(f"nightly: seed {seed} (from {seed_from}; replay with --seed {seed})", err=True)
    results_dir.mkdir(parents=True, exist_ok=True)
    judgements: list[Judgement] = []
    runs = [(n, ()) for n in names] + \
        [(n, SCENARIOS[n].fixed_by) for n in names if controls and SCENARIOS[n].fixed_by]
    started_spark = warm_spark and undertow("spark", "status") != 0
    if started_spark and undertow("spark", "start", "--port", "0", timeout_s=600) != 0:
        raise SystemExit("nightly: the warm Spark did not start (see `undertow spark start`)")
    try:
        for name, fixed_by in runs:
            sc = SCENARIOS[name]
            limit = float(sc.settings.get("time_limit_s", 60.0))
            j = run_scenario(name, sc.expected, backend=backend, results_dir=results_dir,
                             seed=seed, time_limit_s=time_limit_s, scenario_time_s=limit,
                             require=require, fixed_by=fixed_by, spark=spark)
            judgements.append(j)
            click.echo(f"nightly: {j.scenario}: {'PASS' if j.passed else 'FAIL'}: {j.reason}",
                       err=True)
    finally:
        if started_spark:
            undertow("spark", "stop", timeout_s=300)
        if heal:
            undertow("heal", timeout_s=300)
        write_summary(results_dir, judgements, seed=seed, seed_from=seed_from)
        from harness.report.render import render_index, render_trends

        try:  # tonight beside every earlier night whose folders are under results_dir
            render_trends(results_dir)
        except Exception as e:  # the verdicts stand without the trends page
            click.echo(f"nightly: trends not rendered: {e}", err=True)
        try:
            render_index(results_dir)
        except Exception as e:  # the verdicts stand without an index
            click.echo(f"nightly: index not rendered: {e}", err=True)
    failed = [j for j in judgements if not j.passed]
    click.echo(f"nightly: {len(judgements) - len(failed)}/{len(judgements)} passed "
               f"({backend} backend, seed {seed}); summary {results_dir / 'nightly.json'}")
    for j in failed:
        click.echo(f"  FAIL {j.scenario}: {j.reason}")
    sys.exit(EXIT_INVALID if failed or len(judgements) < len(runs) else EXIT_VALID)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
