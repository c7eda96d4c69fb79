"""Generators, run on a simulated clock: no threads, no sleeps."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterator

import pytest

from harness import generator as g
from harness.runfiles import NEMESIS, Op, OpType

MS = 1_000_000


def invokes(h: list[Op]) -> list[Op]:
    return [o for o in h if o.type == "invoke"]


def test_op_emits_once_and_limit_caps() -> None:
    h = g.simulate(g.clients(g.op("poll")), concurrency=3)
    assert [o.f for o in invokes(h)] == ["poll"]
    h = g.simulate(g.clients(g.limit(5, g.repeat(g.op("send", 1)))), concurrency=3)
    assert len(invokes(h)) == 5
    assert len(h) == 10


def test_every_invoke_completes_on_the_same_process_and_threads_never_overlap() -> None:
    h = g.simulate(g.clients(g.limit(200, g.repeat(g.op("poll")))), concurrency=4, seed=3,
                   complete=lambda o, r: (r.randrange(1, 5) * MS, "ok"))
    busy: set[object] = set()
    for o in h:
        if o.type == "invoke":
            assert o.process not in busy
            busy.add(o.process)
        else:
            busy.remove(o.process)
    assert not busy
    assert {o.process for o in h} <= {0, 1, 2, 3}


def test_info_completion_moves_the_thread_to_a_new_process() -> None:
    h = g.simulate(g.clients(g.limit(6, g.repeat(g.op("send")))), concurrency=2,
                   complete=lambda o, r: (MS, "info"))
    procs = [o.process for o in invokes(h)]
    assert len(set(procs)) == 6  # no process invokes after its info
    assert all(p % 2 in (0, 1) for p in procs if isinstance(p, int))
    assert max(p for p in procs if isinstance(p, int)) >= 4


def test_time_limit_stops_by_the_clock() -> None:
    h = g.simulate(g.clients(g.time_limit(1.0, g.repeat(g.op("poll")))), concurrency=2,
                   complete=lambda o, r: (10 * MS, "ok"))
    inv = invokes(h)
    assert all(o.time < 1_000_000_000 for o in inv)
    assert 150 <= len(inv) <= 200  # 2 threads x 100 ops of 10 ms each


def test_stagger_rate_is_about_one_over_dt() -> None:
    h = g.simulate(g.clients(g.time_limit(10, g.stagger(0.1, g.repeat(g.op("poll"))))),
                   concurrency=5, seed=7)
    n = len(invokes(h))
    assert 70 <= n <= 130  # Poisson with mean 100


def test_delay_is_exact() -> None:
    h = g.simulate(g.clients(g.limit(4, g.delay(0.5, g.repeat(g.op("poll"))))), concurrency=2)
    assert [o.time for o in invokes(h)] == [0, 500 * MS, 1000 * MS, 1500 * MS]


def test_same_seed_same_history_and_different_seed_differs() -> None:
    def build() -> g.Gen:
        return g.clients(g.time_limit(5, g.stagger(0.01, g.mix(
            [g.repeat(g.op("send")), g.repeat(g.op("poll")), g.repeat(g.op("assign", [1]))],
            weights=[5, 4, 1]))))

    def completer(o: Op, r: random.Random) -> tuple[int, OpType]:
        return r.randrange(1, 20) * MS, r.choice(["ok", "ok", "fail", "info"])

    a = g.simulate(build(), concurrency=4, seed=42, complete=completer)
    b = g.simulate(build(), concurrency=4, seed=42, complete=completer)
    c = g.simulate(build(), concurrency=4, seed=43, complete=completer)
    assert a == b
    assert a != c
    fs = Counter(o.f for o in invokes(a))
    assert fs["send"] > fs["poll"] > fs["assign"] > 0


def test_phases_wait_for_all_threads_and_final_order() -> None:
    main = g.clients(g.limit(10, g.repeat(g.op("send"))))
    gen = g.final(main, nemesis_final=g.op("heal", {}), client_final=g.each_thread(g.op("poll")))
    h = g.simulate(gen, concurrency=3, complete=lambda o, r: (r.randrange(1, 9) * MS, "ok"))
    heal_at = next(i for i, o in enumerate(h) if o.f == "heal")
    # every send completed before the heal was invoked; every final poll after the heal ended
    assert all(o.f == "send" for o in h[:heal_at])
    assert sum(1 for o in h[:heal_at] if o.type != "invoke") == 10
    polls = [o for o in h[heal_at + 2:] if o.type == "invoke"]
    assert h[heal_at + 1].f == "heal" and h[heal_at + 1].type == "ok"
    assert sorted(o.process for o in polls) == [0, 1, 2]  # one per thread


def test_nemesis_routing_and_sleep_schedule() -> None:
    faults = g.cycle(g.seq(g.sleep(10), g.op("kill", {"nodes": ["n1"]}),
                           g.sleep(5), g.op("start", {"nodes": ["n1"]})))
    gen = g.time_limit(60, g.clients_and_nemesis(g.stagger(0.1, g.repeat(g.op("poll"))),
                                                 faults))
    h = g.simulate(gen, concurrency=2, seed=1)
    nem = [o for o in invokes(h) if o.process == NEMESIS]
    # the start due at 60 s falls on the time limit's cutoff and is never emitted
    assert [o.f for o in nem] == ["kill", "start"] * 3 + ["kill"]
    assert [o.time // 1_000_000_000 for o in nem] == [10, 15, 25, 30, 40, 45, 55]
    assert all(o.f == "poll" for o in invokes(h) if o.process != NEMESIS)


def test_until_ok_retries_until_success() -> None:
    outcomes: Iterator[OpType] = iter(["fail", "info", "fail", "ok", "ok"])
    h = g.simulate(g.clients(g.until_ok(g.repeat(g.op("assign", [0])))), concurrency=1,
                   complete=lambda o, r: (MS, next(outcomes)))
    assert [o.type for o in h if o.type != "invoke"] == ["fail", "info", "fail", "ok"]


def test_each_thread_gives_every_thread_its_own_copy() -> None:
    h = g.simulate(g.clients(g.each_thread(g.seq(g.op("assign", [0]), g.op("poll")))),
                   concurrency=3)
    by_proc: dict[object, list[str]] = {}
    for o in invokes(h):
        by_proc.setdefault(o.process, []).append(o.f)
    assert by_proc == {0: ["assign", "poll"], 1: ["assign", "poll"], 2: ["assign", "poll"]}


def test_fn_generator_and_mix_weights_validation() -> None:
    counter = iter(range(1000))
    gen = g.fn(lambda ctx: g.Invoke("send", [["send", 0, next(counter)]]))
    h = g.simulate(g.clients(g.limit(5, gen)), concurrency=2)
    assert [o.value[0][2] for o in invokes(h)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="weights"):
        g.mix([g.op("a")], weights=[1, 2])


def test_deadlock_ends_simulation_instead_of_spinning() -> None:
    # a nemesis op with no nemesis thread can never run: simulate returns
    h = g.simulate(g.nemesis(g.op("kill")), concurrency=2, with_nemesis=False)
    assert h == []


def test_restrict_keeps_each_predicates_threads_past_the_remembered_ones() -> None:
    """Context.restrict remembers which threads a predicate keeps; many predicates (more
    than it remembers, as each_thread makes) still each see exactly their own threads."""
    ctx = g.Context.initial(4, seed=1).busy(2)
    for round_ in range(2):
        for i in range(600):
            t = i % 4
            mine = ctx.restrict(g._only(t))
            assert mine.threads == (t,), (round_, i)
            assert mine.free == (frozenset() if t == 2 else {t})
            assert dict(mine.processes) == {t: t}
    clients = ctx.restrict(lambda u: u != NEMESIS)
    assert clients.threads == (0, 1, 2, 3) and clients.free == {0, 1, 3}
    assert NEMESIS not in clients.processes and ctx.freed(2).restrict(
        lambda u: u != NEMESIS).free == {0, 1, 2, 3}


def test_the_fast_copies_keep_every_field_they_do_not_change() -> None:
    """Op.at and Context's copies call the constructors field by field (for speed); a
    field added to either class later must not be dropped by them silently."""
    op = Op("ok", 3, "send", [1, 2], time=5, index=7, error="e", extra={"k": 1})
    moved = op.at(9)
    assert moved.time == 9
    assert {f.name: getattr(moved, f.name) for f in dataclasses.fields(Op) if f.name != "time"} \
        == {f.name: getattr(op, f.name) for f in dataclasses.fields(Op) if f.name != "time"}
    ctx = g.Context.initial(3, seed=4, time_ns=11).busy(1)
    for copy, changed in ((ctx.at(12), {"time_ns"}), (ctx.busy(0), {"free"}),
                          (ctx.freed(1, 5), {"free", "processes"}),
                          (ctx.restrict(lambda t: t != 2), {"threads", "free", "processes"})):
        for f in dataclasses.fields(g.Context):
            same = getattr(copy, f.name) == getattr(ctx, f.name)
            assert same != (f.name in changed), f.name
