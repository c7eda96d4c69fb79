"""The queue workload: generator shapes (simulated), final reads, and the client on real brokers."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from harness import core
from harness import generator as g
from harness.protocols import Run
from harness.runfiles import HistoryWriter, Op, OpType, RunPaths
from harness.spec import build_spec
from workloads import queue

MS = 1_000_000


def test_main_generator_shapes_and_unique_values() -> None:
    spec = build_spec({"keys": 4, "max_writes_per_key": 1000})
    h = g.simulate(g.clients(g.limit(500, queue.generator(spec))), concurrency=5, seed=3)
    inv = [o for o in h if o.type == "invoke"]
    sends = [o for o in inv if o.f == "send"]
    values = [o.value[0][2] for o in sends]
    assert len(values) == len(set(values)) > 150  # each value sent once
    assert all(o.value[0][0] == "send" and 0 <= o.value[0][1] < 4 for o in sends)
    polls = [o for o in inv if o.f == "poll"]
    assert polls and all(o.value == [["poll"]] for o in polls)
    assigns = [o for o in inv if o.f == "assign"]
    assert assigns and all(set(o.value) <= {0, 1, 2, 3} and o.value for o in assigns)
    assert all(not o.extra or o.extra == {"seek_to_beginning": True} for o in assigns)
    assert {o.f for o in inv} == {"send", "poll", "assign"}


class FakeCluster:
    """A log per key served to the simulated final reads: each poll returns up to 3 records."""

    def __init__(self, logs: dict[int, list[int]], fail_first: int = 0) -> None:
        self.logs = logs
        self.assigned: dict[object, int] = {}
        self.pos: dict[object, int] = {}
        self.fail_left = fail_first

    def __call__(self, o: Op, rng: random.Random) -> tuple[int, OpType | Op]:
        if o.f == "assign":
            self.assigned[o.process] = o.value[0]
            self.pos[o.process] = 0
            return MS, "ok"
        if self.fail_left > 0:
            self.fail_left -= 1
            return MS, o.complete("fail", [["poll"]], error="NOT_LEADER")
        k = self.assigned[o.process]
        p = self.pos[o.process]
        recs = [[i, v] for i, v in enumerate(self.logs[k])][p:p + 3]
        self.pos[o.process] = p + len(recs)
        return MS, o.complete("ok", [["poll", {str(k): recs} if recs else {}]])


def test_final_reads_reach_each_key_target() -> None:
    spec = build_spec({"keys": 3, "final_read_timeout_s": 30})
    logs = {0: list(range(10)), 1: list(range(100, 107)), 2: []}
    cluster = FakeCluster(logs, fail_first=4)
    gen = queue.final_generator(spec, {0: 9, 1: 6, 2: -1})
    h = g.simulate(g.clients(gen), concurrency=2, complete=cluster)
    assigns = [o for o in h if o.type == "invoke" and o.f == "assign"]
    assert sorted(o.value[0] for o in assigns) == [0, 1, 2]
    assert all(o.extra == {"seek_to_beginning": True} for o in assigns)
    read = {(k, tuple(r)) for o in h if o.type == "ok" and o.f == "poll"
            for k, rs in o.value[0][1].items() for r in rs}
    assert {(k, r[0]) for k, r in read} == {("0", i) for i in range(10)} | \
        {("1", i) for i in range(7)}


def test_final_reads_give_up_on_a_short_key_and_respect_the_time_bound() -> None:
    spec = build_spec({"keys": 1, "final_read_timeout_s": 60})
    h = g.simulate(g.clients(queue.final_generator(spec, {0: 50})), concurrency=1,
                   complete=FakeCluster({0: [1, 2]}))
    polls = [o for o in h if o.type == "invoke" and o.f == "poll"]
    n = queue.EMPTY_POLLS_BEFORE_GIVING_UP
    assert n <= len(polls) <= n + 2
    spec = build_spec({"keys": 1, "final_read_timeout_s": 1})
    h = g.simulate(g.clients(queue.final_generator(spec, {0: 50})), concurrency=1,
                   complete=FakeCluster({0: [1, 2]}, fail_first=10**6))
    assert h and max(o.time for o in h) < 1_100 * MS


def test_read_targets_name_every_key_sent_to(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as hw:
        hw.append(Op("ok", 0, "send", [["send", 1, [5, 10]]]))
        hw.append(Op("ok", 1, "send", [["send", 1, [3, 11]], ["send", 2, [0, 12]]]))
        hw.append(Op("info", 2, "send", [["send", 1, 13]]))
        hw.append(Op("ok", 3, "send", [["send", 3, [None, 14]]]))
        hw.append(Op("fail", 4, "send", [["send", 4, [9, 15]]]))
        hw.append(Op("invoke", 5, "send", [["send", 6, 16]]))
        hw.append(Op("ok", 6, "poll", [["poll", {"7": [[0, 1]]}]]))
    with open(path, "ab") as fh:
        fh.write(b'{"index": 5, "type": "ok", "f": "se')  # a torn last line
    # highest acked offset; -1 where a send went but none was acknowledged with an offset
    assert queue.read_targets(path) == {1: 5, 2: 0, 3: -1, 4: -1, 6: -1}


@pytest.mark.slow
def test_client_against_real_brokers(tmp_path: Path) -> None:
    from harness.control.local import LocalBackend
    from systems.undertow.queue_client import QueueClient

    spec = build_spec({"keys": 2, "key_pool": 2, "node_count": 3,
                       "results_dir": str(tmp_path)})
    paths = RunPaths(tmp_path / "run")
    for n in spec.nodes:
        paths.node_dir(n).mkdir(parents=True)
    run = Run(spec=spec, nodes=spec.nodes, paths=paths, log=logging.getLogger("t.queue"))
    backend = LocalBackend()
    try:
        core.cluster_up(backend, run)
        c = QueueClient(keys=2, acks="all").open(run, "n1")
        sent = []
        for v in range(10):
            done = c.invoke(run, Op("invoke", 0, "send", [["send", v % 2, v]]))
            assert done.type == "ok", done
            sent.append(done.value[0])
        offsets = {(k, o): v for _, k, (o, v) in sent}
        assert c.invoke(run, Op("invoke", 0, "poll", [["poll"]])).value == [["poll", {}]]
        a = c.invoke(run, Op("invoke", 0, "assign", [0, 1], extra={"seek_to_beginning": True}))
        assert a.type == "ok" and a.extra == {"seek_to_beginning": True}
        got: dict[tuple[int, int], int] = {}
        for _ in range(20):
            p = c.invoke(run, Op("invoke", 0, "poll", [["poll"]]))
            assert p.type == "ok"
            for k, recs in p.value[0][1].items():
                got.update({(int(k), o): v for o, v in recs})
            if len(got) == 10:
                break
        assert got == offsets
        # a poll returns at most max_poll_records records, shared among its keys
        capped = QueueClient(keys=2, max_poll_records=3).open(run, "n1")
        capped.invoke(run, Op("invoke", 0, "assign", [0, 1]))
        sizes = [sum(len(r) for r in capped.invoke(run, Op("invoke", 0, "poll", [["poll"]]))
                     .value[0][1].values()) for _ in range(6)]
        assert sizes == [2, 2, 2, 2, 2, 0]  # 1 of each key a poll, until both are read
        capped.close(run)
        # a position past the log's end (the log was cut under us): the poll fails, and
        # the key starts over from the beginning, as auto.offset.reset=earliest does
        c.positions[0] = 10_000
        p = c.invoke(run, Op("invoke", 0, "poll", [["poll"]]))
        assert p.type == "fail" and "OFFSET_OUT_OF_RANGE" in (p.error or "")
        assert c.positions[0] == 0
        p = c.invoke(run, Op("invoke", 0, "poll", [["poll"]]))
        assert p.type == "ok" and p.value[0][1]["0"][0][0] == 0
        c.close(run)
        # with every broker down, a send cannot be acknowledged: fail or info, never ok
        for n in spec.nodes:
            run.db.kill(run, n)  # type: ignore[union-attr]
        c = QueueClient(keys=2, timeout_s=1.0).open(run, "n2")
        done = c.invoke(run, Op("invoke", 1, "send", [["send", 0, 99]]))
        assert done.type in ("fail", "info") and done.error
        p = c.invoke(run, Op("invoke", 1, "poll", [["poll"]]))
        assert p.type == "ok"  # nothing assigned: nothing to ask
        c.invoke(run, Op("invoke", 1, "assign", [0]))
        p = c.invoke(run, Op("invoke", 1, "poll", [["poll"]]))
        assert p.type == "fail" and p.error
        c.close(run)
    finally:
        core.cluster_down(backend, run)
