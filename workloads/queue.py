"""The queue workload: Kafka-style send / poll / assign over integer keys (partitions).

Shapes are HISTORY.md's: a send invokes `[["send", k, v]]` and completes ok with
`[["send", k, [offset, v]]]`; a poll invokes `[["poll"]]` and completes with
`[["poll", {"k": [[offset, v], ...]}]]`; an assign's value is the key list, with
`"seek_to_beginning": true` beside it when reading restarts at offset 0.

Each process has its own client (a fresh one after an `info`), with its own
assigned keys and per-key positions, as a Kafka consumer has. Keys a process is
newly assigned start at offset 0 (auto.offset.reset=earliest, as Jepsen's test).
A send's ClientError maps to `fail` when definite, else `info`. A poll changes
nothing on the server, so a poll that hits an error is `fail`, carrying whatever
it had already read (HISTORY.md allows records in any completion).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from harness import generator as g
from harness.protocols import Run
from harness.runfiles import Op
from harness.spec import TestSpec

SEND_WEIGHT, POLL_WEIGHT, ASSIGN_WEIGHT = 5.0, 4.0, 1.0
SEEK_PROBABILITY = 0.2
EMPTY_POLLS_BEFORE_GIVING_UP = 20  # final reads: a key that stays short is lost, not late
EMPTY_POLL_PAUSE_S = 0.1


class QueueClient:
    """harness.protocols.Client over workloads.client.BrokerClient; one per process."""

    def __init__(self, *, keys: int, acks: str = "all", timeout_s: float = 3.0,
                 conn: Any = None) -> None:
        self.keys = keys
        self.acks = acks
        self.timeout_s = timeout_s
        self.conn = conn  # a BrokerClient once opened
        self.assigned: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}

    def open(self, run: Run, node: str) -> QueueClient:
        from workloads.client import BrokerClient

        # the slot's node first: the client follows leaders from there
        addrs = dict(run.client_addrs)
        ordered = {node: addrs.pop(node)} if node in addrs else {}
        ordered.update(addrs)
        return QueueClient(keys=self.keys, acks=self.acks, timeout_s=self.timeout_s,
                           conn=BrokerClient(ordered, timeout_s=self.timeout_s))

    def invoke(self, run: Run, op: Op) -> Op:
        if op.f == "send":
            return self._send(op)
        if op.f == "poll":
            return self._poll(op)
        if op.f == "assign":
            keys = tuple(int(k) for k in op.value)
            if op.extra.get("seek_to_beginning"):
                self.positions.update({k: 0 for k in keys})
            self.assigned = keys
            return op.complete("ok")
        return op.complete("fail", error=f"unknown f {op.f!r}")

    def _send(self, op: Op) -> Op:
        from workloads.client import ClientError

        done: list[Any] = []
        try:
            for micro in op.value:
                _, key, value = micro
                offset = self.conn.produce(int(key), int(value), acks=self.acks)
                done.append(["send", key, [offset, value]])
        except ClientError as e:
            if e.definite and not done:
                return op.complete("fail", error=f"{e.code}: {e}")
            # what was acknowledged before the error stays known (offsets count once it happened)
            rest = op.value[len(done):]
            return op.complete("info", [*done, *rest], error=f"{e.code}: {e}")
        return op.complete("ok", done)

    def _poll(self, op: Op) -> Op:
        from workloads.client import ClientError

        read: dict[str, list[list[int]]] = {}
        try:
            for key in self.assigned:
                pos = self.positions.get(key, 0)
                records = self.conn.fetch(key, pos)
                if records:
                    read[str(key)] = [[o, v] for o, v in records]
                    self.positions[key] = records[-1][0] + 1
        except ClientError as e:
            if e.code == "OFFSET_OUT_OF_RANGE":
                # The log was cut below our position (a new leader holds less): start that key
                # over from the beginning, as Kafka's auto.offset.reset=earliest does. This poll
                # completes `fail`, which ends the succession of polls for the checker.
                self.positions[key] = 0
            return op.complete("fail", [["poll", read]] if read else [["poll"]],
                               error=f"{e.code}: {e}")
        return op.complete("ok", [["poll", read]])

    def close(self, run: Run) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---------------------------------------------------------------- generators


@dataclass(frozen=True, slots=True)
class Sends(g.Gen):
    """Sends of globally unique values (a counter in the generator's state) to random keys."""

    keys: int
    next_value: int = 0

    def op(self, ctx: g.Context) -> g.Result:
        if not ctx.free_threads():
            return g.PENDING, self
        key = ctx.rng.randrange(self.keys)
        inv = g.OneOp(g.Invoke("send", [["send", key, self.next_value]])).op(ctx)
        assert inv is not None
        return inv[0], replace(self, next_value=self.next_value + 1)


def _assign(keys: int) -> g.Gen:
    def make(ctx: g.Context) -> g.Invoke:
        n = ctx.rng.randint(1, max(1, min(keys, 3)))
        chosen = sorted(ctx.rng.sample(range(keys), n))
        seek = ctx.rng.random() < SEEK_PROBABILITY
        return g.Invoke("assign", chosen, {"seek_to_beginning": True} if seek else {})
    return g.fn(make)


def generator(spec: TestSpec) -> g.Gen:
    """The main phase's client ops: a weighted mix of sends, polls and assigns."""
    polls = g.fn(lambda ctx: g.Invoke("poll", [["poll"]]))
    return g.mix([Sends(spec.keys), polls, _assign(spec.keys)],
                 weights=[SEND_WEIGHT, POLL_WEIGHT, ASSIGN_WEIGHT])


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
    A key whose ok polls stay empty EMPTY_POLLS_BEFORE_GIVING_UP times is given up.
    """

    targets: Mapping[int, int]
    todo: tuple[int, ...]
    slots: Mapping[g.Thread, _Slot] = field(default_factory=dict)
    done: frozenset[int] = frozenset()

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
                    if nothing_acked or slot.empty + 1 >= EMPTY_POLLS_BEFORE_GIVING_UP:
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


def final_generator(spec: TestSpec, targets: Mapping[int, int]) -> g.Gen:
    """Every key read from the beginning up to its highest acked offset, bounded in time."""
    keys = tuple(range(spec.keys))
    return g.time_limit(spec.final_read_timeout_s,
                        FinalReads({k: targets.get(k, -1) for k in keys}, keys))


def acked_offsets(history: Path) -> dict[int, int]:
    """key -> highest offset of an ok send, from history.jsonl as written so far."""
    out: dict[int, int] = {}
    with open(history, "rb") as fh:
        for line in fh:
            if b'"ok"' not in line or b'"send"' not in line:
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a torn last line
            if row.get("type") != "ok" or row.get("f") != "send":
                continue
            for micro in row.get("value") or ():
                if micro[0] == "send" and isinstance(micro[2], list) and micro[2][0] is not None:
                    k = int(micro[1])
                    out[k] = max(out.get(k, -1), int(micro[2][0]))
    return out


@dataclass(frozen=True, slots=True)
class QueueWorkload:
    """What the runner needs: a client to open per process, and the generators."""

    client: QueueClient
    generator: g.Gen
    spec: TestSpec

    def final_generator(self, history: Path) -> g.Gen:
        return final_generator(self.spec, acked_offsets(history))


def workload(spec: TestSpec) -> QueueWorkload:
    return QueueWorkload(QueueClient(keys=spec.keys, acks=spec.broker.acks), generator(spec), spec)
