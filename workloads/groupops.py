"""The queue workload's group operations (HISTORY.md's `subscribe`, group `poll`, `assign`,
`crash`, `commit`, `committed`), written once for every system.

`GroupOps` owns the dispatch and the rules every system shares, so that they cannot drift
apart between systems; each system's client supplies a `GroupPort` with only what
differs (how its member joins, polls a batch, commits, reads committed offsets, leaves,
dies, and what its errors say). The rules:

- a `subscribe` keeps a predecessor's membership parked as a spare (a process that ended
  `info`, as Kafka's subscribe() of the same topics changes nothing), unless it is a
  rejoin, which takes it and leaves; any other `subscribe` leaves and joins anew;
- an `assign` ends the membership (an empty one, or one with `"fetch_committed"`: the
  final reads, which also close every spare, waiting for their last commit and leave),
  and with `"fetch_committed"` carries the group's committed offsets (`fail` unread);
- a `commit` is sent only while the member stands where the operation's polls did (its
  `"generation"`, or the keys it `"held"` for a client that names none): else `fail`,
  nothing sent; `ok` once acknowledged, `info` on an error of the client's own;
- a `committed` is a read: an error is a `fail`;
- a `crash` fetches a batch, lets the auto-commit cover it (`auto`), dies: `info`;
- with `--commit processed` (commits not operations), a poll's records count as handed
  on at the process's next operation, and only then may the member commit them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from harness.protocols import Client, Run
from harness.runfiles import Op, OpType
from workloads.offsets import commit_offsets, committed_keys, committed_value, moved_on
from workloads.spares import Spares

CRASH_FETCH_S = 2.0  # a crash waits this long at most for a batch to die holding
# the final committed offsets: long enough for a transaction a lost client left open to be
# aborted at its timeout (a fetch of stable offsets waits for its pending offsets)
COMMITTED_WAIT_S = 20.0

M = TypeVar("M")  # a system's membership: a consumer, a session


@dataclass(frozen=True, slots=True)
class Batch:
    """One group poll: the records read per key (HISTORY.md's shape), the error text (None:
    none), and what the completion carries beside (its generation, its assignment)."""

    read: dict[str, list[list[int]]]
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Held:
    """Where a member stands when a `commit` is asked: its generation (None: the client
    names none, as Kafka's do not), the keys it holds, and its member id."""

    generation: int | None
    keys: list[int]
    member_id: str = ""


class GroupPort(Protocol[M]):
    """What one system's group member does its own way; `GroupOps` drives it."""

    crashed: str  # a `crash`'s error: how this client's process dies

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """The client's own errors: an outcome, never a crash of the worker."""

    def text(self, error: BaseException) -> str:
        """One of `errors` as the history writes it."""

    def join(self, op: Op) -> M:
        """A new member of the run's group, joining in the background."""

    def poll(self, member: M) -> Batch:
        """One poll's batch, its records consumed (handed on by the poll's completion);
        its `"assignment"` when the member's keys are best read with its records."""

    def hand_on(self, member: M, handed: dict[int, int]) -> None:
        """`processed`: the last poll's records (key -> next offset) were handed on."""

    def held(self, member: M) -> Held:
        """Where the member stands now (raises one of `errors` when it cannot tell)."""

    def commit(self, member: M, held: Held, offsets: dict[int, int]) -> tuple[OpType, str | None]:
        """A synchronous commit of the offsets as the member stands (`held`)."""

    def committed_of(self, keys: list[int]) -> dict[int, int]:
        """The group's committed offsets of those keys that have one (a `committed` read)."""

    def committed(self) -> dict[str, int]:
        """Every key's committed offset at the run's end (waits out open transactions)."""

    def leave(self, member: M, *, final: bool) -> None:
        """Leave the group (`final`: the run's last reads follow, wait for it)."""

    def cover(self, member: M, batch: Batch) -> None:
        """`auto`, before a crash: wait until the auto-commit covered the batch."""

    def die(self, member: M | None) -> None:
        """The process dies holding its last batch: its member and connections go."""


class GroupOps(Generic[M]):
    """One process's group operations: its membership, the worker's spares, the rules."""

    def __init__(self, port: GroupPort[M], inner: Client, spares: Spares[M], *,
                 commit: str, offset_ops: bool) -> None:
        """inner: the system's queue client (sends, assigns, polls outside the group);
        commit: the spec's commit mode; offset_ops: commits are operations
        (workloads/offsets.py), so nothing is handed on to be committed."""
        self.port = port
        self.inner = inner
        self.spares = spares
        self.processed = commit == "processed" and not offset_ops
        self.auto = commit == "auto"
        self.member: M | None = None
        self.handed: dict[int, int] = {}  # the last poll's records: key -> next offset

    def invoke(self, run: Run, op: Op) -> Op:
        if self.processed and self.member is not None:
            self.port.hand_on(self.member, self.handed)  # the last op's completion was
        self.handed = {}  # handed on
        if op.f == "commit":
            return self.commit(op)
        if op.f == "committed":
            return self.committed(op)
        if op.f == "subscribe":
            return self.subscribe(op)
        if op.f == "assign":
            return self.assign(run, op)
        if op.f == "poll" and self.member is not None:
            return self.poll(op, self.member)
        if op.f == "crash":
            return self.crash(op)
        return self.inner.invoke(run, op)

    def subscribe(self, op: Op) -> Op:
        if self.member is None:  # a predecessor's membership, if one waits: kept, or left
            # by a rejoin (else it would stay in the group, polled by no one, and hold up
            # every rebalance)
            self.member = self.spares.take()
            if self.member is not None and not op.extra.get("rejoin"):
                return op.complete("ok")
        self.leave()
        self.member = self.port.join(op)
        return op.complete("ok")

    def assign(self, run: Run, op: Op) -> Op:
        """Ends the membership; the final reads' first wait for every member's last commit
        and leave before the group's committed offsets are read."""
        final = bool(op.extra.get("fetch_committed") or not op.value)
        self.leave(final=final)
        if final:
            self.spares.close_all()
        extra: dict[str, Any] = {}
        if op.extra.get("fetch_committed"):
            try:
                extra["committed"] = self.port.committed()
            except self.port.errors as e:
                return op.complete("fail", error=f"committed offsets: {self.port.text(e)}")
        done = self.inner.invoke(run, op)
        return done.with_(extra={**done.extra, **extra}) if extra else done

    def poll(self, op: Op, member: M) -> Op:
        """A group poll's completion names the keys its member held (its `"assignment"`,
        asked after the poll unless the batch names them)."""
        b = self.port.poll(member)
        self.handed = {int(k): rs[-1][0] + 1 for k, rs in b.read.items() if rs}
        extra = b.extra if "assignment" in b.extra else {**b.extra,
                                                         "assignment": keys_held(self.port, member)}
        if b.error is not None:
            return op.complete("fail", [["poll", b.read]] if b.read else [["poll"]],
                               error=b.error, **extra)
        return op.complete("ok", [["poll", b.read]], **extra)

    def commit(self, op: Op) -> Op:
        """The offsets the operation names, committed while the member stands where the
        process's polls did."""
        if self.member is None:
            return op.complete("fail", error="not subscribed: no membership to commit for")
        try:
            held = self.port.held(self.member)
        except self.port.errors as e:
            return op.complete("fail", error=f"assignment: {self.port.text(e)}: nothing sent")
        if (why := _moved_on(op, held)) is not None:
            return op.complete("fail", error=why)
        try:
            typ, why = self.port.commit(self.member, held, commit_offsets(op))
        except self.port.errors as e:
            typ, why = "info", self.port.text(e)
        return op.complete(typ, error=why)

    def committed(self, op: Op) -> Op:
        keys = committed_keys(op)
        try:
            got = self.port.committed_of(keys)
        except self.port.errors as e:
            return op.complete("fail", error=f"committed offsets: {self.port.text(e)}")
        return op.complete("ok", committed_value(keys, got))

    def crash(self, op: Op) -> Op:
        """Fetch a batch and die before handing it on (with `auto`, once a commit covered
        it: processing outlasted the interval)."""
        m = self.member
        if m is not None:
            deadline = time.monotonic() + CRASH_FETCH_S
            batch = Batch({})
            while not batch.read and time.monotonic() < deadline:
                batch = self.port.poll(m)
            if batch.read and self.auto:
                self.port.cover(m, batch)
        self.port.die(m)
        self.member = None
        return op.complete("info", error=self.port.crashed)

    def leave(self, *, final: bool = False) -> None:
        if self.member is not None:
            m, self.member = self.member, None
            self.port.leave(m, final=final)

    def park(self) -> None:
        """The process ended: its membership waits for the worker's next process."""
        if self.member is not None:
            self.spares.put(self.member)
            self.member = None


def final_wait_s(timeout_s: float) -> float:
    """How long the final read of the committed offsets may wait, for a client whose
    requests time out after timeout_s."""
    return max(COMMITTED_WAIT_S, timeout_s * 3)


def keys_held(port: GroupPort[M], member: M) -> list[int]:
    """The keys a member holds, for its poll's completion ([] when its client cannot tell)."""
    try:
        return port.held(member).keys
    except port.errors:
        return []


def _moved_on(op: Op, held: Held) -> str | None:
    """Why a `commit` is refused unsent: the member's group moved on from where the
    operation's polls were (its generation, else the keys it held)."""
    if held.generation is None:
        return moved_on(op, held.keys)
    want, gen = op.extra.get("generation"), held.generation
    if gen < 0 or gen != want:
        return f"the group moved on from generation {want} (now {gen}): nothing sent"
    return None
