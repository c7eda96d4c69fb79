"""`undertow shrink` on the toyshrink system of tests/plugins/toyplug.py, with a planted bug:
lost writes only when n1 was killed and n2 paused in the same run. From a failing run of eight
fault windows it must find exactly those two, in a few trials."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# eight windows, one after another; the bug needs the third and the sixth
WINDOWS = [("kill", "n2"), ("pause", "n1"), ("kill", "n1"), ("pause", "n3"), ("kill", "n3"),
           ("pause", "n2"), ("kill", "n2"), ("pause", "n3")]
HEAL = {"kill": "start", "pause": "resume"}


def experiment(tmp_path: Path) -> Path:
    lines = ['system = "toyshrink"', 'workload = "toyload"', 'nemesis = ["kill", "pause"]',
             "time_limit_s = 4.0", "concurrency = 2", "seed = 3", ""]
    for i, (verb, node) in enumerate(WINDOWS):
        t = 0.4 + 0.3 * i
        for at, f, value in ((t, verb, f'{{ nodes = ["{node}"] }}'), (t + 0.2, HEAL[verb], "{}")):
            lines += ["[[nemesis_plan]]", f"at_s = {at:.2f}", f'f = "{f}"', f"value = {value}", ""]
    path = tmp_path / "planted.toml"
    path.write_text("\n".join(lines))
    return path


def undertow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_shrink_finds_exactly_the_two_planted_faults(
        tmp_path: Path, toy_plugin_env: dict[str, str]) -> None:
    results = tmp_path / "results"
    first = undertow(toy_plugin_env, "run", "--config", str(experiment(tmp_path)),
                     "--results-dir", str(results))
    assert first.returncode == 1 and first.stdout.startswith("INVALID"), first.stdout + first.stderr
    run_dir = (results / "latest").resolve()
    out = undertow(toy_plugin_env, "shrink", str(run_dir), "--tries", "1")
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    (shrink_dir,) = [d.resolve() for d in results.glob("shrink-*/latest")]
    s = json.loads((shrink_dir / "shrink.json").read_text())
    rows = s["minimal"]["rows"]
    assert [(r["fault"], r["target"]) for r in rows] == [("kill", "n1"), ("pause", "n2")]
    assert s["original"]["windows"] == 8 and s["minimal"]["reproduced"] == 1
    assert len(s["trials"]) <= 12, len(s["trials"])  # a few trials, whatever the load
    assert len(list((shrink_dir / "trials").iterdir())) == len(s["trials"])
    assert "kill" in out.stdout and "8 -> 2 fault windows" in out.stdout
    # the minimal plan, replayed from its experiment file, fails the same way
    again = undertow(toy_plugin_env, "run", "--config", str(shrink_dir / "minimal.toml"),
                     "--results-dir", str(results))
    assert again.returncode == 1 and "lost-write" in again.stdout, again.stdout + again.stderr
    html = (shrink_dir / "shrink.html").read_text()
    assert html.count("report") >= len(s["trials"]) and 'href="minimal.toml"' in html
