"""The report's "Recovery after heals" section and its compact availability table.

Both come from results.json's `availability`, as the checkers wrote it (sends and polls
apart, an `assign` never a recovery, the harness's final heal listed apart; beside the
longest stretch with no ok poll, the longest a key with a consumer and records to read
waited for a poll that returned one, since an empty ok poll served no key). A run
folder without it (a history from another tool, or results written before it existed)
has it measured from the history by the default workload's checkers, reached through
harness.registry (`MeasuresAvailability`), so the report imports nothing of the
checkers; a history the strict reader refuses shows no table, and says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.faults import fault_nodes

STALL_S = 30.0
SERVICE = ("send", "poll", "txn")


@dataclass(frozen=True, slots=True)
class HealRow:
    index: int
    f: str
    time_s: float
    nodes: str
    final: bool  # the harness's own final heal: listed, not counted
    recovery: dict[str, float | None]  # send, poll (txn) -> seconds, None: never
    stalled: bool


@dataclass(frozen=True, slots=True)
class WindowRow:
    """One fault window (or the fault-free time) for the availability table."""

    what: str
    nodes: str
    span: str
    shares: dict[str, str]  # send, poll (txn), assign -> "ok of all (share)"
    longest: dict[str, str]  # send, poll -> "s (from-to)"
    key_poll: str  # the key that waited longest for a poll returning it: "key k: s (from-to)"
    errors: str


@dataclass(frozen=True, slots=True)
class Liveness:
    ok: bool
    stall_s: float
    heals: int  # fault heals (the final heal apart)
    recovered: int
    worst: dict[str, float | None]  # per service kind, over fault heals
    kinds: list[str]  # the service kinds the history has (send, poll, txn)
    rows: list[HealRow]
    windows: list[WindowRow]
    overall: list[WindowRow]
    phases: list[tuple[str, float, float]]  # the nemesis schedule's phases, if it had any
    error: str | None = None


def measured(run_dir: Path, results: Mapping[str, Any] | None) -> dict[str, Any]:
    """results.json's `availability`, else measured from the history now."""
    av = (results or {}).get("availability")
    if isinstance(av, Mapping) and isinstance(av.get("heals"), list):
        return dict(av)
    from harness import registry
    from harness.protocols import MeasuresAvailability
    from harness.runfiles import HistoryError
    from harness.spec import DEFAULT_WORKLOAD, SpecError

    try:
        workload = registry.get("workload", DEFAULT_WORKLOAD)
        if not isinstance(workload, MeasuresAvailability):
            return {"error": f"the {DEFAULT_WORKLOAD} workload measures no availability"}
        return workload.availability(run_dir)
    except (HistoryError, OSError, SpecError, ImportError) as e:
        return {"error": str(e)}


def _phases(test: Mapping[str, Any] | None) -> list[tuple[str, float, float]]:
    out = []
    for p in (test or {}).get("nemesis_phases") or []:
        if isinstance(p, Mapping):
            try:
                out.append((str(p["name"]), float(p["from_s"]), float(p["to_s"])))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def _share(c: Any) -> str:
    if not isinstance(c, Mapping):
        return ""
    n = int(c.get("ok", 0)) + int(c.get("fail", 0)) + int(c.get("info", 0))
    return f"{c.get('ok', 0)} of {n} ({100 * c['ok'] / n:.0f} %)" if n else "none"


def _gap(g: Any) -> str:
    if not isinstance(g, Mapping):
        return ""
    return f"{g['s']:.1f} s ({g['from_s']:.1f}\u2013{g['to_s']:.1f})"


def _key_gap(g: Any) -> str:
    """A key's wait for a poll (checkers.availability's `poll_by_key_worst`)."""
    return f"key {g['key']}: {_gap(g)}" if isinstance(g, Mapping) and "key" in g else ""


def _window_row(what: str, nodes: str, span: str, part: Mapping[str, Any]) -> WindowRow:
    ops, longest = part.get("ops") or {}, part.get("longest_without_ok") or {}
    errs = [f"{f} {msg[:60]} x{n}" for f, by in (part.get("errors") or {}).items()
            for msg, n in list(by.items())[:1]]
    return WindowRow(what, nodes, span, {c: _share(v) for c, v in ops.items()},
                     {c: _gap(v) for c, v in longest.items()},
                     _key_gap(part.get("poll_by_key_worst")), "; ".join(errs))


def liveness_section(results: Mapping[str, Any] | None, nemesis_ops: list[dict[str, Any]],
                     test: Mapping[str, Any] | None, run_dir: Path) -> Liveness | None:
    """None when the history has no heal (no fault was undone: nothing to recover from).
    `nemesis_ops`: the nemesis operations' completion lines (the report's scan has them)."""
    av = measured(run_dir, results)
    heals = [h for h in av.get("heals") or [] if isinstance(h, Mapping)]
    if not heals and not av.get("error"):
        return None
    kinds = [c for c in SERVICE if c in (av.get("ops") or {})]
    end_s = float(av.get("end_s") or 0.0)
    values = {o.get("index"): o.get("value") for o in nemesis_ops}
    rows = []
    for h in heals:
        rec = {c: h.get(f"{c}_s") for c in kinds}
        got = [v for v in rec.values() if v is not None]
        stalled = not h.get("final") and (min(got) > STALL_S if got
                                          else end_s - float(h["time_s"]) >= STALL_S)
        rows.append(HealRow(int(h["index"]), str(h["f"]), float(h["time_s"]),
                            ", ".join(fault_nodes(values.get(h["index"]))) or "all",
                            bool(h.get("final")), rec, stalled))
    faults = [r for r in rows if not r.final]
    windows = [_window_row(w["kind"] + (" (final heal)" if w.get("final_heal") else "")
                           + (" (never healed)" if w.get("open") else ""),
                           ", ".join(w.get("nodes") or []) or "all",
                           f"{w['from_s']:.1f}\u2013{w['to_s']:.1f}", w)
               for w in av.get("windows") or []]
    free = av.get("fault_free") or {}
    overall = [_window_row("no fault", "", f"{free.get('s', 0):.1f} s in all", free),
               _window_row("whole run", "", f"0\u2013{end_s:.1f}", av)] if free else []
    return Liveness(ok=not any(r.stalled for r in rows), stall_s=STALL_S, heals=len(faults),
                    recovered=sum(1 for r in faults if all(v is not None
                                                           for v in r.recovery.values())),
                    worst={c: (av.get("recovery") or {}).get(f"worst_{c}_s") for c in kinds},
                    kinds=kinds, rows=rows, windows=windows, overall=overall,
                    phases=_phases(test), error=av.get("error"))
