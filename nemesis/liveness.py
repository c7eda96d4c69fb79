"""Liveness: after each heal, how long until the cluster served a client again.

Pure over a history (a list of Op or of history.jsonl dicts). A heal is the
completion of a nemesis op that ends a fault: a kind's stop verb (start, resume,
heal, ...) or an instant kind's own verb (lose-unflushed: its node is back when
it completes), as harness.faultkinds declares them; the harness's own final heal
(`"final": true`) is not one. The recovery time is from that completion to the
next `ok` send, poll or transaction that was invoked after it (an op invoked
before the heal proves nothing; an `assign` or `subscribe` succeeds while writes
cannot, so it proves nothing either). A heal with no such op within `stall_s` is
flagged. results.json's `availability` (checkers.availability) holds the finer
figures: sends and polls apart, per fault window.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

from harness.faultkinds import known, recovery_verbs
from harness.runfiles import FINAL, NEMESIS, Op, iter_history
from harness.spec import TestSpec

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


SERVICE = frozenset({"send", "poll", "txn"})  # what serving clients means


def _row(op: Op | Mapping[str, Any]) -> tuple[int, int, str, Any, str, bool]:
    if isinstance(op, Op):
        return op.index, op.time, op.type, op.process, op.f, op.extra.get(FINAL) is True
    return (int(op.get("index", -1)), int(op.get("time", 0)), str(op.get("type")),
            op.get("process"), str(op.get("f")), op.get(FINAL) is True)


class Tally:
    """What liveness needs of a history, fed one op at a time in file order: the heals,
    each ok send, poll or txn completion with its invocation's time, and the last time. Memory is
    16 bytes per ok op, so the run's writer can feed it as ops happen (`watch`)."""

    def __init__(self) -> None:
        self.heal_verbs = recovery_verbs(known())  # built-in kinds and plug-ins' faults
        self._invoked_at: dict[Any, int] = {}
        self.heals: list[tuple[int, int, str]] = []
        self._inv = array("q")  # per ok completion: its invocation's time
        self._done = array("q")  # and its own
        self.last: int | None = None

    def add(self, op: Op | Mapping[str, Any]) -> None:
        index, t, typ, proc, f, final = _row(op)
        if self.last is None or t > self.last:
            self.last = t
        if proc == NEMESIS:
            if typ != "invoke" and f in self.heal_verbs and not final:
                self.heals.append((index, t, f))
        elif f not in SERVICE:
            return
        elif typ == "invoke":
            self._invoked_at[proc] = t
        elif typ == "ok" and proc in self._invoked_at:
            self._inv.append(self._invoked_at[proc])
            self._done.append(t)

    def recoveries(self) -> list[Recovery]:
        """Each heal and the first ok completion (by completion time, then file order)
        whose op was invoked at or after it."""
        inv, done = self._inv, self._done
        if any(a > b for a, b in pairwise(done)):  # a writer's history never is
            order = sorted(range(len(done)), key=done.__getitem__)
            inv, done = array("q", (inv[i] for i in order)), array("q", (done[i] for i in order))
        # the first ok invoked at or after t is the first whose running max of
        # invocation times reaches t (that max first reaches t at such an op)
        reach = list(accumulate(inv, max))
        out = []
        for index, t, f in self.heals:
            i = bisect_left(reach, t)
            out.append(Recovery(index, f, t, done[i] if i < len(done) else None))
        return out

    def summary(self, *, stall_s: float = 30.0, end_ns: int | None = None) -> dict[str, Any]:
        """The `stats.liveness` block (see `liveness`)."""
        last = end_ns if end_ns is not None else (self.last if self.last is not None else 0)
        recs = self.recoveries()
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
            "stalled": [_json(r) for r in stalled],
            "ok": not stalled,
            "recoveries": [_json(r) for r in recs],
        }


def _json(r: Recovery) -> dict[str, Any]:
    return {"index": r.heal_index, "f": r.f, "time": r.heal_ns,
            "recovery_s": None if r.recovery_s is None else round(r.recovery_s, 3)}


def tally(history: Iterable[Op | Mapping[str, Any]]) -> Tally:
    out = Tally()
    for op in history:
        out.add(op)
    return out


def recoveries(history: Iterable[Op | Mapping[str, Any]]) -> list[Recovery]:
    """Each heal and when the first client op invoked after it completed ok."""
    return tally(history).recoveries()


def liveness(history: Iterable[Op | Mapping[str, Any]], *, stall_s: float = 30.0,
             end_ns: int | None = None) -> dict[str, Any]:
    """The `stats.liveness` block: recovery after each heal, and whether any stalled.

    A heal with no recovery counts as stalled when the history goes on for at least
    stall_s after it (end_ns: the history's last time unless given).
    """
    return tally(history).summary(stall_s=stall_s, end_ns=end_ns)


class LivenessChecker:
    """harness.protocols.Checker: liveness in results.json's stats; the verdict stays safety's.

    The checkers judge safety from the run files alone; liveness is the harness's own
    measurement of the faults it injected, so it adds stats and never a verdict. In a
    run it tallies the ops as the writer writes them (harness.protocols.WatchesHistory),
    so checking does not parse the history again; any other folder is read."""

    name = "liveness"

    def __init__(self) -> None:
        self._watched: tuple[Path, Tally] | None = None

    def watch(self, history: Path) -> Callable[[Op], None]:
        t = Tally()
        self._watched = (history, t)
        return t.add

    def _tally(self, run_dir: Path) -> Tally:
        path = run_dir / "history.jsonl"
        if self._watched is not None and self._watched[0].exists() \
                and os.path.samefile(self._watched[0], path):
            return self._watched[1]
        return tally(iter_history(path))

    def check(self, run_dir: Path, spec: TestSpec | None) -> dict[str, Any]:
        try:
            return {"valid": True, "stats": {"liveness": self._tally(run_dir).summary()}}
        except (OSError, ValueError) as e:
            return {"valid": True, "stats": {"liveness_error": f"{type(e).__name__}: {e}"}}
