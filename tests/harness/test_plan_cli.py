"""`undertow plan RUN_DIR`: a run's recorded fault plan as an experiment file that `undertow
run --config` replays, on the run's system or another; bad input exits 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner

from checkers.options import SparkOptions
from harness.cli import main as cli
from harness.runfiles import RunPaths
from harness.spec import build_spec
from harness.store import write_test_json
from harness.test import assemble
from nemesis.options import StandardOptions
from systems.undertow.options import UndertowOptions
from tests.harness.test_core import spec_of
from workloads.options import QueueOptions


def _recorded_run(tmp_path: Path, **settings: object) -> tuple[Path, list[dict[str, object]]]:
    """A run folder's test.json as `undertow run` writes it: the spec and the plan its seed
    draws (the nemesis package's own plan), with an option of our broker's set."""
    spec = build_spec({"nemesis": ["kill", "partition"], "seed": 42, "time_limit_s": 30.0,
                       "extra": {"controller_voters": 3}, **settings})
    pkg = assemble(spec).nemesis
    plan = pkg.plan_json() if pkg is not None else []
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_test_json(RunPaths(run_dir), spec, nemesis_plan=plan)
    return run_dir, plan


def test_the_plan_replays_on_the_same_system_and_on_another(tmp_path: Path) -> None:
    run_dir, plan = _recorded_run(tmp_path, producer={"delivery_timeout_ms": 5000})
    assert plan and {s["f"] for s in plan} >= {"kill", "partition"}
    same = CliRunner().invoke(cli, ["plan", str(run_dir)])
    assert same.exit_code == 0, same.output
    assert same.output.startswith(f"# replay of run (system undertow, seed 42): {len(plan)} ")
    (tmp_path / "same.toml").write_text(same.output)
    spec = spec_of("--config", str(tmp_path / "same.toml"))
    assert spec["nemesis_plan"] == plan and spec["seed"] == 42
    assert spec["system"] == "undertow" and spec["options"] == {
        "undertow": {**dataclasses.asdict(UndertowOptions()), "controller_voters": 3,
                     "delivery_timeout_ms": 5000},
        "standard": json.loads(json.dumps(dataclasses.asdict(StandardOptions()))),  # package's
        "queue": dataclasses.asdict(QueueOptions()),  # the workload's
        "checkers": dataclasses.asdict(SparkOptions())}  # the checkers' (which Spark)

    out = CliRunner().invoke(cli, ["plan", str(run_dir), "--system", "kafka", "-o",
                                   str(tmp_path / "kafka.toml")])
    assert out.exit_code == 0, out.output
    kafka = spec_of("--config", str(tmp_path / "kafka.toml"), "--kafka-version", "4.4.0")
    assert kafka["system"] == "kafka" and kafka["nemesis_plan"] == plan
    # the settings both systems take carry over; our broker's own ones are not Kafka's
    assert kafka["broker"] == {k: v for k, v in spec["broker"].items()
                               if k not in ("truncation", "txn_epoch_fencing",
                                            "offsets_commit_acks")}
    assert kafka["time_limit_s"] == 30.0
    options = kafka["options"]
    assert isinstance(options, dict) and "undertow" not in options
    assert options["kafka"]["kafka_version"] == "4.4.0"  # the command line adds to the file
    # a setting both systems declare alike carries over, one declared apart does not
    assert options["kafka"]["delivery_timeout_ms"] == 5000
    assert options["kafka"]["controller_voters"] == 0


def test_bad_input_exits_2_and_says_what_is_wrong(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["plan", str(tmp_path)])
    assert out.exit_code == 2 and "test.json: no such file" in out.output, out.output
    run_dir, _ = _recorded_run(tmp_path, nemesis=[])
    out = CliRunner().invoke(cli, ["plan", str(run_dir)])
    assert out.exit_code == 2 and "recorded no fault plan" in out.output, out.output
    run_dir = tmp_path / "other"
    run_dir.mkdir()
    write_test_json(RunPaths(run_dir), build_spec({"seed": 1}),
                    nemesis_plan=[{"at_s": 1.0, "f": "kill", "value": {"nodes": ["n1"]}}])
    out = CliRunner().invoke(cli, ["plan", str(run_dir), "--system", "nope"])
    assert out.exit_code == 2 and "'nope' is not a system; known: " in out.output, out.output
