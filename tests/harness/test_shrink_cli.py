"""`undertow shrink`: what it refuses at once (exit 2, a clear message), before any trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
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


def test_listed_in_help() -> None:
    r = CliRunner().invoke(main, ["--help"])
    assert "shrink" in r.output
