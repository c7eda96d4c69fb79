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

from harness.generator.combinators import (
    AnyOf,
    Cycle,
    EachThread,
    Limit,
    Mix,
    OnThreads,
    Repeat,
    Seq,
    Sleep,
    Stagger,
    Synchronize,
    TimeLimit,
    UntilOk,
    _only,
    any_of,
    clients,
    clients_and_nemesis,
    cycle,
    delay,
    each_thread,
    final,
    limit,
    mix,
    nemesis,
    once,
    phases,
    repeat,
    seq,
    sleep,
    stagger,
    synchronize,
    time_limit,
    until_ok,
)
from harness.generator.core import (
    NS,
    PENDING,
    Context,
    Fn,
    Gen,
    Invoke,
    Nil,
    OneOp,
    Pending,
    Result,
    Thread,
    fn,
    op,
)
from harness.generator.simulation import Completer, simulate

__all__ = [
    "NS", "PENDING", "AnyOf", "Completer", "Context", "Cycle", "EachThread", "Fn", "Gen",
    "Invoke", "Limit", "Mix", "Nil", "OnThreads", "OneOp", "Pending", "Repeat", "Result",
    "Seq", "Sleep", "Stagger", "Synchronize", "Thread", "TimeLimit", "UntilOk", "_only",
    "any_of", "clients", "clients_and_nemesis", "cycle", "delay", "each_thread", "final", "fn",
    "limit", "mix", "nemesis", "once", "op", "phases", "repeat", "seq", "simulate", "sleep",
    "stagger", "synchronize", "time_limit", "until_ok",
]
