"""The nemesis package's scheduling options (nemesis/options.py, issue 34): --nemesis-interval,
--nemesis-targets and --nemesis-schedule, TestSpec fields before, now the package's own:
the same flags under its --help heading, `[standard]` in TOML, `options.standard` in
test.json; old files' top-level keys, scenarios and old test.json files still set them, and
the package plans its faults by them."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.runfiles import RunPaths
from harness.spec import build_spec, load_test_json
from harness.store import write_test_json
from nemesis.options import StandardOptions
from nemesis.packages import FAULTS
from nemesis.schedule import schedule_of
from tests.harness.test_core import help_sections, spec_of

FORMER = ("nemesis_interval_s", "nemesis_targets", "nemesis_schedule")


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, ["run", "--print-spec", *args])


def test_the_flags_are_the_package_s_under_its_heading() -> None:
    s = spec_of("--nemesis-interval", "4", "--nemesis-targets", "one,leader",
                "--nemesis-schedule", "phases")
    own = s["options"]["standard"]
    assert (own["interval_s"], own["targets"], own["schedule"]) == (4.0, ["one", "leader"],
                                                                    "phases")
    assert not set(FORMER) & set(s)  # no longer TestSpec fields
    d = spec_of()["options"]["standard"]  # the defaults as before
    assert (d["interval_s"], d["targets"], d["schedule"]) == \
        (10.0, ["one", "minority", "majority"], "stagger")
    assert spec_of("--nemesis-targets", "none")["options"]["standard"]["targets"] == []
    main_section, own_section = help_sections("the nemesis package standard")
    for flag in ("--nemesis-interval S", "--nemesis-targets T,...", "--nemesis-schedule"):
        assert flag in own_section and flag not in main_section, flag
    assert "--nemesis TEXT" in main_section  # the faults stay the harness's


def test_toml_old_keys_and_scenarios_set_them(tmp_path: Path) -> None:
    new = tmp_path / "new.toml"
    new.write_text('[standard]\ninterval_s = 3\ntargets = ["all"]\n')
    own = spec_of("--config", str(new))["options"]["standard"]
    assert (own["interval_s"], own["targets"]) == (3.0, ["all"])
    old = tmp_path / "old.toml"  # a file written when they were TestSpec fields
    old.write_text('nemesis_interval_s = 6\nnemesis_targets = ["leader"]\n'
                   'nemesis_schedule = "phases"\n')
    own = spec_of("--config", str(old))["options"]["standard"]
    assert (own["interval_s"], own["targets"], own["schedule"]) == (6.0, ["leader"], "phases")
    assert spec_of("--config", str(old), "--nemesis-interval", "2")[
        "options"]["standard"]["interval_s"] == 2.0
    safe = spec_of("--scenario", "safe")["options"]["standard"]
    assert (safe["interval_s"], safe["targets"]) == (8.0, ["one", "minority", "majority",
                                                           "leader"])


@pytest.mark.parametrize("args,needle", [
    (["--nemesis-interval", "0"], "--nemesis-interval (standard.interval_s): must be positive"),
    (["--nemesis-targets", "everyone"],
     "--nemesis-targets (standard.targets): 'everyone' is not one of"),
    (["--nemesis-schedule", "bursty"], "--nemesis-schedule"),
])
def test_a_wrong_value_exits_2_naming_the_option(args: list[str], needle: str) -> None:
    r = _run(*args)
    assert r.exit_code == 2 and needle in r.output, r.output


def test_test_json_records_them_and_an_old_one_s_keys_are_the_package_s(
        tmp_path: Path) -> None:
    spec = build_spec({"seed": 3, "nemesis_interval_s": 5.0, "nemesis_targets": ["leader"]})
    write_test_json(RunPaths(tmp_path), spec)
    saved = json.loads((tmp_path / "test.json").read_text())
    assert saved["options"]["standard"]["targets"] == ["leader"]
    assert not set(FORMER) & set(saved) and saved["extra"] == {}
    back = load_test_json(tmp_path / "test.json")
    assert back.options == spec.options
    assert StandardOptions.of(back).targets == ("leader",)  # a tuple, read back typed
    saved.pop("options")
    saved.update({"nemesis_interval_s": 7.0, "nemesis_targets": ["one", "all"],
                  "nemesis_schedule": "phases"})
    (tmp_path / "test.json").write_text(json.dumps(saved))
    old = StandardOptions.of(load_test_json(tmp_path / "test.json"))
    assert (old.interval_s, old.targets, old.schedule) == (7.0, ("one", "all"), "phases")


def test_the_package_plans_by_them() -> None:
    spec = build_spec({"seed": 1, "time_limit_s": 100, "nemesis": ["kill"]},
                      {"standard": {"targets": ["majority"], "schedule": "phases",
                                    "interval_s": 5}})
    sched = schedule_of(spec)
    assert (sched.kind, sched.interval_s, sched.fault_span) == ("phases", 5.0, (20.0, 70.0))
    steps = FAULTS["kill"].plan(spec, random.Random(1))
    starts = [s for s in steps if s.f == "kill"]
    assert starts and all(s.value["target"] == "majority" for s in starts)
    assert all(20.0 <= s.at_s <= 70.0 for s in steps)
