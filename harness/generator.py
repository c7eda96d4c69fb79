"""Pure, composable generators of operations, in the style of Jepsen's.

A generator is an immutable value. `op(ctx)` returns None when it is exhausted,
else `(op_or_pending, next_generator)`; `update(ctx, event)` returns the
generator after an invocation or completion happened. Generators do no I/O,
start no threads and never sleep: time comes from `ctx.time_ns` and randomness
from `ctx.rng` (seeded by the run), so a schedule can be simulated exactly with
`simulate()` and a simulated clock.

Rules the interpreter (and `simulate`) follow:
- an `Op` whose `time` is later than now is committed: its thread is reserved
  (busy) at once and the op is invoked at its time; the next generator is kept,
  like for any op (so no state, e.g. when a `sleep` started, is ever lost);
- a `Pending` keeps its next generator too; `Pending.wake_ns` says when asking
  again may help even if no event arrives;
- every emitted invocation (when committed) and every completion is passed to
  `update`.

Threads are the client workers `0..n-1` and `"nemesis"`; a thread runs one
process at a time (a client thread whose op ended `info` gets process `p + n`).

Composing, e.g. a nemesis schedule and a client mix with a final phase::

    from harness import generator as g

    faults = g.cycle(g.seq(
        g.sleep(10), g.op("kill", {"nodes": ["n1"]}),
        g.sleep(10), g.op("start", {"nodes": ["n1"]}),
    ))
    workload = g.stagger(0.01, g.mix([g.fn(lambda ctx: g.Invoke("poll", [["poll"]])),
                                      g.fn(next_send)]))
    main = g.time_limit(60, g.any_of(g.clients(workload), g.nemesis(faults)))
    whole = g.phases(main, g.nemesis(g.op("heal", {})), g.clients(final_reads))

`g.simulate(whole, concurrency=10, seed=1, complete=...)` runs it on a
simulated clock and returns the history, with no threads and no sleeps.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.runfiles import NEMESIS, Op, OpType, Process

Thread = int | str  # client thread index, or "nemesis"
NS = 1_000_000_000


def _ns(seconds: float) -> int:
    return round(seconds * NS)


@dataclass(frozen=True, slots=True)
class Pending:
    """Nothing to emit now; `wake_ns` (if set) is when asking again may give an op."""

    wake_ns: int | None = None


PENDING = Pending()


@dataclass(frozen=True, slots=True)
class Invoke:
    """What a leaf generator emits; the process is filled in from a free thread."""

    f: str
    value: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Context:
    """What a generator may look at: the time, the threads in scope, a seeded random."""

    time_ns: int
    threads: tuple[Thread, ...]  # the threads in scope, in a fixed order
    free: frozenset[Thread]
    processes: Mapping[Thread, Process]  # thread -> the process it runs now
    rng: random.Random
    client_threads: int  # total client threads, to map a process back to its thread

    @staticmethod
    def initial(concurrency: int, *, seed: int = 0, time_ns: int = 0,
                with_nemesis: bool = True) -> Context:
        threads: tuple[Thread, ...] = tuple(range(concurrency))
        if with_nemesis:
            threads = (*threads, NEMESIS)
        procs: dict[Thread, Process] = {t: t for t in threads}
        return Context(time_ns=time_ns, threads=threads, free=frozenset(threads),
                       processes=procs, rng=random.Random(seed), client_threads=concurrency)

    # at, restrict, busy and freed run several times per op on the scheduler's path: they
    # build the Context directly (dataclasses.replace costs several times more)
    def _but(self, *, time_ns: int | None = None, threads: tuple[Thread, ...] | None = None,
             free: frozenset[Thread] | None = None,
             processes: Mapping[Thread, Process] | None = None) -> Context:
        """A copy with the given fields replaced, the others kept."""
        return Context(self.time_ns if time_ns is None else time_ns,
                       self.threads if threads is None else threads,
                       self.free if free is None else free,
                       self.processes if processes is None else processes,
                       self.rng, self.client_threads)

    def at(self, time_ns: int) -> Context:
        return self._but(time_ns=time_ns)

    def thread_of(self, process: Process) -> Thread:
        if process == NEMESIS or isinstance(process, str):
            return NEMESIS
        return process % self.client_threads

    def restrict(self, pred: Callable[[Thread], bool]) -> Context:
        """The same context seen by a generator that may only use threads matching pred
        (a pure predicate: which threads it keeps is remembered, _kept)."""
        threads, keep = _kept(pred, self.threads)
        return self._but(threads=threads, free=self.free & keep,
                         processes={t: p for t, p in self.processes.items() if t in keep})

    def free_threads(self) -> list[Thread]:
        return [t for t in self.threads if t in self.free]

    def all_free(self) -> bool:
        return all(t in self.free for t in self.threads)

    def busy(self, thread: Thread) -> Context:
        return self._but(free=self.free - {thread})

    def freed(self, thread: Thread, process: Process | None = None) -> Context:
        procs = self.processes
        if process is not None:
            procs = {**procs, thread: process}
        return self._but(free=self.free | {thread}, processes=procs)


# (pred, threads) -> the threads pred keeps, as a tuple and a set. The keys hold their
# predicates, so an id is never reused while cached; cleared when it grows (each_thread
# makes a predicate per thread and call).
_KEPT: dict[tuple[Callable[[Thread], bool], tuple[Thread, ...]],
            tuple[tuple[Thread, ...], frozenset[Thread]]] = {}
_KEPT_MAX = 256


def _kept(pred: Callable[[Thread], bool],
          threads: tuple[Thread, ...]) -> tuple[tuple[Thread, ...], frozenset[Thread]]:
    key = (pred, threads)
    kept = _KEPT.get(key)
    if kept is None:
        mine = tuple(t for t in threads if pred(t))
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        kept = _KEPT[key] = (mine, frozenset(mine))
    return kept


Result = tuple["Op | Pending", "Gen"] | None


class Gen:
    """Base of every generator: immutable; subclasses override `op` and maybe `update`."""

    def op(self, ctx: Context) -> Result:
        raise NotImplementedError

    def update(self, ctx: Context, event: Op) -> Gen:
        return self


# ---------------------------------------------------------------- leaves


def _fill(ctx: Context, inv: Invoke) -> Op | Pending:
    """An invocation for a free thread of ctx (chosen by the seeded random), or Pending."""
    free = ctx.free_threads()
    if not free:
        return PENDING
    thread = free[0] if len(free) == 1 else free[ctx.rng.randrange(len(free))]
    return Op(type="invoke", process=ctx.processes[thread], f=inv.f, value=inv.value,
              time=ctx.time_ns, extra=dict(inv.extra))


@dataclass(frozen=True, slots=True)
class OneOp(Gen):
    """Emits one invocation, then is exhausted."""

    inv: Invoke

    def op(self, ctx: Context) -> Result:
        o = _fill(ctx, self.inv)
        return (o, self) if isinstance(o, Pending) else (o, Nil())


@dataclass(frozen=True, slots=True)
class Nil(Gen):
    """The exhausted generator."""

    def op(self, ctx: Context) -> Result:
        return None


@dataclass(frozen=True, slots=True)
class Fn(Gen):
    """Calls fn(ctx) for each op: an Invoke, or None to end. Infinite until then."""

    fn: Callable[[Context], Invoke | None]

    def op(self, ctx: Context) -> Result:
        if not ctx.free_threads():
            return PENDING, self
        inv = self.fn(ctx)
        if inv is None:
            return None
        return _fill(ctx, inv), self


def op(f: str, value: Any = None, **extra: Any) -> Gen:
    """One invocation of f with value (extra keys go beside value in the history)."""
    return OneOp(Invoke(f, value, extra))


def fn(f: Callable[[Context], Invoke | None]) -> Gen:
    return Fn(f)


# ---------------------------------------------------------------- helpers


def _soonest(results: Sequence[tuple[int, Result]]) -> tuple[int, Op | Pending] | None:
    """Index and value of the earliest op; else a merged Pending; None if all exhausted."""
    best: tuple[int, Op] | None = None
    wake: int | None = None
    pending = False
    for i, r in results:
        if r is None:
            continue
        x = r[0]
        if isinstance(x, Op):
            if best is None or x.time < best[1].time:
                best = (i, x)
        else:
            pending = True
            if x.wake_ns is not None:
                wake = x.wake_ns if wake is None else min(wake, x.wake_ns)
    if best is not None:
        return best
    if pending:
        return -1, Pending(wake)
    return None


# ---------------------------------------------------------------- combinators


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


# ---------------------------------------------------------------- simulation

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
