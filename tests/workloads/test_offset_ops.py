"""Commits and committed reads as operations (workloads/offsets.py): the generator's
commits name what the process's polls handed on in their generation (fast), and a short
subscribe run on our broker with faults on the coordinator is judged by the register
checker and stays valid (slow)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import core
from harness import generator as g
from harness.runfiles import Op, OpType
from harness.spec import build_spec
from harness.test import assemble
from workloads import offsets, queue
from workloads.offsets import OffsetOps

MS = 1_000_000


class Group:
    """A simulated group: each poll returns the next record of one key, in the process's
    generation (which moves every 40 polls of it)."""

    def __init__(self) -> None:
        self.next: Counter[int] = Counter()
        self.polls: Counter[object] = Counter()

    def __call__(self, o: Op, rng: random.Random) -> tuple[int, Op | OpType]:
        if o.f != "poll":
            return 20 * MS, "ok"
        self.polls[o.process] += 1
        key = rng.randrange(4)
        off = self.next[key]
        self.next[key] += 1
        gen = self.polls[o.process] // 40
        return 20 * MS, o.complete("ok", [["poll", {str(key): [[off, 0]]}]], generation=gen,
                                   assignment=[key])


def simulated(commit: str, speaks: bool = True) -> list[Op]:
    """10 s of the queue workload's main phase on our broker (`speaks`), or on a system
    whose client does not speak offset operations."""
    spec = build_spec({"keys": 4, "key_pool": 4, "sub_via": "subscribe",
                       "consumer": {"commit": commit}})
    gen = queue.workload.generator(assemble(spec)) if speaks else queue.generator(spec)
    return g.simulate(g.clients(g.time_limit(10, gen)), concurrency=4, seed=7, complete=Group())


def test_a_commit_names_the_positions_its_process_handed_on_in_that_generation() -> None:
    h = simulated("processed")
    commits = [o for o in h if o.type == "invoke" and o.f == "commit"]
    assert len(commits) >= 10
    for c in commits:
        # replay the process's poll completions before the commit, in its generation
        gen = c.extra["generation"]
        want: dict[str, int] = {}
        for o in h[:h.index(c)]:
            if o.process == c.process and o.f == "poll" and o.type == "ok" \
                    and o.extra["generation"] == gen:
                for k, rs in o.value[0][1].items():
                    want[k] = rs[-1][0] + 1
        assert c.value == [["commit", want]] and want
    reads = [o for o in h if o.type == "invoke" and o.f == "committed"]
    assert reads and all(o.value == [["committed", [0, 1, 2, 3]]] for o in reads)


def test_off_reads_without_committing_and_auto_or_no_support_emits_neither() -> None:
    fs = Counter(o.f for o in simulated("off") if o.type == "invoke")
    assert fs["committed"] > 0 and fs["commit"] == 0
    for h in (simulated("auto"), simulated("processed", speaks=False)):
        assert not {o.f for o in h} & {"commit", "committed"}


def test_offset_ops_are_on_only_where_the_system_speaks_them() -> None:
    base = {"sub_via": "subscribe", "consumer": {"commit": "processed"}}
    assert offsets.enabled(build_spec(base), assemble(build_spec(base)).system)
    for over in ({"sub_via": "assign"}, {"consumer": {"commit": "auto"}},
                 {"workload": "txn"}):
        spec = build_spec({**base, **over})
        assert not offsets.enabled(spec, assemble(spec).system), over
    assert not offsets.enabled(build_spec(base), object())


def test_seen_ignores_everything_but_a_group_polls_records() -> None:
    ops = OffsetOps(True, 4)
    poll = Op(type="ok", process=1, f="poll", value=[["poll", {"2": [[5, 9], [6, 10]]}]],
              time=0, extra={"generation": 3})
    assert ops.seen(poll.with_(extra={})) is ops
    assert ops.seen(poll.with_(value=[["poll"]])) is ops
    assert ops.seen(poll.with_(f="txn")) is ops
    once = ops.seen(poll)
    assert once.handed == {1: (3, {2: 7})} and once.moved == {1}
    later = once.seen(poll.with_(value=[["poll", {"0": [[1, 1]]}]], extra={"generation": 4}))
    assert later.handed == {1: (4, {0: 2})}  # a new generation starts afresh
    # a client that names no generation (librdkafka): its assignment is the stretch
    plain = poll.with_(extra={"assignment": [2, 0]})
    held = ops.seen(plain).seen(plain.with_(value=[["poll", {"0": [[3, 3]]}]]))
    assert held.handed == {1: ((0, 2), {2: 7, 0: 4})}
    commit: Op | None = None
    for seed in range(50):  # the coin decides when, never what
        got = held.pick(random.Random(seed), 1, 5)
        if got is not None and got[0].f == "commit":
            commit = got[0]
            break
    assert commit is not None and commit.extra == {"held": [0, 2]}
    assert commit.value == [["commit", {"0": 4, "2": 7}]]
    moved = held.seen(plain.with_(extra={"assignment": [1]}, value=[["poll", {"1": [[0, 5]]}]]))
    assert moved.handed == {1: ((1,), {1: 1})}  # a new assignment starts afresh


def history(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_subscribe_run_commits_and_reads_offsets_as_operations_and_stays_valid(
        tmp_path: Path) -> None:
    spec = build_spec({"name": "offset-ops", "sub_via": "subscribe", "time_limit_s": 20.0,
                       "nemesis": ("kill", "pause", "partition"), "nemesis_interval_s": 5.0,
                       "nemesis_targets": ("coordinator",), "seed": 4, "keys": 4,
                       "key_pool": 4, "concurrency": 5, "results_dir": str(tmp_path),
                       "consumer": {"commit": "processed"}})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    ops = history(outcome.run_dir)
    fs = Counter((o["f"], o["type"]) for o in ops)
    assert fs["commit", "ok"] >= 5 and fs["committed", "ok"] >= 3, fs
    answered = [o["value"][0][1] for o in ops if o["f"] == "committed" and o["type"] == "ok"]
    assert any(v is not None for a in answered for v in a.values())  # commits were read back
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["stats"]["offset_registers"] >= 1
