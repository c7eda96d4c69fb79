"""A system and a workload of one's own, plugged in without touching the harness.

tests/plugins/toyplug.py is named in $UNDERTOW_PLUGINS: an in-process key-value log
(its DB can be killed and started, its client sends and polls), and a workload with a
checker of its own. `undertow run` drives them end to end, to a verdict and a report,
as it drives our broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def test_unknown_system_and_workload_are_usage_errors(tmp_path: Path) -> None:
    for opt, name in (("--system", "nope"), ("--workload", "nope")):
        out = subprocess.run([sys.executable, "-m", "harness.cli", "run", opt, name,
                              "--results-dir", str(tmp_path / "r")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out
        assert f"{opt}: 'nope' is not known" in out.stderr
        assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_toy_system_and_workload_run_end_to_end(
        tmp_path: Path, toy_plugin_env: dict[str, str]) -> None:
    """`undertow run --system toy --workload toyload`: kills included, a verdict, a report."""
    results = tmp_path / "results"
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--system", "toy", "--workload", "toyload",
         "--nemesis", "kill", "--nemesis-interval", "1", "--time-limit", "4", "--seed", "7",
         "--concurrency", "3", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=240, env=toy_plugin_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("VALID"), out.stdout
    run_dir = (results / "latest").resolve()
    res = json.loads((run_dir / "results.json").read_text())
    assert res["valid"] is True and res["stats"]["toy_sends_ok"] > 10
    assert "liveness" in res["stats"]  # the nemesis package's checker ran too
    test = json.loads((run_dir / "test.json").read_text())
    assert test["system"] == "toy" and test["system_info"] == {"name": "toy", "version": "1"}
    history = (run_dir / "history.jsonl").read_text()
    assert '"f":"kill"' in history.replace(" ", "") and '"f":"poll"' in history.replace(" ", "")
    assert (run_dir / "report.html").stat().st_size > 1000


def test_the_toy_system_refuses_a_workload_it_does_not_speak(
        tmp_path: Path, toy_plugin_env: dict[str, str]) -> None:
    out = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--system", "toy",
                          "--results-dir", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=60, env=toy_plugin_env)
    assert out.returncode == 2, out
    assert "the toy system speaks only toyload" in out.stderr
    assert not (tmp_path / "r").exists()
