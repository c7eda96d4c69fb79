"""Liveness: after each heal, how long until the cluster served a client again.

Pure over a history (a list of Op or of history.jsonl dicts). A heal is the
completion of a nemesis op that ends a fault: a kind's stop verb (start, resume,
heal, ...) or an instant kind's own verb (lose-unflushed: its node is back when
it completes), as nemesis.kinds declares them. The
recovery time is from that completion to the next `ok` client completion that
was invoked after it (an op invoked before the heal proves nothing). A heal
with no such op within `stall_s` is flagged, as is a run whose longest stretch
with no ok client op after a heal exceeds `stall_s`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.runfiles import NEMESIS, Op
from nemesis.kinds import KINDS, recovery_verbs

HEAL_VERBS = recovery_verbs(KINDS)
NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Recovery:
    heal_index: int
    f: str
    heal_ns: int
    recovered_ns: int | None  # time of the first ok client completion invoked after it

    @property
    def recovery_s(self) -> float | None:
        return None if self.recovered_ns is None else (self.recovered_ns - self.heal_ns) / NS


def _row(op: Op | Mapping[str, Any]) -> tuple[int, int, str, Any, str]:
    if isinstance(op, Op):
        return op.index, op.time, op.type, op.process, op.f
    return (int(op.get("index", -1)), int(op.get("time", 0)), str(op.get("type")),
            op.get("process"), str(op.get("f")))


def recoveries(history: Iterable[Op | Mapping[str, Any]]) -> list[Recovery]:
    """Each heal and when the first client op invoked after it completed ok."""
    rows = [_row(o) for o in history]
    invoked_at: dict[Any, int] = {}
    heals: list[tuple[int, int, str]] = []
    oks: list[tuple[int, int]] = []  # (invoke time, completion time)
    for index, t, typ, proc, f in rows:
        if proc == NEMESIS:
            if typ != "invoke" and f in HEAL_VERBS:
                heals.append((index, t, f))
            continue
        if typ == "invoke":
            invoked_at[proc] = t
        elif typ == "ok" and proc in invoked_at:
            oks.append((invoked_at[proc], t))
    oks.sort(key=lambda x: x[1])
    out: list[Recovery] = []
    for index, t, f in heals:
        done = next((c for inv, c in oks if inv >= t), None)
        out.append(Recovery(index, f, t, done))
    return out


def liveness(history: Iterable[Op | Mapping[str, Any]], *, stall_s: float = 30.0,
             end_ns: int | None = None) -> dict[str, Any]:
    """The `stats.liveness` block: recovery after each heal, and whether any stalled.

    A heal with no recovery counts as stalled when the history goes on for at least
    stall_s after it (end_ns: the history's last time unless given).
    """
    ops = list(history)
    last = end_ns if end_ns is not None else max((_row(o)[1] for o in ops), default=0)
    recs = recoveries(ops)
    times = [r.recovery_s for r in recs if r.recovery_s is not None]
    stalled = [r for r in recs
               if (r.recovery_s is not None and r.recovery_s > stall_s)
               or (r.recovery_s is None and (last - r.heal_ns) / NS >= stall_s)]
    return {
        "heals": len(recs),
        "recovered": len(times),
        "max_recovery_s": round(max(times), 3) if times else None,
        "median_recovery_s": round(sorted(times)[len(times) // 2], 3) if times else None,
        "stall_s": stall_s,
        "stalled": [{"index": r.heal_index, "f": r.f, "time": r.heal_ns,
                     "recovery_s": None if r.recovery_s is None else round(r.recovery_s, 3)}
                    for r in stalled],
        "ok": not stalled,
        "recoveries": [{"index": r.heal_index, "f": r.f, "time": r.heal_ns,
                        "recovery_s": None if r.recovery_s is None else round(r.recovery_s, 3)}
                       for r in recs],
    }
