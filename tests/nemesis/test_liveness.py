"""Liveness over a history: time from each heal to the next ok client op invoked after it."""

from __future__ import annotations

from harness.runfiles import Op
from nemesis.liveness import liveness, recoveries

S = 1_000_000_000


def op(t_s: float, typ: str, process: int | str, f: str) -> Op:
    return Op(type=typ, process=process, f=f, time=int(t_s * S))  # type: ignore[arg-type]


def test_recovery_counts_only_ops_invoked_after_the_heal() -> None:
    h = [op(0, "invoke", "nemesis", "kill"), op(0.1, "info", "nemesis", "kill"),
         op(1, "invoke", 0, "send"),
         op(2, "invoke", "nemesis", "start"), op(2.5, "info", "nemesis", "start"),
         op(3, "ok", 0, "send"),  # invoked before the heal: proves nothing
         op(4, "invoke", 1, "poll"), op(4.75, "ok", 1, "poll")]
    (r,) = recoveries(h)
    assert r.f == "start" and r.recovery_s == 2.25
    out = liveness(h, stall_s=10)
    assert out["ok"] and out["max_recovery_s"] == 2.25 and out["heals"] == 1


def test_a_long_silence_after_a_heal_is_flagged() -> None:
    h = [op(0, "invoke", "nemesis", "heal"), op(1, "info", "nemesis", "heal"),
         op(2, "invoke", 0, "send"), op(3, "fail", 0, "send"),
         op(40, "invoke", 0, "send"), op(45, "ok", 0, "send")]
    out = liveness(h, stall_s=30)
    assert not out["ok"] and out["stalled"][0]["recovery_s"] == 44.0
    h2 = [*h[:4], op(50, "invoke", 1, "poll"), op(50.5, "fail", 1, "poll")]
    out2 = liveness(h2, stall_s=30)
    assert not out2["ok"] and out2["stalled"][0]["recovery_s"] is None


def test_reads_history_rows_too() -> None:
    rows = [{"index": 0, "time": 0, "type": "invoke", "process": "nemesis", "f": "resume"},
            {"index": 1, "time": S, "type": "info", "process": "nemesis", "f": "resume"},
            {"index": 2, "time": 2 * S, "type": "invoke", "process": 3, "f": "poll"},
            {"index": 3, "time": 3 * S, "type": "ok", "process": 3, "f": "poll"}]
    assert liveness(rows)["recoveries"] == [{"index": 1, "f": "resume", "time": S,
                                             "recovery_s": 2.0}]
