"""`undertow run`: option layering (fast) and a short run end to end on the local backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main

REPO = Path(__file__).resolve().parents[2]


def spec_of(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(main, ["run", "--print-spec", *args])
    assert r.exit_code == 0, r.output
    spec: dict[str, Any] = json.loads(r.output[r.output.index("{"):])
    return spec


def help_sections(part: str) -> tuple[str, str]:
    """`undertow run --help` cut in two: the harness's own options (before the first
    part's heading), and the options under `Options of PART:` (to the next blank line)."""
    text = CliRunner().invoke(main, ["run", "--help"]).output
    own = text[text.index(f"Options of {part}:"):]
    return text.partition("Options of ")[0], own[:own.index("\n\n")] if "\n\n" in own else own


def test_defaults_are_the_default_experiment() -> None:
    s = spec_of()
    keys = s["options"]["queue"]["keys"]  # the workload's own (workloads/options.py)
    assert (s["backend"], s["node_count"], s["workload"], keys, s["concurrency"]) == \
        ("local", 3, "queue", 8, 10)
    assert s["nemesis"] == ["kill", "partition"] and s["time_limit_s"] == 60
    assert s["broker"]["acks"] == "all" and s["broker"]["min_insync_replicas"] == 2
    assert isinstance(s["seed"], int)
    assert spec_of()["seed"] != s["seed"] or spec_of()["seed"] != s["seed"]  # random


def test_extra_knobs_join_the_scenario_s() -> None:
    s = spec_of("--scenario", "kafka-acks-1", "--extra", "kafka_version=4.0.2",
                "--extra", "controller_voters=2")
    assert s["extra"] == {"controller_voters": 2, "kafka_version": "4.0.2"}
    r = CliRunner().invoke(main, ["run", "--print-spec", "--extra", "novalue"])
    assert r.exit_code == 2 and "expected KEY=VALUE" in r.output


def test_layers_defaults_toml_cli(tmp_path: Path) -> None:
    toml = tmp_path / "exp.toml"
    toml.write_text('time_limit_s = 20\nkeys = 4\nnemesis = "pause"\nseed = 9\n'
                    '[broker]\nacks = "1"\ntruncation = "hw"\n')
    s = spec_of("--config", str(toml), "--keys", "6", "--no-unclean-leader-election")
    assert s["time_limit_s"] == 20 and s["options"]["queue"]["keys"] == 6
    assert s["nemesis"] == ["pause"]
    assert s["seed"] == 9 and s["broker"]["acks"] == "1" and s["broker"]["truncation"] == "hw"
    s = spec_of("--config", str(toml), "--acks", "all", "--nemesis", "none", "--seed", "3")
    assert s["broker"]["acks"] == "all" and s["nemesis"] == [] and s["seed"] == 3
    assert s["broker"]["truncation"] == "hw"  # still from the file


def test_examples_experiment_toml_is_valid() -> None:
    s = spec_of("--config", str(REPO / "examples" / "experiment.toml"))
    assert s["workload"] == "queue"


def test_scenario_layer_under_the_command_line() -> None:
    from harness.scenarios import all_scenarios

    SCENARIOS = all_scenarios()

    name = sorted(SCENARIOS)[0]
    s = spec_of("--scenario", name, "--time-limit", "7")
    assert s["scenario"] == name and s["time_limit_s"] == 7


@pytest.mark.parametrize("args,needle", [
    (["--replication-factor", "5"], "exceeds"),
    (["--nemesis-targets", "everyone"], "--nemesis-targets"),
    (["--config", "/nonexistent.toml"], "no such file"),
    (["--concurrency", "0"], "positive"),
    (["--keys", "3", "--key-pool", "2"], "--key-pool 2: must be at least --keys (3)"),
    (["--max-writes-per-key", "0"], "--max-writes-per-key (queue.max_writes_per_key): must be"),
    (["--max-poll-records", "-1"], "--max-poll-records (queue.max_poll_records): must be"),
])
def test_bad_options_exit_2_with_a_clear_message(args: list[str], needle: str) -> None:
    r = CliRunner().invoke(main, ["run", *args])
    assert r.exit_code == 2
    assert needle in r.output


def test_unknown_toml_key_is_named(tmp_path: Path) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text("tme_limit_s = 3\n")
    r = CliRunner().invoke(main, ["run", "--config", str(toml)])
    assert r.exit_code == 2 and "tme_limit_s" in r.output


