"""Fault plans: a seeded timeline of nemesis ops, computed before the run starts.

The whole plan is drawn from the seed up front (never from the shared generator
random, whose use depends on client timing), so `--seed N` replays the same
faults at the same offsets, and test.json can record the plan. `Timeline` is a
harness.generator generator that emits each step at its offset from when it is
first asked (later if the nemesis is still busy with the previous step).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness import generator as gen
from harness.faultplan import Step
from harness.runfiles import Op

NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Timeline(gen.Gen):
    """Emits planned steps in order, each no sooner than its offset; pure and immutable."""

    steps: tuple[Step, ...]
    start_ns: int | None = None

    def op(self, ctx: gen.Context) -> gen.Result:
        if not self.steps:
            return None
        start = ctx.time_ns if self.start_ns is None else self.start_ns
        me = replace(self, start_ns=start)
        step = self.steps[0]
        due = start + int(step.at_s * NS)
        if ctx.time_ns < due:
            return gen.Pending(due), me
        free = ctx.free_threads()
        if not free:
            return gen.PENDING, me
        o = Op(type="invoke", process=ctx.processes[free[0]], f=step.f,
               value=dict(step.value), time=ctx.time_ns)
        return o, replace(me, steps=self.steps[1:])


def timeline(steps: Sequence[Step]) -> Timeline:
    return Timeline(tuple(sorted(steps, key=lambda s: s.at_s)))


def windows(rng: random.Random, interval_s: float, horizon_s: float,
            first_s: float | None = None) -> list[tuple[float, float]]:
    """Fault windows (start, end) until horizon: each lasts about one interval, and
    the gap before the next is about one interval too (uniform 0.5x..1.5x)."""
    out: list[tuple[float, float]] = []
    t = rng.uniform(0.5, 1.5) * interval_s if first_s is None else first_s
    while t < horizon_s:
        end = t + rng.uniform(0.5, 1.5) * interval_s
        out.append((t, end))
        t = end + rng.uniform(0.5, 1.5) * interval_s
    return out


def merge(*plans: Sequence[Step]) -> tuple[Step, ...]:
    """Several faults' plans as one timeline (the nemesis does one op at a time)."""
    return tuple(sorted((s for p in plans for s in p), key=lambda s: s.at_s))
