"""The queue workload's consumer group on our broker: `subscribe`, group polls, `crash`.

A `subscribe` starts a GroupSession: a GroupMember that a background thread
joins and keeps (heartbeats, a rejoin whenever the group rebalances, the
commits), as a Kafka consumer's heartbeat thread and poll loop do between them.
Eager protocol: before each rejoin the member commits (by the spec's commit
mode) and gives up every key; after it, each assigned key starts at the group's
committed offset, or 0 when none (auto.offset.reset=earliest).

Commit modes (harness.spec.ConsumerSettings): `auto` commits the consumed
positions every interval from the background thread, whatever the worker is
doing; `processed` commits the positions of the polls whose completions were
handed on (marked at the worker's next operation); `off` never commits.

A client closed after an `info` hands its membership to the worker's next
process (its first `subscribe` takes it over; a rejoin takes it and leaves): a send
that timed out is no reason for the group to rebalance twice, and under faults
such churn kept an eager group from ever settling.

A `crash` is the smallest honest client fault: the process fetches a batch as a
poll would and dies while processing it, before handing it on; with `auto` it
dies only after an auto-commit covered that batch (processing outlasted the
interval). It is abandoned: no commit, no leave; the coordinator removes it when
its session times out.

With offset operations (workloads/offsets.py: `processed` or `off` on the queue
workload), the group's commits are the workload's `commit` operations, each a
synchronous commit of the offsets it names in the generation it names (`ok` once
acknowledged, `fail` when certainly refused, `info` when an attempt may have
landed); the session then commits nothing by itself (neither before a rejoin nor
at a leave). `committed` operations read the group's offsets from the coordinator.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from harness.protocols import Run
from harness.runfiles import Op
from harness.spec import GROUP_ID, ConsumerSettings
from systems.undertow.admin import TOPIC
from systems.undertow.client import BrokerClient, ClientError
from systems.undertow.group_member import GroupError, GroupMember, commit_sync, fetch_committed
from systems.undertow.queue_client import QueueClient
from workloads.offsets import commit_offsets, committed_keys, committed_value
from workloads.spares import Spares

log = logging.getLogger("undertow.group")
HEARTBEAT_S = 0.1
IDLE_POLL_S = 0.05  # a poll with no key assigned (a rebalance is on) waits this long
CRASH_FETCH_S = 2.0  # a crash waits this long at most for a batch to die holding
REBALANCE_TIMEOUT_MS = 10_000
LEAVE_WAIT_S = 30.0  # how long the final reads' leave waits for the last commit and leave
# the final committed offsets: long enough for a transaction a lost client left open to
# be aborted at its timeout (the fetch waits for pending transactional offsets)
COMMITTED_WAIT_S = 20.0


class GroupSession:
    """One membership of the run's group, kept by a background thread until closed."""

    def __init__(self, addrs: Mapping[str, str], partitions: int, settings: ConsumerSettings,
                 client_id: str, timeout_s: float) -> None:
        self.settings = settings
        self.partitions = partitions
        self.client = BrokerClient(addrs, timeout_s=timeout_s)
        self.member = GroupMember(self.client, GROUP_ID, [TOPIC], {TOPIC: partitions},
                                  strategy=settings.assignor, client_id=client_id,
                                  session_timeout_ms=settings.session_timeout_ms,
                                  rebalance_timeout_ms=REBALANCE_TIMEOUT_MS)
        self.lock = threading.Lock()
        self.generation = -1
        self.keys: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}  # consumed: the next offset each key hands on
        self.processed: tuple[int, dict[int, int]] | None = None  # (generation, positions)
        self.commits: list[tuple[int, dict[int, int]]] = []  # (generation, what) committed
        self.behind = False  # positions ran ahead of the group's commits: rewind (txn workload)
        self._stop = threading.Event()
        self._leave = False
        self.thread = threading.Thread(target=self._run, name=f"group-{client_id}", daemon=True)
        self.thread.start()

    # -- the worker's side -----------------------------------------------------------
    def snapshot(self) -> tuple[int, tuple[int, ...], dict[int, int]]:
        with self.lock:
            return self.generation, self.keys, dict(self.positions)

    def holding(self) -> tuple[int, str, tuple[int, ...], dict[int, int]]:
        """The generation, member id, keys and positions (the member id is the one of that
        generation: the thread sets the generation after each join)."""
        with self.lock:
            return self.generation, self.member.member_id, self.keys, dict(self.positions)

    def rewind(self, generation: int, committed: Mapping[int, int]) -> bool:
        """Back to the group's committed positions (0 where none) after a transaction that
        did not commit; False when the group rebalanced meanwhile (its join rewound)."""
        with self.lock:
            if generation != self.generation:
                return False
            self.positions = {k: committed.get(k, 0) for k in self.keys}
            self.behind = False
            return True

    def consume(self, generation: int, read: Mapping[int, list[tuple[int, int]]]) -> bool:
        """Records a poll of `generation` hands on: positions move past them. False (nothing
        handed on) when the group rebalanced meanwhile."""
        with self.lock:
            if generation != self.generation:
                return False
            for key, records in read.items():
                if records:
                    self.positions[key] = records[-1][0] + 1
            return True

    def mark_processed(self) -> None:
        """Everything consumed so far was handed on: `processed` may commit it."""
        with self.lock:
            if self.generation >= 0:
                self.processed = (self.generation, dict(self.positions))

    def covered(self, generation: int, positions: Mapping[int, int]) -> bool:
        """Whether a commit of `generation` reached every one of `positions`."""
        with self.lock:
            done = [c for g, c in self.commits if g == generation]
        return all(any(c.get(k, -1) >= p for c in done) for k, p in positions.items())

    def close(self, *, leave: bool, wait_s: float = 0.0) -> None:
        """leave: commit (by the mode) and leave the group, waiting at most wait_s for it (the
        thread finishes in the background: a coordinator that is down may hold it for a
        whole join); else abandon: the thread stops at its next step, with no commit and no
        leave."""
        self._leave = leave
        self._stop.set()
        if leave and wait_s > 0:
            self.thread.join(wait_s)

    # -- the background thread -----------------------------------------------------------
    def _run(self) -> None:
        interval = self.settings.auto_commit_interval_ms / 1000
        next_commit = time.monotonic() + interval
        joined = False
        try:
            while not self._stop.is_set():
                try:
                    if not joined:
                        self._join()
                        joined = True
                        continue
                    if self._stop.wait(min(HEARTBEAT_S, max(0.0, next_commit - time.monotonic()))):
                        break
                    if time.monotonic() >= next_commit or self.settings.commit == "processed":
                        next_commit = time.monotonic() + interval
                        if not self._commit():
                            joined = self._revoke(commit=False)
                            continue
                    if not self.member.heartbeat():
                        joined = self._revoke(commit=True)
                except (ClientError, GroupError) as e:
                    log.debug("group %s: %s", self.member.client_id, e)
                    self._stop.wait(HEARTBEAT_S)
            if self._leave:
                self._commit()
                self.member.leave()
        except (ClientError, GroupError) as e:
            log.debug("group %s: leaving: %s", self.member.client_id, e)
        finally:
            self.client.close()

    def _join(self) -> None:
        self.member.join()
        keys = tuple(sorted(p for t, p in self.member.assignment if t == TOPIC))
        committed = self.member.committed([(TOPIC, k) for k in keys])
        with self.lock:
            self.generation = self.member.generation
            self.keys = keys
            self.positions = {k: committed.get((TOPIC, k), 0) for k in keys}
            self.behind = False

    def _revoke(self, *, commit: bool) -> bool:
        """Before a rejoin: commit by the mode (eager: the member then owns nothing)."""
        if commit:
            try:
                self._commit()
            except ClientError as e:
                log.debug("group %s: commit before rejoin: %s", self.member.client_id, e)
        with self.lock:
            self.generation, self.keys, self.positions = -1, (), {}
        return False

    def _commit(self) -> bool:
        """Commit by the mode; False when the group moved on (rejoin)."""
        mode = self.settings.commit
        with self.lock:
            gen = self.generation
            if mode == "auto":
                what = dict(self.positions)
            elif mode == "processed" and self.processed is not None and self.processed[0] == gen:
                what = self.processed[1]
            else:
                what = {}
        if gen < 0 or not what or gen != self.member.generation:
            return True
        if not self.member.commit({(TOPIC, k): o for k, o in what.items()}):
            return False
        with self.lock:
            self.commits = [*self.commits[-7:], (gen, what)]
            if mode == "processed" and self.processed == (gen, what):
                self.processed = None
        return True


