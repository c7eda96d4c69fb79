"""One fault timeline: test.json's plan and the history's nemesis operations merged.

Each planned step is matched, in order, to the next nemesis completion of the same verb;
what it named by role ("the node called A") is then resolved to the nodes the history
shows. A planned step with no such operation never ran; an operation after the time
limit that the plan did not ask for is the harness's final heal. Colours are the fault
kinds' (harness.faultkinds, or test.json's `fault_kinds`), the same in every report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.faultkinds import FaultKind
from harness.report.faults import UNKNOWN_COLOUR, fault_nodes
from harness.report.plan import describe


@dataclass(frozen=True, slots=True)
class FaultRow:
    at_s: str
    fault: str
    colour: str
    planned: str  # the plan's target in words ("" when not planned)
    actual: str  # nodes or grudge the history shows ("" when it never ran)
    status: str  # ran, landed, did not land, never ran, final heal by the harness, unplanned
    css: str
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class Legend:
    label: str
    verbs: str
    colour: str


def colours(kinds: Sequence[FaultKind]) -> dict[str, str]:
    """verb -> colour: a kind's start and its stop share the kind's colour."""
    out: dict[str, str] = {}
    for k in kinds:
        out.setdefault(k.start, k.colour)
        if k.stop is not None:
            out.setdefault(k.stop, k.colour)
    return out


def _roles(planned: Mapping[str, Any], actual: Any) -> str:
    """"A = n2" when the plan named a role and the history the node."""
    nodes = fault_nodes(actual)
    names = [str(planned[k]) for k in ("role", "as") if planned.get(k)]
    if names and nodes:
        return "; ".join(f"{n} = {', '.join(nodes)}" for n in names)
    return ""


def _status(op: Mapping[str, Any]) -> tuple[str, str, str]:
    landed = op.get("landed")
    ev = str(op.get("evidence") or "")
    if landed is True:
        return "landed", "ran", ev
    if landed is False:
        return "did not land", "bad", ev
    return "ran", "ran", ev


def _actual_words(value: Any) -> str:
    """The nodes (or grudge) and key an operation acted on; the plan's own words (roles,
    targets) are left to the planned column."""
    if not isinstance(value, Mapping):
        return str(value)
    if not value:
        return "all nodes"
    said = {"grudge": value["grudge"]} if isinstance(value.get("grudge"), Mapping) \
        else {k: value[k] for k in ("nodes",) if k in value}
    words = describe(said)[1] if said else ""
    key = value.get("key")
    if isinstance(key, int) and not isinstance(key, bool):
        words += f" (key {key})"
    return words or describe(value)[1]


def fault_rows(test: Mapping[str, Any] | None, nemesis_ops: Sequence[Mapping[str, Any]],
               kinds: Sequence[FaultKind], end_ns: int) -> list[FaultRow]:
    test = test or {}
    colour = colours(kinds)
    plan = [s for s in (test.get("nemesis_plan") or []) if isinstance(s, Mapping)]
    limit = test.get("time_limit_s")
    limit_ns = float(limit) * 1e9 if isinstance(limit, int | float) else None
    used: set[int] = set()
    rows: list[tuple[float, int, FaultRow]] = []
    cursor = 0
    offsets: list[float] = []  # history time minus planned time of matched steps
    for step in plan:
        f = str(step.get("f", "?"))
        raw = step.get("value")
        value: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        target, what = describe(value)
        planned = f"{target}: {what}" if target != "—" else what
        at = step.get("at_s")
        late = isinstance(at, int | float) and limit_ns is not None and at * 1e9 > limit_ns
        match = None if late else next((i for i in range(cursor, len(nemesis_ops))
                                        if i not in used and nemesis_ops[i].get("f") == f),
                                       None)
        if match is None:
            when = f"{at:.1f}" if isinstance(at, int | float) else "?"
            why = f"never ran (planned after the {float(limit or 0):g} s time limit)" if late \
                else f"never ran (the history ends at {end_ns / 1e9:.1f} s)" \
                if isinstance(at, int | float) and at * 1e9 > end_ns else "never ran"
            rows.append((float(at) if isinstance(at, int | float) else 0.0, 1,
                         FaultRow(when, f, colour.get(f, UNKNOWN_COLOUR), planned, "", why,
                                  "never")))
            continue
        used.add(match)
        cursor = match + 1
        op = nemesis_ops[match]
        t = op.get("time")
        t_s = t / 1e9 if isinstance(t, int) else 0.0
        if isinstance(at, int | float) and isinstance(t, int):
            offsets.append(t - at * 1e9)
        status, css, ev = _status(op)
        actual = _actual_words(op.get("value"))
        roles = _roles(value, op.get("value"))
        rows.append((t_s, 0, FaultRow(f"{t_s:.1f}", f, colour.get(f, UNKNOWN_COLOUR), planned,
                                      f"{actual}; {roles}" if roles else actual, status, css,
                                      ev)))
    # history time counts from the test's start, the plan's and the limit's from the
    # workload's: the steps that ran say how far apart the two clocks are
    shift = sorted(offsets)[len(offsets) // 2] if offsets else 0.0
    rows = [(at + shift / 1e9, n, replace(r, at_s=f"{at + shift / 1e9:.1f}")) if n else
            (at, n, r) for at, n, r in rows]
    for i, op in enumerate(nemesis_ops):
        if i in used:
            continue
        f = str(op.get("f"))
        t = op.get("time")
        t_s = t / 1e9 if isinstance(t, int) else 0.0
        final = limit_ns is not None and isinstance(t, int) and t - shift > limit_ns
        status, css, ev = _status(op)
        if final:
            status, css = "final heal by the harness", "final"
        elif plan:
            status = f"{status}, not in the plan"
        rows.append((t_s, 0, FaultRow(f"{t_s:.1f}", f, colour.get(f, UNKNOWN_COLOUR), "",
                                      _actual_words(op.get("value")), status, css, ev)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r for _, _, r in rows]


def legend(rows: Sequence[FaultRow], kinds: Sequence[FaultKind]) -> list[Legend]:
    """The kinds a run's timeline shows, each with its colour and verbs."""
    shown = {r.fault for r in rows}
    out = [Legend(k.label or k.start, k.start + (f" … {k.stop}" if k.stop else ""), k.colour)
           for k in kinds if k.start in shown or (k.stop is not None and k.stop in shown)]
    known = {v for k in kinds for v in (k.start, k.stop) if v}
    out += [Legend(f, f, UNKNOWN_COLOUR) for f in sorted(shown - known)]
    return out
