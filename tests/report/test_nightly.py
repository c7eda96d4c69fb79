"""The nightly matrix: the judging rule, the summary, and a real run on the local backend."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkers.spark_server import DIR_ENV
from harness.nightly import MATRIX, Judgement, judge, main, nightly_seed, write_summary
from harness.scenarios import all_scenarios

SCENARIOS = all_scenarios()


def test_matrix_is_the_documented_scenarios() -> None:
    assert set(MATRIX) == {"kip101-loss", "kip101-divergence", "isr-shrink-2013",
                           "unclean-election", "last-replica-standing", "safe",
                           "kafka-unclean-election", "kafka-acks-1", "kafka-safe",
                           "kafka-read-uncommitted", "kafka-retries-without-idempotence"}
    assert all(n in SCENARIOS for n in MATRIX)
    assert SCENARIOS["safe"].expected == ()


def _res(valid: object, *types: str) -> dict[str, object]:
    return {"valid": valid, "anomaly_types": list(types), "bad_anomaly_types": list(types)}


@pytest.mark.parametrize(("expected", "results", "require", "passed"), [
    ((), _res(True), "all", True),
    ((), _res(False, "lost-write"), "all", False),       # safe must stay valid
    ((), _res("unknown"), "all", False),                 # ... and decided
    ((), None, "all", False),                            # ... and checked
    (("lost-write",), _res(False, "lost-write"), "all", True),
    (("lost-write",), _res(True), "all", False),         # the bug went undetected
    (("lost-write",), _res("unknown"), "all", False),
    (("lost-write", "replica-lost-write"), _res(False, "lost-write"), "all", False),
    (("lost-write", "replica-lost-write"), _res(False, "lost-write"), "any", True),
    (("lost-write",), _res(False, "duplicate"), "any", False),  # invalid, but not for this bug
])
def test_judge(expected: tuple[str, ...], results: dict[str, object] | None, require: str,
               passed: bool) -> None:
    ok, reason = judge("x", expected, results, require=require)
    assert ok is passed, reason
    assert reason


def test_summary_files(tmp_path: Path) -> None:
    js = [Judgement("safe", True, "valid", True, (), (), "/r/safe/1", 0, 1.0),
          Judgement("kip101-loss", False, "bug undetected", True, (), ("lost-write",),
                    "/r/k/1", 0, 2.0)]
    write_summary(tmp_path, js, seed=77, seed_from="--seed")
    data = json.loads((tmp_path / "nightly.json").read_text())
    assert data["passed"] is False and len(data["scenarios"]) == 2
    assert (data["seed"], data["seed_from"]) == (77, "--seed")
    suite = ET.parse(tmp_path / "nightly-junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["seed"] == "77"


def test_each_night_draws_its_own_seed_and_can_replay_it() -> None:
    day = datetime.date(2026, 11, 25)
    seeds = {nightly_seed(day + datetime.timedelta(days=d), r) for d in range(30)
             for r in range(3)}
    assert len(seeds) == 90  # a new seed every night and every run
    assert nightly_seed(day, 4) == nightly_seed(day, 4)  # the same night, the same seed
    assert all(0 <= s < 2**31 for s in seeds)


def test_unknown_scenario_is_bad_usage(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["--scenario", "nope", "--results-dir", str(tmp_path)])
    assert res.exit_code == 2 and "not a scenario" in res.output


@pytest.mark.slow
def test_nightly_runs_a_scenario_on_the_local_backend(tmp_path: Path) -> None:
    """The whole path: a real run as a child process, its results judged, heal, summary, index.

    The verdict itself belongs to the cluster; what is checked here is that the
    nightly judges the run that really happened and exits accordingly.
    """
    results = tmp_path / "results"
    r = subprocess.run([sys.executable, "-m", "harness.nightly", "--backend", "local",
                        "--scenario", "safe", "--time-limit", "6", "--results-dir", str(results),
                        "--run-number", "7"],
                       capture_output=True, text=True, timeout=900, check=False)
    summary = json.loads((results / "nightly.json").read_text())
    seed = nightly_seed(datetime.datetime.now(datetime.UTC).date(), 7)
    assert summary["seed"] == seed and f"nightly: seed {seed} " in r.stderr
    suite = ET.parse(results / "nightly-junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["seed"] == str(seed)
    (j,) = summary["scenarios"]
    assert j["run_dir"] is not None, r.stderr[-3000:]
    run_dir = Path(j["run_dir"])
    assert run_dir.parent == results / "safe"
    run_results = run_dir / "results.json"
    if run_results.exists():
        valid = json.loads(run_results.read_text())["valid"]
        assert j["valid"] == valid
        assert j["passed"] is (valid is True)
    else:
        assert j["passed"] is False and "no results.json" in j["reason"]
    assert r.returncode == (0 if j["passed"] else 1), r.stderr[-3000:]
    assert "nightly: $ undertow heal" in r.stderr
    assert json.loads((run_dir / "test.json").read_text())["seed"] == seed
    assert f'<td class="mono">{seed}</td>' in (results / "index.html").read_text()
    trends = json.loads((results / "trends.json").read_text())
    assert [c["seed"] for r in trends["rows"] for c in r["cells"]] == [str(seed)]
    assert '<a href="trends.html">' in (results / "index.html").read_text()


# at night (two runs and a warm Spark of its own: 79 s of the suite); the suite keeps the
# nightly's whole path on one scenario (above) and its judging of a bug and its control
# (test_judge), and the nightly workflow runs every known bug with its control
@pytest.mark.slow
@pytest.mark.nightly
def test_nightly_runs_a_known_bug_and_then_its_fix(tmp_path: Path) -> None:
    """--controls (the default): the same scenario again with its fix's options, judged as
    safe. The fixed run must really carry the fix (test.json) and be judged by `valid`."""
    results = tmp_path / "results"
    warm = tmp_path / "warm-spark"  # --warm-spark: both runs are checked on one warm Spark
    r = subprocess.run([sys.executable, "-m", "harness.nightly", "--backend", "local",
                        "--scenario", "kip101-loss", "--time-limit", "7",
                        "--results-dir", str(results), "--warm-spark"],
                       env={**os.environ, DIR_ENV: str(warm)},
                       capture_output=True, text=True, timeout=900, check=False)
    summary = json.loads((results / "nightly.json").read_text())
    bug, fixed = summary["scenarios"]
    assert (bug["scenario"], fixed["scenario"]) == ("kip101-loss", "kip101-loss (fixed)")
    assert bug["run_dir"] and fixed["run_dir"] and bug["run_dir"] != fixed["run_dir"], \
        r.stderr[-3000:]
    assert bug["expected"] == ["lost-write", "replica-lost-write"] and fixed["expected"] == []
    spec = json.loads((Path(fixed["run_dir"]) / "test.json").read_text())
    assert spec["broker"]["truncation"] == "leader-epoch" and spec["nemesis"] == ["kip101-loss"]
    assert json.loads((Path(bug["run_dir"]) / "test.json").read_text())["broker"][
        "truncation"] == "hw"
    assert fixed["passed"] is (fixed["valid"] is True), fixed
    assert r.returncode == (0 if bug["passed"] and fixed["passed"] else 1)
    for run in (bug, fixed):
        stats = json.loads((Path(run["run_dir"]) / "results.json").read_text())["stats"]
        assert stats["spark"].startswith("warm sc://127.0.0.1:"), stats
    assert "nightly: $ undertow spark stop" in r.stderr
    assert not (warm / "state.json").exists()
    assert subprocess.run(["pgrep", "-f", str(warm)], check=False).returncode == 1
