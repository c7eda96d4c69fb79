"""The nemesis package's own options: how slow a slow link is, how lossy a lossy one, how far
a clock fault shifts a clock (nemesis/options.py, declared as a system's are).

Shown under `Options of the nemesis package standard` by --help, set by a TOML `[standard]`
table (the command line winning; `[nemesis]` cannot be: `nemesis` is the list of faults),
recorded in test.json under `options.standard`, refused with exit 2 when wrong, before
anything starts; the package hands them to the nemeses it builds, so a slow step of a run
carries the delay asked. Old test.json files (none of these) load with the defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from harness import registry
from harness.cli import main
from harness.faultplan import NEMESIS_PACKAGE
from harness.runfiles import Op
from harness.spec import SpecError, build_spec, load_test_json
from harness.spec import TestSpec as Spec  # not collected as a test class
from nemesis.faults import Clock
from nemesis.netfaults import Links
from nemesis.options import StandardOptions
from nemesis.packages import NemesisPackage
from tests.harness.test_core import spec_of

DEFAULTS = {"interval_s": 10.0, "targets": ["one", "minority", "majority"],
            "schedule": "stagger",  # the schedule's (test_package_schedule.py)
            "slow_delay_ms": 100.0, "slow_jitter_ms": 50.0, "lossy_drop_probability": 0.2,
            "clock_bump_max_ms": 10_000.0, "clock_skew_max_ms": 5000.0}


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, ["run", *args])


def _package(spec: Spec) -> NemesisPackage:
    """The run's package as assembly builds it: the registry's part, called with the spec."""
    package: NemesisPackage = registry.get("nemesis", NEMESIS_PACKAGE)(spec)
    return package


def test_help_shows_them_under_the_nemesis_package_s_heading() -> None:
    r = _run("--help")
    assert r.exit_code == 0, r.output
    text = r.output
    own = text.index("Options of the nemesis package standard:")
    assert text.index("Options of --system undertow:") < own  # the systems' first
    for flag in ("--slow-delay-ms MS", "--slow-jitter-ms MS", "--lossy-drop-probability P",
                 "--clock-bump-max-ms MS", "--clock-skew-max-ms MS"):
        assert text.index(flag) > own, flag  # not among the harness's own
    assert "[default: 100.0]" in text[own:]


def test_the_standard_table_and_the_command_line_set_them(tmp_path: Path) -> None:
    assert spec_of()["options"]["standard"] == DEFAULTS
    toml = tmp_path / "slow.toml"
    toml.write_text('nemesis = ["slow", "lossy"]\n'
                    "[standard]\nslow_delay_ms = 30\nslow_jitter_ms = 5\n"
                    "lossy_drop_probability = 0.5\n")
    s = spec_of("--config", str(toml))
    assert s["nemesis"] == ["slow", "lossy"]
    assert s["options"]["standard"] == {**DEFAULTS, "slow_delay_ms": 30.0,
                                        "slow_jitter_ms": 5.0, "lossy_drop_probability": 0.5}
    s = spec_of("--config", str(toml), "--slow-delay-ms", "250", "--clock-skew-max-ms", "0")
    assert s["options"]["standard"] == {**DEFAULTS, "slow_delay_ms": 250.0,  # the command line
                                        "slow_jitter_ms": 5.0, "lossy_drop_probability": 0.5,
                                        "clock_skew_max_ms": 0.0}
    # an `options.standard` table and `--extra` work as for every part
    toml.write_text("[options.standard]\nslow_delay_ms = 7\n")
    assert spec_of("--config", str(toml))["options"]["standard"]["slow_delay_ms"] == 7.0
    assert spec_of("--extra", "slow_jitter_ms=9")["options"]["standard"]["slow_jitter_ms"] == 9.0


def test_test_json_records_them_and_old_test_json_still_loads(tmp_path: Path) -> None:
    spec = build_spec({"nemesis": ["slow"], "standard": {"slow_delay_ms": 40}})
    spec.save(tmp_path / "test.json")
    saved = json.loads((tmp_path / "test.json").read_text())
    assert saved["nemesis"] == ["slow"]  # the faults' list, as before
    assert saved["options"]["standard"] == {**DEFAULTS, "slow_delay_ms": 40.0}
    assert saved["extra"] == {"slow_delay_ms": 40.0}  # extra shows what differs, as for all
    again = load_test_json(tmp_path / "test.json")
    assert again.options == spec.options and StandardOptions.of(again).slow_delay_ms == 40.0
    # a test.json written before the package had options: none recorded, the defaults taken
    old = {"nemesis": ["kill", "slow"], "seed": 4, "options": {"undertow": {}}, "extra": {}}
    (tmp_path / "test.json").write_text(json.dumps(old))
    spec = load_test_json(tmp_path / "test.json")
    assert spec.nemesis == ("kill", "slow") and spec.options["standard"] == DEFAULTS
    assert StandardOptions.of(Spec()) == StandardOptions()  # a spec made by hand


@pytest.mark.parametrize("args,says", [
    (["--slow-delay-ms", "-5"],
     "--slow-delay-ms (standard.slow_delay_ms): expected a number of milliseconds >= 0, "
     "got -5.0"),
    (["--slow-jitter-ms", "-1"], "--slow-jitter-ms (standard.slow_jitter_ms): expected a "
                                 "number of milliseconds >= 0"),
    (["--lossy-drop-probability", "1.5"],
     "--lossy-drop-probability (standard.lossy_drop_probability): expected a probability, "
     "0 to 1, got 1.5"),
    (["--lossy-drop-probability", "-0.1"], "expected a probability, 0 to 1, got -0.1"),
    (["--lossy-drop-probability", "nan"], "expected a probability, 0 to 1, got nan"),
    (["--clock-bump-max-ms", "0"], "--clock-bump-max-ms (standard.clock_bump_max_ms): "
                                   "expected a number of milliseconds > 0, got 0.0"),
    (["--slow-delay-ms", "soon"], "'soon' is not a valid float"),
    (["--extra", "lossy_drop_probability=2"],
     "--lossy-drop-probability (standard.lossy_drop_probability): expected a probability"),
])
def test_a_wrong_value_exits_2_naming_the_option(tmp_path: Path, args: list[str],
                                                 says: str) -> None:
    r = _run("--nemesis", "slow,lossy,clock", *args, "--results-dir", str(tmp_path / "r"))
    assert r.exit_code == 2, r.output
    assert says in r.output.strip().splitlines()[-1], r.output  # one line says why
    assert not (tmp_path / "r").exists()  # before anything starts


@pytest.mark.parametrize("table,says", [
    ('[standard]\nslow_delay_ms = "x"\n',
     "(standard.slow_delay_ms): expected a number, got 'x'"),
    ("[standard]\nslow_delay = 3\n",
     "[standard]: unknown key 'slow_delay'; known: clock_bump_max_ms, clock_skew_max_ms, "
     "interval_s, lossy_drop_probability, schedule, slow_delay_ms, slow_jitter_ms, targets"),
    ("[nemesis]\nslow_delay_ms = 3\n",  # the table a user might guess: `nemesis` is a list
     '[nemesis] must be the list of faults, e.g. ["kill"]; the nemesis package\'s options '
     "go in [standard]"),
])
def test_a_wrong_table_exits_2_naming_the_key(tmp_path: Path, table: str, says: str) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text(table)
    r = _run("--config", str(toml), "--results-dir", str(tmp_path / "r"))
    assert r.exit_code == 2 and says in r.output, r.output
    assert not (tmp_path / "r").exists()
    with pytest.raises(SpecError, match="must be the list of faults"):
        build_spec({"nemesis": {"slow_delay_ms": 3}})


def _links(pkg: NemesisPackage) -> Links:
    parts = getattr(pkg.nemesis, "parts", ())
    return next(p for p in parts if isinstance(p, Links))


def test_the_package_builds_its_links_and_clock_with_them() -> None:
    pkg = _package(build_spec({"nemesis": ["slow", "lossy", "clock"], "seed": 3,
                               "standard": {"slow_delay_ms": 30, "slow_jitter_ms": 0,
                                            "lossy_drop_probability": 1,
                                            "clock_skew_max_ms": 20}}))
    links = _links(pkg)
    assert (links.delay_ms, links.jitter_ms, links.drop_probability) == (30.0, 0.0, 1.0)
    clock = next(p for p in getattr(pkg.nemesis, "parts", ()) if isinstance(p, Clock))
    assert clock.max_skew_ns == 20 * 10**6
    links = _links(_package(build_spec({"nemesis": ["slow"]})))  # no options: as before
    assert (links.delay_ms, links.jitter_ms, links.drop_probability) == (100.0, 50.0, 0.2)


def test_the_clock_plan_draws_within_the_bounds_asked() -> None:
    def shifts(**opts: float) -> list[int]:
        spec = build_spec({"nemesis": ["clock"], "seed": 5, "time_limit_s": 600.0,
                           "nemesis_interval_s": 5.0, "standard": opts})
        plan = _package(spec).plan
        return [abs(int(x)) for s in plan for x in
                ([s.value["delta_ns"]] if "delta_ns" in s.value
                 else dict(s.value.get("offsets_ns", {})).values())]

    wide = shifts()
    assert wide and max(wide) > 1000 * 10**6  # the defaults: up to 10 s and 5 s
    narrow = shifts(clock_bump_max_ms=50, clock_skew_max_ms=30)
    assert narrow and max(narrow) <= 50 * 10**6


class _Net:
    """A Net that records the shaping asked (times nothing, so no landing claim)."""

    def __init__(self) -> None:
        self.slowed: list[tuple[tuple[str, ...], float, float]] = []

    def slow(self, run: Any, nodes: Any, delay_ms: float, jitter_ms: float) -> None:
        self.slowed.append((tuple(nodes), delay_ms, jitter_ms))

    def fast(self, run: Any) -> None:
        pass


def test_a_run_s_slow_step_carries_the_delay_asked() -> None:
    """The planned slow step, invoked as the run invokes it: the Net is asked for the delay
    given on the command line, and the completion (the history's line) records it."""
    spec = build_spec({"nemesis": ["slow"], "seed": 1, "standard": {"slow_delay_ms": 250,
                                                                     "slow_jitter_ms": 10}})
    pkg = _package(spec)
    step = next(s for s in pkg.plan if s.f == "slow")
    net = _Net()
    run = SimpleNamespace(spec=spec, nodes=spec.nodes, net=net, extra={})
    done = pkg.nemesis.invoke(run, Op(type="invoke", process="nemesis", f="slow",  # type: ignore[arg-type]
                                      value=dict(step.value)))
    assert done.error is None, done
    assert done.value["delay_ms"] == 250.0 and done.value["jitter_ms"] == 10.0
    assert net.slowed == [(tuple(done.value["nodes"]), 250.0, 10.0)]
