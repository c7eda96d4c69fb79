"""Which faults are in force, from the nemesis ops as they happen: the live status line.

The vocabulary comes from the fault kinds the nemesis declares (never from verbs
written here): a kind's `start` completion puts its targets in force, its `stop`
takes them out (the nodes the stop names, or all of them when it names none). An
op still in flight shows too, so an instant (a kind with no stop, whose op is its
window, such as lose-unflushed) is in force exactly while it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.protocols import FaultKind
from harness.runfiles import Op


def targets(kind: FaultKind, value: Any) -> list[str]:
    """What a kind's op aims at, as text: its nodes, or for a partition its grudge."""
    if isinstance(value, Mapping):
        grudge = value.get("grudge")
        if kind.aims == "grudge" and isinstance(grudge, Mapping):
            return [" ".join(f"{k}x{','.join(map(str, v))}" for k, v in grudge.items())]
        nodes = value.get("nodes")
        if isinstance(nodes, list) and nodes:
            return [str(n) for n in nodes]
        if "target" in value:
            return [str(value["target"])]
    return [str(value)[:40]] if value else []


def targets_any(value: Any) -> list[str]:
    """An op's nodes, whatever its kind (for a line about a fault that did not land)."""
    nodes = value.get("nodes") if isinstance(value, Mapping) else None
    return [str(n) for n in nodes] if isinstance(nodes, list) else []


class InForce:
    """Faults in force by kind; not thread-safe (the caller holds its own lock)."""

    def __init__(self, kinds: Sequence[FaultKind] = ()) -> None:
        self.kinds = tuple(kinds)
        self._starts = {k.start: k for k in self.kinds}
        self._open: dict[str, dict[str, None]] = {}  # start verb -> targets, in order
        self._running: Op | None = None              # the start op in flight, if any
        self._missed: list[str] = []                 # faults whose completion said not landed

    def record(self, op: Op) -> None:
        """Take one nemesis event (invocation or completion) into account."""
        if op.type == "invoke":
            self._running = op if op.f in self._starts else None
            return
        self._running = None
        if op.extra.get("landed") is False:
            self._missed.append(f"{op.f} {','.join(targets_any(op.value))}".strip())
        kind = self._starts.get(op.f)
        if kind is not None and kind.stop is not None:
            self._open.setdefault(kind.start, {}).update(dict.fromkeys(targets(kind, op.value)))
        named = op.value.get("nodes") if isinstance(op.value, Mapping) else None
        for k in self.kinds:
            if k.stop != op.f or k.start not in self._open:
                continue
            if k.aims == "nodes" and isinstance(named, list) and named:
                for n in named:
                    self._open[k.start].pop(str(n), None)
            else:
                self._open[k.start].clear()
            if not self._open[k.start]:
                del self._open[k.start]

    def text(self) -> dict[str, str]:
        """Each kind in force (by label, in declaration order) -> its targets."""
        out: dict[str, str] = {}
        running = self._running
        for k in self.kinds:
            now = dict(self._open.get(k.start, {}))
            if running is not None and running.f == k.start:
                now.update(dict.fromkeys(targets(k, running.value)))
            if now:
                out[k.label] = ",".join(now)
        if self._missed:
            out["DID NOT LAND"] = f"{len(self._missed)} (last: {self._missed[-1]})"
        return out
