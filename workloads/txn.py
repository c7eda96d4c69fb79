"""The txn workload: transactions of sends and polls over integer keys, as Jepsen's Kafka test.

Each `txn` operation is one transaction: one to MAX_MICRO_OPS micro-ops, sends
(`["send", k, v]`) and polls (`["poll"]`) in a random order, committed, or
aborted when the invoke carries `"abort": true` (probability ABORT_PROBABILITY).
A transaction that sends sends at least two values: HISTORY.md allows cycles
through operations that send two or more messages (Kafka orders no
transaction's writes against other producers'), so a correct system stays valid.
`assign` operations choose the keys a process's polls read, as in the queue
workload, and the final reads are the queue workload's (`poll` operations at
the consumers' isolation level).

With `--sub-via subscribe` the polls are the run's consumer group's, as in the
queue workload (each process first subscribes, now and then one rejoins, no
`assign` in the main phase, the group's final committed positions read at the
end), and each transaction is Kafka's exactly-once loop (consume, transform,
produce, `run_transaction`): after its polls the consumer's positions are sent
into the transaction, so they are committed with its sends or not at all, and a
transaction that does not commit rewinds the consumer to the group's committed
positions. The group commits nothing outside transactions.

The client is the system's (`System.client`); the run-file checkers judge it
(G1a, precommitted-read, cycles, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from checkers.suite import RunFileChecker
from harness import generator as g
from harness import registry
from harness.protocols import Checker, SetsAcks
from harness.runfiles import Op, OpType, Process
from harness.spec import SpecError, TestSpec
from harness.test import Test
from workloads import queue
from workloads.keys import KeyRing
from workloads.options import QueueOptions, TxnOptions, WritesQueueKeys

TXN_WEIGHT, ASSIGN_WEIGHT = 9.0, 1.0
MAX_MICRO_OPS = 4
SEND_PROBABILITY = 0.6  # of each micro-op
ABORT_PROBABILITY = 0.3
ASSIGN_MAX_KEYS = 3
SEEK_PROBABILITY = 0.02
# final reads: empty polls of a key before giving it up. At read_committed a key's last
# stable offset waits for a transaction that a failed client left open, until its abort
# (at once if the client could reach the coordinator, else at the transaction timeout).
FINAL_READ_PATIENCE = 200  # of 0.1 s pauses: 20 s

E = TypeVar("E")


def run_micro_ops(micro: Sequence[Sequence[Any]], poll: Callable[[], tuple[list[Any], E | None]],
                  send_run: Callable[[list[tuple[int, int]]], tuple[list[int | None], E | None]]
                  ) -> tuple[list[list[Any]], E | None]:
    """Carry out a transaction's micro-ops in order, for any system's client: each poll
    alone (`poll()` gives the completed poll micro-op), each run of consecutive sends as
    one batch that a producer pipelines (`send_run(items)` gives each send's offset, None
    when not acknowledged). Stops at the first error. Returns the completed micro-ops (what
    an error left undone stays as invoked) and that error."""
    done: list[list[Any]] = []
    error: E | None = None
    i = 0
    while i < len(micro) and error is None:
        if micro[i][0] == "poll":
            read, error = poll()
            done.append(read)
            i += 1
            continue
        j = i
        while j < len(micro) and micro[j][0] == "send":
            j += 1
        items = [(int(m[1]), int(m[2])) for m in micro[i:j]]
        offsets, error = send_run(items)
        for (k, v), offset in zip(items, offsets, strict=True):
            done.append(["send", k, v] if offset is None else ["send", k, [offset, v]])
        i = j
    done.extend(list(m) for m in micro[i:])
    return done, error


class Transactional(Protocol[E]):
    """One system's transactional producer, with its consumer, as `run_transaction` drives
    them; errors are the client's own type E (`text` writes one for the history)."""

    def begin(self, keys: set[int]) -> E | None:
        """A new transaction that sends to `keys`; a consumer left ahead of the group's
        committed positions by a transaction that did not commit is rewound first."""

    def poll(self) -> tuple[list[Any], E | None]: ...

    def send_run(self, items: list[tuple[int, int]]) -> tuple[list[int | None], E | None]: ...

    def send_async(self, items: list[tuple[int, int]]) -> E | None:
        """Hand a run of sends to the producer without waiting for them (`--txn-sends
        at-commit`): the commit flushes them, and fails if one of them failed. An error
        here is one the producer gave at once (a full buffer, a fenced producer)."""

    def sent(self) -> list[int | None]:
        """The offsets of this transaction's `send_async` items so far, in order (None: not
        acknowledged), once its commit or abort returned."""

    def send_offsets(self) -> E | None:
        """The consumer group's positions into the transaction, when its polls moved them
        (nothing without a group); an error (e.g. a fenced generation) means abort."""

    def commit(self) -> tuple[OpType, str | None]:
        """Commit: `ok`, `fail` (certainly not committed) or `info`, and why; the consumer
        rewinds (before the next transaction) unless it committed."""

    def abort(self) -> None:
        """Never committed: abort (best effort; the next begin or the coordinator's timeout
        finishes it) and rewind the consumer before the next transaction."""

    def text(self, error: E) -> str: ...

    def extra(self) -> dict[str, Any]:
        """Fields for the completion (e.g. the group generation and assignment polled)."""


