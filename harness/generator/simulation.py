"""A generator run on a simulated clock: no threads, no sleeps, deterministic for a seed."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from harness.generator.core import (
    Context,
    Gen,
    Pending,
)
from harness.runfiles import NEMESIS, Op, OpType, Process

Completer = Callable[[Op, random.Random], tuple[int, "OpType | Op"]]


def simulate(gen: Gen, *, concurrency: int, seed: int = 0,
             complete: Completer | None = None, max_ops: int = 100_000,
             with_nemesis: bool = True) -> list[Op]:
    """Run gen on a simulated clock; returns invocations and completions in order.

    `complete(invocation, rng) -> (latency_ns, type or completion Op)` decides each
    outcome (default: 1 ms, ok). No threads and no sleeps: deterministic for a seed.
    """
    ctx = Context.initial(concurrency, seed=seed, with_nemesis=with_nemesis)
    sim_rng = random.Random(seed ^ 0x5EED)
    done: Completer = complete or _default_complete
    events: list[tuple[int, int, bool, Op]] = []  # (time, seq, is_invocation, op)
    history: list[Op] = []
    seq_no = 0

    def push(t: int, is_inv: bool, o: Op) -> None:
        nonlocal seq_no
        seq_no += 1
        heapq.heappush(events, (t, seq_no, is_inv, o))

    def happen(ctx: Context, gen: Gen) -> tuple[Context, Gen]:
        t, _, is_inv, o = heapq.heappop(events)
        ctx = ctx.at(max(ctx.time_ns, t))
        o = o.with_(time=ctx.time_ns)
        history.append(o)
        if is_inv:  # a committed invocation starts now: schedule its completion
            latency, out = done(o, sim_rng)
            push(ctx.time_ns + latency, False, out if isinstance(out, Op) else o.complete(out))
            return ctx, gen
        thread = ctx.thread_of(o.process)
        new_proc: Process | None = None
        if o.type == "info" and thread != NEMESIS and isinstance(o.process, int):
            new_proc = o.process + concurrency
        ctx = ctx.freed(thread, new_proc)
        return ctx, gen.update(ctx, o)

    while len(history) < max_ops:
        r = gen.op(ctx)
        next_at = events[0][0] if events else None
        if r is None:
            if next_at is None:
                break
            ctx, gen = happen(ctx, gen)
            continue
        x, gen = r
        if isinstance(x, Pending):
            if next_at is not None and (x.wake_ns is None or next_at <= x.wake_ns):
                ctx, gen = happen(ctx, gen)
            elif x.wake_ns is not None:
                ctx = ctx.at(max(ctx.time_ns, x.wake_ns))
            else:
                break  # deadlock: nothing can ever happen
            continue
        inv = x.with_(time=max(x.time, ctx.time_ns))
        ctx = ctx.busy(ctx.thread_of(inv.process))
        gen = gen.update(ctx, inv)
        push(inv.time, True, inv)
    return history


def _default_complete(o: Op, rng: random.Random) -> tuple[int, OpType | Op]:
    return 1_000_000, "ok"
