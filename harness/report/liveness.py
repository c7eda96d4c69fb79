"""The report's "Recovery after heals" section: how soon the cluster served again.

The figures are results.json's `stats.liveness` (the harness measures them after
every run); for a run folder without them (a history from another tool, or checked
with `undertow check` only) they are measured here from the history, the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.report.faults import fault_nodes


@dataclass(frozen=True, slots=True)
class HealRow:
    index: int
    f: str
    time_s: float
    nodes: str
    recovery_s: float | None
    stalled: bool


@dataclass(frozen=True, slots=True)
class Liveness:
    ok: bool
    stall_s: float
    heals: int
    recovered: int
    max_recovery_s: float | None
    median_recovery_s: float | None
    rows: list[HealRow]
    phases: list[tuple[str, float, float]]  # the nemesis schedule's phases, if it had any


def _measured(results: Mapping[str, Any] | None, ops: list[dict[str, Any]]) -> dict[str, Any]:
    live = ((results or {}).get("stats") or {}).get("liveness")
    if isinstance(live, Mapping) and isinstance(live.get("recoveries"), list):
        return dict(live)
    from nemesis.liveness import liveness  # the one definition of recovery; pure

    return liveness(ops)


def _phases(test: Mapping[str, Any] | None) -> list[tuple[str, float, float]]:
    out = []
    for p in (test or {}).get("nemesis_phases") or []:
        if isinstance(p, Mapping):
            try:
                out.append((str(p["name"]), float(p["from_s"]), float(p["to_s"])))
            except (KeyError, TypeError, ValueError):
                continue
    return out


def liveness_section(results: Mapping[str, Any] | None, ops: list[dict[str, Any]],
                     test: Mapping[str, Any] | None) -> Liveness | None:
    """None when the history has no heal (no fault was undone: nothing to recover from)."""
    live = _measured(results, ops)
    recs = [r for r in live.get("recoveries") or [] if isinstance(r, Mapping)]
    if not recs:
        return None
    stalled = {int(s["index"]) for s in live.get("stalled") or [] if isinstance(s, Mapping)}
    heal_values = {o.get("index"): o.get("value") for o in ops
                   if o.get("process") == "nemesis" and o.get("type") != "invoke"}
    rows = [HealRow(index=int(r["index"]), f=str(r["f"]), time_s=int(r["time"]) / 1e9,
                    nodes=", ".join(fault_nodes(heal_values.get(r["index"]))) or "all",
                    recovery_s=r.get("recovery_s"), stalled=int(r["index"]) in stalled)
            for r in recs]
    return Liveness(ok=bool(live.get("ok", not stalled)), stall_s=float(live.get("stall_s", 30.0)),
                    heals=int(live.get("heals", len(rows))),
                    recovered=int(live.get("recovered", 0)),
                    max_recovery_s=live.get("max_recovery_s"),
                    median_recovery_s=live.get("median_recovery_s"), rows=rows,
                    phases=_phases(test))
