"""Fault windows from the nemesis operations of a history, per node, for shading plots.

The vocabulary is the fault kinds: those a run recorded in its test.json, then
those harness.faultkinds declares (which hold HISTORY.md's kill..start, pause..resume
and partition..heal, so histories from other tools draw too). A window runs from
a kind's start to the completion of its stop; a kind with no stop (lose-unflushed)
is an instant, its op's own span. An unknown verb X is closed by stop-X, X-stop,
end-X, X-end, heal-X, X-heal, undo-X or reset-X, and is an instant otherwise.
Windows still open at the end of the history end there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.faultkinds import KINDS, FaultKind

_PREFIXES = ("stop-", "end-", "heal-", "undo-", "reset-")
_SUFFIXES = ("-stop", "-end", "-heal", "-undo", "-reset")
ALL_NODES = "all"
UNKNOWN_COLOUR = "#7f7f7f"  # a verb no kind declares


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One fault on one node (or on `all`), from start_ns to end_ns (equal: an instant)."""

    node: str
    kind: str  # the verb that started it
    start_ns: int
    end_ns: int
    index: int  # history index of the fault's invocation
    colour: str = UNKNOWN_COLOUR
    label: str = ""  # the kind's label ("" for an unknown verb: its verb stands)


def run_kinds(test: Mapping[str, Any] | None) -> tuple[FaultKind, ...]:
    """The kinds to draw a run with: test.json's `fault_kinds` (ill-formed ones are
    skipped, a report draws what it can), then every declared kind it does not name."""
    recorded: list[FaultKind] = []
    rows = (test or {}).get("fault_kinds")
    for row in rows if isinstance(rows, list) else []:
        try:
            recorded.append(FaultKind.from_json(row if isinstance(row, Mapping) else {}))
        except ValueError:
            continue
    starts = {k.start for k in recorded}
    return (*recorded, *(k for k in KINDS if k.start not in starts))


def closed_by(verb: str, kinds: Sequence[FaultKind] = KINDS) -> frozenset[str]:
    """The fault verbs a verb ends; empty when the verb is not an undo."""
    declared = frozenset(k.start for k in kinds if k.stop == verb)
    if declared:
        return declared
    for p in _PREFIXES:
        if verb.startswith(p):
            return frozenset({verb[len(p):]})
    for s in _SUFFIXES:
        if verb.endswith(s):
            return frozenset({verb[: -len(s)]})
    return frozenset()


def fault_nodes(value: Any) -> list[str]:
    """The nodes a nemesis op's value names: `nodes`, or a partition's grudge."""
    if not isinstance(value, dict):
        return []
    nodes = value.get("nodes")
    if isinstance(nodes, list):
        return sorted({str(n) for n in nodes})
    grudge = value.get("grudge")
    if isinstance(grudge, dict):
        out: set[str] = set()
        for node, dropped in grudge.items():
            if isinstance(dropped, list) and dropped:
                out.add(str(node))
                out.update(str(d) for d in dropped)
        return sorted(out)
    return []


def fault_windows(nemesis_ops: Sequence[tuple[int, str, Any, int, int]],
                  end_ns: int, kinds: Sequence[FaultKind] = KINDS) -> list[FaultWindow]:
    """Windows from (index, f, value, invoke_ns, complete_ns) of each nemesis operation.

    A verb has a duration when its kind has a stop or the history undoes it.
    """
    by_start = {k.start: k for k in kinds}
    durable = {k.start for k in kinds if k.stop is not None}
    for _, f, _, _, _ in nemesis_ops:
        durable |= closed_by(f, kinds)

    def window(node: str, f: str, start: int, end: int, index: int) -> FaultWindow:
        k = by_start.get(f)
        return (FaultWindow(node, f, start, end, index) if k is None
                else FaultWindow(node, f, start, end, index, k.colour, k.label))

    open_: dict[tuple[str, str], tuple[int, int]] = {}  # (node, kind) -> (start, index)
    out: list[FaultWindow] = []
    for index, f, value, t_inv, t_done in nemesis_ops:
        ends = closed_by(f, kinds)
        nodes = fault_nodes(value)
        if ends:
            for (node, kind), (start, idx) in list(open_.items()):
                if kind in ends and (not nodes or node in nodes or node == ALL_NODES):
                    out.append(window(node, kind, start, t_done, idx))
                    del open_[(node, kind)]
            continue
        targets = nodes or [ALL_NODES]
        if f in durable:
            for node in targets:
                open_.setdefault((node, f), (t_inv, index))
        else:
            out.extend(window(node, f, t_inv, t_done, index) for node in targets)
    out.extend(window(node, kind, start, max(start, end_ns), idx)
               for (node, kind), (start, idx) in open_.items())
    out.sort(key=lambda w: (w.start_ns, w.node))
    return out


def in_force(windows: Sequence[FaultWindow], t_ns: int) -> list[str]:
    """The faults in force at t_ns, in words ("kill on n2"), each kind once with its nodes."""
    by_kind: dict[str, set[str]] = {}
    for w in windows:
        if w.start_ns <= t_ns <= w.end_ns:
            by_kind.setdefault(w.label or w.kind, set()).add(w.node)
    return [f"{k} on {', '.join(sorted(n))}" if n - {ALL_NODES} else k
            for k, n in by_kind.items()]
