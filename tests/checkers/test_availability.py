"""results.json's `availability` against a hand-built history whose outages are known.

The history: sends to keys 0 and 1 and polls every 0.5 s; a kill from 10 s that makes
sends and polls fail (the assigns keep succeeding); its heal at 15.2 s; an `assign`
that succeeds at once after it (it must not count as a recovery), polls back at
17.1 s, sends to key 0 at 18.1 s, to key 1 at 20.1 s; then the harness's final heal
(`"final": true`) and a final poll. The figures are checked against those known times
and against a direct recomputation from the list of lines.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from checkers.api import check_local
from checkers.availability import availability as measure
from checkers.availability import error_class
from checkers.tables import load_tables
from nemesis.liveness import liveness

S = 1_000_000_000
NER = "NOT_ENOUGH_REPLICAS"


class History:
    """Lines at given times (seconds), each client op on its own process."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.next_value = 0
        self.next_process = 0
        self.written: dict[int, list[list[int]]] = {}  # key -> [offset, value] of ok sends

    def add(self, t_s: float, typ: str, process: int | str, f: str, value: Any,
            **extra: Any) -> None:
        self.lines.append({"index": len(self.lines), "time": round(t_s * S), "type": typ,
                           "process": process, "f": f, "value": value, **extra})

    def client(self, t0: float, t1: float, f: str, ok: bool, key: int = 0,
               error: str = NER) -> None:
        p, self.next_process = self.next_process, self.next_process + 1
        if f == "send":
            v, self.next_value = self.next_value, self.next_value + 1
            log = self.written.setdefault(key, [])
            inv: Any = [["send", key, v]]
            done: Any = [["send", key, [len(log), v]]] if ok else inv
            if ok:
                log.append([len(log), v])
        elif f == "poll":
            inv, done = [["poll"]], [["poll", {}]]
        elif f == "final-poll":  # reads every ok send, so that none is `unseen`
            f, inv = "poll", [["poll"]]
            done = [["poll", {str(k): log for k, log in self.written.items()}]]
        else:
            inv = done = [key]
        self.add(t0, "invoke", p, f, inv)
        extra = {} if ok else {"error": error}
        self.add(t1, "ok" if ok else "fail", p, f, done, **extra)

    def nemesis(self, t0: float, t1: float, f: str, value: Any, **extra: Any) -> None:
        self.add(t0, "invoke", "nemesis", f, value, **extra)
        self.add(t1, "info", "nemesis", f, value, **extra)

    def in_order(self) -> list[dict[str, Any]]:
        """The lines by time, numbered: the history as a writer would have written it."""
        self.lines.sort(key=lambda x: x["time"])
        for i, x in enumerate(self.lines):
            x["index"] = i
        return self.lines

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "history.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n"
                                                         for x in self.in_order()))
        return run_dir


def outage_history() -> History:
    h = History()
    t = 0.0
    while t < 25:
        up_send0 = t < 10 or t >= 18
        up_send1 = t < 10 or t >= 20
        up_poll = t < 10 or t >= 17
        h.client(t + 0.01, t + 0.1, "send", up_send0, key=0)
        h.client(t + 0.02, t + 0.1, "send", up_send1, key=1,
                 error=NER if t < 15.2 else "REQUEST_TIMED_OUT")
        h.client(t + 0.03, t + 0.1, "poll", up_poll, error="LEADER_NOT_AVAILABLE")
        t += 0.5
    h.nemesis(10.0, 10.05, "kill", {"nodes": ["n1"]})
    h.nemesis(15.0, 15.2, "start", {"nodes": ["n1"]})
    h.client(15.25, 15.3, "assign", True)  # right after the heal: serves no write
    h.client(12.0, 12.05, "assign", True)  # inside the window, ok all the same
    h.nemesis(25.0, 25.1, "heal", {}, final=True)
    h.client(25.5, 25.6, "final-poll", True)
    return h


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return outage_history().write(tmp_path_factory.mktemp("outage"))


