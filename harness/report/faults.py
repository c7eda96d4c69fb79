"""Fault windows from the nemesis operations of a history, per node, for shading plots.

A window runs from a fault's invocation to the completion of the operation that
undoes it: kill..start, pause..resume, partition..heal, clock-bump/skew..clock-reset,
slow/lossy..fast; an unknown verb X is closed by stop-X, X-stop, end-X, X-end,
heal-X, X-heal, undo-X or reset-X. A fault with no known undo (lose-unflushed) is
an instant. Windows still open at the end of the history end there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# closing verb -> the faults it ends
CLOSES: dict[str, frozenset[str]] = {
    "start": frozenset({"kill", "crash"}),
    "resume": frozenset({"pause"}),
    "heal": frozenset({"partition"}),
    "clock-reset": frozenset({"clock-bump", "clock-skew", "clock-strobe"}),
    "fast": frozenset({"slow", "lossy", "flaky"}),
}
_PREFIXES = ("stop-", "end-", "heal-", "undo-", "reset-")
_SUFFIXES = ("-stop", "-end", "-heal", "-undo", "-reset")
ALL_NODES = "all"


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One fault on one node (or on `all`), from start_ns to end_ns (equal: an instant)."""

    node: str
    kind: str
    start_ns: int
    end_ns: int
    index: int  # history index of the fault's invocation


def closed_by(verb: str) -> frozenset[str]:
    """The fault kinds a verb ends; empty when the verb is not an undo."""
    if verb in CLOSES:
        return CLOSES[verb]
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
                  end_ns: int) -> list[FaultWindow]:
    """Windows from (index, f, value, invoke_ns, complete_ns) of each nemesis operation.

    A verb has a duration when a known undo exists for it or the history undoes it.
    """
    durable: set[str] = set()
    for kinds in CLOSES.values():
        durable |= kinds
    for _, f, _, _, _ in nemesis_ops:
        durable |= closed_by(f)
    open_: dict[tuple[str, str], tuple[int, int]] = {}  # (node, kind) -> (start, index)
    out: list[FaultWindow] = []
    for index, f, value, t_inv, t_done in nemesis_ops:
        ends = closed_by(f)
        nodes = fault_nodes(value)
        if ends:
            for (node, kind), (start, idx) in list(open_.items()):
                if kind in ends and (not nodes or node in nodes or node == ALL_NODES):
                    out.append(FaultWindow(node, kind, start, t_done, idx))
                    del open_[(node, kind)]
            continue
        targets = nodes or [ALL_NODES]
        if f in durable:
            for node in targets:
                open_.setdefault((node, f), (t_inv, index))
        else:
            out.extend(FaultWindow(node, f, t_inv, t_done, index) for node in targets)
    out.extend(FaultWindow(node, kind, start, max(start, end_ns), idx)
               for (node, kind), (start, idx) in open_.items())
    out.sort(key=lambda w: (w.start_ns, w.node))
    return out
