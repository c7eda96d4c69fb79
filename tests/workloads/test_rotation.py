"""Key rotation in the queue workload: bounded writes per key, fresh keys, rare seeks, seeded."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from harness import generator as g
from harness.runfiles import HistoryWriter, Op, recent_send_keys
from harness.spec import SpecError, build_spec
from workloads import queue
from workloads.keys import KeyRing
from workloads.options import POOL_MAX, QueueOptions, partitions


def _main(seed: int = 5, ops: int = 6000, **spec: object) -> list[Op]:
    s = build_spec({"keys": 4, "max_writes_per_key": 20, "key_pool": 400, **spec})
    return [o for o in g.simulate(g.clients(g.limit(ops, queue.generator(s))), concurrency=6,
                                  seed=seed) if o.type == "invoke"]


def _send_keys(inv: list[Op]) -> list[int]:
    return [o.value[0][1] for o in inv if o.f == "send"]


def test_each_key_takes_at_most_max_writes_then_a_fresh_one_follows() -> None:
    keys = _send_keys(_main())
    per_key = Counter(keys)
    assert max(per_key.values()) <= 20
    assert len(per_key) > 50  # rotated through many keys of the pool
    # a retired key is never written again, and the keys enter in pool order
    last = {k: i for i, k in enumerate(keys)}
    first = {k: keys.index(k) for k in per_key}
    assert sorted(per_key) == list(range(len(per_key)))
    entered = [k for k in sorted(per_key, key=first.__getitem__) if k >= 4]
    assert entered == sorted(entered)
    # at most `keys` keys are being written at any moment
    for i in range(0, len(keys), 25):
        assert sum(1 for k in per_key if first[k] <= i <= last[k]) <= 4


def test_assigns_name_active_keys_and_seek_to_the_beginning_rarely() -> None:
    inv = _main(ops=20_000)
    assigns = [o for o in inv if o.f == "assign"]
    seeks = [o for o in assigns if o.extra.get("seek_to_beginning")]
    assert len(assigns) > 1000
    assert 0 < len(seeks) <= 2 * queue.SEEK_PROBABILITY * len(assigns)
    assert all(1 <= len(o.value) <= queue.ASSIGN_MAX_KEYS for o in assigns)
    # every key assigned is one being written around then: sent to before or soon after
    sends = [(i, o.value[0][1]) for i, o in enumerate(inv) if o.f == "send"]
    first = {k: i for i, k in reversed(sends)}
    last = {k: i for i, k in sends}
    for i, o in enumerate(inv):
        if o.f == "assign":
            assert all(first[k] - 200 <= i <= last[k] + 200 for k in o.value), (i, o.value)


def test_the_history_is_the_same_for_a_seed_and_differs_across_seeds() -> None:
    a, b, c = _main(seed=9, ops=3000), _main(seed=9, ops=3000), _main(seed=10, ops=3000)
    assert [(o.process, o.f, o.value, o.extra) for o in a] == \
        [(o.process, o.f, o.value, o.extra) for o in b]
    assert [o.value for o in a] != [o.value for o in c]


def test_a_used_up_pool_starts_over_at_keys_not_active() -> None:
    ring = KeyRing.start(2, 3, 2)
    rng = random.Random(1)
    seen: list[int] = []
    for _ in range(60):
        k, ring = ring.send_key(rng)
        seen.append(k)
        assert len(set(ring.active)) == 2 and set(ring.active) <= {0, 1, 2}
    assert set(seen) == {0, 1, 2}
    # a pool as small as the active keys: no rotation at all, the old fixed keys
    ring = KeyRing.start(3, 3, 1)
    for _ in range(30):
        k, ring = ring.send_key(rng)
        assert ring.active == (0, 1, 2)


def test_the_first_keys_retire_at_staggered_times() -> None:
    assert KeyRing.start(4, 100, 20).left == (5, 10, 15, 20)
    assert KeyRing.start(3, 100, 1).left == (1, 1, 1)


def test_final_reads_read_every_key_written_from_the_beginning() -> None:
    spec = build_spec({"keys": 2, "final_read_timeout_s": 30})
    targets = {0: -1, 5: -1, 17: -1}  # nothing acknowledged: one ok poll each
    h = g.simulate(g.clients(queue.final_generator(spec, targets)), concurrency=2, seed=1,
                   complete=lambda o, rng: (1_000_000, o.complete("ok", [["poll", {}]])
                                            if o.f == "poll" else "ok"))
    assigns = [o for o in h if o.type == "invoke" and o.f == "assign"]
    assert sorted(o.value[0] for o in assigns) == [0, 5, 17]
    assert all(o.extra == {"seek_to_beginning": True} for o in assigns)


def test_the_pool_lasts_the_time_limit_and_is_checked_before_anything_starts() -> None:
    short, long = build_spec({"time_limit_s": 60}), build_spec({"time_limit_s": 600})
    assert QueueOptions.of(short).keys < partitions(short) < partitions(long) <= POOL_MAX
    assert partitions(build_spec({"key_pool": 8})) == 8
    with pytest.raises(SpecError, match="--key-pool 4: must be at least --keys"):
        build_spec({"keys": 8, "key_pool": 4})
    with pytest.raises(SpecError, match=r"--max-writes-per-key \(queue.max_writes_per_key\): "
                       "must be at least 1"):
        build_spec({"max_writes_per_key": 0})
    with pytest.raises(SpecError, match=r"--max-poll-records \(queue.max_poll_records\): "
                       "expected an integer"):
        build_spec({"max_poll_records": "many"})


def test_recent_send_keys_reads_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    assert recent_send_keys(path) == []
    with HistoryWriter(path) as hw:
        for v in range(3000):
            hw.append(Op("invoke", v % 5, "send", [["send", v // 100, v]]))
            hw.append(Op("invoke", v % 5, "poll", [["poll"]]))
    assert recent_send_keys(path)[:3] == [29, 28, 27]
    assert recent_send_keys(path, tail_bytes=2000) == [29]
