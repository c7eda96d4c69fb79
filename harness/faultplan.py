"""Fault sequences as data: what a system declares and the nemesis plans.

A system brings its known bugs' fault sequences (`HasSequences.sequences`): named
cycles of planned steps over the kinds of harness.faultkinds. The nemesis part reads
them through harness.registry and turns them into faults; a system that must refuse
faults it cannot take asks `fault_kinds` which kinds a run's faults inject. So a
system imports nothing of the nemesis, and each sequence is written once, by its system.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from harness import registry
from harness.faultkinds import FaultKind

NEMESIS_PACKAGE = "standard"  # the nemesis part runs are assembled with (harness.test)


@dataclass(frozen=True, slots=True)
class Step:
    """One planned nemesis op: at `at_s` seconds after the schedule starts."""

    at_s: float
    f: str
    value: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"at_s": round(self.at_s, 3), "f": self.f, "value": dict(self.value)}


# one cycle of a sequence: its steps from time t on (seconds), drawn from the seeded rng
Cycle = Callable[[float, random.Random], list[Step]]


@dataclass(frozen=True, slots=True)
class FaultSequence:
    """One `--nemesis` name a system brings: `cycle` repeated every `period_s` (plus
    seeded jitter, nemesis.sequences.cycles) until the time limit."""

    name: str
    kinds: tuple[FaultKind, ...]  # what it injects: the nemeses a run with it composes
    period_s: float
    cycle: Cycle


@runtime_checkable
class HasSequences(Protocol):
    """A system that brings fault sequences of its own (names unique across systems)."""

    sequences: Mapping[str, FaultSequence]


@runtime_checkable
class KnowsFaultKinds(Protocol):
    """The nemesis part as the registry hands it out: it knows what its faults inject."""

    def fault_kinds(self, names: Iterable[str]) -> frozenset[FaultKind]: ...


def fault_kinds(names: Iterable[str]) -> frozenset[FaultKind]:
    """The kinds the named `--nemesis` faults inject (a sequence: the kinds it declares),
    as the nemesis part says; unknown names add nothing (assembly refuses them)."""
    part = registry.get("nemesis", NEMESIS_PACKAGE)
    if not isinstance(part, KnowsFaultKinds):
        raise TypeError(f"the nemesis part {NEMESIS_PACKAGE!r} does not say what its "
                        "faults inject (harness.faultplan.KnowsFaultKinds)")
    return part.fault_kinds(names)
