"""Drives clients and the nemesis from a generator, writing every event as it happens.

One scheduler (the thread calling `Interpreter.run`) asks the pure generator for
ops and hands each to a worker thread: one per client slot, one for the nemesis.
The scheduler writes each invocation to the history when it dispatches it; the
worker writes the completion the moment it has it, so a harness killed mid-run
leaves a readable history. As in Jepsen, a client worker whose op ended `info`
continues under a new process (process + concurrency) with a fresh client, and
a client that raises completes `info` with the error (the op may have happened).
A client op still running after `stuck_after_s` (its client's own timeouts failed,
e.g. a library call that ignores its timeout) completes `info` there and then; its
thread gets a new worker, and whatever the stuck call returns later is not written.

`run(gen)` may be called several times (main phase, final heal, final reads):
the processes and the clock carry over. `stop()` (e.g. on SIGINT) ends the
current `run` quickly: nothing new is dispatched, and ops still in flight after
`abandon_after_s` are abandoned (their invocations stay without completions,
which readers treat as `info`).
"""

from __future__ import annotations

import heapq
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.generator import Context, Gen, Pending, Thread
from harness.inforce import InForce
from harness.protocols import Client, FaultKind, Nemesis, Run
from harness.runfiles import NEMESIS, HistoryWriter, Op, Process

MAX_WAIT_S = 0.05  # longest the scheduler blocks before looking at stop/timers again
STUCK_AFTER_S = 120.0  # a client op running this long is stuck: far past any client's timeouts


@dataclass
class Stats:
    """Live counts for the progress line; updated by workers, read by the display.

    The faults in force are read in the vocabulary of the fault kinds the nemesis
    declares (`declare`, called by the Interpreter with its nemesis's kinds).
    """

    counts: Counter[str] = field(default_factory=Counter)  # ok / fail / info of clients
    faults: dict[str, str] = field(default_factory=dict)   # fault label -> its targets, in force
    nemesis_ops: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_force: InForce = field(default_factory=InForce)

    def declare(self, kinds: Sequence[FaultKind]) -> None:
        with self.lock:
            self.in_force = InForce(kinds)
            self.faults = {}

    def record(self, op: Op) -> None:
        """Take one event: client completions are counted, nemesis events move faults."""
        with self.lock:
            if op.process != NEMESIS:
                if op.type != "invoke":
                    self.counts[op.type] += 1
                return
            if op.type != "invoke":
                self.nemesis_ops += 1
            self.in_force.record(op)
            self.faults = self.in_force.text()

    def snapshot(self) -> tuple[dict[str, int], dict[str, str]]:
        with self.lock:
            return dict(self.counts), dict(self.faults)


class _Worker:
    """A thread running one client slot (or the nemesis), one op at a time."""

    def __init__(self, interp: Interpreter, thread: Thread) -> None:
        self.interp = interp
        self.thread = thread
        self.inbox: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self.client: Client | None = None
        self.client_process: Process | None = None
        self.t = threading.Thread(target=self._loop, name=f"worker-{thread}", daemon=True)
        self.t.start()

    def _loop(self) -> None:
        while True:
            op = self.inbox.get()
            if op is None:
                self._close_client()
                return
            done = self._invoke(op)
            self.interp._completed(self, done)

    def _invoke(self, op: Op) -> Op:
        it = self.interp
        try:
            if self.thread == NEMESIS:
                assert it.nemesis is not None
                done = it.nemesis.invoke(it.run_, op)
                return done if done.type == "info" else done.with_(type="info")
            if self.client is None or self.client_process != op.process:
                self._close_client()
                try:
                    assert isinstance(self.thread, int)
                    self.client = it.open_client(self.thread)
                    self.client_process = op.process
                except Exception as e:  # nothing was sent: a definite failure
                    it.log.warning("worker %s: opening a client failed: %r", self.thread, e)
                    return op.complete("fail", error=f"no client: {e!r}")
            done = self.client.invoke(it.run_, op)
            if done.type == "info":
                self._close_client()
            return done
        except Exception as e:
            it.log.warning("worker %s: %s raised %r", self.thread, op.f, e)
            if self.thread != NEMESIS:
                self._close_client()
            return op.complete("info", error=repr(e)[:500])

    def _close_client(self) -> None:
        if self.client is not None:
            try:
                self.client.close(self.interp.run_)
            except Exception as e:
                self.interp.log.debug("worker %s: close failed: %r", self.thread, e)
            self.client = None
            self.client_process = None


