"""Which nodes a fault hits: one, minority, majority, all, leader, followers, controller,
coordinator.

`one`..`all` are pure picks from the node list with the run's seeded random.
`leader`, `followers`, `controller` and `coordinator` (of the run's consumer group)
are resolved at injection time from the cluster itself (HasLeaders, HasCoordinator,
and the admin metadata where the DB offers it), because the leader of a key is only
known while the test runs.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from harness.protocols import HasCoordinator, HasLeaders, HasMetadata, Run

PURE_TARGETS = ("one", "minority", "majority", "all")
DYNAMIC_TARGETS = ("leader", "followers", "controller", "coordinator")
TARGETS = PURE_TARGETS + DYNAMIC_TARGETS


class TargetError(ValueError):
    """A target the nemesis cannot resolve (unknown name, or no way to ask the cluster)."""


class ClusterView(Protocol):
    """What target resolution asks the cluster, at injection time."""

    def leader_of(self, key: int) -> str | None: ...
    def controller(self) -> str | None: ...
    def coordinator(self) -> str | None: ...
    def replicas_of(self, key: int) -> tuple[str, ...] | None: ...
    def isr_of(self, key: int) -> tuple[str, ...] | None: ...


@dataclass(frozen=True, slots=True)
class StaticView:
    """A fixed view of the cluster: for tests, and for backends with no admin API."""

    leaders: Mapping[int, str]
    controller_node: str | None = None
    coordinator_node: str | None = None
    replicas: Mapping[int, tuple[str, ...]] | None = None
    isr: Mapping[int, tuple[str, ...]] | None = None

    def leader_of(self, key: int) -> str | None:
        return self.leaders.get(key)

    def controller(self) -> str | None:
        return self.controller_node

    def coordinator(self) -> str | None:
        return self.coordinator_node

    def replicas_of(self, key: int) -> tuple[str, ...] | None:
        return None if self.replicas is None else self.replicas.get(key)

    def isr_of(self, key: int) -> tuple[str, ...] | None:
        return None if self.isr is None else self.isr.get(key)


class LiveView:
    """The cluster as the run's DB reports it now; each question asks again."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._md: Mapping[str, Any] | None = None
        self._asked = False

    def leader_of(self, key: int) -> str | None:
        db = self.run.db
        if isinstance(db, HasLeaders):
            return db.leader_of(self.run, key)
        part = self._partition(key)
        leader = part.get("leader") if part else None
        return str(leader) if leader else None

    def controller(self) -> str | None:
        db = self.run.db
        if isinstance(db, HasLeaders):
            return db.controller(self.run)
        md = self._metadata()
        c = md.get("controller") if md else None
        return str(c) if c else None

    def coordinator(self) -> str | None:
        db = self.run.db
        if isinstance(db, HasCoordinator):
            try:
                return db.coordinator(self.run)
            except Exception:  # a node down or slow: the caller falls back
                return None
        return None

    def replicas_of(self, key: int) -> tuple[str, ...] | None:
        part = self._partition(key)
        reps = part.get("replicas") if part else None
        return tuple(str(r) for r in reps) if reps else None

    def isr_of(self, key: int) -> tuple[str, ...] | None:
        part = self._partition(key)
        isr = part.get("isr") if part else None
        return tuple(str(r) for r in isr) if isr is not None else None

    def _metadata(self) -> Mapping[str, Any] | None:
        """One metadata answer per view (a view lives for one injection)."""
        if not self._asked:
            self._asked = True
            db = self.run.db
            if isinstance(db, HasMetadata):
                try:
                    self._md = db.metadata()
                except Exception:  # a node down or slow: the caller falls back
                    self._md = None
        return self._md

    def _partition(self, key: int) -> Mapping[str, Any] | None:
        md = self._metadata()
        if not md:
            return None
        parts = md.get("partitions") or {}
        part = parts.get(str(key))
        return part if isinstance(part, Mapping) else None


def pick(target: str, nodes: Sequence[str], rng: random.Random) -> tuple[str, ...]:
    """A pure target: a seeded choice among the nodes, in node order."""
    n = len(nodes)
    if target == "one":
        count = 1
    elif target == "minority":
        count = max(1, (n - 1) // 2) if n > 1 else 0
    elif target == "majority":
        count = n // 2 + 1
    elif target == "all":
        count = n
    else:
        raise TargetError(f"target {target!r} is not one of {', '.join(PURE_TARGETS)}")
    chosen = set(rng.sample(list(nodes), min(count, n)))
    return tuple(x for x in nodes if x in chosen)


def resolve(target: str, nodes: Sequence[str], rng: random.Random,
            view: ClusterView | None = None, key: int = 0) -> tuple[str, ...]:
    """Any target; dynamic ones ask `view` and fall back to one random node if it cannot say."""
    if target in PURE_TARGETS:
        return pick(target, nodes, rng)
    if target not in DYNAMIC_TARGETS:
        raise TargetError(f"target {target!r} is not one of {', '.join(TARGETS)}")
    if view is None:
        raise TargetError(f"target {target!r} needs the live cluster (HasLeaders)")
    if target in ("controller", "coordinator"):
        c = view.controller() if target == "controller" else view.coordinator()
        return (c,) if c is not None and c in nodes else pick("one", nodes, rng)
    leader = view.leader_of(key)
    if target == "leader":
        return (leader,) if leader is not None and leader in nodes else pick("one", nodes, rng)
    # followers: the key's replicas other than its leader
    replicas = view.replicas_of(key) or tuple(nodes)
    if leader not in nodes:
        return pick("minority", replicas, rng)
    return tuple(x for x in nodes if x in replicas and x != leader)