@pytest.mark.slow
def test_short_run_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`undertow run` in this process (click's runner), as a user's command line runs it."""
    env = {**os.environ, "UNDERTOW_STATE_DIR": str(tmp_path / "state")}
    monkeypatch.setenv("UNDERTOW_STATE_DIR", env["UNDERTOW_STATE_DIR"])
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: stderr is a terminal (the status line)
    p = CliRunner().invoke(main, [
        "run", "--time-limit", "10", "--nemesis", "kill",
        "--nemesis-interval", "2", "--nemesis-schedule", "phases", "--concurrency", "5",
        "--keys", "3", "--max-writes-per-key", "40", "--key-pool", "64", "--seed", "11",
        "--results-dir", str(tmp_path / "results")])
    assert p.exit_code == 0, p.output[-3000:] + repr(p.exception)
    assert p.stderr.startswith("undertow run: queue-kill, undertow on 3 nodes (local)")
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("VALID") and "report" in last
    # the live status line, redrawn on stderr while the run went on
    assert re.search(r"\[running\] +[\d.]+/10 s \| ok \d+ fail \d+ info \d+ \| faults: ",
                     p.stderr), p.stderr[-2000:]
    run = (tmp_path / "results" / "latest").resolve()
    assert run.parent.name == "queue-kill"
    for f in ("test.json", "history.jsonl", "replicas.jsonl", "results.json", "report.html",
              "harness.log"):
        assert (run / f).stat().st_size > 0, f
    test = json.loads((run / "test.json").read_text())
    assert test["seed"] == 11 and test["nodes"] == ["n1", "n2", "n3"]
    assert test["name"] == run.parent.name  # the derived name, not the spec's default
    rows = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    assert any(r["f"] == "kill" for r in rows) and any(r["f"] == "start" for r in rows)
    assert sum(1 for r in rows if r["f"] == "send" and r["type"] == "ok") > 50
    # keys rotate: at most 40 sends each until all 64 of the pool were written (a fast
    # machine goes round again), and the final reads read each one from offset 0
    sent = Counter(r["value"][0][1] for r in rows if r["f"] == "send" and r["type"] == "invoke")
    laps = -(-sum(sent.values()) // (40 * 64))
    assert len(sent) > 3 and max(sent.values()) <= 40 * (laps + 1)
    assert len(sent) == 64 or max(sent.values()) <= 40
    final = [r for r in rows if r["f"] == "assign" and r["type"] == "invoke"
             and r["time"] > 10e9 and r.get("seek_to_beginning")]
    assert {k for r in final for k in r["value"]} == set(sent)
    assert (run / "nodes" / "n1").is_dir()
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    # the harness adds how fast the cluster served again after each heal (start = a heal)
    live = results["stats"]["liveness"]
    # the harness's own final heal ("final": true) is no fault's heal: liveness leaves it out
    starts = sum(1 for r in rows if r["f"] == "start" and r["type"] == "info"
                 and not r.get("final"))
    assert live["heals"] == starts >= 1 and live["recovered"] >= 1 and live["ok"] is True
    # phases: no fault in the steady first 2 s nor in the recovery after 7 s; the report says so
    assert [p["name"] for p in test["nemesis_phases"]] == ["steady", "faults", "recovery"]
    # (times count from the history's start, which is when the schedule starts; the final
    # heal comes after the 10 s limit). The schedule decides when a fault begins; how long a
    # restart then takes is the machine's business, so only invocations are checked.
    # The plan says when each fault begins; a busy machine only delays what follows a slow
    # restart, never starts a fault early: the plan is checked, the history bounded below.
    planned = [st["at_s"] for st in test["nemesis_plan"] if st["f"] == "kill"]
    assert planned and all(2.0 <= t < 7.5 for t in planned), planned
    fault_s = [r["time"] / 1e9 for r in rows if r["f"] == "kill" and r["type"] == "invoke"]
    assert fault_s and all(t >= 2.0 for t in fault_s), fault_s
    html = (run / "report.html").read_text()
    assert 'id="liveness-table"' in html and "steady 0\u20132 s, faults 2\u20137 s" in html
    # `undertow check` judges the folder by the run's own checkers (from test.json):
    # liveness too, with the same figures as the run's
    (run / "results.json").unlink()
    c = subprocess.run([sys.executable, "-m", "harness.cli", "check", "--spark", "cold",
                        "--spark-master", "local[2]", str(run)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert c.returncode == 0, c.stdout + c.stderr[-3000:]
    again = json.loads((run / "results.json").read_text())
    assert again["valid"] is True and again["stats"]["liveness"] == live
    for field in ("anomaly_types", "counts"):
        assert again[field] == results[field]


def test_the_verdict_line_shows_the_longest_outages_beside_safety(tmp_path: Path) -> None:
    from harness.core import Outcome

    av: dict[str, Any] = {
        "longest_without_ok": {"send": {"s": 10.7, "from_s": 8.7, "to_s": 19.4},
                               "poll": {"s": 0.4, "from_s": 1.0, "to_s": 1.4}}}
    line = Outcome(tmp_path, True, {"valid": True, "availability": av}, None).summary()
    assert line.startswith("VALID: no anomalies; availability: longest no ok send for 10.7 s "
                           "(8.7-19.4); run ")
    assert "poll" not in line  # under a second: no outage worth a word
    assert "availability" not in Outcome(tmp_path, True, {"valid": True}, None).summary()
    # polls kept succeeding, empty: the key whose records sat unread is named
    av["poll_by_key_worst"] = {"key": 3, "s": 5.1, "from_s": 1.1, "to_s": 6.2}
    line = Outcome(tmp_path, True, {"valid": True, "availability": av}, None).summary()
    assert "longest no ok send for 10.7 s (8.7-19.4), key 3 unread for 5.1 s (1.1-6.2); " \
        in line
