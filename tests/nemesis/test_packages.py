"""Packages and scenarios: seeded plans, alternating fault and heal, a final heal of all."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from harness import faultkinds as fk
from harness import generator as gen
from harness.scenarios import all_scenarios
from harness.spec import SpecError, build_spec
from nemesis.packages import FAULTS, known_faults, nemesis_package
from systems.kafka.options import KafkaOptions
from systems.settings import LogOptions
from systems.undertow.options import UndertowOptions
from workloads.options import QueueOptions

if TYPE_CHECKING:
    from harness.spec import TestSpec

SCENARIOS = all_scenarios()


def _broker(spec: TestSpec) -> dict[str, object]:
    """The system's settings that were the spec's broker table (test.json still has it)."""
    return dict(spec.to_json()["broker"])

CLOSE = {"kill": "start", "pause": "resume", "partition": "heal", "slow": "fast",
         "lossy": "fast", "clock-bump": "clock-reset", "clock-skew": "clock-reset"}


def plan_of(**spec: object) -> list[dict[str, object]]:
    return nemesis_package(build_spec({"time_limit_s": 120.0, **spec})).plan_json()


def test_the_same_seed_replays_the_same_plan_and_another_seed_does_not() -> None:
    a = plan_of(seed=7, nemesis=("kill", "partition", "pause"))
    assert a == plan_of(seed=7, nemesis=("kill", "partition", "pause"))
    assert a != plan_of(seed=8, nemesis=("kill", "partition", "pause"))
    assert len(a) > 10 and all(s["at_s"] > 0 for s in a)  # type: ignore[operator]
    faults = [s for s in a if s["f"] in CLOSE]
    assert all(s["at_s"] < 120 for s in faults)  # type: ignore[operator]


@pytest.mark.parametrize("fault", ["kill", "pause", "partition", "slow", "lossy", "clock"])
def test_each_fault_alternates_with_its_heal_and_names_its_targets(fault: str) -> None:
    steps = plan_of(seed=1, nemesis=(fault,), nemesis_targets=("one", "minority", "majority"))
    fs = [s["f"] for s in steps]
    for i in range(0, len(fs) - 1, 2):
        assert CLOSE[str(fs[i])] == fs[i + 1]
    for s in steps[::2]:
        v = s["value"]
        assert isinstance(v, dict)
        assert v.get("nodes") or v.get("grudge")  # resolved from the seed, into the op


def test_dynamic_targets_are_left_for_injection_time() -> None:
    steps = plan_of(seed=2, nemesis=("kill",), nemesis_targets=("leader",))
    v = steps[0]["value"]
    assert isinstance(v, dict) and v["target"] == "leader" and "nodes" not in v
    assert v["key"] == "live"  # a key being written, found when injected


def test_generator_emits_the_plan_at_its_offsets_then_the_final_heal() -> None:
    spec = build_spec({"seed": 3, "nemesis": ("kill", "partition"), "time_limit_s": 60.0})
    pkg = nemesis_package(spec)
    whole = gen.phases(gen.time_limit(60, gen.nemesis(pkg.generator)),
                       gen.nemesis(pkg.final_generator))
    hist = gen.simulate(whole, concurrency=2, seed=3)
    invokes = [o for o in hist if o.type == "invoke"]
    planned = [s for s in pkg.plan if s.at_s < 60]
    assert [o.f for o in invokes[:len(planned)]] == [s.f for s in planned]
    for o, s in zip(invokes, planned, strict=False):
        assert abs(o.time / 1e9 - s.at_s) < 0.01
    heals = fk.stops(fk.KINDS)  # the built-ins' order: start before resume
    assert [o.f for o in invokes[len(planned):]] == [f for f in heals if f in pkg.nemesis.fs]
    assert all(o.process == "nemesis" for o in hist)
    # only the final heal is marked final, on its invocations and their completions
    finals = [o for o in hist if o.extra.get("final") is True]
    assert finals == [o for o in hist if o.time >= invokes[len(planned)].time]
    assert len(finals) == 2 * len(invokes[len(planned):])


def test_unknown_faults_are_named() -> None:
    with pytest.raises(SpecError, match="'explode' unknown"):
        nemesis_package(build_spec({"nemesis": ("explode",)}))


def test_scenarios_are_exactly_the_known_bugs_and_build() -> None:
    assert set(SCENARIOS) == {"kip101-loss", "kip101-divergence", "isr-shrink-2013",
                              "unclean-election", "last-replica-standing", "safe",
                              "retries-without-idempotence", "read-uncommitted",
                              "zombie-producer", "offsets-commit-acks-1",
                              "kafka-safe", "kafka-unclean-election", "kafka-acks-1",
                              "kafka-read-uncommitted", "kafka-retries-without-idempotence",
                              "kafka-last-replica-standing",
                              "kafka-kip101-loss", "kafka-kip101-divergence",
                              "kafka-txn-late-marker", "kafka-txn-late-marker-slow",
                              "kafka-coordinator-isolation"}
    known = known_faults()
    for name, s in SCENARIOS.items():
        spec = build_spec(s.settings)
        assert spec.scenario == name and spec.time_limit_s <= 120
        assert all(f in known for f in spec.nemesis)
        pkg = nemesis_package(spec)
        assert pkg.plan, name
        assert s.safe == (name in ("safe", "kafka-safe"))
    safe = build_spec(SCENARIOS["safe"].settings)
    assert set(safe.nemesis) == {"kill", "pause", "partition"}
    own = UndertowOptions.of(safe)
    assert own.truncation == "leader-epoch" and own.min_insync_replicas == 2
    assert UndertowOptions.of(build_spec(SCENARIOS["kip101-loss"].settings)).truncation == "hw"
    assert set(FAULTS) >= {"kill", "pause", "partition", "slow", "lossy", "clock",
                           "lose-unflushed"}


def test_scenarios_cli_lists_every_scenario_with_settings() -> None:
    from click.testing import CliRunner

    from harness.scenarios_cli import scenarios

    out = CliRunner().invoke(scenarios, []).output
    for name in SCENARIOS:
        assert name in out
    assert "truncation=hw" in out and "replica-divergence" in out


def test_known_bug_scenarios_keep_one_controller_voter_and_safe_a_quorum() -> None:
    """The sequences kill two replicas; a 3-voter quorum on those nodes would stop elections."""
    from harness.spec import build_spec
    from systems.undertow.admin import controller_voters

    # no sequence (any faults), or one that stops no node (clients lose a leader's answers)
    # offsets-commit-acks-1 stops only the coordinator: the other voters elect meanwhile
    ordinary_faults = {"read-uncommitted", "zombie-producer", "kafka-read-uncommitted",
                       "offsets-commit-acks-1",
                       "kafka-retries-without-idempotence",
                       "kafka-txn-late-marker",  # pauses only: every node comes back
                       "kafka-txn-late-marker-slow",  # pauses and slow links: the same
                       "kafka-coordinator-isolation"}  # a partition of one node at a time
    for name, sc in SCENARIOS.items():
        if "kafka_version" in sc.settings.get("extra", {}):
            continue  # a ZooKeeper-era release: its controller is a broker ZooKeeper elects
        spec = build_spec(sc.settings)
        if spec.system == "kafka":  # its own option: N dedicated controllers (0: every node)
            k = KafkaOptions.of(spec).controller_voters
            voters = list(spec.nodes[:k] if k else spec.nodes)
        else:
            voters = controller_voters(spec)
        quorum = sc.safe or name in ordinary_faults
        assert voters == (["n1", "n2", "n3"] if quorum else ["n1"]), name


@pytest.mark.parametrize("nemesis", [("kill", "pause", "partition"), ("kip101-loss",),
                                     ("last-replica",), ("clock", "lose-unflushed")])
def test_phases_keep_faults_between_the_steady_and_the_recovery_phase(
        nemesis: tuple[str, ...]) -> None:
    spec = build_spec({"seed": 11, "nemesis": nemesis, "nemesis_schedule": "phases",
                       "time_limit_s": 100.0, "nemesis_interval_s": 8.0})
    pkg = nemesis_package(spec)
    assert pkg.schedule is not None
    assert [(p["name"], p["from_s"], p["to_s"]) for p in pkg.schedule["phases"]] == [
        ("steady", 0.0, 20.0), ("faults", 20.0, 70.0), ("recovery", 70.0, 100.0)]
    steps = pkg.plan_json()
    assert steps, "the fault phase holds faults"
    assert all(20.0 <= float(s["at_s"]) <= 70.0 for s in steps)
    # every fault opened in the fault phase is closed in it: nothing is left for recovery
    open_faults: dict[str, int] = {}
    for s in steps:
        f = str(s["f"])
        if f in CLOSE:
            open_faults[CLOSE[f]] = open_faults.get(CLOSE[f], 0) + 1
        elif f in open_faults:
            open_faults[f] = 0
    assert not any(open_faults.values()), open_faults


def test_stagger_spreads_faults_over_the_whole_run_and_phases_leave_it_quiet_at_the_end() -> None:
    stagger = plan_of(seed=5, nemesis=("kill",), nemesis_interval_s=5.0)
    phases = plan_of(seed=5, nemesis=("kill",), nemesis_interval_s=5.0, nemesis_schedule="phases")
    assert max(float(s["at_s"]) for s in stagger) > 100.0  # type: ignore[arg-type]
    assert max(float(s["at_s"]) for s in phases) <= 84.0  # type: ignore[arg-type]
    assert min(float(s["at_s"]) for s in phases) >= 24.0  # type: ignore[arg-type]


def test_an_unknown_schedule_is_named() -> None:
    with pytest.raises(SpecError, match=r"--nemesis-schedule \(standard.schedule\): 'bursty' "
                       "is not one of"):
        build_spec({"nemesis_schedule": "bursty"})


def test_each_known_bug_names_the_options_that_fix_it_and_they_build_a_fixed_spec() -> None:
    """`fixed_by` through the real CLI layering: the same sequence, the bug's setting undone."""
    import click
    from click.testing import CliRunner

    from harness.run_cli import RunCommand, build_run_spec, run

    seen: dict[str, object] = {}

    @click.command(cls=RunCommand, params=run.params)  # the parts' options too
    @click.pass_context
    def capture(ctx: click.Context, /, **params: object) -> None:
        seen["spec"] = build_run_spec(ctx, params)

    for name, sc in SCENARIOS.items():
        if sc.safe:
            assert not sc.fixed_by
            continue
        assert sc.fixed_by, name
        res = CliRunner().invoke(capture, ["--scenario", name, "--seed", "1", *sc.fixed_by])
        assert res.exit_code == 0, res.output
        fixed = seen["spec"]
        assert isinstance(fixed, type(build_spec({})))
        unsafe = build_spec(sc.settings)
        assert fixed.nemesis == unsafe.nemesis and fixed.node_count == unsafe.node_count
        b = LogOptions.of(fixed)
        # Kafka truncates by leader epoch always (our broker's option only)
        assert _broker(fixed).get("truncation", "leader-epoch") == "leader-epoch", name
        assert b.acks == "all", name
        assert not b.unclean_leader_election or b.min_insync_replicas >= 2, name
        if name == "last-replica-standing":
            assert b.flush == "every-message"
        # the producer's setting, not the broker's
        if name in ("retries-without-idempotence", "kafka-retries-without-idempotence"):
            p, q = LogOptions.of(fixed), LogOptions.of(unsafe)
            assert p.enable_idempotence and not q.enable_idempotence
            assert p.retries == q.retries
            assert (q.retries or 0) > 0
            continue
        # the consumers' setting, not the broker's
        if name in ("read-uncommitted", "kafka-read-uncommitted"):
            isolation = QueueOptions.of(unsafe).isolation, QueueOptions.of(fixed).isolation
            assert (unsafe.workload, fixed.workload) == ("txn", "txn")
            assert isolation == ("read-uncommitted", "read-committed")
            assert _broker(fixed) == _broker(unsafe)
            continue
        if name == "kafka-last-replica-standing":  # a cluster feature, formatted in
            assert _broker(fixed) == _broker(unsafe)
            assert KafkaOptions.of(fixed) == replace(
                KafkaOptions.of(unsafe), kafka_features="eligible.leader.replicas.version=1")
            continue
        if name in ("kafka-txn-late-marker", "kafka-txn-late-marker-slow"):
            # a hunt: the client that speaks KIP-890 part 2
            assert KafkaOptions.of(fixed) == replace(KafkaOptions.of(unsafe), client="java")
            assert _broker(fixed) == _broker(unsafe)
            continue
        if name == "kafka-coordinator-isolation":  # a hunt: the release with the fix
            assert (KafkaOptions.of(unsafe).kafka_version,
                    KafkaOptions.of(fixed).kafka_version) == ("4.3.0", "4.3.1")
            assert _broker(fixed) == _broker(unsafe)
            continue
        if name in ("kafka-kip101-loss", "kafka-kip101-divergence"):  # the release that fixed it
            assert (KafkaOptions.of(unsafe).kafka_version,
                    KafkaOptions.of(fixed).kafka_version) == \
                ("0.10.2.2", "0.11.0.3")
            assert _broker(fixed) == _broker(unsafe)  # and every other option the same:
            assert KafkaOptions.of(fixed) == replace(KafkaOptions.of(unsafe),
                                                     kafka_version="0.11.0.3")
            continue
        if name == "offsets-commit-acks-1":  # the group coordinator's acks alone
            assert (UndertowOptions.of(unsafe).offsets_commit_acks,
                    UndertowOptions.of(fixed).offsets_commit_acks) == (1, -1)
            assert _broker(fixed) == {**_broker(unsafe), "offsets_commit_acks": -1}
            continue
        if name == "zombie-producer":  # the coordinator's fencing, shared ids either way
            assert UndertowOptions.of(fixed).txn_epoch_fencing
            assert not UndertowOptions.of(unsafe).txn_epoch_fencing
            assert UndertowOptions.of(fixed) == replace(UndertowOptions.of(unsafe),
                                                        txn_epoch_fencing=True)
            assert UndertowOptions.of(unsafe).shared_transactional_ids
            continue
        assert _broker(fixed) != _broker(unsafe), name
