"""Fault plans as windows, and a recorded plan replayed: the units the shrinker works on."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.faultplan import Step
from harness.spec import SpecError, build_spec
from nemesis import replay
from nemesis.packages import nemesis_package
from nemesis.windows import windows
from systems.undertow.sequences import isr_shrink, kip101_loss


def test_generated_plan_one_window_per_fault_with_its_heal() -> None:
    spec = build_spec({"nemesis": ["kill", "pause", "partition"], "time_limit_s": 60.0,
                       "nemesis_interval_s": 5.0, "seed": 4})
    plan = nemesis_package(spec).plan
    w = windows(plan)
    starts = [s for s in plan if s.f in ("kill", "pause", "partition")]
    assert w.count == len(starts) > 6
    for i in range(w.count):
        members = [plan[j].f for j in w.members(i)]
        assert members in (["kill", "start"], ["pause", "resume"], ["partition", "heal"])
    assert w.restrict(range(w.count)) == w.steps


def test_a_sequence_is_one_window_and_a_shared_heal_belongs_to_both() -> None:
    import random

    seq = kip101_loss(10.0, random.Random(1))
    plain = [Step(9.0, "kill", {"target": "one", "nodes": ["n3"]}), Step(12.0, "start", {})]
    w = windows([*seq, *plain])
    assert w.count == 2
    fs = {i: sorted(w.steps[j].f for j in w.members(i)) for i in range(2)}
    assert fs[0] == ["kill", "start"]  # the plain kill and its start {}
    assert fs[1] == ["kill", "kill", "start", "start", "start"]  # the cycle and that start {}
    assert w.describe(1) == ("kill x2", "followers of a live key as B")
    assert w.describe(0) == ("kill", "n3")
    kept = w.restrict([1])
    assert len(kept) == 5 and {s.f for s in kept} == {"kill", "start"}
    assert [s.f for s in w.restrict([0])] == ["kill", "start"]


def test_a_role_windows_plain_heal_joins_it() -> None:
    import random

    w = windows(isr_shrink(5.0, random.Random(0)))
    assert w.count == 1 and w.span(0) == (5.0, 14.5)


def test_shorten_and_shift_move_only_the_windows_own_steps() -> None:
    plan = [Step(10.0, "kill", {"nodes": ["n1"]}), Step(20.0, "start", {}),
            Step(30.0, "pause", {"nodes": ["n2"]}), Step(34.0, "resume", {})]
    w = windows(plan)
    out = w.restrict([0, 1], scale={0: 0.5}, shift_s=5.0)
    assert [(s.at_s, s.f) for s in out] == [(5.0, "kill"), (10.0, "start"),
                                            (25.0, "pause"), (29.0, "resume")]


def test_a_replayed_spec_runs_its_plan_not_the_drawn_one(tmp_path: Path) -> None:
    spec = build_spec({"nemesis": ["kill", "partition"], "seed": 2, "time_limit_s": 30.0})
    drawn = nemesis_package(spec).plan
    mine = [Step(3.0, "kill", {"target": "leader", "key": 3}), Step(6.0, "start", {})]
    again = replay.replaying(spec, mine, time_limit_s=12.0)
    pkg = nemesis_package(again)
    assert pkg.plan == tuple(mine) != drawn and again.time_limit_s == 12.0
    # written as an experiment file and read back by `undertow run --config`
    from click.testing import CliRunner

    from harness.cli import main

    toml = tmp_path / "min.toml"
    toml.write_text(replay.experiment_toml(again, mine, header="minimal plan\nof a run"))
    assert toml.read_text().startswith("# minimal plan\n# of a run\n")
    r = CliRunner().invoke(main, ["run", "--print-spec", "--config", str(toml)])
    assert r.exit_code == 0, r.output
    import json

    got = json.loads(r.output[r.output.index("{"):])
    assert got["nemesis_plan"] == replay.steps_to_json(mine) and got["time_limit_s"] == 12.0
    assert got["seed"] == 2


@pytest.mark.parametrize("plan,needle", [
    ([{"at_s": -1, "f": "kill"}], "at_s must be a number"),
    ([{"at_s": 1, "f": "kill", "when": 2}], "unknown key"),
    ([{"at_s": 1, "f": "pause", "value": {}}], "'pause' is not a verb of --nemesis kill"),
    ("kill", "must be a list"),
])
def test_a_bad_plan_is_refused_before_anything_starts(plan: object, needle: str) -> None:
    spec = build_spec({"nemesis": ["kill"], "nemesis_plan": plan})
    with pytest.raises(SpecError, match=needle):
        nemesis_package(spec)


def test_a_partition_is_shown_by_its_sides() -> None:
    from nemesis.windows import sides, target_text

    assert sides({"n1": ["n2"], "n2": ["n1", "n3"], "n3": ["n2"]}) == "n2 | n1,n3"
    assert sides({"n1": ["n3"], "n2": [], "n3": ["n1"]}) == "n1 drops n3; n3 drops n1"
    assert target_text({"target": "leader", "key": 3}) == "leader of key 3"
    assert target_text({"role": "A"}) == "role A"


def test_a_kafka_sequence_is_one_window() -> None:
    import random

    from systems.kafka.scenarios import unclean_pauses

    w = windows(unclean_pauses(4.0, random.Random(0)))
    assert w.count == 1 and w.describe(0) == ("pause+kill", "followers of a live key as F")
