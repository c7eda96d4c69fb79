"""The queue workload's consumer group on our broker: GroupSession, and its GroupPort.

The operations and their rules are workloads/groupops.py's. A `subscribe` starts a
GroupSession: a GroupMember that a background thread joins and keeps (heartbeats, a
rejoin whenever the group rebalances, the commits), as a Kafka consumer's heartbeat
thread and poll loop do between them. Eager protocol: before each rejoin the member
commits (by the spec's commit mode) and gives up every key; after it, each assigned key
starts at the group's committed offset, or 0 when none (auto.offset.reset=earliest).

Commit modes (workloads.options.ConsumerSettings): `auto` commits the consumed positions
every interval from the background thread, whatever the worker is doing; `processed`
commits the positions of the polls whose completions were handed on; `off` never
commits. With offset operations the session commits nothing by itself (neither before a
rejoin nor at a leave), and a `commit` names the generation its polls ran in.

A `crash` is the smallest honest client fault: the member is abandoned (no commit, no
leave); the coordinator removes it when its session times out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from harness.protocols import Run
from harness.runfiles import Op, OpType
from systems.undertow.admin import TOPIC
from systems.undertow.client import BrokerClient, ClientError
from systems.undertow.group_member import GroupError, GroupMember, commit_sync, fetch_committed
from systems.undertow.queue_client import QueueClient
from workloads.groupops import Batch, GroupOps, Held, final_wait_s
from workloads.options import GROUP_ID, ConsumerSettings
from workloads.spares import Spares

log = logging.getLogger("undertow.group")
HEARTBEAT_S = 0.1
IDLE_POLL_S = 0.05  # a poll with no key assigned (a rebalance is on) waits this long
REBALANCE_TIMEOUT_MS = 10_000
LEAVE_WAIT_S = 30.0  # how long the final reads' leave waits for the last commit and leave


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
    `crash` (workloads/groupops.py's rules), and its GroupPort for a GroupSession; sends,
    assigns and assigned polls go to a QueueClient."""

    crashed = "crashed: the client was abandoned unclosed"
    errors = (ClientError,)

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
        self.ops = GroupOps(self, inner, self.spares, commit=settings.commit,
                            offset_ops=offset_ops)
        self._next_key = 0  # where a group poll starts among its keys (each gets its turn)

    @property
    def session(self) -> GroupSession | None:
        return self.ops.member

    def open(self, run: Run, node: str) -> GroupQueueClient:
        addrs = dict(run.client_addrs)
        ordered = {node: addrs.pop(node)} if node in addrs else {}
        ordered.update(addrs)
        return GroupQueueClient(self.inner.open(run, node), partitions=self.partitions,
                                settings=self.settings, addrs=ordered, name=f"{node}-{id(self)}",
                                spares=self.spares, offset_ops=self.offset_ops)

    def invoke(self, run: Run, op: Op) -> Op:
        return self.ops.invoke(run, op)

    # -- workloads.groupops.GroupPort ----------------------------------------------------

    def text(self, error: BaseException) -> str:
        return f"{error.code}: {error}" if isinstance(error, ClientError) else str(error)

    def join(self, op: Op) -> GroupSession:
        return GroupSession(self.addrs, self.partitions, self.settings, f"p{op.process}",
                            self.inner.timeout_s)

    def hand_on(self, member: GroupSession, handed: dict[int, int]) -> None:
        """Everything the session consumed so far was handed on: `processed` commits it."""
        member.mark_processed()

    def held(self, member: GroupSession) -> Held:
        gen, member_id, keys, _positions = member.holding()
        return Held(gen, list(keys), member_id)

    def commit(self, member: GroupSession, held: Held,
               offsets: dict[int, int]) -> tuple[OpType, str | None]:
        """Synchronously, in the generation (and with the member id) it was held in."""
        assert held.generation is not None
        return commit_sync(self.inner.conn, GROUP_ID, held.member_id, held.generation,
                           {(TOPIC, k): o for k, o in offsets.items()},
                           timeout_s=self.inner.timeout_s)

    def committed_of(self, keys: list[int]) -> dict[int, int]:
        """As the coordinator answers them once stable."""
        got = fetch_committed(self.inner.conn, GROUP_ID, [(TOPIC, k) for k in keys])
        return {p: o for (_t, p), o in got.items()}

    def committed(self) -> dict[str, int]:
        return committed_offsets(self.addrs, self.partitions,
                                 final_wait_s(self.inner.timeout_s))

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

    def poll(self, member: GroupSession) -> Batch:
        gen, keys, read, error = self.fetch_batch(member)
        if not member.consume(gen, read):
            read = {}  # the group rebalanced during the fetch: nothing was handed on
        return Batch({str(k): [[o, v] for o, v in rs] for k, rs in read.items()},
                     None if error is None else f"{error.code}: {error}",
                     {"generation": gen, "assignment": list(keys)})

    def cover(self, member: GroupSession, batch: Batch) -> None:
        """Until an auto-commit of the batch's generation covered it (bounded)."""
        gen = batch.extra["generation"]
        upto = {int(k): rs[-1][0] + 1 for k, rs in batch.read.items()}
        wait_until = time.monotonic() + 2 * self.settings.auto_commit_interval_ms / 1000 + 5
        while not member.covered(gen, upto) and time.monotonic() < wait_until:
            time.sleep(0.01)

    def die(self, member: GroupSession | None) -> None:
        """Abandoned: no commit, no leave (the coordinator times it out); its sockets close."""
        if member is not None:
            member.close(leave=False)
        if self.inner.conn is not None:
            self.inner.conn.close()  # what the dying process's sockets do
            self.inner.conn = None

    def leave(self, member: GroupSession, *, final: bool) -> None:
        """Commit (by the mode) and leave; before the final reads wait for both."""
        member.close(leave=True, wait_s=LEAVE_WAIT_S if final else 0.0)

    def close(self, run: Run) -> None:
        """After an `info` the worker's next process takes this membership over (Kafka's
        subscribe() of the same topics changes nothing), so a send that timed out does not
        cost the group two rebalances."""
        self.ops.park()
        self.inner.close(run)
