"""`undertow shrink`: what it refuses at once (exit 2, a clear message), before any trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.shrink_cli import load_failing
from harness.spec import build_spec

PLAN = [{"at_s": 3.0, "f": "kill", "value": {"target": "one", "nodes": ["n2"]}},
        {"at_s": 6.0, "f": "start", "value": {}}]


def run_folder(root: Path, *, results: dict[str, object] | None, plan: object = PLAN,
               test: bool = True) -> Path:
    d = root / "results" / "queue-kill" / "20260101T000000Z"
    d.mkdir(parents=True)
    if test:
        spec = build_spec({"nemesis": ["kill"], "seed": 5, "time_limit_s": 10.0})
        spec.save(d / "test.json", nemesis_plan=plan, nodes=list(spec.nodes))
    if results is not None:
        (d / "results.json").write_text(json.dumps(results))
    return d


def shrink(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["shrink", *args])
    return r.exit_code, r.output


@pytest.mark.parametrize("results,plan,test,needle", [
    ({"valid": True, "bad_anomaly_types": []}, PLAN, True, "the run is valid"),
    ({"valid": "unknown", "bad_anomaly_types": []}, PLAN, True, "nothing to shrink"),
    ({"valid": False, "bad_anomaly_types": ["lost-write"]}, [], True, "no nemesis_plan"),
    ({"valid": False, "bad_anomaly_types": ["lost-write"]}, None, True, "no nemesis_plan"),
    (None, PLAN, True, "no results.json"),
    ({"valid": False, "bad_anomaly_types": ["lost-write"]}, PLAN, False, "no test.json"),
])
def test_refused_runs_exit_2_at_once(tmp_path: Path, results: dict[str, object] | None,
                                     plan: object, test: bool, needle: str) -> None:
    d = run_folder(tmp_path, results=results, plan=plan, test=test)
    code, out = shrink(str(d))
    assert code == 2 and needle in out, out
    assert str(d) in out
    assert not (tmp_path / "results" / "shrink-queue-kill").exists()  # nothing started


def test_a_missing_folder_and_bad_options_exit_2(tmp_path: Path) -> None:
    code, out = shrink(str(tmp_path / "nope"))
    assert code == 2 and "no such run folder" in out
    d = run_folder(tmp_path, results={"valid": False, "bad_anomaly_types": ["lost-write"]})
    code, out = shrink(str(d), "--tries", "0")
    assert code == 2 and "--tries" in out


def test_a_latest_link_is_taken_as_the_run_it_points_to(tmp_path: Path) -> None:
    d = run_folder(tmp_path, results={"valid": False, "bad_anomaly_types": ["lost-write"]})
    (d.parent / "latest").symlink_to(d.name)
    failing = load_failing((d.parent / "latest").absolute())
    assert failing.run_dir == d.resolve() and failing.bad == {"lost-write"}


def test_listed_in_help() -> None:
    r = CliRunner().invoke(main, ["--help"])
    assert "shrink" in r.output


@pytest.mark.slow
def test_ctrl_c_keeps_the_best_so_far_heals_and_starts_no_second_trial(tmp_path: Path) -> None:
    """A real broker trial interrupted: the run heals and tears down, the shrink writes its
    outputs (the original plan, as nothing smaller was found) and exits 130."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.harness.test_sigint import REPO, leftovers, wait_for

    plan = [{"at_s": 2.0 + 3 * i, "f": "kill", "value": {"target": "one", "nodes": [n]}}
            for i, n in enumerate(("n2", "n3", "n2", "n3"))]
    plan += [{"at_s": 3.5 + 3 * i, "f": "start", "value": {}} for i in range(4)]
    d = run_folder(tmp_path, results={"valid": False, "bad_anomaly_types": ["lost-write"]},
                   plan=plan)
    env = {**os.environ, "UNDERTOW_STATE_DIR": str(tmp_path / "state")}
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "shrink", str(d), "--tries", "2"],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    trials = tmp_path / "results" / "shrink-queue-kill" / "latest" / "trials"

    def running() -> bool:
        runs = [r for r in (tmp_path / "results" / "queue-kill").glob("2*") if r != d]
        return any((r / "history.jsonl").exists() and (r / "history.jsonl").stat().st_size
                   > 2000 for r in runs)

    assert wait_for(running, 120), p.stderr.read() if p.stderr else ""
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, out + err[-3000:]
    assert "trial 1 of at most" in err and "trial 2 " not in err
    assert [x.name for x in trials.iterdir()] == ["001"]
    shrink_dir = trials.parent
    for f in ("shrink.json", "shrink.html", "minimal.toml"):
        assert (shrink_dir / f).stat().st_size > 0, f
    s = json.loads((shrink_dir / "shrink.json").read_text())
    assert s["stopped"] == "interrupted" and s["minimal"]["windows"] == 4
    assert "SHRUNK (interrupted: best so far): 4 -> 4 fault windows" in out
    time.sleep(1.0)
    assert leftovers(tmp_path) == []
