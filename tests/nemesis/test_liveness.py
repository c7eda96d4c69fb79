"""Liveness over a history: time from each heal to the next ok client op invoked after it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from harness.faultkinds import KINDS, recovery_verbs
from harness.runfiles import HistoryWriter, Op
from nemesis.liveness import LivenessChecker, liveness, recoveries

HEAL_VERBS = recovery_verbs(KINDS)  # the built-in kinds' heals

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


def _first_ok_after(h: list[Op]) -> list[int | None]:
    """The definition, directly: per heal, the earliest ok completion (by time, then
    file order) of a client op invoked at or after the heal."""
    invoked: dict[Any, int] = {}
    oks: list[tuple[int, int]] = []
    for o in h:
        if o.process != "nemesis" and o.type == "invoke":
            invoked[o.process] = o.time
        elif o.process != "nemesis" and o.type == "ok" and o.process in invoked:
            oks.append((invoked[o.process], o.time))
    oks.sort(key=lambda x: x[1])
    return [next((c for inv, c in oks if inv >= o.time), None) for o in h
            if o.process == "nemesis" and o.type != "invoke" and o.f in HEAL_VERBS]


def _random_history(rng: random.Random, n: int) -> list[Op]:
    """Clients and heals at coarse times (many ties); completion times out of order."""
    h: list[Op] = []
    busy: dict[int, int] = {}
    for _ in range(n):
        t = rng.randrange(50)
        if rng.random() < 0.1:
            h.append(op(t / 10, rng.choice(["invoke", "info"]), "nemesis",
                        rng.choice(["start", "heal", "kill", "resume"])))
            continue
        p = rng.randrange(4)
        if p in busy:
            h.append(op(max(t, busy.pop(p)) / 10, rng.choice(["ok", "ok", "fail", "info"]),
                        p, "send"))
        else:
            busy[p] = t
            h.append(op(t / 10, "invoke", p, "send"))
    return [o.with_(index=i) for i, o in enumerate(h)]


def test_recoveries_match_the_definition_on_random_histories() -> None:
    rng = random.Random(7)
    for _ in range(300):
        h = _random_history(rng, rng.randrange(1, 60))
        got = [r.recovered_ns for r in recoveries(h)]
        assert got == _first_ok_after(h)


def test_a_watched_run_gives_what_reading_its_file_gives(tmp_path: Path) -> None:
    """The run's writer feeds the checker as it writes; a fresh checker reads the file;
    both answers are the same (the writer makes times monotonic, so use raw ones)."""
    rng = random.Random(3)
    watched = LivenessChecker()
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, observers=[watched.watch(path)]) as w:
        for o in _random_history(rng, 2000):
            w.append(o)
    mine = watched.check(tmp_path, None)
    assert mine == LivenessChecker().check(tmp_path, None)
    assert mine["stats"]["liveness"]["heals"] > 10
    assert mine["stats"]["liveness"]["recovered"] > 10
    other = tmp_path / "copy"
    other.mkdir()
    (other / "history.jsonl").write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    # the watched checker asked about another folder reads that folder
    assert watched.check(other, None) == LivenessChecker().check(other, None) != mine
