"""A fault plan as fault windows: the units a shrinker keeps or drops.

A window is a fault and what undoes it: `kill` and the `start` after it, a
partition and its `heal`. A known bug's sequence is one window: its steps name
each other through roles (`"as": "B"` ... `"role": "B"`, `key_of`, `shorter_of`),
so they are kept or dropped together. A plain heal (`{}`) undoes every fault of
its kind in force, so it belongs to each window it ends; a candidate keeps a
step when it keeps any window the step belongs to, which makes a sub-plan the
original with the dropped faults taken out, every kept fault ending when it did.
Pure: no I/O, tested on plain plans.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness import faultkinds as fk
from harness.faultplan import Step

ROLE_REFS = ("role", "key_of", "shorter_of")


def heal_verbs() -> tuple[dict[str, str], frozenset[str]]:
    """The stop verb of each fault's start verb (an instant, as lose-unflushed, has none),
    and every stop verb: of the built-in kinds and of the faults plug-ins registered."""
    kinds = fk.known()
    return ({k.start: k.stop for k in kinds if k.stop is not None},
            frozenset(fk.stops(kinds)))


def _refs(value: Mapping[str, Any]) -> list[str]:
    """Roles a step's value refers to (defined by an earlier step)."""
    out: list[str] = []
    for k in ROLE_REFS:
        v = value.get(k)
        if isinstance(v, list | tuple):
            out += [str(x) for x in v]
        elif v is not None:
            out.append(str(v))
    return out


@dataclass(frozen=True, slots=True)
class Windowed:
    """A plan's steps and, for each step, the windows it belongs to (0, 1, ... in time order)."""

    steps: tuple[Step, ...]
    owners: tuple[frozenset[int], ...]
    count: int
    heals: frozenset[str]  # the stop verbs of the kinds the plan was read with

    def members(self, w: int) -> list[int]:
        return [i for i, o in enumerate(self.owners) if w in o]

    def span(self, w: int) -> tuple[float, float]:
        """(from, to) of window w in seconds: its first step to its last."""
        times = [self.steps[i].at_s for i in self.members(w)]
        return min(times), max(times)

    def spans(self) -> list[tuple[float, float]]:
        return [self.span(w) for w in range(self.count)]

    def restrict(self, keep: Collection[int], scale: Mapping[int, float] | None = None,
                 shift_s: float = 0.0) -> tuple[Step, ...]:
        """The steps of the kept windows; a window w in `scale` is shortened (its own steps
        drawn towards its start by that factor); every step moves `shift_s` earlier."""
        keep, scale = frozenset(keep), scale or {}
        out: list[Step] = []
        for step, owners in zip(self.steps, self.owners, strict=True):
            mine = owners & keep
            if not mine:
                continue
            at = step.at_s
            if len(mine) == 1:
                (w,) = mine
                if w in scale:
                    start = self.span(w)[0]
                    at = start + (at - start) * scale[w]
            out.append(replace(step, at_s=max(0.0, at - shift_s)))
        return tuple(sorted(out, key=lambda s: s.at_s))

    def describe(self, w: int) -> tuple[str, str]:
        """(fault, target) of window w, as a person reads them."""
        steps = [self.steps[i] for i in self.members(w) if self.owners[i] == frozenset({w})]
        steps = steps or [self.steps[i] for i in self.members(w)]
        faults = [s.f for s in steps if s.f not in self.heals] or [steps[0].f]
        counts = {f: faults.count(f) for f in faults}  # a sequence: kill x2 (B, then A)
        return ("+".join(f if n == 1 else f"{f} x{n}" for f, n in counts.items()),
                target_text(steps[0].value))


def target_text(value: Mapping[str, Any]) -> str:
    """What a step aims at: node names, a role resolved at injection, or a partition."""
    parts: list[str] = []
    if "nodes" in value:
        parts.append(",".join(map(str, value["nodes"])))
    elif "role" in value:
        parts.append(f"role {value['role']}")
    elif "grudge" in value and isinstance(value["grudge"], Mapping):
        parts.append(sides(value["grudge"]))
    elif "target" in value or "kind" in value:
        t = str(value.get("target") or value.get("kind"))
        key = value.get("key")
        which = "a live key" if key in ("live", "auto", "fresh") else f"key {key}"
        parts.append(f"{t} of {which}" if key is not None and t in ("leader", "followers")
                     else t)
    if "as" in value:
        parts.append(f"as {value['as']}")
    return " ".join(parts) or "all"


def sides(grudge: Mapping[str, Any]) -> str:
    """A partition's sides (`n2 | n1,n3`): the groups of nodes that still reach each other;
    a grudge that splits no group apart (a ring, a bridge) is shown as who drops whom."""
    nodes = sorted(grudge)
    drops = {n: {str(x) for x in grudge[n] or ()} for n in nodes}
    group: dict[str, int] = {}
    for n in nodes:
        if n in group:
            continue
        group[n], todo = len(set(group.values())), [n]
        while todo:
            a = todo.pop()
            for b in nodes:
                if b not in group and b not in drops[a] and a not in drops[b]:
                    group[b] = group[n]
                    todo.append(b)
    ids = sorted(set(group.values()))
    cut = [",".join(n for n in nodes if group[n] == i) for i in ids]
    if len(cut) > 1 and all(drops[a] >= {b for b in nodes if group[b] != group[a]}
                            for a in nodes):
        return " | ".join(sorted(cut, key=len))
    return "; ".join(f"{n} drops {','.join(sorted(drops[n]))}" for n in nodes if drops[n])


def windows(steps: Sequence[Step]) -> Windowed:
    """Group a plan's steps (in time order) into fault windows; see the module docstring."""
    steps = tuple(sorted(steps, key=lambda s: s.at_s))
    heal_of, heals = heal_verbs()
    owners: list[set[int]] = []
    role_window: dict[str, int] = {}
    open_: dict[str, list[int]] = {}  # heal verb -> windows with a fault of that kind in force
    faults: dict[tuple[int, str], int] = {}  # (window, heal verb) -> faults minus heals
    count = 0
    for s in steps:
        v = s.value
        refs = [role_window[r] for r in _refs(v) if r in role_window]
        if refs:
            mine = {refs[0]}
        elif s.f in heals:
            mine = set(open_.pop(s.f, []))
        else:
            mine = set()
        if not mine:
            mine = {count}
            count += 1
        for r in ("as", "leader_as"):
            if r in v:
                role_window[str(v[r])] = min(mine)
        heal = heal_of.get(s.f)
        for w in mine:
            if heal is not None:
                faults[w, heal] = faults.get((w, heal), 0) + 1
                if w not in open_.setdefault(heal, []):
                    open_[heal].append(w)
            elif s.f in heals and refs:  # a role's heal: the window ends when all are undone
                faults[w, s.f] = faults.get((w, s.f), 0) - 1
                if faults[w, s.f] <= 0 and w in open_.get(s.f, []):
                    open_[s.f].remove(w)
        owners.append(mine)
    return Windowed(steps, tuple(frozenset(o) for o in owners), count, heals)