def committed_offsets(addrs: Mapping[str, str], partitions: int,
                      timeout_s: float) -> dict[str, int]:
    """The group's committed offset of every key that has one (asked of its coordinator)."""
    client = BrokerClient(addrs, timeout_s=timeout_s)
    try:
        member = GroupMember(client, GROUP_ID, [TOPIC], {TOPIC: partitions})
        got = member.committed([(TOPIC, k) for k in range(partitions)])
    finally:
        client.close()
    return {str(p): o for (t, p), o in sorted(got.items()) if t == TOPIC}


def _leave(s: GroupSession) -> None:
    """A parked membership at the run's end: leave the group (bounded)."""
    s.close(leave=True, wait_s=LEAVE_WAIT_S)


class GroupQueueClient:
    """harness.protocols.Client: the queue workload's ops on our broker with `subscribe` and
    `crash`; sends, assigns and assigned polls go to a QueueClient."""

    def __init__(self, inner: QueueClient, *, partitions: int, settings: ConsumerSettings,
                 addrs: Mapping[str, str] | None = None, name: str = "",
                 spares: Spares[GroupSession] | None = None, offset_ops: bool = False) -> None:
        """offset_ops: the group's commits are the workload's `commit` operations (the
        session's `processed` commits are never marked, so it commits nothing by itself)
        and `committed` operations read the group's offsets (workloads/offsets.py)."""
        self.inner = inner
        self.offset_ops = offset_ops
        self.partitions = partitions
        self.settings = settings
        self.addrs = dict(addrs or {})
        self.name = name
        self.spares = spares if spares is not None else Spares(_leave)
        self.session: GroupSession | None = None
        self._next_key = 0  # where a group poll starts among its keys (each gets its turn)

    def open(self, run: Run, node: str) -> GroupQueueClient:
        addrs = dict(run.client_addrs)
        ordered = {node: addrs.pop(node)} if node in addrs else {}
        ordered.update(addrs)
        return GroupQueueClient(self.inner.open(run, node), partitions=self.partitions,
                                settings=self.settings, addrs=ordered, name=f"{node}-{id(self)}",
                                spares=self.spares, offset_ops=self.offset_ops)

    def invoke(self, run: Run, op: Op) -> Op:
        if self.session is not None and not self.offset_ops:
            self.session.mark_processed()  # the last op's completion was handed on
        if op.f == "commit":
            return self._commit(op)
        if op.f == "committed":
            return self._committed(op)
        if op.f == "subscribe":
            if self.session is None:  # a predecessor's membership, if one waits: kept,
                # or left by a rejoin (else it would stay in the group, read by no one)
                self.session = self.spares.take()
                if self.session is not None and not op.extra.get("rejoin"):
                    return op.complete("ok")
            self._end_session()
            self.session = GroupSession(self.addrs, self.partitions, self.settings,
                                        f"p{op.process}", self.inner.timeout_s)
            return op.complete("ok")
        if op.f == "assign":
            # before the group's final committed offsets are read, this member's last commit
            # and leave must be done
            final = bool(op.extra.get("fetch_committed") or not op.value)
            self._end_session(wait_s=LEAVE_WAIT_S if final else 0.0)
            if final:
                self.spares.close_all()
            extra: dict[str, Any] = {}
            if op.extra.get("fetch_committed"):
                try:
                    extra["committed"] = committed_offsets(
                        self.addrs, self.partitions,
                        max(self.inner.timeout_s * 3, COMMITTED_WAIT_S))
                except ClientError as e:
                    return op.complete("fail", error=f"committed offsets: {e.code}: {e}")
            done = self.inner.invoke(run, op)
            return done.with_(extra={**done.extra, **extra}) if extra else done
        if op.f == "poll" and self.session is not None:
            return self._poll(op)
        if op.f == "crash":
            self._crash()
            return op.complete("info", error="crashed: the client was abandoned unclosed")
        return self.inner.invoke(run, op)

    def _commit(self, op: Op) -> Op:
        """A `commit` operation: the offsets its invoke names (what this process's polls of
        that generation handed on), committed synchronously in that generation."""
        offsets = {(TOPIC, k): o for k, o in commit_offsets(op).items()}
        want = op.extra.get("generation")
        if self.session is None:
            return op.complete("fail", error="not subscribed: no membership to commit for")
        gen, member, _keys, _positions = self.session.holding()
        if gen < 0 or gen != want:
            return op.complete("fail", error=f"the group moved on from generation {want} "
                               f"(now {gen}): nothing sent")
        typ, why = commit_sync(self.inner.conn, GROUP_ID, member, gen, offsets,
                               timeout_s=self.inner.timeout_s)
        return op.complete(typ, error=why)

    def _committed(self, op: Op) -> Op:
        """A `committed` operation: the group's committed offsets of its keys, as the
        coordinator answers them once stable (a read: an error is a `fail`)."""
        keys = committed_keys(op)
        try:
            got = fetch_committed(self.inner.conn, GROUP_ID, [(TOPIC, k) for k in keys])
        except ClientError as e:
            return op.complete("fail", error=f"{e.code}: {e}")
        return op.complete("ok", committed_value(keys, {p: o for (_t, p), o in got.items()}))

    def fetch_batch(self, s: GroupSession) -> tuple[int, tuple[int, ...],
                                               dict[int, list[tuple[int, int]]],
                                               ClientError | None]:
        """One poll's records from the session's keys (each key's turn first in rotation), at
        the consumer's isolation level."""
        gen, keys, positions = s.snapshot()
        read: dict[int, list[tuple[int, int]]] = {}
        if not keys:
            time.sleep(IDLE_POLL_S)
            return gen, keys, read, None
        budget = self.inner.max_poll_records
        start = self._next_key % len(keys)
        self._next_key += 1
        try:
            for key in keys[start:] + keys[:start]:
                if budget <= 0:
                    break
                records, _next = self.inner.conn.fetch_next(key, positions[key],
                                                            max_records=budget,
                                                            isolation=self.inner.isolation)
                if records:
                    read[key] = records
                    budget -= len(records)
        except ClientError as e:
            return gen, keys, read, e
        return gen, keys, read, None

    def _poll(self, op: Op) -> Op:
        assert self.session is not None
        gen, keys, read, error = self.fetch_batch(self.session)
        if not self.session.consume(gen, read):
            read = {}  # the group rebalanced during the fetch: nothing was handed on
        out = {str(k): [[o, v] for o, v in rs] for k, rs in read.items()}
        extra: dict[str, Any] = {"generation": gen, "assignment": list(keys)}
        if error is not None:
            return op.complete("fail", [["poll", out]] if out else [["poll"]],
                               error=f"{error.code}: {error}", **extra)
        return op.complete("ok", [["poll", out]], **extra)

    def _crash(self) -> None:
        """Fetch a batch, die before handing it on (after an auto-commit covered it)."""
        s = self.session
        if s is not None:
            deadline = time.monotonic() + CRASH_FETCH_S
            consumed = False
            while not consumed and time.monotonic() < deadline:
                gen, _, read, _ = self.fetch_batch(s)
                consumed = bool(read) and s.consume(gen, read)
            if consumed and self.settings.commit == "auto":
                upto = {k: rs[-1][0] + 1 for k, rs in read.items()}
                wait_until = time.monotonic() + 2 * self.settings.auto_commit_interval_ms / 1000 + 5
                while not s.covered(gen, upto) and time.monotonic() < wait_until:
                    time.sleep(0.01)
            s.close(leave=False)
            self.session = None
        if self.inner.conn is not None:
            self.inner.conn.close()  # what the dying process's sockets do
            self.inner.conn = None

    def _end_session(self, wait_s: float = 0.0) -> None:
        if self.session is not None:
            self.session.close(leave=True, wait_s=wait_s)
            self.session = None

    def close(self, run: Run) -> None:
        """After an `info` the worker's next process takes this membership over (Kafka's
        subscribe() of the same topics changes nothing), so a send that timed out does not
        cost the group two rebalances."""
        if self.session is not None:
            self.spares.put(self.session)
            self.session = None
        self.inner.close(run)
