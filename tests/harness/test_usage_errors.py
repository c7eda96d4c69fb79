"""A spec error is found before anything is made: exit 2, one line naming the option.

Drives the real CLI in a subprocess, so what a person sees (both streams) is
what is checked, and the results folder shows whether anything was created.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UNDERTOW_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--results-dir", str(tmp_path / "results"),
         "--time-limit", "5", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args,option", [
    (["--backend", "ssh"], "--backend ssh"),
    (["--nemesis", "bogus"], "--nemesis"),
    (["--nemesis-interval", "-1"], "--nemesis-interval"),
    (["--replication-factor", "4"], "--replication-factor"),
    (["--nodes", "2"], "--replication-factor"),
    (["--config", "{toml}"], "frobnicate"),
    (["--retries", "-1"], "--retries"),
    (["--request-timeout-ms", "5000"], "--request-timeout-ms"),
], ids=["ssh-without-node", "unknown-nemesis", "negative-interval", "rf-above-nodes",
        "too-few-nodes", "toml-unknown-key", "negative-retries", "attempt-beyond-delivery"])
def test_spec_error_exits_2_with_one_line_and_no_run_folder(
        tmp_path: Path, args: list[str], option: str) -> None:
    toml = tmp_path / "exp.toml"
    toml.write_text("time_limit_s = 3\nfrobnicate = 1\n")
    r = run_cli(tmp_path, *(a.replace("{toml}", str(toml)) for a in args))
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: ") and option in lines[0], lines[0]
    assert not (tmp_path / "results").exists()
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())
