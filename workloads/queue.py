"""The queue workload: Kafka-style send / poll / assign over integer keys (partitions).

Shapes are HISTORY.md's: a send invokes `[["send", k, v]]` and completes ok with
`[["send", k, [offset, v]]]`; a poll invokes `[["poll"]]` and completes with
`[["poll", {"k": [[offset, v], ...]}]]`; an assign's value is the key list, with
`"seek_to_beginning": true` beside it when reading restarts at offset 0.

The client that performs these operations is the system's (`System.client`):
each process has its own (a fresh one after an `info`), with its own assigned
keys and per-key positions, as a Kafka consumer has. This module holds only what
the clients do (pure generators) and how the outcome is judged (the checkers).

Keys rotate as in Jepsen's Kafka workload (workloads/keys.py): `--keys` are
written at once, each takes at most `--max-writes-per-key` sends, and seeks to
offset 0 are rare outside the final reads, which read every key sent to from the
beginning; so no read re-reads a long log and the history stays linear in its
operations.

With `--sub-via subscribe` (Jepsen's :sub-via) the processes do not pick keys:
each one's first operation is a `subscribe` to every key of the pool, which
joins the run's one consumer group, whose rebalances hand the keys out among
the members; now and then a process leaves and joins again (a `subscribe` with
`"rejoin": true`; a plain one keeps a membership the worker already holds, as
Kafka's subscribe() to the same topics does, e.g. after its last process ended
`info`).
Before the final reads each process leaves the group (an empty `assign`), and
one more empty `assign` with `"fetch_committed": true` asks the group's final
committed offsets, which its completion carries as `"committed": {"key":
offset}` (read by harness/report/groups.py). `--crash-client-interval` crashes a random
process now and then (`crash`: abandoned without closing, as a consumer that
dies while it processes what it last fetched).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from checkers.suite import RunFileChecker
from harness import generator as g
from harness.protocols import Checker
from harness.runfiles import Op, Process, iter_history
from harness.spec import TestSpec
from harness.test import Test
from workloads import offsets
from workloads.keys import KeyRing
from workloads.offsets import OffsetOps
from workloads.options import QueueOptions, WritesQueueKeys

SEND_WEIGHT, POLL_WEIGHT, ASSIGN_WEIGHT = 5.0, 4.0, 1.0
# Seeks to offset 0 outside the final reads: rare, and cheap since logs stay short.
SEEK_PROBABILITY = 0.02
ASSIGN_MAX_KEYS = 3
EMPTY_POLLS_BEFORE_GIVING_UP = 20  # final reads: a key that stays short is lost, not late
EMPTY_POLL_PAUSE_S = 0.1
# --sub-via subscribe: a process leaves and rejoins the group this often, on average (all
# processes together): each rejoin is a rebalance of the whole group
RESUBSCRIBE_INTERVAL_S = 5.0


# ---------------------------------------------------------------- generators


@dataclass(frozen=True, slots=True)
class QueueOps(g.Gen):
    """The main phase: a weighted mix of sends, polls and assigns over the rotating keys.

    Sends carry globally unique values (a counter) to the ring's active keys; assigns
    take one to ASSIGN_MAX_KEYS active keys and seek to the beginning with
    SEEK_PROBABILITY. State is immutable and randomness comes from ctx.rng.
    """

    ring: KeyRing
    next_value: int = 0

    def op(self, ctx: g.Context) -> g.Result:
        if not ctx.free_threads():
            return g.PENDING, self
        f = ctx.rng.choices(("send", "poll", "assign"),
                            weights=(SEND_WEIGHT, POLL_WEIGHT, ASSIGN_WEIGHT))[0]
        nxt = self
        if f == "send":
            key, ring = self.ring.send_key(ctx.rng)
            inv = g.Invoke("send", [["send", key, self.next_value]])
            nxt = replace(self, ring=ring, next_value=self.next_value + 1)
        elif f == "poll":
            inv = g.Invoke("poll", [["poll"]])
        else:
            keys = self.ring.pick(ctx.rng, ctx.rng.randint(1, ASSIGN_MAX_KEYS))
            seek = ctx.rng.random() < SEEK_PROBABILITY
            inv = g.Invoke("assign", keys, {"seek_to_beginning": True} if seek else {})
        out = g.OneOp(inv).op(ctx)
        assert out is not None
        return out[0], nxt


@dataclass(frozen=True, slots=True)
class SubscribeOps(g.Gen):
    """The main phase with --sub-via subscribe: sends and polls as QueueOps, and each
    process's first operation a `subscribe` to every key (a new process after an `info`
    subscribes again)."""

    ring: KeyRing
    next_value: int = 0
    subscribed: frozenset[Process] = frozenset()
    offsets: OffsetOps | None = None  # commits and committed reads as operations

    def op(self, ctx: g.Context) -> g.Result:
        free = ctx.free_threads()
        if not free:
            return g.PENDING, self
        thread = free[0] if len(free) == 1 else free[ctx.rng.randrange(len(free))]
        proc = ctx.processes[thread]
        nxt = self
        if proc not in self.subscribed:
            return subscribe(ctx, proc, self.ring), replace(self,
                                                            subscribed=self.subscribed | {proc})
        if self.offsets is not None:
            got = self.offsets.pick(ctx.rng, proc, ctx.time_ns)
            if got is not None:
                return got[0], replace(self, offsets=got[1])
        if ctx.rng.random() < SEND_WEIGHT / (SEND_WEIGHT + POLL_WEIGHT):
            key, ring = self.ring.send_key(ctx.rng)
            o = Op(type="invoke", process=proc, f="send", value=[["send", key, self.next_value]],
                   time=ctx.time_ns)
            nxt = replace(self, ring=ring, next_value=self.next_value + 1)
        else:
            o = Op(type="invoke", process=proc, f="poll", value=[["poll"]], time=ctx.time_ns)
        return o, nxt

    def update(self, ctx: g.Context, event: Op) -> g.Gen:
        if self.offsets is None or event.type == "invoke":
            return self
        seen = self.offsets.seen(event)
        return self if seen is self.offsets else replace(self, offsets=seen)


def subscribe(ctx: g.Context, proc: Process, ring: KeyRing) -> Op:
    """A process's first operation with --sub-via subscribe: it joins the group, subscribed
    to every key of the pool."""
    return Op(type="invoke", process=proc, f="subscribe", value=list(range(ring.pool)),
              time=ctx.time_ns)


def rejoins(ring: KeyRing) -> g.Gen:
    """Now and then a process leaves the group and joins again: a rebalance of the group."""
    return g.stagger(RESUBSCRIBE_INTERVAL_S,
                     g.repeat(g.op("subscribe", list(range(ring.pool)), rejoin=True)))


def generator(spec: TestSpec, *, offset_ops: bool = False) -> g.Gen:
    """The main phase's client ops: sends, polls and assigns (or subscribes, with --sub-via
    subscribe) over `--keys` rotating keys; crashes with --crash-client-interval;
    `offset_ops`: commits and committed reads as operations (workloads/offsets.py)."""
    opts = QueueOptions.of(spec)
    ring = KeyRing.start(opts.keys, opts.partitions(spec.time_limit_s), opts.max_writes_per_key)
    # the timed ops come first: a tie in time goes to the first generator, and the
    # main mix always has an op for now
    gens: list[g.Gen] = []
    if opts.crash_client_interval_s is not None:
        gens.append(g.stagger(opts.crash_client_interval_s, g.repeat(g.op("crash"))))
    if opts.subscribe:
        offsets = OffsetOps(opts.commit == "processed", ring.pool) if offset_ops \
            else None
        gens += [rejoins(ring), SubscribeOps(ring, offsets=offsets)]
    else:
        gens.append(QueueOps(ring))
    return gens[0] if len(gens) == 1 else g.any_of(*gens)


@dataclass(frozen=True, slots=True)
class _Slot:
    key: int
    stage: str  # "assign" | "poll"
    empty: int = 0  # consecutive empty ok polls
    not_before_ns: int = 0


@dataclass(frozen=True, slots=True)
class FinalReads(g.Gen):
    """Reads each key from offset 0 (fresh assign + seek) until it reaches its target.

    targets: key -> highest acknowledged offset (-1: none; one ok poll suffices).
    A key whose ok polls stay empty `patience` times is given up.
    """

    targets: Mapping[int, int]
    todo: tuple[int, ...]
    slots: Mapping[g.Thread, _Slot] = field(default_factory=dict)
    done: frozenset[int] = frozenset()
    patience: int = EMPTY_POLLS_BEFORE_GIVING_UP

    def op(self, ctx: g.Context) -> g.Result:
        slots = dict(self.slots)
        todo = self.todo
        wake: int | None = None
        for t in ctx.threads:
            if t not in ctx.free:
                continue
            slot = slots.get(t)
            if slot is not None and slot.key in self.done:
                slot = None
                del slots[t]
            if slot is None:
                if not todo:
                    continue
                slot, todo = _Slot(todo[0], "assign"), todo[1:]
                slots[t] = slot
            if slot.not_before_ns > ctx.time_ns:
                wake = slot.not_before_ns if wake is None else min(wake, slot.not_before_ns)
                continue
            proc = ctx.processes[t]
            if slot.stage == "assign":
                o = Op(type="invoke", process=proc, f="assign", value=[slot.key],
                       time=ctx.time_ns, extra={"seek_to_beginning": True})
            else:
                o = Op(type="invoke", process=proc, f="poll", value=[["poll"]], time=ctx.time_ns)
            return o, replace(self, todo=todo, slots=slots)
        active = {s.key for s in slots.values()} - self.done
        if not todo and not active:
            return None
        return g.Pending(wake), replace(self, todo=todo, slots=slots)

    def update(self, ctx: g.Context, event: Op) -> g.Gen:
        if event.type == "invoke":
            return self
        t = ctx.thread_of(event.process)
        slot = self.slots.get(t)
        if slot is None:
            return self
        done = self.done
        if event.f == "assign":
            slot = replace(slot, stage="poll" if event.type == "ok" else "assign")
        elif event.f == "poll":
            if event.type == "info":  # a new process: its fresh client has nothing assigned
                slot = replace(slot, stage="assign")
            else:
                top = _max_offset(event.value, slot.key)
                if top is not None and top >= self.targets.get(slot.key, -1):
                    done = done | {slot.key}
                elif event.type == "ok" and top is None:
                    nothing_acked = self.targets.get(slot.key, -1) < 0
                    if nothing_acked or slot.empty + 1 >= self.patience:
                        done = done | {slot.key}
                    slot = replace(slot, empty=slot.empty + 1,
                                   not_before_ns=ctx.time_ns + int(EMPTY_POLL_PAUSE_S * 1e9))
                elif top is not None:
                    slot = replace(slot, empty=0)
                else:  # failed with nothing read: the cluster may still be recovering
                    slot = replace(slot, not_before_ns=ctx.time_ns + int(EMPTY_POLL_PAUSE_S * 1e9))
        return replace(self, slots={**self.slots, t: slot}, done=done)


def _max_offset(value: Any, key: int) -> int | None:
    best: int | None = None
    for micro in value or ():
        if micro and micro[0] == "poll" and len(micro) > 1:
            for o, _ in micro[1].get(str(key), ()):
                best = o if best is None else max(best, o)
    return best


def final_generator(spec: TestSpec, targets: Mapping[int, int],
                    patience: int = EMPTY_POLLS_BEFORE_GIVING_UP) -> g.Gen:
    """Every key in targets read from the beginning up to its target, bounded in time;
    `patience`: empty polls of a key before it is given up. With --sub-via subscribe,
    first every process leaves the group and the group's final committed offsets are
    read (the module docstring says how)."""
    keys = tuple(sorted(targets))
    opts = QueueOptions.of(spec)
    reads = g.time_limit(opts.final_read_timeout_s,
                         FinalReads(dict(targets), keys, patience=patience))
    if not opts.subscribe:
        return reads
    return g.phases(g.each_thread(g.op("assign", [])),
                    g.op("assign", [], fetch_committed=True), reads)


def read_targets(history: Path) -> dict[int, int]:
    """Every key a send went to -> the highest offset of an ok send to it (-1: none known),
    from history.jsonl as written so far: the keys the final reads must read."""
    out: dict[int, int] = {}
    for row in iter_history(history, having=b'"send"', skip_torn=True):  # a torn last line
        ok = row.get("type") == "ok"
        for micro in row.get("value") or ():
            if not (isinstance(micro, list) and len(micro) == 3 and micro[0] == "send"):
                continue
            k = int(micro[1])
            top = out.get(k, -1)
            v = micro[2]
            if ok and isinstance(v, list) and v[0] is not None:
                top = max(top, int(v[0]))
            out[k] = top
    return out


class QueueWorkload(WritesQueueKeys):
    """harness.protocols.Workload (and MeasuresAvailability, WritesKeys): sends, polls and
    assigns; the run-file checkers judge it. Its options: workloads/options.py."""

    name = "queue"

    def generator(self, test: Test) -> g.Gen:
        return generator(test.spec, offset_ops=offsets.enabled(test.spec, test.system))

    def final_generator(self, test: Test, history: Path) -> g.Gen | None:
        return final_generator(test.spec, read_targets(history))

    def checkers(self, test: Test) -> Sequence[Checker]:
        return [RunFileChecker()]

    def availability(self, run_dir: Path) -> dict[str, Any]:
        """harness.protocols.MeasuresAvailability: what its checkers write, measured now."""
        from checkers.availability import history_availability

        return history_availability(run_dir)


workload = QueueWorkload()
