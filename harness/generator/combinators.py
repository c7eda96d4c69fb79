"""Combinators: generators made of generators (limits, time, order, mixes, threads,
repetition), each an immutable value as the leaves are."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from harness.generator.core import (
    PENDING,
    Context,
    Gen,
    Nil,
    Pending,
    Result,
    Thread,
    _ns,
    _soonest,
)
from harness.runfiles import NEMESIS, Op, Process


@dataclass(frozen=True, slots=True)
class Limit(Gen):
    n: int
    gen: Gen

    def op(self, ctx: Context) -> Result:
        if self.n <= 0:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        x, g = r
        return x, Limit(self.n - (1 if isinstance(x, Op) else 0), g)

    def update(self, ctx: Context, event: Op) -> Gen:
        return Limit(self.n, self.gen.update(ctx, event))


def limit(n: int, gen: Gen) -> Gen:
    """At most n ops of gen."""
    return Limit(n, gen)


def once(gen: Gen) -> Gen:
    """The first op of gen only."""
    return Limit(1, gen)


@dataclass(frozen=True, slots=True)
class TimeLimit(Gen):
    dt_ns: int
    gen: Gen
    cutoff_ns: int | None = None

    def op(self, ctx: Context) -> Result:
        cutoff = ctx.time_ns + self.dt_ns if self.cutoff_ns is None else self.cutoff_ns
        if ctx.time_ns >= cutoff:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        x, g = r
        if isinstance(x, Op):
            if x.time >= cutoff:
                return None
            return x, TimeLimit(self.dt_ns, g, cutoff)
        wake = cutoff if x.wake_ns is None else min(x.wake_ns, cutoff)
        return Pending(wake), TimeLimit(self.dt_ns, g, cutoff)

    def update(self, ctx: Context, event: Op) -> Gen:
        return TimeLimit(self.dt_ns, self.gen.update(ctx, event), self.cutoff_ns)


def time_limit(dt_s: float, gen: Gen) -> Gen:
    """Ops of gen until dt_s after the first time it is asked."""
    return TimeLimit(_ns(dt_s), gen)


@dataclass(frozen=True, slots=True)
class Stagger(Gen):
    """Ops spaced by exponential delays of mean dt (a Poisson process), from the seed."""

    dt_ns: int
    gen: Gen
    next_ns: int | None = None
    fixed: bool = False

    def op(self, ctx: Context) -> Result:
        r = self.gen.op(ctx)
        if r is None:
            return None
        x, g = r
        if not isinstance(x, Op):
            return x, replace(self, gen=g)
        t = max(x.time, ctx.time_ns if self.next_ns is None else self.next_ns)
        gap = self.dt_ns if self.fixed else int(ctx.rng.expovariate(1.0) * self.dt_ns)
        return x.with_(time=t), replace(self, gen=g, next_ns=t + gap)

    def update(self, ctx: Context, event: Op) -> Gen:
        return replace(self, gen=self.gen.update(ctx, event))


def stagger(dt_s: float, gen: Gen) -> Gen:
    """Ops of gen at random intervals averaging dt_s (all threads together)."""
    return Stagger(_ns(dt_s), gen)


def delay(dt_s: float, gen: Gen) -> Gen:
    """Ops of gen exactly dt_s apart (the first at once)."""
    return Stagger(_ns(dt_s), gen, fixed=True)


@dataclass(frozen=True, slots=True)
class Sleep(Gen):
    dt_ns: int
    until_ns: int | None = None

    def op(self, ctx: Context) -> Result:
        until = ctx.time_ns + self.dt_ns if self.until_ns is None else self.until_ns
        if ctx.time_ns >= until:
            return None
        return Pending(until), Sleep(self.dt_ns, until)


def sleep(dt_s: float) -> Gen:
    """Emits nothing for dt_s from when it is first asked, then ends (use inside seq)."""
    return Sleep(_ns(dt_s))


@dataclass(frozen=True, slots=True)
class Seq(Gen):
    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> Result:
        gens = self.gens
        while gens:
            r = gens[0].op(ctx)
            if r is not None:
                x, g = r
                return x, Seq((g, *gens[1:]))
            gens = gens[1:]
        return None

    def update(self, ctx: Context, event: Op) -> Gen:
        if not self.gens:
            return self
        return Seq((self.gens[0].update(ctx, event), *self.gens[1:]))


def seq(*gens: Gen) -> Gen:
    """Each generator until exhausted, then the next (no waiting between them)."""
    return Seq(tuple(gens))


@dataclass(frozen=True, slots=True)
class Synchronize(Gen):
    """Waits until every thread in scope is free, then behaves as gen."""

    gen: Gen
    started: bool = False

    def op(self, ctx: Context) -> Result:
        if not self.started and not ctx.all_free():
            return PENDING, self
        r = self.gen.op(ctx)
        if r is None:
            return None
        x, g = r
        return x, Synchronize(g, True)

    def update(self, ctx: Context, event: Op) -> Gen:
        if not self.started:
            return self
        return Synchronize(self.gen.update(ctx, event), True)


def synchronize(gen: Gen) -> Gen:
    return Synchronize(gen)


def phases(*gens: Gen) -> Gen:
    """Each generator in turn; each starts only when all threads in scope are free."""
    return Seq(tuple(Synchronize(g) for g in gens))


@dataclass(frozen=True, slots=True)
class Mix(Gen):
    gens: tuple[Gen, ...]
    weights: tuple[float, ...]

    def op(self, ctx: Context) -> Result:
        gens, weights = list(self.gens), list(self.weights)
        while gens:
            i = ctx.rng.choices(range(len(gens)), weights=weights)[0] if len(gens) > 1 else 0
            r = gens[i].op(ctx)
            if r is None:
                del gens[i]
                del weights[i]
                continue
            x, g = r
            if isinstance(x, Pending):
                return x, Mix(tuple(gens), tuple(weights))
            gens[i] = g
            return x, Mix(tuple(gens), tuple(weights))
        return None

    def update(self, ctx: Context, event: Op) -> Gen:
        return Mix(tuple(g.update(ctx, event) for g in self.gens), self.weights)


def mix(gens: Iterable[Gen], weights: Iterable[float] | None = None) -> Gen:
    """Each op from one of gens chosen at random (by weight); ends when all have ended."""
    gs = tuple(gens)
    ws = tuple(weights) if weights is not None else tuple(1.0 for _ in gs)
    if len(ws) != len(gs):
        raise ValueError(f"mix: {len(gs)} generators but {len(ws)} weights")
    return Mix(gs, ws)


@dataclass(frozen=True, slots=True)
class AnyOf(Gen):
    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> Result:
        results = [(i, g.op(ctx)) for i, g in enumerate(self.gens)]
        best = _soonest(results)
        if best is None:
            return None
        i, x = best
        # keep the next state of the emitter and of pending children; others unchanged
        new: list[Gen] = []
        for j, r in results:
            if r is None:
                new.append(Nil())
            elif j == i or isinstance(r[0], Pending):
                new.append(r[1])
            else:
                new.append(self.gens[j])
        return x, AnyOf(tuple(new))

    def update(self, ctx: Context, event: Op) -> Gen:
        return AnyOf(tuple(g.update(ctx, event) for g in self.gens))


def any_of(*gens: Gen) -> Gen:
    """The soonest op of any of gens; ends when all have ended."""
    return AnyOf(tuple(gens))


@dataclass(frozen=True, slots=True)
class OnThreads(Gen):
    pred: Callable[[Thread], bool]
    gen: Gen

    def op(self, ctx: Context) -> Result:
        r = self.gen.op(ctx.restrict(self.pred))
        if r is None:
            return None
        x, g = r
        return x, OnThreads(self.pred, g)

    def update(self, ctx: Context, event: Op) -> Gen:
        if not self.pred(ctx.thread_of(event.process)):
            return self
        return OnThreads(self.pred, self.gen.update(ctx.restrict(self.pred), event))


def _is_client(t: Thread) -> bool:
    return t != NEMESIS


def _is_nemesis(t: Thread) -> bool:
    return t == NEMESIS


def clients(gen: Gen) -> Gen:
    """gen, on client threads only."""
    return OnThreads(_is_client, gen)


def nemesis(gen: Gen) -> Gen:
    """gen, on the nemesis thread only."""
    return OnThreads(_is_nemesis, gen)


def clients_and_nemesis(client_gen: Gen, nemesis_gen: Gen | None) -> Gen:
    """The usual test body: client ops and nemesis ops side by side."""
    if nemesis_gen is None:
        return clients(client_gen)
    return any_of(clients(client_gen), nemesis(nemesis_gen))


def _only(t: Thread) -> Callable[[Thread], bool]:
    return lambda u: u == t


@dataclass(frozen=True, slots=True)
class EachThread(Gen):
    fresh: Gen
    per_thread: Mapping[Thread, Gen]

    def _gen(self, t: Thread) -> Gen:
        return self.per_thread.get(t, self.fresh)

    def op(self, ctx: Context) -> Result:
        results: list[tuple[int, Result]] = []
        threads = list(ctx.threads)
        for i, t in enumerate(threads):
            results.append((i, self._gen(t).op(ctx.restrict(_only(t)))))
        best = _soonest(results)
        if best is None:
            return None
        i, x = best
        per = dict(self.per_thread)
        for j, r in results:
            t = threads[j]
            if r is None:
                per[t] = Nil()
            elif j == i or isinstance(r[0], Pending):
                per[t] = r[1]
        return x, EachThread(self.fresh, per)

    def update(self, ctx: Context, event: Op) -> Gen:
        t = ctx.thread_of(event.process)
        if t not in ctx.threads:
            return self
        g = self._gen(t).update(ctx.restrict(_only(t)), event)
        return EachThread(self.fresh, {**self.per_thread, t: g})


def each_thread(gen: Gen) -> Gen:
    """A separate copy of gen for each thread in scope."""
    return EachThread(gen, {})


@dataclass(frozen=True, slots=True)
class UntilOk(Gen):
    gen: Gen
    active: frozenset[Process] = frozenset()
    done: bool = False

    def op(self, ctx: Context) -> Result:
        if self.done:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        x, g = r
        active = self.active | {x.process} if isinstance(x, Op) else self.active
        return x, UntilOk(g, active, False)

    def update(self, ctx: Context, event: Op) -> Gen:
        g = self.gen.update(ctx, event)
        if event.type == "invoke" or event.process not in self.active:
            return UntilOk(g, self.active, self.done)
        return UntilOk(g, self.active - {event.process}, self.done or event.type == "ok")


def until_ok(gen: Gen) -> Gen:
    """Ops of gen until one of them completes ok."""
    return UntilOk(gen)


@dataclass(frozen=True, slots=True)
class Repeat(Gen):
    gen: Gen
    n: int | None = None

    def op(self, ctx: Context) -> Result:
        if self.n is not None and self.n <= 0:
            return None
        r = self.gen.op(ctx)
        if r is None:
            return None
        x, _ = r
        if isinstance(x, Pending):
            return x, self
        return x, Repeat(self.gen, None if self.n is None else self.n - 1)


def repeat(gen: Gen, n: int | None = None) -> Gen:
    """The first op of gen, again and again (n times, or forever); gen's state is discarded."""
    return Repeat(gen, n)


