"""The generator's core: the context a generator reads, the Gen type and its leaves
(one op, a function of the context, nothing); harness/generator/__init__.py says how
generators work."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.runfiles import NEMESIS, Op, Process

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


