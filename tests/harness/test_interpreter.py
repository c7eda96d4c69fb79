"""The interpreter with real threads, a real in-process client over an in-memory log."""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness import generator as g
from harness.interpreter import Interpreter
from harness.protocols import FaultKind, Run
from harness.runfiles import NEMESIS, HistoryWriter, Op, RunPaths
from harness.spec import TestSpec as Spec

HOLD_S = 60.0  # a 'hold' op returns by itself after this long: a test never hangs on it


class MemLog:
    """A tiny shared append-only log per key: the 'system under test'. A 'hold' op blocks
    until `release` is set, so a test learns what happened while a call was still in
    flight from events, not from how long things took."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.logs: dict[int, list[int]] = {}
        self.release = threading.Event()
        self.held_returned = 0
        self.closed = threading.Semaphore(0)  # one release per client closed


class MemClient:
    """Sends append; 'boom' raises (an indeterminate failure); 'slow' blocks a while."""

    def __init__(self, mem: MemLog, opened: list[int]) -> None:
        self.mem = mem
        self.opened = opened

    def open(self, run: Run, node: str) -> MemClient:
        self.opened.append(1)
        return MemClient(self.mem, self.opened)

    def invoke(self, run: Run, op: Op) -> Op:
        if op.f == "boom":
            raise ConnectionError("broker went away")
        if op.f == "slow":
            time.sleep(float(op.value))
            return op.complete("ok")
        if op.f == "hold":
            self.mem.release.wait(HOLD_S)
            with self.mem.lock:
                self.mem.held_returned += 1
            return op.complete("ok")
        if op.f == "fail":
            return op.complete("fail", error="NOT_LEADER")
        _, key, value = op.value[0]
        with self.mem.lock:
            log = self.mem.logs.setdefault(key, [])
            log.append(value)
            offset = len(log) - 1
        return op.complete("ok", [["send", key, [offset, value]]])

    def close(self, run: Run) -> None:
        self.mem.closed.release()


class MemNemesis:
    fs = frozenset({"kill", "start"})
    kinds: tuple[FaultKind, ...] = ()

    def setup(self, run: Run) -> MemNemesis:
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        return op.complete("info")

    def teardown(self, run: Run) -> None:
        pass


def make(tmp_path: Path, concurrency: int = 4, nemesis: bool = True,
         stuck_after_s: float = 120.0) -> tuple[Interpreter, HistoryWriter, MemLog, list[int]]:
    run = Run(spec=Spec(), nodes=("n1", "n2", "n3"), paths=RunPaths(tmp_path),
              log=logging.getLogger("test.interp"))
    hw = HistoryWriter(tmp_path / "history.jsonl")
    mem, opened = MemLog(), list[int]()
    proto = MemClient(mem, opened)
    interp = Interpreter(run, hw, concurrency=concurrency,
                         open_client=lambda t: proto.open(run, run.nodes[t % 3]),
                         nemesis=MemNemesis() if nemesis else None, seed=1,
                         abandon_after_s=1.0, stuck_after_s=stuck_after_s)
    return interp, hw, mem, opened


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def sends() -> g.Gen:
    counter = itertools.count()
    return g.fn(lambda ctx: g.Invoke("send", [["send", next(counter) % 3, next(counter)]]))


def test_history_is_complete_paired_and_matches_the_log(tmp_path: Path) -> None:
    interp, hw, mem, _ = make(tmp_path)
    faults = g.cycle(g.seq(g.sleep(0.1), g.op("kill", {"nodes": ["n1"]}),
                           g.sleep(0.1), g.op("start", {"nodes": ["n1"]})))
    # 2 s: at least four fault steps and many sends even when the machine is loaded
    interp.run(g.time_limit(2.0, g.clients_and_nemesis(sends(), faults)))
    interp.close()
    hw.close()
    rows = read(tmp_path / "history.jsonl")
    assert [r["index"] for r in rows] == list(range(len(rows)))
    times = [r["time"] for r in rows]
    assert times == sorted(times)
    open_: dict[object, dict[str, Any]] = {}
    for r in rows:
        if r["type"] == "invoke":
            assert r["process"] not in open_
            open_[r["process"]] = r
        else:
            inv = open_.pop(r["process"])
            assert inv["f"] == r["f"]
    assert not open_
    oks = [r for r in rows if r["type"] == "ok" and r["f"] == "send"]
    assert len(oks) > 20
    stored = {(k, o, v) for k, log in mem.logs.items() for o, v in enumerate(log)}
    got = {(r["value"][0][1], *r["value"][0][2]) for r in oks}
    assert got == stored
    nem = [r for r in rows if r["process"] == NEMESIS and r["type"] == "invoke"]
    assert [r["f"] for r in nem][:4] == ["kill", "start", "kill", "start"]
    nem_done = [r for r in rows if r["process"] == NEMESIS and r["type"] != "invoke"]
    assert all(r["type"] == "info" for r in nem_done)
    assert interp.stats.counts["ok"] == len([r for r in rows if r["type"] == "ok"])


def test_exception_is_info_and_worker_continues_as_new_process(tmp_path: Path) -> None:
    interp, hw, _, opened = make(tmp_path, concurrency=2, nemesis=False)
    gen = g.clients(g.seq(g.limit(4, g.repeat(g.op("boom"))), g.limit(2, g.repeat(g.op("fail")))))
    interp.run(gen)
    interp.close()
    hw.close()
    rows = read(tmp_path / "history.jsonl")
    booms = [r for r in rows if r["f"] == "boom" and r["type"] != "invoke"]
    assert [r["type"] for r in booms] == ["info"] * 4
    assert all("broker went away" in r["error"] for r in booms)
    inv_procs = [r["process"] for r in rows if r["type"] == "invoke"]
    # a process never invokes after its info; the fails stay on their processes
    boom_procs = [r["process"] for r in rows if r["type"] == "invoke" and r["f"] == "boom"]
    assert len(set(boom_procs)) == 4
    assert all(p % 2 in (0, 1) for p in inv_procs)
    fails = [r for r in rows if r["f"] == "fail" and r["type"] == "fail"]
    assert len(fails) == 2 and all(r["error"] == "NOT_LEADER" for r in fails)
    assert len(opened) >= 5  # each new process got a fresh client


def test_runs_carry_processes_and_clock_over(tmp_path: Path) -> None:
    interp, hw, _, _ = make(tmp_path, concurrency=2, nemesis=True)
    interp.run(g.clients(g.limit(2, g.repeat(g.op("boom")))))
    interp.run(g.final(g.clients(g.limit(2, sends())), nemesis_final=g.op("start", {"nodes": []})))
    interp.close()
    hw.close()
    rows = read(tmp_path / "history.jsonl")
    later = [r["process"] for r in rows[4:] if r["type"] == "invoke" and r["process"] != NEMESIS]
    assert later and all(p >= 2 for p in later)  # threads kept their new processes


def test_stop_abandons_in_flight_ops_instead_of_waiting_for_them(tmp_path: Path) -> None:
    interp, hw, mem, _ = make(tmp_path, concurrency=2, nemesis=False)
    threading.Timer(0.3, interp.stop).start()
    interp.run(g.clients(g.repeat(g.op("hold"))))
    # run returned while both calls were still held: abandoned after the bound, not awaited
    assert mem.held_returned == 0
    mem.release.set()
    interp.close()
    hw.close()
    rows = read(tmp_path / "history.jsonl")
    assert [r["type"] for r in rows] == ["invoke", "invoke"]  # no completion written late


def test_a_stuck_op_completes_info_and_its_thread_goes_on_with_a_fresh_client(
        tmp_path: Path) -> None:
    """A client call that outlives stuck_after_s (a call held until the test releases it,
    against a 0.5 s bound) completes info at the bound; its thread continues under a new
    process with a fresh client, and the stuck call's own completion, when it comes, is
    not written."""
    interp, hw, mem, opened = make(tmp_path, concurrency=1, nemesis=False, stuck_after_s=0.5)
    interp.run(g.clients(g.seq(g.op("hold"), g.limit(3, sends()))))
    assert mem.held_returned == 0  # the run went on and ended while the call was stuck
    mem.release.set()
    # the stuck call returns; its old worker then closes its client and ends
    assert mem.closed.acquire(timeout=HOLD_S), "the stuck worker never closed its client"
    interp.close()
    hw.close()
    rows = read(tmp_path / "history.jsonl")
    assert [(r["process"], r["f"], r["type"]) for r in rows] == [
        (0, "hold", "invoke"), (0, "hold", "info"),
        *[(1, "send", t) for _ in range(3) for t in ("invoke", "ok")]]
    assert "stuck" in rows[1]["error"]
    assert len(opened) == 2


def test_ops_ending_about_the_stuck_bound_get_exactly_one_completion(tmp_path: Path) -> None:
    """Calls that return just before, at and after the bound: the worker's completion and
    the stuck one never both get written."""
    interp, hw, _, _ = make(tmp_path, concurrency=4, nemesis=False, stuck_after_s=0.3)
    durations = iter([0.2 + 0.01 * (i % 40) for i in range(40)])
    interp.run(g.clients(g.limit(40, g.fn(lambda ctx: g.Invoke("slow", next(durations))))))
    time.sleep(0.7)  # every stuck call has returned
    interp.close()
    hw.close()
    rows = read(tmp_path / "history.jsonl")
    open_: dict[object, dict[str, Any]] = {}
    ends: Counter[str] = Counter()
    for r in rows:
        if r["type"] == "invoke":
            assert r["process"] not in open_, r
            open_[r["process"]] = r
        else:
            open_.pop(r["process"])
            ends[r["type"]] += 1
    assert not open_
    assert sum(ends.values()) == 40 and ends["ok"] > 0 and ends["info"] > 0, ends
