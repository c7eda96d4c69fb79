"""Every fault kind, declared once: its verbs, what it aims at, its colour and label.

The nemesis classes take their verbs from here; the interpreter's live status
line, the report's fault lanes, liveness, the benchmarks and the systems' fault
sequences read the same declarations, so a new built-in fault kind is one entry in
`KINDS` (and its nemesis); a fault of one's own declares its kinds itself and is
registered as a `fault` (harness.registry), and `known()` adds them. It lives in the
harness, not the nemesis, because all of them share it: a system or the report names a
kind without importing the nemesis.

A kind's window runs from its `start` to the completion of its `stop` (a stop
whose value names nodes ends the window on those nodes only; `{}` ends it
everywhere). A kind without a stop is an instant: its op is its own window
(`lose-unflushed` crashes, truncates and restarts within one op), so its own
completion is where the cluster may recover.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

Aim = Literal["nodes", "grudge"]
_COLOUR = re.compile(r"#[0-9a-fA-F]{3}|#[0-9a-fA-F]{6}|[a-zA-Z]{3,20}")


@dataclass(frozen=True, slots=True)
class FaultKind:
    """One fault kind (satisfies harness.protocols.FaultKind)."""

    start: str          # the verb that injects it
    stop: str | None    # the verb that ends it; None: an instant, its op is its window
    colour: str         # CSS colour of its lane in reports
    label: str          # what people read: the status line, lane tooltips
    aims: Aim = "nodes"  # what its completion's value names: `nodes`, or a partition `grudge`

    @property
    def ends(self) -> str:
        """The verb whose completion ends this fault: its stop, or an instant's own start."""
        return self.stop or self.start

    @property
    def heal(self) -> str:
        """Its stop verb, for planning the heal of a kind that has one (`{}`: everywhere)."""
        if self.stop is None:
            raise ValueError(f"fault kind {self.start!r} is an instant: nothing heals it")
        return self.stop

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> FaultKind:
        """A kind recorded in a run's test.json; raises ValueError naming a bad field."""
        start, stop, colour = row.get("start"), row.get("stop"), row.get("colour")
        aims = row.get("aims", "nodes")
        if not isinstance(start, str) or not start:
            raise ValueError(f"fault kind {dict(row)}: `start` must be a verb")
        if stop is not None and not isinstance(stop, str):
            raise ValueError(f"fault kind {start!r}: `stop` must be a verb or null")
        if not isinstance(colour, str) or not _COLOUR.fullmatch(colour):
            raise ValueError(f"fault kind {start!r}: `colour` {colour!r} is not #rgb, "
                             "#rrggbb or a colour name")
        if aims not in ("nodes", "grudge"):
            raise ValueError(f"fault kind {start!r}: `aims` must be nodes or grudge")
        return cls(start, stop or None, colour, str(row.get("label") or start), aims)


KILL = FaultKind("kill", "start", "#d62728", "kill")
PAUSE = FaultKind("pause", "resume", "#9467bd", "pause")
PARTITION = FaultKind("partition", "heal", "#ff7f0e", "partition", aims="grudge")
SLOW = FaultKind("slow", "fast", "#17becf", "slow links")
LOSSY = FaultKind("lossy", "fast", "#17becf", "lossy links")
CLOCK_BUMP = FaultKind("clock-bump", "clock-reset", "#1f77b4", "clock bump")
CLOCK_SKEW = FaultKind("clock-skew", "clock-reset", "#1f77b4", "clock skew")
LOSE_UNFLUSHED = FaultKind("lose-unflushed", None, "#8c564b", "lose unflushed")

# every kind, in the order the final heal sends their stops (a node must be up to resume)
KINDS: tuple[FaultKind, ...] = (KILL, PAUSE, PARTITION, SLOW, LOSSY, CLOCK_BUMP, CLOCK_SKEW,
                                LOSE_UNFLUSHED)


def known() -> tuple[FaultKind, ...]:
    """Every kind a run may meet, once each: the built-ins in `KINDS`'s order (the final
    heal's), then those of registered faults (plug-ins: harness.registry's `fault` kind,
    loaded at first use)."""
    from harness import registry

    extra: list[FaultKind] = []
    for name in registry.names("fault"):
        extra += getattr(registry.get("fault", name), "kinds", ())
    return tuple(dict.fromkeys((*KINDS, *extra)))


def verbs(kinds: Iterable[FaultKind]) -> frozenset[str]:
    """Every verb the kinds use, starts and stops: what a nemesis of them handles."""
    return frozenset(v for k in kinds for v in (k.start, k.stop) if v is not None)


def stops(kinds: Iterable[FaultKind]) -> tuple[str, ...]:
    """The kinds' stop verbs, once each, in their order: the final heal of a package."""
    return tuple(dict.fromkeys(k.stop for k in kinds if k.stop is not None))


def recovery_verbs(kinds: Iterable[FaultKind]) -> frozenset[str]:
    """Verbs whose completion ends a fault (stops, and instants' own verbs): heals."""
    return frozenset(k.ends for k in kinds)


def by_start(kinds: Iterable[FaultKind]) -> dict[str, FaultKind]:
    """Kinds by their start verb; two kinds with one start verb are a declaration error."""
    out: dict[str, FaultKind] = {}
    for k in kinds:
        if k.start in out:
            raise ValueError(f"two fault kinds start with {k.start!r}")
        out[k.start] = k
    return out


def kinds_json(kinds: Sequence[FaultKind] = KINDS) -> list[dict[str, Any]]:
    """The kinds as test.json records them, so a run folder names its own vocabulary."""
    return [k.to_json() for k in kinds]
