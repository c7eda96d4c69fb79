"""The controller: liveness by heartbeats, leader election, ISR changes, as metadata records.

Every decision is a record appended to the MetadataLog; the controller's own
view is a MetadataState fed only from committed records, exactly like a
broker's. With the Raft log (broker/raft/, KRaft's shape) every voter runs a
Controller that keeps catching up; only the active one (the Raft leader with its
own epoch committed) decides, the others answer NOT_CONTROLLER with a hint.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import Any

from .clock import Clock
from .config import NodeConfig
from .metadata import MetadataLog, MetadataRecord, MetadataState, PartitionMeta
from .protocol import (
    INELIGIBLE_REPLICA,
    INVALID_REQUEST,
    NOT_CONTROLLER,
    REQUEST_TIMED_OUT,
    STALE_STATE,
    ProtocolError,
)
from .raft.core import NotLeaderError
from .raft.driver import ProposalLost

log = logging.getLogger("broker.controller")


def assignment(brokers: tuple[str, ...], partitions: int, rf: int) -> dict[str, list[str]]:
    """Round-robin replica sets; the first replica is the preferred leader."""
    n = len(brokers)
    return {str(p): [brokers[(p + i) % n] for i in range(rf)] for p in range(partitions)}


class Controller:
    def __init__(self, cfg: NodeConfig, log: MetadataLog, clock: Clock) -> None:
        self.cfg = cfg
        self.log = log
        self.clock = clock
        self.state = MetadataState()
        self.last_seen_ms: dict[str, int] = {}
        self._logged_leaders: dict[int, str | None] = {}
        self.started_ms = clock.now_ms()
        self.last_expire_ms = self.started_ms
        self._lock = asyncio.Lock()  # one decision at a time: each reads the state it changes
        self._alter_queue: list[_Alter] = []  # ISR changes waiting for the next batch
        self.active = False  # acting as the active controller (activation done)
        self.activations = 0
        # a test control: ISR commits answer REQUEST_TIMED_OUT although they committed
        self.test_alter_times_out = False
        self._catch_up()
        for b in cfg.brokers:
            self.last_seen_ms[b] = self.started_ms

    # -- the quorum ------------------------------------------------------------
    @property
    def log_active(self) -> bool:
        """The log lets this node decide: Raft leader with its own epoch committed (a
        single-voter file log always does)."""
        return bool(getattr(self.log, "is_active", True))

    @property
    def leader(self) -> str | None:
        """The active controller as far as this node knows (None while electing)."""
        if not hasattr(self.log, "leader"):
            return self.cfg.node_id
        leader = self.log.leader
        return None if leader is None else str(leader)

    @property
    def epoch(self) -> int:
        return int(getattr(self.log, "epoch", 0))

    def quorum_view(self) -> dict[str, Any]:
        qv = getattr(self.log, "quorum_view", None)
        if qv is None:
            return {"leader": self.cfg.node_id, "epoch": 0, "role": "leader",
                    "voters": list(self.cfg.controller_quorum_voters),
                    "metadata_offset": self.log.committed_offset}
        view: dict[str, Any] = qv()
        return view

    def not_controller(self) -> ProtocolError:
        hint = self.leader
        return ProtocolError(NOT_CONTROLLER, f"{self.cfg.node_id} is not the active controller"
                             f" (epoch {self.epoch}); ask {hint or 'another voter'}",
                             extra={"controller": hint, "epoch": self.epoch})

    async def start(self) -> None:
        """Become active at once if the log allows (a single voter); else run() will."""
        async with self._lock:
            self._catch_up()
            if self.log_active:
                await self._activate()

    async def _ensure_active(self) -> None:
        """Under the lock: refuse unless active; on the first call after winning, activate."""
        if not self.log_active:
            if self.active:
                log.info("controller: %s no longer active (epoch %d, leader %s)",
                         self.cfg.node_id, self.epoch, self.leader)
            self.active = False
            raise self.not_controller()
        if not self.active:
            await self._activate()

    async def _activate(self) -> None:
        """Take over: every committed record is applied (Raft's own-epoch rule), brokers get a
        full session from now (this controller has heard no heartbeats yet and must not fence
        everyone), and the topic is created on a new cluster."""
        self._catch_up()
        now = self.clock.now_ms()
        for b in self.cfg.brokers:
            self.last_seen_ms[b] = now
        self.last_expire_ms = now
        self.started_ms = now  # first elections wait leader.election.grace.ms from here
        self.active = True
        self.activations += 1
        log.info("controller: %s is the active controller (epoch %d, metadata offset %d)",
                 self.cfg.node_id, self.epoch, self.state.offset)
        if self.state.topic is None:
            t = self.cfg.topic
            await self._commit([{"type": "topic", "name": t.name,
                                 "assignment": assignment(
                                     self.cfg.brokers, t.partitions + self.cfg.internal_partitions,
                                     t.replication_factor)}])

    # -- the log ---------------------------------------------------------------
    def _catch_up(self) -> None:
        while self.state.offset < self.log.committed_offset:
            for off, rec in self.log.read(self.state.offset):
                self.state.apply(off, rec)

    async def _commit(self, records: list[MetadataRecord]) -> None:
        if records:
            try:
                await self.log.append(records)
            except (NotLeaderError, ProposalLost) as e:  # certainly not committed
                self.active = False
                self._catch_up()
                raise self.not_controller() from e
            except TimeoutError as e:  # unknown: it may still commit; the log will tell
                self._catch_up()
                raise ProtocolError(REQUEST_TIMED_OUT, "metadata commit timed out "
                                    f"(epoch {self.epoch})") from e
            self._catch_up()
            for r in records:
                if r["type"] != "partition":
                    log.info("controller: %s", r)
                elif r["leader"] != self._logged_leaders.get(r["partition"]):
                    self._logged_leaders[r["partition"]] = r["leader"]
                    log.info("controller: p%d leader %s epoch %d isr %s", r["partition"],
                             r["leader"], r["leader_epoch"], r["isr"])

    def records_since(self, offset: int, limit: int = 100_000) -> list[tuple[int, MetadataRecord]]:
        return self.log.read(offset, limit)

    # -- elections -------------------------------------------------------------
    def _elect(self, p: PartitionMeta, exclude: frozenset[str]) -> PartitionMeta:
        """The partition after a leader election that may not pick `exclude`."""
        st = self.state
        cands = [r for r in p.replicas if r in p.isr and r not in exclude and st.alive(r)]
        isr = p.isr
        if not cands and self.cfg.settings.unclean_leader_election:
            cands = [r for r in p.replicas if r not in exclude and st.alive(r)]
            if cands:
                isr = (cands[0],)
        leader = cands[0] if cands else None
        if leader == p.leader and isr == p.isr:
            return p
        return replace(p, leader=leader, leader_epoch=p.leader_epoch + 1,
                       partition_epoch=p.partition_epoch + 1, isr=isr)

    def _elect_leaderless(self) -> list[MetadataRecord]:
        now = self.clock.now_ms()
        in_grace = now - self.started_ms < self.cfg.settings.election_grace_ms
        out = []
        for p in self.state.partitions.values():
            if p.leader is not None:
                continue
            if p.leader_epoch == 0 and in_grace and not self.state.alive(p.replicas[0]):
                continue  # first election: give the preferred replica a moment to register
            q = self._elect(p, frozenset())
            if q.leader is not None:
                out.append(q.record())
        return out

    # -- requests --------------------------------------------------------------
    async def heartbeat(self, node: str, incarnation: str,
                        metadata_offset: int) -> dict[str, Any]:
        if node not in self.cfg.brokers:
            raise ProtocolError(INVALID_REQUEST, f"{node!r} is not a broker of this cluster")
        self.last_seen_ms[node] = self.clock.now_ms()
        async with self._lock:
            await self._ensure_active()
            await self._heartbeat(node, incarnation)
        return {"records": [[o, r] for o, r in self.records_since(metadata_offset)],
                "committed": self.log.committed_offset, "controller": self.cfg.node_id,
                "epoch": self.epoch}

    async def _heartbeat(self, node: str, incarnation: str) -> None:
        b = self.state.brokers.get(node)
        if b is None or not b.alive or b.incarnation != incarnation:
            restarted = b is not None and b.alive and b.incarnation != incarnation
            await self._commit([{"type": "register", "node": node, "incarnation": incarnation}])
            recs: list[MetadataRecord] = []
            if restarted:  # a restarted leader gives up its partitions (new epoch)
                for p in self.state.partitions.values():
                    if p.leader == node:
                        q = self._elect(p, frozenset({node}))
                        if q.leader is None:
                            q = replace(p, leader_epoch=p.leader_epoch + 1,
                                        partition_epoch=p.partition_epoch + 1)
                        recs.append(q.record())
            await self._commit(recs)
        await self._commit(self._elect_leaderless())

    async def fence(self, node: str) -> None:
        """The broker's session ended: drop it from ISRs (never the last one), move its leaders."""
        async with self._lock:
            await self._ensure_active()
            await self._fence(node)

    async def _fence(self, node: str) -> None:
        """The fence and the partitions it changes are one metadata entry (Kafka's controller
        writes them in one batch): one Raft round, and a fence proposed by a leader that then
        loses its quorum takes effect with its partitions when that log is committed later,
        not a session later."""
        recs: list[MetadataRecord] = []
        if self.state.alive(node):
            recs.append({"type": "fence", "node": node})
        for p in self.state.partitions.values():
            isr = p.isr
            if node in isr and len(isr) > 1:
                isr = tuple(r for r in isr if r != node)
            q = replace(p, isr=isr)
            if p.leader == node:
                q = self._elect(q, frozenset({node}))
                if q.leader == node or q is p:
                    q = replace(q, leader=None)
                if q.leader != p.leader and q.leader_epoch == p.leader_epoch:
                    q = replace(q, leader_epoch=p.leader_epoch + 1)
            if q != p:
                recs.append(replace(q, partition_epoch=p.partition_epoch + 1).record())
        await self._commit(recs)

    async def alter_partition(self, node: str, partition: int, leader_epoch: int,
                              partition_epoch: int, isr: list[str]) -> dict[str, Any]:
        """One leader's ISR change (Kafka's AlterPartition). Changes that arrive while the
        controller is busy wait together and are committed as one metadata entry (one Raft
        round), as Kafka's leaders send every pending partition in one AlterPartition and its
        controller commits them in one batch: one entry per change, each a full Raft round,
        left a restarted broker's dozens of ISR expansions queued for seconds, and the
        heartbeats queued behind them timed out until healthy brokers were fenced."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieved)  # a caller that went away leaves no warning
        self._alter_queue.append(_Alter(node, partition, leader_epoch, partition_epoch,
                                        tuple(isr), fut))
        async with self._lock:
            if not fut.done():  # not yet decided by a batch an earlier caller committed
                await self._alter_batch()
        return await fut

    async def _alter_batch(self) -> None:
        """Under the lock: decide every queued ISR change, commit the accepted ones together."""
        batch, self._alter_queue = self._alter_queue, []
        try:
            await self._ensure_active()
        except Exception as e:  # every caller gets the refusal (NOT_CONTROLLER and its hint)
            for a in batch:
                _fail(a.fut, e)
            return
        projected: dict[int, PartitionMeta] = {}  # each partition as the batch leaves it
        records: list[MetadataRecord] = []
        accepted: list[_Alter] = []
        for a in batch:
            try:
                q = self._altered(a, projected.get(a.partition))
            except ProtocolError as e:
                _fail(a.fut, e)
                continue
            projected[a.partition] = q
            records.append(q.record())
            accepted.append(a)
        try:
            await self._commit(records)
        except Exception as e:  # not committed, or unknown (REQUEST_TIMED_OUT): all alike
            for a in accepted:
                _fail(a.fut, e)
            return
        if self.test_alter_times_out and records:
            for a in accepted:
                _fail(a.fut, ProtocolError(REQUEST_TIMED_OUT, "metadata commit timed out "
                                           f"(epoch {self.epoch}; a test control)"))
            return
        for a in accepted:
            if not a.fut.done():
                a.fut.set_result(self.state.partitions[a.partition].view())

    def _altered(self, a: _Alter, p: PartitionMeta | None) -> PartitionMeta:
        """The partition after change `a` (p: as an earlier change of this batch left it),
        or ProtocolError: the same checks as ever, against the state the batch builds."""
        partition = a.partition
        p = p or self.state.partitions.get(partition)
        if p is None:
            raise ProtocolError(INVALID_REQUEST, f"no partition {partition}")
        if (p.leader, p.leader_epoch, p.partition_epoch) != (a.node, a.leader_epoch,
                                                              a.partition_epoch):
            raise ProtocolError(STALE_STATE, f"partition {partition} is at leader {p.leader} "
                                f"epoch {p.leader_epoch}/{p.partition_epoch}")
        new_isr = tuple(r for r in p.replicas if r in a.isr)
        if a.node not in new_isr or len(new_isr) != len(set(a.isr)):
            raise ProtocolError(INVALID_REQUEST, f"isr {list(a.isr)} must be replicas and hold "
                                "the leader")
        added = set(new_isr) - set(p.isr)
        if any(not self.state.alive(r) for r in added):
            raise ProtocolError(INELIGIBLE_REPLICA,
                                f"cannot add fenced brokers {sorted(added)} to isr")
        return replace(p, isr=new_isr, partition_epoch=p.partition_epoch + 1)

    async def init_producer_id(self) -> dict[str, Any]:
        """A producer id never handed out before, even by an earlier controller: the record
        that takes it is committed to the metadata log before it is answered."""
        async with self._lock:
            await self._ensure_active()
            pid = self.state.next_producer_id
            await self._commit([{"type": "producer_id", "id": pid}])
        return {"producer_id": pid, "producer_epoch": 0}

    async def expire(self) -> None:
        """Fence brokers whose session timed out (and never-seen ones still in an ISR)."""
        async with self._lock:
            await self._ensure_active()
            await self._expire()

    async def _expire(self) -> None:
        now = self.clock.now_ms()
        timeout = self.cfg.settings.session_timeout_ms
        if now - self.last_expire_ms > timeout / 2:
            # we were stalled (paused, clock jump): heartbeats could not be heard; grace
            for node in self.cfg.brokers:
                self.last_seen_ms[node] = max(self.last_seen_ms.get(node, now), now - timeout // 2)
        self.last_expire_ms = now
        for node in self.cfg.brokers:
            if now - self.last_seen_ms.get(node, self.started_ms) <= timeout:
                continue
            in_isr = any((node in p.isr and len(p.isr) > 1) or p.leader == node
                         for p in self.state.partitions.values())
            if self.state.alive(node) or in_isr:
                await self._fence(node)
        await self._commit(self._elect_leaderless())

    async def run(self) -> None:
        """Every voter: keep applying committed records; the active one also expires sessions
        and elects leaders. Errors are logged and survived."""
        interval_s = max(0.02, self.cfg.settings.heartbeat_interval_ms / 2000)
        while True:
            await asyncio.sleep(interval_s)
            try:
                self._catch_up()
                if self.log_active or self.active:
                    await self.expire()
            except ProtocolError:
                pass  # lost the leadership or a commit timed out: try again next round
            except Exception:
                log.exception("controller round failed")

    def view(self) -> dict[str, Any]:
        return self.state.view()


@dataclass(frozen=True, slots=True)
class _Alter:
    """A queued ISR change and where its answer goes."""

    node: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[str, ...]
    fut: asyncio.Future[dict[str, Any]]


def _fail(fut: asyncio.Future[dict[str, Any]], e: BaseException) -> None:
    """Each caller raises an error of its own (one exception object raised by many tasks
    would gather their tracebacks)."""
    if fut.done():
        return
    if isinstance(e, ProtocolError):
        e = ProtocolError(e.code, str(e), extra=e.extra)
    fut.set_exception(e)


def _retrieved(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def not_controller(node: str, controller: str | None) -> ProtocolError:
    return ProtocolError(NOT_CONTROLLER, f"{node} is not a controller; ask {controller}",
                         extra={"controller": controller})