def run_transaction(op: Op, t: Transactional[E], sends: str = "awaited") -> Op:
    """One `txn` operation as Kafka's exactly-once loop (consume, transform, produce): begin,
    the micro-ops, the consumer's positions sent into the transaction, then commit, or
    abort when the invoke says `"abort": true` or anything failed. Completions: `ok` once
    committed, `fail` when certainly not committed, `info` when the commit's outcome is
    unknown (HISTORY.md).

    `sends` (the workload's --txn-sends): `awaited` waits for each run of sends before the
    next micro-op, so a failed send aborts the transaction before any commit; `at-commit`
    leaves them to the producer and the commit flushes them, as Kafka Streams does, so a
    send that fails fails the commit, which the client answers with an abort on the same
    producer (the path of KAFKA-17754 in Jepsen's analysis). The sends' offsets are then
    known once the commit or abort returned."""
    micro = [list(m) for m in op.value]
    error = t.begin({int(m[1]) for m in micro if m[0] == "send"})
    if error is not None:
        t.abort()
        return op.complete("fail", error=t.text(error), **t.extra())
    at_commit = sends == "at-commit"

    def send_later(items: list[tuple[int, int]]) -> tuple[list[int | None], E | None]:
        return [None] * len(items), t.send_async(items)

    done, error = run_micro_ops(micro, t.poll, send_later if at_commit else t.send_run)
    abort = bool(op.extra.get("abort"))
    if error is None and not abort:
        error = t.send_offsets()
    if error is not None or abort:
        t.abort()
        return op.complete("fail", settle(done, t.sent()) if at_commit else done,
                           error="aborted" if error is None else t.text(error), **t.extra())
    typ, why = t.commit()
    return op.complete(typ, settle(done, t.sent()) if at_commit else done, error=why,
                       **t.extra())


def settle(done: list[list[Any]], offsets: list[int | None]) -> list[list[Any]]:
    """The completed micro-ops with the offsets the producer gave the sends handed to it
    (the first len(offsets) sends, in order; the rest were never sent)."""
    out, i = [], 0
    for m in done:
        if m[0] == "send" and i < len(offsets):
            offset, i = offsets[i], i + 1
            if offset is not None:
                m = ["send", m[1], [offset, m[2]]]
        out.append(m)
    return out


@dataclass(frozen=True, slots=True)
class TxnOps(g.Gen):
    """The main phase: transactions and assigns over the rotating keys; values from a
    counter, so each is sent once in the whole history. Pure: randomness from ctx.rng.
    `subscribed` (--sub-via subscribe): the processes that joined the group; each one's
    first operation is its `subscribe`, and there are no assigns."""

    ring: KeyRing
    next_value: int = 0
    subscribed: frozenset[Process] | None = None

    def op(self, ctx: g.Context) -> g.Result:
        free = ctx.free_threads()
        if not free:
            return g.PENDING, self
        if self.subscribed is not None:
            for t in free:
                proc = ctx.processes[t]
                if proc not in self.subscribed:
                    return queue.subscribe(ctx, proc, self.ring), replace(
                        self, subscribed=self.subscribed | {proc})
        rng = ctx.rng
        nxt = self
        if self.subscribed is not None or rng.random() < TXN_WEIGHT / (TXN_WEIGHT
                                                                         + ASSIGN_WEIGHT):
            kinds = ["send" if rng.random() < SEND_PROBABILITY else "poll"
                     for _ in range(rng.randint(1, MAX_MICRO_OPS))]
            if kinds.count("send") == 1:
                kinds.append("send")
            ring, value = self.ring, self.next_value
            micro: list[list[Any]] = []
            for kind in kinds:
                if kind == "poll":
                    micro.append(["poll"])
                    continue
                key, ring = ring.send_key(rng)
                micro.append(["send", key, value])
                value += 1
            abort = rng.random() < ABORT_PROBABILITY
            inv = g.Invoke("txn", micro, {"abort": True} if abort else {})
            nxt = replace(self, ring=ring, next_value=value)
        else:
            keys = self.ring.pick(rng, rng.randint(1, ASSIGN_MAX_KEYS))
            seek = rng.random() < SEEK_PROBABILITY
            inv = g.Invoke("assign", keys, {"seek_to_beginning": True} if seek else {})
        out = g.OneOp(inv).op(ctx)
        assert out is not None
        return out[0], nxt


def generator(spec: TestSpec) -> g.Gen:
    opts = QueueOptions.of(spec)
    ring = KeyRing.start(opts.keys, opts.partitions(spec.time_limit_s), opts.max_writes_per_key)
    if opts.subscribe:
        # the timed rejoins first: a tie in time goes to the first generator
        return g.any_of(queue.rejoins(ring), TxnOps(ring, subscribed=frozenset()))
    return TxnOps(ring)


class TxnWorkload(WritesQueueKeys):
    """harness.protocols.Workload (and WritesKeys): transactions; the run-file checkers
    judge them. Its options are the queue workload's and --txn-sends (workloads/options.py)."""

    name = "txn"
    options = TxnOptions

    def check(self, spec: TestSpec) -> None:
        """Its own rules, on every system (harness.protocols.ChecksSpec)."""
        if QueueOptions.of(spec).crash_client_interval_s is not None:
            raise SpecError("--crash-client-interval: only the queue workload has it, not txn")
        system = registry.get("system", spec.system)
        if isinstance(system, SetsAcks) and (acks := system.acks(spec)) != "all":
            raise SpecError(f"--workload txn needs --acks all, not {acks} "
                            "(a transactional producer is idempotent)")

    def generator(self, test: Test) -> g.Gen:
        return generator(test.spec)

    def final_generator(self, test: Test, history: Path) -> g.Gen | None:
        return queue.final_generator(test.spec, queue.read_targets(history),
                                     patience=FINAL_READ_PATIENCE)

    def checkers(self, test: Test) -> Sequence[Checker]:
        return [RunFileChecker()]


workload = TxnWorkload()