@pytest.fixture(scope="module")
def availability(run_dir: Path) -> dict[str, Any]:
    """Measured on the tables the checker reads (checkers.tables), as every check does."""
    return measure(load_tables(run_dir), run_dir)


def test_the_check_writes_it_beside_an_unchanged_verdict(run_dir: Path,
                                                         availability: dict[str, Any]) -> None:
    results = check_local(run_dir, write=True)
    assert results["valid"] is True and results["counts"] == {}
    written = json.loads((run_dir / "results.json").read_text())
    assert written["availability"] == json.loads(json.dumps(availability))


def test_the_kill_window_and_the_shares_in_and_out_of_it(availability: dict[str, Any]) -> None:
    (w,) = [w for w in availability["windows"] if w["kind"] == "kill"]
    assert (w["from_s"], w["to_s"], w["nodes"], w["final_heal"]) == (10.0, 15.2, ["n1"], False)
    # sends and polls invoked from 10 to 15 s, completing inside: every one failed
    # the sends and polls that completed in it (10.1 .. 15.1 s): every one failed
    assert w["ops"]["send"] == {"ok": 0, "fail": 2 * 11, "info": 0, "ok_share": 0.0}
    assert w["ops"]["poll"]["ok_share"] == 0.0 and w["ops"]["poll"]["fail"] == 11
    assert w["ops"]["assign"] == {"ok": 1, "fail": 0, "info": 0, "ok_share": 1.0}
    assert w["errors"]["send"] == {NER: 22}
    assert w["longest_without_ok"]["send"] == {"s": 5.2, "from_s": 10.0, "to_s": 15.2}
    free = availability["fault_free"]
    assert free["s"] == pytest.approx(25.6 - 5.2)
    assert free["ops"]["assign"]["ok"] == 1
    # outside the window: sends fail from 15.5 to 17.5 s (key 0) and 19.5 s (key 1)
    assert free["ops"]["send"]["fail"] == 5 + 9 and free["ops"]["poll"]["fail"] == 3
    assert free["longest_without_ok"]["send"] == {"s": 2.9, "from_s": 15.2, "to_s": 18.1}


def test_longest_stretches_without_a_send_and_a_poll(availability: dict[str, Any]) -> None:
    longest = availability["longest_without_ok"]
    assert longest["send"] == {"s": 8.5, "from_s": 9.6, "to_s": 18.1}
    assert longest["poll"] == {"s": 7.5, "from_s": 9.6, "to_s": 17.1}
    assert availability["send_by_key"]["0"]["s"] == 8.5
    assert availability["send_by_key"]["1"] == {"s": 10.5, "from_s": 9.6, "to_s": 20.1}


def test_an_assign_is_never_a_recovery_and_the_final_heal_is_apart(
        availability: dict[str, Any]) -> None:
    start, final = availability["heals"]
    assert (start["f"], start["time_s"], start["final"]) == ("start", 15.2, False)
    assert start["send_s"] == pytest.approx(18.1 - 15.2)  # not the assign's 0.1 s
    assert start["poll_s"] == pytest.approx(17.1 - 15.2)
    assert final["final"] is True and final["poll_s"] == pytest.approx(0.5)
    rec = availability["recovery"]
    assert rec["heals"] == 1 and rec["worst_send_s"] == pytest.approx(2.9)
    live = liveness(outage_history().in_order())
    assert live["heals"] == 1 and live["max_recovery_s"] == pytest.approx(17.1 - 15.2)


def test_errors_by_message(availability: dict[str, Any]) -> None:
    assert availability["errors"]["send"] == {NER: 16 + 11, "REQUEST_TIMED_OUT": 9}
    assert availability["errors"]["poll"] == {"LEADER_NOT_AVAILABLE": 14}