@dataclass(frozen=True, slots=True)
class Cycle(Gen):
    orig: Gen
    cur: Gen
    n: int | None = None
    emitted: bool = False  # whether the current round emitted anything (stops empty loops)

    def op(self, ctx: Context) -> Result:
        cur, n, emitted = self.cur, self.n, self.emitted
        for _ in range(2):
            if n is not None and n <= 0:
                return None
            r = cur.op(ctx)
            if r is not None:
                x, g = r
                return x, Cycle(self.orig, g, n, emitted or isinstance(x, Op))
            if not emitted:
                return None
            cur, n, emitted = self.orig, None if n is None else n - 1, False
        return None

    def update(self, ctx: Context, event: Op) -> Gen:
        return replace(self, cur=self.cur.update(ctx, event))


def cycle(gen: Gen, n: int | None = None) -> Gen:
    """gen until exhausted, then a fresh gen again (n rounds, or forever)."""
    return Cycle(gen, gen, n)


def final(main: Gen, *, nemesis_final: Gen | None = None, client_final: Gen | None = None) -> Gen:
    """main, then (all threads free) the nemesis's final heal, then the clients' final reads."""
    parts = [main]
    if nemesis_final is not None:
        parts.append(nemesis(nemesis_final))
    if client_final is not None:
        parts.append(clients(client_final))
    return phases(*parts)


