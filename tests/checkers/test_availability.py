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
    whole = notes.read_notes(history)
    assert len(whole.nemesis) == 6 and len(whole.errors) == 16 + 20 + 14
    assert whole.nemesis[-1]["final"] is True
    monkeypatch.setattr(notes, "PARALLEL_BYTES", 1)
    assert notes.read_notes(history, workers=3) == whole


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