def _reference(lines: list[dict[str, Any]], f: str) -> tuple[float, dict[int, float | None]]:
    """The definitions, directly over the lines: the longest stretch between ok
    completions of f (first invoke to last completion), and per heal the first ok
    completion of an f invoked at or after it."""
    invoked: dict[Any, int] = {}
    oks: list[tuple[int, int]] = []
    times: list[int] = []
    for x in lines:
        if x["f"] != f:
            continue
        times.append(x["time"])
        if x["type"] == "invoke":
            invoked[x["process"]] = x["time"]
        elif x["type"] == "ok":
            oks.append((invoked[x["process"]], x["time"]))
    points = sorted([min(times), max(times), *(c for _, c in oks)])
    longest = max(b - a for a, b in itertools.pairwise(points)) / S
    heals = {x["index"]: x["time"] for x in lines
             if x["process"] == "nemesis" and x["type"] == "info" and x["f"] in ("start", "heal")}
    first = {i: min((c for inv, c in oks if inv >= h), default=None) for i, h in heals.items()}
    return longest, {i: None if c is None else (c - heals[i]) / S for i, c in first.items()}


@pytest.mark.parametrize("f", ["send", "poll"])
def test_matches_a_direct_recomputation(availability: dict[str, Any], f: str) -> None:
    longest, rec = _reference(outage_history().in_order(), f)
    assert availability["longest_without_ok"][f]["s"] == pytest.approx(longest)
    got = {h["index"]: h[f"{f}_s"] for h in availability["heals"]}
    assert got.keys() == rec.keys()
    for i, want in rec.items():
        assert got[i] == (None if want is None else pytest.approx(want, abs=1e-3))


def test_an_error_class_counts_one_cause_once() -> None:
    a = error_class("REQUEST_TIMED_OUT: n1: offset 66 not committed in time (hw 66)")
    b = error_class("REQUEST_TIMED_OUT: n1: offset 334 not committed in time (hw 333)")
    assert a == b == "REQUEST_TIMED_OUT: n1: offset N not committed in time (hw N)"
    assert error_class("n2: gave up after 3.0s") != error_class("n3: gave up after 3.0s")


