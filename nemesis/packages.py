"""Packages: each fault paired with its seeded schedule and its heal; several compose.

`nemesis_package(spec)` is what the runner uses: the composed nemesis, the
generator of its ops for the main phase (a seeded `Timeline`, or the recorded
plan the spec replays), and a final generator that heals everything the package
can break. Besides its own faults it plans the sequences each registered system
declares (harness.faultplan) and the faults registered as plug-ins (a `fault` in
harness.registry: a `Fault` with nemeses and kinds of its own), both read through
harness.registry.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness import faultkinds as fk
from harness import generator as gen
from harness import registry
from harness.faultplan import FaultSequence, HasSequences, Step
from harness.protocols import Checker, Nemesis
from harness.runfiles import FINAL
from harness.spec import SpecError, TestSpec
from nemesis import grudges as g
from nemesis import replay
from nemesis.compose import Composed, compose
from nemesis.faults import Clock, Kill, LoseUnflushed, Pause
from nemesis.liveness import LivenessChecker
from nemesis.netfaults import Links, Partition
from nemesis.options import BUMP_MIN_MS, StandardOptions
from nemesis.plan import merge, timeline
from nemesis.schedule import schedule_of
from nemesis.targets import PURE_TARGETS, pick

# partition kind for each --nemesis-targets value
PARTITION_KIND = {"one": "one", "minority": "random-halves", "majority": "random-halves",
                  "leader": "leader", "followers": "followers", "controller": "controller",
                  "coordinator": "coordinator"}


@dataclass(frozen=True, slots=True)
class NemesisPackage:
    """What a run needs from the nemesis part."""

    nemesis: Nemesis
    generator: gen.Gen
    final_generator: gen.Gen
    plan: tuple[Step, ...] = ()
    schedule: dict[str, Any] | None = None  # Schedule.to_json(): its kind and phases

    @property
    def kinds(self) -> tuple[fk.FaultKind, ...]:
        """The fault kinds this package can inject (test.json records them)."""
        return tuple(k for k in fk.known() if k in self.nemesis.kinds)

    def plan_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.plan]

    def kinds_json(self) -> list[dict[str, Any]]:
        """The declarations of its fault kinds, for test.json (the report draws from them)."""
        return fk.kinds_json(self.kinds)

    def phases(self) -> list[dict[str, Any]] | None:
        phases: list[dict[str, Any]] | None = (self.schedule or {}).get("phases")
        return phases

    def checkers(self) -> Sequence[Checker]:
        """How fast the cluster served again after each heal (never changes the verdict)."""
        return [LivenessChecker()]


@dataclass(frozen=True, slots=True)
class Fault:
    """One `--nemesis` name: the nemeses that inject its faults and how its steps are planned."""

    name: str
    needs: tuple[Callable[[int], Nemesis], ...]  # nemesis classes, shared across faults
    plan: Callable[[TestSpec, random.Random], list[Step]]

    @property
    def kinds(self) -> tuple[fk.FaultKind, ...]:
        """The fault kinds its nemeses inject (each declared as a harness.faultkinds
        FaultKind, a plug-in's too: test.json records them, the report draws them)."""
        found = [k for make in self.needs for k in getattr(make, "kinds", ())]
        odd = [k for k in found if not isinstance(k, fk.FaultKind)]
        if odd:
            raise TypeError(f"fault {self.name!r}: its kinds must be harness.faultkinds."
                            f"FaultKind, not {odd!r}")
        return tuple(dict.fromkeys(found))


def _target_value(spec: TestSpec, rng: random.Random) -> dict[str, Any]:
    """A target from --nemesis-targets: pure ones resolved now, dynamic ones at injection."""
    target = rng.choice(StandardOptions.of(spec).targets or ("one",))
    if target in PURE_TARGETS:
        return {"target": target, "nodes": list(pick(target, spec.nodes, rng))}
    return {"target": target, "key": "live"}  # resolved when injected: keys rotate


def _node_fault(kind: fk.FaultKind) -> Callable[[TestSpec, random.Random], list[Step]]:
    def plan(spec: TestSpec, rng: random.Random) -> list[Step]:
        out: list[Step] = []
        for start, end in schedule_of(spec).windows(rng):
            out += [Step(start, kind.start, _target_value(spec, rng)),
                    Step(end, kind.heal, {})]
        return out
    return plan


def _partition_value(spec: TestSpec, rng: random.Random) -> dict[str, Any]:
    target = rng.choice(StandardOptions.of(spec).targets or ("one",))
    nodes = list(spec.nodes)
    if target == "all":
        kind = rng.choice(("majorities-ring", "bridge"))
        grudge = (g.majorities_ring(nodes, rng) if kind == "majorities-ring"
                  else g.bridge(nodes, rng))
        return {"target": target, "kind": kind, "grudge": g.to_json(grudge)}
    kind = PARTITION_KIND[target]
    if kind == "one":
        return {"target": target, "kind": kind,
                "grudge": g.to_json(g.isolate(nodes, [rng.choice(nodes)]))}
    if kind == "random-halves":
        return {"target": target, "kind": kind, "grudge": g.to_json(g.random_halves(nodes, rng))}
    return {"target": target, "kind": kind, "key": "live"}


def _plan_partition(spec: TestSpec, rng: random.Random) -> list[Step]:
    out: list[Step] = []
    for start, end in schedule_of(spec).windows(rng):
        out += [Step(start, fk.PARTITION.start, _partition_value(spec, rng)),
                Step(end, fk.PARTITION.heal, {})]
    return out





def _plan_clock(spec: TestSpec, rng: random.Random) -> list[Step]:
    bump, skew = (o := StandardOptions.of(spec)).clock_bump_max_ms, o.clock_skew_max_ms
    out: list[Step] = []
    for start, end in schedule_of(spec).windows(rng):
        if rng.random() < 0.5:
            delta_ms = rng.choice((-1, 1)) * rng.uniform(min(BUMP_MIN_MS, bump), bump)
            out.append(Step(start, fk.CLOCK_BUMP.start,
                            {**_target_value(spec, rng), "delta_ns": int(delta_ms * 1e6)}))
        else:
            offsets = {n: int(rng.uniform(-skew, skew) * 1e6) for n in spec.nodes}
            out.append(Step(start, fk.CLOCK_SKEW.start, {"nodes": list(spec.nodes),
                                                      "offsets_ns": offsets}))
        out.append(Step(end, fk.CLOCK_BUMP.heal, {}))
    return out


def _plan_lose_unflushed(spec: TestSpec, rng: random.Random) -> list[Step]:
    return [Step(start, fk.LOSE_UNFLUSHED.start, _target_value(spec, rng))
            for start, _ in schedule_of(spec).windows(rng)]


FAULTS: dict[str, Fault] = {
    "kill": Fault("kill", (Kill,), _node_fault(fk.KILL)),
    "pause": Fault("pause", (Pause,), _node_fault(fk.PAUSE)),
    "partition": Fault("partition", (Partition,), _plan_partition),
    "slow": Fault("slow", (Links,), _node_fault(fk.SLOW)),
    "lossy": Fault("lossy", (Links,), _node_fault(fk.LOSSY)),
    "clock": Fault("clock", (Clock,), _plan_clock),
    "lose-unflushed": Fault("lose-unflushed", (LoseUnflushed,), _plan_lose_unflushed),
}


# the nemeses that inject the kinds a system's sequence declares (slow and lossy: one Links)
INJECTORS: tuple[Callable[[int], Nemesis], ...] = (Kill, Pause, Partition, Links, Clock,
                                                    LoseUnflushed)


def _fault_of(seq: FaultSequence) -> Fault:
    """A system's sequence as a fault: the nemeses of its kinds, in its order, and its
    cycle repeated on the schedule."""
    from nemesis.sequences import cycles

    needs: dict[Callable[[int], Nemesis], None] = {}
    for kind in seq.kinds:
        make = next((m for m in INJECTORS if kind in getattr(m, "kinds", ())), None)
        if make is None:
            raise ValueError(f"fault sequence {seq.name!r}: no nemesis injects {kind.start!r}")
        needs[make] = None
    return Fault(seq.name, tuple(needs), cycles(seq.period_s, seq.cycle))


def known_faults() -> list[str]:
    """Every `--nemesis` name: the nemesis's own faults, the faults registered as plug-ins,
    then the sequences of every registered system that imports (one that does not is left
    out, as in --help)."""
    for name in registry.names("fault"):
        FAULTS[name] = registry.get("fault", name)
    for name in registry.names("system"):
        try:
            system = registry.get("system", name)
        except (ImportError, SpecError):
            continue
        if isinstance(system, HasSequences):
            for seq in system.sequences.values():
                FAULTS[seq.name] = _fault_of(seq)
    return sorted(FAULTS)


def fault_kinds(names: Iterable[str]) -> frozenset[fk.FaultKind]:
    """The fault kinds the named `--nemesis` faults inject (a scenario's sequence: those of
    the nemeses it needs), so a system or backend decides what it can do by kind, whatever
    the name; unknown names add nothing (nemesis_package refuses them)."""
    known_faults()
    return frozenset(k for n in names if n in FAULTS for k in FAULTS[n].kinds)


def final_generator(nemesis: Nemesis) -> gen.Gen:
    """Every heal the nemesis knows, once each, in an order that works (start before resume),
    marked `"final": true` so that availability and liveness tell it from a fault's heal."""
    heals = fk.stops(k for k in fk.known() if k in nemesis.kinds)
    return gen.seq(*(gen.op(f, {}, **{FINAL: True}) for f in heals if f in nemesis.fs))


def _rng(seed: int, name: str) -> random.Random:
    return random.Random(f"{seed}:{name}")


def _made(make: Callable[[int], Nemesis], seed: int, opts: StandardOptions) -> Nemesis:
    """The nemesis make builds, given the package's options (links' shaping, clock shifts)."""
    if make is Links:
        return Links(seed, opts.slow_delay_ms, opts.slow_jitter_ms, opts.lossy_drop_probability)
    if make is Clock:
        return Clock(seed, opts.clock_skew_max_ms)
    return make(seed)


def build(spec: TestSpec) -> NemesisPackage:
    """The faults spec.nemesis names, composed, each on its own seeded schedule."""
    known_faults()
    unknown = [n for n in spec.nemesis if n not in FAULTS]
    if unknown:
        raise SpecError(f"--nemesis: {', '.join(map(repr, unknown))} unknown; "
                        f"known: {', '.join(sorted(FAULTS))}")
    opts = StandardOptions.of(spec)
    parts: dict[Callable[[int], Nemesis], Nemesis] = {}
    plans: list[list[Step]] = []
    for name in dict.fromkeys(spec.nemesis):  # keep order, drop repeats
        fault = FAULTS[name]
        for make in fault.needs:  # slow and lossy share one Links nemesis
            if make not in parts:
                parts[make] = _made(make, _rng(spec.seed, f"{name}:{make}").randrange(2**32),
                                    opts)
        plans.append(fault.plan(spec, _rng(spec.seed, name)))
    nemesis: Composed = compose(*parts.values())
    plan = merge(*plans)
    if spec.nemesis_plan is not None:  # replay: the recorded plan instead of the drawn one
        plan = replay.steps_from_json(spec.nemesis_plan, "the spec")
        replay.check_verbs(plan, nemesis.fs, spec.nemesis)
    return NemesisPackage(nemesis=nemesis, generator=timeline(plan),
                          final_generator=final_generator(nemesis), plan=plan,
                          schedule=schedule_of(spec).to_json())


class Standard:
    """The `standard` nemesis part as harness.registry hands it out: called with a spec,
    the run's package; asked, the kinds named faults inject (harness.faultplan). Its own
    options (harness/options.py): nemesis/options.py."""

    options = StandardOptions

    def __call__(self, spec: TestSpec) -> NemesisPackage:
        return build(spec)

    def fault_kinds(self, names: Iterable[str]) -> frozenset[fk.FaultKind]:
        return fault_kinds(names)


nemesis_package = Standard()
