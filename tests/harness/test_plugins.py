"""A system and a workload of one's own, plugged in without touching the harness.

tests/plugins/toyplug.py is named in $UNDERTOW_PLUGINS: an in-process key-value log
(its DB can be killed and started, its client sends and polls), and a workload with a
checker of its own; each declares its own options (`--toy-latency-ms`, `--toy-final-polls`).
`undertow run` drives them end to end, to a verdict and a report, as it drives our broker.
tests/plugins/toyfault.py adds a fault of its own (`--nemesis toy-mark`) the same way.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.options import SparkOptions
from nemesis.options import StandardOptions

# the nemesis package's and the checkers' options, at their defaults, recorded beside the
# toy parts' own
NEMESIS = {"standard": json.loads(json.dumps(dataclasses.asdict(StandardOptions()))),
           "checkers": dataclasses.asdict(SparkOptions())}


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
    toml = tmp_path / "toy.toml"
    toml.write_text("[toy]\nlatency_ms = 1\n[toyload]\nfinal_polls = 2\n")
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--system", "toy", "--workload", "toyload",
         "--nemesis", "kill", "--nemesis-interval", "1", "--time-limit", "4", "--seed", "7",
         "--concurrency", "3", "--results-dir", str(results), "--config", str(toml),
         "--toy-latency-ms", "2"],
        capture_output=True, text=True, timeout=240, env=toy_plugin_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("VALID"), out.stdout
    run_dir = (results / "latest").resolve()
    res = json.loads((run_dir / "results.json").read_text())
    assert res["valid"] is True and res["stats"]["toy_sends_ok"] > 10
    assert "liveness" in res["stats"]  # the nemesis package's checker ran too
    test = json.loads((run_dir / "test.json").read_text())
    assert test["system"] == "toy" and test["system_info"] == {"name": "toy", "version": "1"}
    # each part's options under its name: the command line over the file
    assert test["options"] == {"toy": {"latency_ms": 2}, "toyload": {"final_polls": 2},
                               **NEMESIS, "standard": {**NEMESIS["standard"], "interval_s": 1.0}}
    history = (run_dir / "history.jsonl").read_text()
    finals = [json.loads(line) for line in history.splitlines()]
    assert sum(o["f"] == "poll" and o["type"] == "invoke" for o in finals) == 2  # final polls
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


def _undertow(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def test_a_plugin_s_parts_bring_their_own_options(
        tmp_path: Path, toy_plugin_env: dict[str, str]) -> None:
    """The toy system's and workload's options: shown by --help under their part, taken
    from TOML and the command line, refused in one line with exit 2 when wrong."""
    helped = _undertow(["--help"], toy_plugin_env)
    assert helped.returncode == 0, helped.stderr
    text = helped.stdout
    toy = text.index("Options of --system toy:")
    load = text.index("Options of --workload toyload:")
    # each under its own part's heading (systems first), not among the harness's own
    assert toy < text.index("--toy-latency-ms MS") < load < text.index("--toy-final-polls")

    toml = tmp_path / "toy.toml"
    toml.write_text('system = "toy"\nworkload = "toyload"\n[toy]\nlatency_ms = 5\n'
                    "[toyload]\nfinal_polls = 4\n")
    out = _undertow(["--config", str(toml), "--print-spec"], toy_plugin_env)
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)
    assert spec["options"] == {"toy": {"latency_ms": 5}, "toyload": {"final_polls": 4},
                               **NEMESIS}
    out = _undertow(["--config", str(toml), "--toy-latency-ms", "7", "--print-spec"],
                    toy_plugin_env)
    assert json.loads(out.stdout)["options"]["toy"] == {"latency_ms": 7}

    toy_run = ["--system", "toy", "--workload", "toyload", "--results-dir", str(tmp_path / "r")]
    for args, says in (
            (["--toy-latency-ms", "5000"], "--toy-latency-ms (toy.latency_ms): expected 0 to "
                                           "1000 ms, got 5000"),
            (["--toy-latency-ms", "soon"], "'soon' is not a valid integer"),
            (["--toy-final-polls", "0"], "--toy-final-polls (toyload.final_polls): expected >= 1"),
            (["--system", "undertow", "--workload", "queue", "--toy-latency-ms", "1"],
             "--toy-latency-ms: only --system toy has them, not undertow")):
        out = _undertow([*toy_run, *args], toy_plugin_env)
        assert out.returncode == 2, out
        assert says in out.stderr.strip().splitlines()[-1], out.stderr  # one line says why
    for table, says in (('[toy]\nlatency_ms = "x"\n', "expected an integer, got 'x'"),
                        ("[toy]\nlatencyms = 1\n", "unknown key 'latencyms'; known: latency_ms"),
                        ("[toyload]\nfinal_polls = -2\n", "expected >= 1, got -2")):
        toml.write_text('system = "toy"\nworkload = "toyload"\n' + table)
        out = _undertow(["--config", str(toml), "--results-dir", str(tmp_path / "r")],
                        toy_plugin_env)
        assert out.returncode == 2 and says in out.stderr, out.stderr
    assert not (tmp_path / "r").exists()


def test_a_plugin_s_fault_is_planned_healed_recorded_and_drawn(
        tmp_path: Path, toy_plugin_env: dict[str, str]) -> None:
    """`--nemesis toy-mark,kill` from tests/plugins/toyfault.py, which nothing else names:
    planned on the run's schedule beside a built-in fault, each completion with its
    evidence, healed by the final heal after the built-ins' heals, its kind in test.json,
    its heals counted by liveness, its lane in the report; unknown without the plug-in."""
    env = {**toy_plugin_env, "UNDERTOW_PLUGINS": "toyplug,toyfault"}
    results = tmp_path / "results"
    out = _undertow(["--system", "toy", "--workload", "toyload", "--nemesis", "toy-mark,kill",
                     "--nemesis-interval", "1", "--time-limit", "5", "--seed", "3",
                     "--concurrency", "3", "--results-dir", str(results)], env)
    assert out.returncode == 0 and out.stdout.startswith("VALID"), out.stdout + out.stderr
    run_dir = (results / "latest").resolve()
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    marks = [o for o in ops if o["process"] == "nemesis" and o["type"] == "info"
             and o["f"] in ("toy-mark", "toy-unmark")]
    assert any(o["f"] == "toy-mark" and not o.get("final") for o in marks), marks
    assert all(o["landed"] is True and "marks" in o["evidence"] for o in marks), marks
    finals = [o["f"] for o in ops if o["process"] == "nemesis" and o["type"] == "invoke"
              and o.get("final")]
    assert finals == ["start", "toy-unmark"], finals  # built-ins' heals first, then its own
    assert not any((run_dir / "toy-marks").iterdir())  # every mark taken away
    test = json.loads((run_dir / "test.json").read_text())
    assert {"start": "toy-mark", "stop": "toy-unmark", "colour": "#2ca02c",
            "label": "toy mark", "aims": "nodes"} in test["fault_kinds"]
    heals = sum(o["f"] in ("start", "toy-unmark") and not o.get("final") for o in ops
                if o["process"] == "nemesis" and o["type"] == "info")
    res = json.loads((run_dir / "results.json").read_text())
    assert res["stats"]["liveness"]["heals"] == heals > 0
    assert "toy mark" in (run_dir / "report.html").read_text()

    plain = _undertow(["--system", "toy", "--workload", "toyload", "--nemesis", "toy-mark",
                       "--results-dir", str(tmp_path / "r")], toy_plugin_env)
    assert plain.returncode == 2, plain
    assert "--nemesis: 'toy-mark' unknown; known: " in plain.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "r").exists()
