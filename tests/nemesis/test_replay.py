"""A recorded plan replayed by `undertow run --config`: the same faults, at the same times."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.spec import load_test_json
from nemesis import replay

REPO = Path(__file__).resolve().parents[2]


def undertow(tmp: Path, *args: str) -> Path:
    env = {**os.environ, "UNDERTOW_STATE_DIR": str(tmp / "state")}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", *args,
                        "--results-dir", str(tmp / "results")],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert p.returncode in (0, 1), p.stdout + p.stderr[-3000:]
    return (tmp / "results" / "latest").resolve()


def nemesis_invokes(run: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    return [r for r in rows if r["process"] == "nemesis" and r["type"] == "invoke"]


def aimed(value: dict[str, Any]) -> dict[str, Any]:
    """What a planned value aims at: nodes, or a role/target resolved at injection."""
    return {k: value[k] for k in ("nodes", "target", "role", "kind", "as", "leader_as")
            if k in value}


@pytest.mark.slow
def test_a_replayed_plan_injects_the_same_faults_at_the_same_times(tmp_path: Path) -> None:
    first = undertow(tmp_path, "--time-limit", "12", "--nemesis", "kill,partition",
                     "--nemesis-interval", "2", "--nemesis-targets", "one,leader,followers",
                     "--concurrency", "4", "--keys", "3", "--seed", "7")
    test = json.loads((first / "test.json").read_text())
    plan = replay.steps_from_json(test["nemesis_plan"], "test.json")
    assert any("target" in s.value and "nodes" not in s.value for s in plan)  # a role
    toml = tmp_path / "replay.toml"
    spec = load_test_json(first / "test.json")
    toml.write_text(replay.experiment_toml(spec, plan))
    second = undertow(tmp_path, "--config", str(toml))
    assert second != first
    a, b = nemesis_invokes(first), nemesis_invokes(second)
    assert len(a) == len(b) >= 6
    assert [(x["f"], aimed(x["value"])) for x in a] == [(x["f"], aimed(x["value"])) for x in b]
    # each fault at its planned time, in both runs: never before it (a busy machine only
    # delays a fault that waits for a slow restart, so no upper bound is load-free), and the
    # replay's plan is the first run's (asserted below): a replay that drew its own times
    # would record a plan of its own
    for run, invokes in ((first, a), (second, b)):
        planned = [st for st in json.loads((run / "test.json").read_text())["nemesis_plan"]]
        steps = [x for x in invokes if not x.get("final")]
        assert [st["f"] for st in planned][:len(steps)] == [x["f"] for x in steps]
        early = [(st["at_s"], x["time"] / 1e9) for st, x in zip(planned, steps, strict=False)
                 if x["time"] / 1e9 < float(st["at_s"]) - 0.05]
        assert not early, early
    # the replay recorded the plan it replayed, so it can be replayed again
    assert json.loads((second / "test.json").read_text())["nemesis_plan"] == \
        test["nemesis_plan"]