class Interpreter:
    """Worker threads plus a scheduler; see the module docstring."""

    def __init__(self, run: Run, history: HistoryWriter, *, concurrency: int,
                 open_client: Callable[[int], Client], nemesis: Nemesis | None,
                 seed: int, start_ns: int | None = None, stats: Stats | None = None,
                 abandon_after_s: float = 10.0,
                 stuck_after_s: float | None = STUCK_AFTER_S) -> None:
        self.run_ = run
        self.history = history
        self.concurrency = concurrency
        self.open_client = open_client
        self.nemesis = nemesis
        self.log = run.log
        self.stats = stats or Stats()
        if nemesis is not None:
            self.stats.declare(nemesis.kinds)
        self.abandon_after_s = abandon_after_s
        self.stuck_after_s = stuck_after_s
        self.start_ns = time.monotonic_ns() if start_ns is None else start_ns
        self._done: queue.SimpleQueue[tuple[Thread, Op]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        threads: list[Thread] = list(range(concurrency))
        if nemesis is not None:
            threads.append(NEMESIS)
        self._ctx = Context(time_ns=self.now_ns(), threads=tuple(threads),
                            free=frozenset(threads), processes={t: t for t in threads},
                            rng=random.Random(seed), client_threads=concurrency)
        self._workers = {t: _Worker(self, t) for t in threads}
        self._busy: set[Thread] = set()
        # client ops dispatched and not completed: thread -> (dispatch time, invocation);
        # exactly one completion is written for each (the worker's, or the stuck one's)
        self._in_flight: dict[Thread, tuple[int, Op]] = {}
        self._flight_lock = threading.Lock()
        self._next_stuck_check_ns = 0

    # ------------------------------------------------------------ time & events

    def now_ns(self) -> int:
        return time.monotonic_ns() - self.start_ns

    def _record(self, op: Op) -> Op:
        with self._lock:
            if self._closed:
                return op
            written = self.history.append(op)
        self.stats.record(written)
        return written

    def _completed(self, worker: _Worker, done: Op) -> None:
        """Called by a worker: write the completion now, then tell the scheduler; nothing
        from a worker replaced because its op was stuck."""
        thread = worker.thread
        with self._flight_lock:
            if self._workers.get(thread) is not worker:
                self.log.info("worker %s: a stuck %s returned %s late; not written",
                              thread, done.f, done.type)
                return
            self._in_flight.pop(thread, None)
            written = self._record(done.at(self.now_ns()))
        self._done.put((thread, written))

    def _end_stuck(self, now: int) -> None:
        """Complete `info` every client op running longer than stuck_after_s, and give its
        thread a new worker (the old one ends when its call returns, if ever)."""
        if self.stuck_after_s is None or now < self._next_stuck_check_ns:
            return
        self._next_stuck_check_ns = now + 200_000_000
        limit = int(self.stuck_after_s * 1e9)
        with self._flight_lock:
            stuck = [(t, inv) for t, (since, inv) in self._in_flight.items()
                     if now - since > limit]
            for t, inv in stuck:
                del self._in_flight[t]
                self._workers[t].inbox.put(None)
                self._workers[t] = _Worker(self, t)
                why = f"stuck: no completion after {self.stuck_after_s:g} s; abandoned"
                written = self._record(inv.complete("info", error=why).at(self.now_ns()))
                self._done.put((t, written))
        for t, inv in stuck:
            self.log.warning("worker %s: %s stuck for %g s; completed info, new worker",
                             t, inv.f, self.stuck_after_s)

    def stop(self) -> None:
        """Ask the running `run` to end soon (safe from a signal handler)."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------ scheduling

    def _absorb(self, ctx: Context, gen: Gen, thread: Thread, op: Op) -> tuple[Context, Gen]:
        self._busy.discard(thread)
        new_proc: Process | None = None
        if op.type == "info" and thread != NEMESIS and isinstance(op.process, int):
            new_proc = op.process + self.concurrency
        ctx = ctx.at(self.now_ns()).freed(thread, new_proc)
        return ctx, gen.update(ctx, op)

    def _dispatch(self, inv: Op) -> None:
        now = self.now_ns()
        thread = self._ctx.thread_of(inv.process)
        with self._flight_lock:
            written = self._record(inv.at(now))
            if thread != NEMESIS:
                self._in_flight[thread] = (now, written)
            worker = self._workers[thread]
        worker.inbox.put(written)

    def run(self, gen: Gen) -> None:
        """Drive gen until it is exhausted and every op it started has completed, or stop()."""
        ctx = self._ctx
        timers: list[tuple[int, int, Op]] = []  # invocations committed for a later time
        seq = 0
        try:
            while not self._stop.is_set():
                while True:  # take every completion that is waiting
                    try:
                        thread, op = self._done.get_nowait()
                    except queue.Empty:
                        break
                    ctx, gen = self._absorb(ctx, gen, thread, op)
                now = self.now_ns()
                self._end_stuck(now)
                while timers and timers[0][0] <= now:
                    self._dispatch(heapq.heappop(timers)[2])
                ctx = ctx.at(now)
                r = gen.op(ctx)
                wake_ns: int | None = None
                if r is None:
                    if not self._busy and not timers:
                        return
                else:
                    x, gen = r
                    if isinstance(x, Pending):
                        wake_ns = x.wake_ns
                    else:
                        t = ctx.thread_of(x.process)
                        inv = x if x.time >= now else x.at(now)
                        ctx = ctx.busy(t)
                        self._busy.add(t)
                        gen = gen.update(ctx, inv)
                        if inv.time <= now:
                            self._dispatch(inv)
                        else:
                            seq += 1
                            heapq.heappush(timers, (inv.time, seq, inv))
                        continue  # ask again at once: more threads may be free
                if timers:
                    wake_ns = timers[0][0] if wake_ns is None else min(wake_ns, timers[0][0])
                wait_s = MAX_WAIT_S if wake_ns is None else (wake_ns - self.now_ns()) / 1e9
                wait_s = min(max(wait_s, 0.0), MAX_WAIT_S)
                try:
                    thread, op = self._done.get(timeout=wait_s) if wait_s > 0 else \
                        self._done.get_nowait()
                except queue.Empty:
                    continue
                ctx, gen = self._absorb(ctx, gen, thread, op)
            self._drain(ctx, gen, timers)
        finally:
            self._ctx = ctx

    def _drain(self, ctx: Context, gen: Gen, timers: Sequence[tuple[int, int, Op]]) -> None:
        """After stop(): wait a bounded time for in-flight ops; abandon the rest."""
        for _, _, inv in timers:
            ctx = ctx.freed(ctx.thread_of(inv.process))
            self._busy.discard(self._ctx.thread_of(inv.process))
        deadline = time.monotonic() + self.abandon_after_s
        while self._busy and time.monotonic() < deadline:
            try:
                thread, op = self._done.get(timeout=0.1)
            except queue.Empty:
                continue
            ctx, gen = self._absorb(ctx, gen, thread, op)
        if self._busy:
            self.log.warning("abandoning %d in-flight ops on threads %s", len(self._busy),
                             sorted(map(str, self._busy)))
        self._ctx = ctx

    def close(self, *, join_s: float = 2.0) -> None:
        """Stop the workers (closing their clients); later completions are not written."""
        with self._lock:
            self._closed = True
        for w in self._workers.values():
            w.inbox.put(None)
        deadline = time.monotonic() + join_s
        for w in self._workers.values():
            w.t.join(timeout=max(0.0, deadline - time.monotonic()))

    @property
    def context(self) -> Context:
        return self._ctx


def client_node(nodes: Sequence[str], thread: int) -> str:
    """The node a client slot talks to first (slots spread round-robin over nodes)."""
    return nodes[thread % len(nodes)]