def test_the_notes_are_the_same_read_in_parallel_ranges(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.runfiles import notes

    history = outage_history().write(tmp_path) / "history.jsonl"
    whole = notes.read_notes(history, assigned=True)
    assert len(whole.nemesis) == 6 and len(whole.errors) == 16 + 20 + 14
    assert whole.nemesis[-1]["final"] is True
    assert whole.assigned.key.tolist() == [0, 0]  # the two ok assigns' one key
    assert not len(notes.read_notes(history).assigned)  # only when asked
    monkeypatch.setattr(notes, "PARALLEL_BYTES", 1)
    parts = notes.read_notes(history, workers=3, assigned=True)
    assert (parts.nemesis, parts.errors) == (whole.nemesis, whole.errors)
    assert all(np.array_equal(getattr(parts.assigned, c), getattr(whole.assigned, c))
               for c in ("time", "process", "key"))


def _rows(a: Any) -> list[tuple[int, int, int]]:
    return sorted(zip(a.time.tolist(), a.process.tolist(), a.key.tolist(), strict=True))


def test_the_keys_of_assigns_are_the_same_from_each_reader(tmp_path: Path) -> None:
    """The strict reader keeps the keys of ok assigns and subscribes (Tables.assigned);
    DuckDB's does not, and then the notes reader finds them in the history: the same
    rows, and the same figures."""
    from checkers.fastscan import scan_fast
    from checkers.tables import build_tables
    from harness.runfiles import read_notes

    run = waiting_history().write(tmp_path)
    t = load_tables(run)
    assert t.assigned is not None
    assert [k for _, _, k in sorted(_rows(t.assigned))] == [0, 2, 3, 4, 5, 6, 0, 7, 8, 7, 9,
                                                           10]  # not the failed one of 11
    noted = read_notes(run / "history.jsonl", assigned=True).assigned
    assert _rows(noted) == _rows(t.assigned)
    duck = build_tables(scan_fast(run / "history.jsonl", min_bytes=0), None)
    assert duck.assigned is None
    assert measure(duck, run) == measure(t, run)


def test_no_stretch_is_counted_where_no_such_operation_was_done(tmp_path: Path) -> None:
    """Sends until 5 s, then only polls until 20 s (as in the final reads): no send gap."""
    h = History()
    for t in range(6):
        h.client(t, t + 0.1, "send", True)
    for t in range(21):
        h.client(t + 0.2, t + 0.3, "poll", True)
    av = measure(load_tables(h.write(tmp_path)), tmp_path)
    assert av["longest_without_ok"]["send"] == {"s": 1.0, "from_s": 0.1, "to_s": 1.1}
    assert av["fault_free"]["longest_without_ok"]["send"]["s"] == 1.0
    assert av["longest_without_ok"]["poll"]["s"] == 1.0


def waiting_history() -> History:
    """Keys whose records wait unread while ok polls come back empty every 0.5 s (known
    stretches, see the tests below), a kill window from 2.5 to 4.5 s, and an ok `assign`
    of key 0 at 4 s that returns nothing. Keys 0 and 2 to 5 have a consumer throughout
    (process 900); keys 6 to 11 have one only now and then, or never."""
    h = History()

    def consumer(p: int, f: str, t0: float, t1: float, value: Any, typ: str = "ok") -> None:
        h.add(t0, "invoke", p, f, [["poll"]] if f == "poll" else value)
        h.add(t1, typ, p, f, value, **({"error": "gone"} if typ == "fail" else {}))

    consumer(900, "assign", 0.0, 0.05, [0, 2, 3, 4, 5])
    consumer(900, "poll", 9.4, 9.5, [["poll", {}]])  # its last operation

    def sent(key: int, t0: float, t1: float) -> list[int]:
        h.client(t0, t1, "send", True, key=key)
        return h.written[key][-1]

    def poll(t0: float, t1: float, reads: dict[int, list[list[int]]],
             typ: str = "ok") -> None:
        p, h.next_process = h.next_process, h.next_process + 1
        h.add(t0, "invoke", p, "poll", [["poll"]])
        h.add(t1, typ, p, "poll", [["poll", {str(k): v for k, v in reads.items()}]])

    for i in range(19):  # empty ok polls from 0.25 to 9.3 s
        h.client(0.25 + 0.5 * i, 0.3 + 0.5 * i, "poll", True)
    a, b = sent(0, 1.0, 1.1), sent(0, 2.0, 2.1)
    poll(6.1, 6.2, {0: [a, b]})  # key 0 waits 1.1 -> 6.2
    h.client(4.0, 4.05, "assign", True, key=0)  # ok, returns nothing: no end to it
    poll(0.7, 0.8, {2: [sent(2, 0.5, 0.6)]})  # key 2 waits 0.6 -> 0.8, then has nothing
    poll(6.95, 7.05, {3: [sent(3, 7.0, 7.1)]})  # read before its ack came: never waits
    poll(5.4, 5.5, {4: [sent(4, 5.0, 5.1)]}, typ="info")  # read by an info poll: 5.1 -> 5.5
    a, b = sent(5, 1.0, 1.1), sent(5, 1.15, 1.2)
    poll(1.9, 2.0, {5: [a]})  # key 5 waits 1.1 -> 2.0, then for b from that poll to 3.0
    poll(2.9, 3.0, {5: [b]})
    h.nemesis(2.5, 2.55, "kill", {"nodes": ["n1"]})
    h.nemesis(4.4, 4.5, "start", {"nodes": ["n1"]})
    six = sent(6, 1.0, 1.1)  # nobody reads key 6 until 3.05 s
    consumer(901, "assign", 3.0, 3.05, [6])
    consumer(901, "poll", 3.9, 4.0, [["poll", {"6": [six]}]])
    seven = sent(7, 5.0, 5.1)  # read 5.2-5.6 s, then nobody, then 6.5-6.9 s
    consumer(902, "assign", 5.15, 5.2, [7])
    consumer(902, "assign", 5.6, 5.65, [8])
    consumer(903, "assign", 6.45, 6.5, [7])
    consumer(903, "poll", 6.8, 6.9, [["poll", {"7": [seven]}]])
    sent(9, 7.2, 7.3)  # its reader crashes at 7.5 s, and nobody reads it after
    consumer(904, "assign", 6.95, 7.0, [9])
    consumer(904, "crash", 7.5, 7.55, None, typ="info")
    ten = sent(10, 7.0, 7.1)  # a group member's from 8 s
    consumer(905, "subscribe", 7.95, 8.0, [10])
    consumer(905, "poll", 8.5, 8.6, [["poll", {"10": [ten]}]])
    sent(11, 0.9, 0.95)  # its only assign failed: never read, never waited for
    consumer(906, "assign", 1.0, 1.05, [11], typ="fail")
    consumer(906, "poll", 1.2, 1.3, [["poll", {}]])
    return h


@pytest.fixture(scope="module")
def waited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = waiting_history().write(tmp_path_factory.mktemp("waiting"))
    return measure(load_tables(run), run)


def test_a_key_waits_while_empty_polls_succeed(waited: dict[str, Any]) -> None:
    by_key = waited["poll_by_key"]
    assert by_key["0"] == {"s": 5.1, "from_s": 1.1, "to_s": 6.2}  # past the assign at 4 s
    assert waited["poll_by_key_worst"] == {"key": 0, "s": 5.1, "from_s": 1.1, "to_s": 6.2}
    # the polls never stopped succeeding: the whole-run stretch alone would not show it
    assert waited["longest_without_ok"]["poll"]["s"] < 1.0
    # from the poll that returned part of key 5's records, not from the ack of the rest
    assert by_key["5"] == {"s": 1.0, "from_s": 2.0, "to_s": 3.0}


def test_a_key_with_nothing_to_read_does_not_wait(waited: dict[str, Any]) -> None:
    by_key = waited["poll_by_key"]
    assert by_key["2"] == {"s": 0.2, "from_s": 0.6, "to_s": 0.8}  # then 8.5 s of empty polls
    assert by_key["3"] is None  # read before its send was acknowledged
    assert by_key["4"] == {"s": 0.4, "from_s": 5.1, "to_s": 5.5}  # an info poll read it
    assert set(by_key) == {str(k) for k in (0, 2, 3, 4, 5, 6, 7, 9, 10, 11)}  # acked


def test_a_key_waits_only_while_it_has_a_consumer(waited: dict[str, Any]) -> None:
    """A key nobody was assigned is the workload's choice, not an outage: its stretch
    starts when a consumer gets it and stops when the last one lets it go."""
    by_key = waited["poll_by_key"]
    assert by_key["6"] == {"s": 0.95, "from_s": 3.05, "to_s": 4.0}  # not from 1.1 s
    # 5.2-5.6 s and 6.5-6.9 s: two stretches, not 5.1-6.9 s across the gap
    assert by_key["7"] == {"s": 0.4, "from_s": 5.2, "to_s": 5.6}
    assert by_key["9"] == {"s": 0.25, "from_s": 7.3, "to_s": 7.55}  # its reader crashed
    assert by_key["10"] == {"s": 0.6, "from_s": 8.0, "to_s": 8.6}  # subscribed at 8 s
    assert by_key["11"] is None  # a failed assign gives no consumer
    # the run's worst and the fault-free worst are still key 0's (1.7 s from 4.5 s)
    assert waited["poll_by_key_worst"]["key"] == 0
    assert waited["fault_free"]["poll_by_key_worst"]["key"] == 0


def test_a_history_without_assigns_measures_no_key(tmp_path: Path) -> None:
    """Nothing says who read which key: no per-key figure, rather than a wrong one."""
    h = History()
    h.client(0.0, 0.1, "send", True, key=0)
    for i in range(10):
        h.client(0.2 + i, 0.3 + i, "poll", True)
    av = measure(load_tables(h.write(tmp_path)), tmp_path)
    assert av["poll_by_key"] == {}
    assert av["poll_by_key_worst"] is None


def test_the_worst_waiting_key_per_window_and_outside(waited: dict[str, Any]) -> None:
    (w,) = waited["windows"]
    assert w["poll_by_key_worst"] == {"key": 0, "s": 2.0, "from_s": 2.5, "to_s": 4.5}
    assert waited["fault_free"]["poll_by_key_worst"] == {"key": 0, "s": 1.7, "from_s": 4.5,
                                                          "to_s": 6.2}


def test_the_per_key_polls_are_the_same_when_spark_drops_the_records(
        waited: dict[str, Any], tmp_path: Path) -> None:
    """Tables.reads (what checkers.sparkread keeps of the records read) gives the same
    figures as the entries; built here from the entries, as the driver's answer."""
    from checkers.pollwaits import polls_read
    from checkers.tables import KIND_SEND

    run = waiting_history().write(tmp_path)
    t = load_tables(run)
    e = t.entries
    s = e["kind"] == KIND_SEND
    t.reads = (e["offset"][s], *polls_read(t))
    t.sends = (e["op"][s], e["key"][s])
    t.entries = {c: v[:0] for c, v in e.items()}
    assert measure(t, run) == waited


def test_the_records_read_give_the_same_stretches_a_few_at_a_time(
        waited: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """checkers.pollwaits reads the entries CHUNK at a time: steps that cut a poll's
    records and a key's apart change nothing."""
    from checkers import pollwaits

    run = waiting_history().write(tmp_path)
    monkeypatch.setattr(pollwaits, "CHUNK", 3)
    assert measure(load_tables(run), run) == waited


def _waits_one_by_one(acked: tuple[Any, Any, Any], polls: tuple[Any, Any, Any, Any],
                      end: int) -> list[tuple[int, int, int]]:
    """The definition walked event by event, per key (acks before polls at one time)."""
    out = []
    for k in sorted(set(acked[0].tolist()) | set(polls[0].tolist())):
        ev = sorted([(int(t), 0, int(o), False) for kk, t, o in zip(*acked, strict=True)
                     if kk == k and o >= 0]
                    + [(int(t), 1, int(o), bool(ok)) for kk, t, o, ok in zip(*polls, strict=True)
                       if kk == k])
        top_acked = top_read = -1
        since = None
        for t, is_poll, o, ok in ev:
            if is_poll:
                top_read = max(top_read, o)
            else:
                top_acked = max(top_acked, o)
            waits = top_acked > top_read
            if since is not None and (not waits or ok):
                if t > since:
                    out.append((k, since, t))
                since = None
            if waits and since is None:
                since = t
        if since is not None and end > since:
            out.append((k, since, end))
    return out


def test_the_stretches_are_the_definition_walked_event_by_event() -> None:
    """checkers.pollwaits.waiting (one sort, running maxima) against a plain walk of the
    definition, on random acks and polls with many equal times; huge times and offsets
    take its other paths (a lexsort, offsets by rank), to the same stretches."""
    from checkers.pollwaits import waiting

    rng = np.random.default_rng(7)
    for i in range(60):
        big = 1 << 58 if i % 2 else 1
        n, m = int(rng.integers(0, 40)), int(rng.integers(0, 40))
        acked = (rng.integers(0, 4, n), rng.integers(0, 30, n) * big,
                 np.maximum(rng.integers(-1, 12, n) * big, -1))
        polls = (rng.integers(0, 4, m), rng.integers(0, 30, m) * big,
                 rng.integers(0, 12, m) * big, rng.random(m) < 0.6)
        key, lo, up = waiting(acked, polls, 30 * big)
        got = list(zip(key.tolist(), lo.tolist(), up.tolist(), strict=True))
        assert got == _waits_one_by_one(acked, polls, 30 * big)


def test_the_cover_cuts_the_stretches_as_a_walk_over_time_would() -> None:
    """checkers.pollwaits.merge and gate against unit steps of time: a step of a stretch
    is kept when some span of its key covers it."""
    from checkers.pollwaits import gate, merge

    rng = np.random.default_rng(11)
    for _ in range(80):
        spans = [(int(k), int(a), int(a + d)) for k, a, d in
                 zip(rng.integers(0, 3, 12), rng.integers(0, 40, 12), rng.integers(1, 9, 12),
                     strict=True)][: int(rng.integers(0, 12))]
        waits = []
        for k in range(3):  # disjoint stretches with room between them, by key then time
            at = int(rng.integers(0, 4))
            while at < 45:
                d = int(rng.integers(1, 10))
                waits.append((k, at, at + d))
                at += d + int(rng.integers(1, 6))
        def col(rows: list[tuple[int, int, int]], i: int) -> Any:
            return np.array([r[i] for r in rows], np.int64)

        cover = merge(*(col(spans, i) for i in range(3)))
        got = gate(tuple(col(waits, i) for i in range(3)), cover)
        steps = {(k, t) for k, a, b in waits for t in range(a, b)
                 if any(k == kk and aa <= t < bb for kk, aa, bb in spans)}
        pieces = []
        for k, a, b in waits:
            run = None
            for t in range(a, b + 1):
                if t < b and (k, t) in steps:
                    run = t if run is None else run
                elif run is not None:
                    pieces.append((k, run, t))
                    run = None
        assert list(zip(*(x.tolist() for x in got), strict=True)) == pieces
        ck, ca, cb = cover
        assert np.all((ck[1:] > ck[:-1]) | (ca[1:] > cb[:-1]))  # disjoint, not touching


def test_sparse_process_numbers_give_the_same_cover(tmp_path: Path) -> None:
    """Process numbers index an array when they are dense enough, else their ranks are
    taken: the same spans either way."""
    from checkers.pollwaits import assigned_spans
    from harness.runfiles import Assigned

    t = load_tables(waiting_history().write(tmp_path))
    assert t.assigned is not None
    at = np.where(t.op_cmp_time == np.iinfo(np.int64).max, t.op_inv_time, t.op_cmp_time)
    end = int(at.max())
    dense = assigned_spans(t.assigned, t.op_process, t.op_f, t.op_inv_time, at, end)
    far = 10**9  # numbers far apart: ranks
    sparse = assigned_spans(Assigned(t.assigned.time, t.assigned.process * far,
                                     t.assigned.key),
                            t.op_process * far, t.op_f, t.op_inv_time, at, end)
    assert dense[0].tolist() == [0, 2, 3, 4, 5, 6, 7, 7, 9, 10]  # 8: its reader did nothing
    assert all(np.array_equal(a, b) for a, b in zip(dense, sparse, strict=True))


def test_a_broken_line_found_by_the_notes_reader_is_named_by_its_byte(tmp_path: Path) -> None:
    """The notes reader parses its lines together; a line that is not JSON is still named
    (the strict reader would have refused it first: this is the reader used alone)."""
    from harness.runfiles import HistoryError, read_notes

    good = b'{"index": 0, "time": 1, "type": "invoke", "process": "nemesis", "f": "kill"}\n'
    bad = b'{"index": 1, "time": 2, "type": "info", "process": "nemesis", "f": "kill",\n'
    (tmp_path / "history.jsonl").write_bytes(good + bad)
    with pytest.raises(HistoryError, match=f"not valid JSON at byte {len(good)}"):
        read_notes(tmp_path / "history.jsonl")
