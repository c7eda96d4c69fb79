"""A broker node's replicas and background work: metadata pull, ISR checks, checkpoints, flushes."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .clock import Clock
from .config import NodeConfig
from .fetcher import Fetcher
from .log import PartitionLog, list_partition_dirs, partition_dir
from .metadata import MetadataState, PartitionMeta
from .partition import Partition
from .rpc import Peer, RpcError

log = logging.getLogger("broker")
OFFSETS_TOPIC = "__consumer_offsets"  # its replicas are left out of dumps and tools
TXN_TOPIC = "__transaction_state"  # likewise


class Broker:
    def __init__(self, cfg: NodeConfig, clock: Clock) -> None:
        self.cfg = cfg
        self.node = cfg.node_id
        self.settings = cfg.settings
        self.clock = clock
        self.meta = MetadataState()
        self.incarnation = uuid.uuid4().hex
        self.partitions: dict[int, Partition] = {}
        self.peers: dict[str, Peer] = {}
        self.fetchers: dict[str, Fetcher] = {}
        self.fetch_paused = cfg.settings.fetcher_start_paused
        self.fetch_resumed = asyncio.Event()
        if not self.fetch_paused:
            self.fetch_resumed.set()
        self._append_waiters: list[asyncio.Future[None]] = []  # long polls until an append
        self._to_append: set[int] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._bg: set[asyncio.Task[None]] = set()
        self.registered = False
        self.metadata_held = False  # a test control: heartbeats apply no metadata meanwhile
        # the active controller: where heartbeats go now (a guess, corrected by NOT_CONTROLLER
        # hints and by falling through the voters), and the one that last answered
        self.controller_guess = cfg.controller
        self.controller_known: str | None = None
        self.controller_epoch: int | None = None
        # on a node that is also a voter: the Raft leader its own quorum member knows (None
        # while electing), set by the node's runner; controller requests then go there
        self.local_leader: Callable[[], str | None] | None = None
        self._changed: set[int] = set()
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_next = 0  # generation of the last HW snapshot taken
        self._checkpoint_gen = 0  # generation of the last one written
        for topic, pid, _d in list_partition_dirs(cfg.data_dir):
            if topic == cfg.topic.name:
                self.partition(pid)

    # -- plumbing ----------------------------------------------------------------
    def partition(self, pid: int) -> Partition:
        p = self.partitions.get(pid)
        if p is None:
            first, txns = self.cfg.topic.partitions, self.cfg.txn_pids
            if pid < first:
                d = partition_dir(self.cfg.data_dir, self.cfg.topic.name, pid)
            elif pid in txns:
                d = partition_dir(self.cfg.data_dir, TXN_TOPIC, pid - txns.start)
            else:
                d = partition_dir(self.cfg.data_dir, OFFSETS_TOPIC, pid - first)
            lg = PartitionLog(d, segment_bytes=self.settings.segment_bytes)
            p = Partition(node=self.node, pid=pid, log=lg, settings=self.settings)
            self.partitions[pid] = p
        return p

    def peer(self, node: str, channel: str = "control") -> Peer:
        """One connection per (node, channel): replica fetches never share one with
        heartbeats, so a slow long poll or a reset cannot starve the other."""
        key = f"{node}/{channel}"
        if key not in self.peers:
            self.peers[key] = Peer(self.cfg.peers[node])
        return self.peers[key]

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """A fire-and-forget task, kept referenced until it ends; its failure is logged."""
        t = asyncio.create_task(coro)
        self._bg.add(t)
        t.add_done_callback(self._task_done)

    def _task_done(self, t: asyncio.Task[None]) -> None:
        self._bg.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("background task failed", exc_info=t.exception())

    def start(self) -> None:
        for coro in (self._heartbeat_loop(), self._isr_loop(), self._checkpoint_loop(),
                     self._flush_loop(), self._expire_loop(), self._writeback_loop()):
            t = asyncio.create_task(coro)
            t.add_done_callback(self._loop_done)
            self._tasks.append(t)

    def _loop_done(self, t: asyncio.Task[None]) -> None:
        if not t.cancelled() and t.exception() is not None:
            log.critical("a broker loop died", exc_info=t.exception())

    # -- metadata ------------------------------------------------------------------
    def _next_voter(self, after: str) -> str:
        voters = self.cfg.controller_quorum_voters
        i = voters.index(after) if after in voters else -1
        return voters[(i + 1) % len(voters)]

    def _controller_moved(self, tried: str, resp: dict[str, Any] | None) -> bool:
        """`tried` is not the active controller: follow its hint, else the next voter.
        True when the hint names another node (worth asking at once)."""
        hint = (resp or {}).get("controller")
        if isinstance(hint, str) and hint != tried and hint in self.cfg.peers:
            self.controller_guess = hint
            return True
        self.controller_guess = self._next_voter(tried)
        if self.controller_known == tried:
            self.controller_known = None
        return False

    def _controller_target(self) -> str | None:
        """Where controller requests go. A broker beside a voter asks the leader that voter
        knows, and nobody while it knows none (an election): guessing through the voters
        then spent a request timeout on each cut-off one, and a controller elected meanwhile
        went unheard for up to a second (a restarted broker registered, and the new
        controller's own broker sent its ISR changes, that much later). Kafka's brokers
        likewise take the controller from their Raft client's leader. Elsewhere: the guess."""
        if self.local_leader is None:
            return self.controller_guess
        leader = self.local_leader()
        if leader is not None:
            self.controller_guess = leader
        return leader

    async def _heartbeat_loop(self) -> None:
        interval_s = self.settings.heartbeat_interval_ms / 1000
        loop = asyncio.get_running_loop()
        last_ok = loop.time()
        last_warn = 0.0
        hops = 0  # hints followed without sleeping; bounded so stale hints cannot spin
        while True:
            ctrl = self._controller_target()
            at_once = False
            if ctrl is None:  # our voter knows no leader yet: look again after an interval
                now = loop.time()
                if now - last_ok > 1.0 and now - last_warn > 1.0:
                    last_warn = now
                    log.warning("no heartbeat reply from a controller for %.1fs (electing: "
                                "this node's voter knows no leader)", now - last_ok)
                await asyncio.sleep(interval_s)
                continue
            try:
                resp = await self.peer(ctrl).call(
                    {"type": "heartbeat", "node": self.node, "incarnation": self.incarnation,
                     "metadata_offset": self.meta.offset},
                    timeout_s=max(1.0, 4 * interval_s))
                if resp.get("error") == "NOT_CONTROLLER":
                    at_once = self._controller_moved(ctrl, resp)
                elif resp.get("error"):
                    log.warning("heartbeat to %s: %s %s", ctrl, resp["error"], resp.get("message"))
                else:
                    self.registered = True
                    last_ok = loop.time()
                    if (self.controller_known, self.controller_epoch) != (ctrl, resp.get("epoch")):
                        log.info("controller is %s (epoch %s)", ctrl, resp.get("epoch"))
                    self.controller_known = ctrl
                    if isinstance(resp.get("epoch"), int):
                        self.controller_epoch = resp["epoch"]
                    if not self.metadata_held:
                        self.apply_metadata(resp["records"], int(resp["committed"]))
            except RpcError as e:
                self._controller_moved(ctrl, None)
                now = loop.time()
                if now - last_ok > 1.0 and now - last_warn > 1.0:
                    last_warn = now
                    log.warning("no heartbeat reply from a controller for %.1fs (%s: %s)",
                                now - last_ok, ctrl, e)
            except Exception:  # never let metadata handling stop the heartbeats
                log.exception("heartbeat: applying metadata failed")
            hops = hops + 1 if at_once else 0
            if not at_once or hops > len(self.cfg.controller_quorum_voters):
                hops = 0
                await asyncio.sleep(interval_s)

    def apply_metadata(self, records: list[list[Any]], committed: int) -> None:
        """Apply records; once caught up with `committed`, act on each changed partition's
        final state (never on an intermediate one, e.g. an old leadership after a restart)."""
        changed = self._changed
        for off, rec in records:
            if off != self.meta.offset:
                continue
            pid = self.meta.apply(int(off), rec)
            if rec.get("type") == "topic":
                changed.update(self.meta.partitions)
            elif pid is not None:
                changed.add(pid)
        if self.meta.offset < committed:
            return
        self._changed = set()
        for pid in sorted(changed):
            self._on_partition(pid)

    def _on_partition(self, pid: int) -> None:
        m = self.meta.partitions[pid]
        if self.node not in m.replicas:
            return
        p = self.partition(pid)
        if m.leader == self.node:
            if p.role != "leader" or m.leader_epoch > p.leader_epoch:
                p.become_leader(m, self.clock.now_ms())
                log.info("p%d: leader at epoch %d, leo %d hw %d, isr %s", pid, m.leader_epoch,
                         p.log.leo, p.log.hw, list(m.isr))
            else:
                p.update_meta(m)
            return
        if p.meta is None or p.role == "leader" or m.leader_epoch > p.leader_epoch:
            before = p.log.leo
            notes = p.become_follower(m)
            for n in notes:
                log.info("%s", n)
            log.info("p%d: follower of %s at epoch %d (leo %d -> %d, hw %d)", pid, m.leader,
                     m.leader_epoch, before, p.log.leo, p.log.hw)
            self._ensure_fetchers()
        else:
            p.update_meta(m)

    def _ensure_fetchers(self) -> None:
        leaders = {p.meta.leader for p in self.partitions.values()
                   if p.role == "follower" and p.meta is not None and p.meta.leader}
        for leader in leaders:
            f = self.fetchers.get(leader)
            if f is None:
                f = self.fetchers[leader] = Fetcher(self, leader)
            if f.task is None or f.task.done():
                f.task = asyncio.create_task(f.run())
                f.task.add_done_callback(self._loop_done)

    def fetcher_for(self, leader: str) -> Fetcher:
        if leader not in self.fetchers:
            self.fetchers[leader] = Fetcher(self, leader)
        return self.fetchers[leader]

    # -- appends -------------------------------------------------------------------
    def schedule_append(self, p: Partition) -> None:
        if not self._to_append:
            asyncio.get_running_loop().call_soon(self._do_appends)
        self._to_append.add(p.pid)

    def _do_appends(self) -> None:
        pids, self._to_append = self._to_append, set()
        for pid in pids:
            p = self.partitions[pid]
            n = p.append_pending()
            self.after_append(p, n)
        self.wake_fetchers()

    def next_append(self) -> asyncio.Future[None]:
        """Done at the next append here (a follower's long poll waits on it): a bare future,
        no task, since every replica fetch that finds nothing new waits on one."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._append_waiters.append(fut)
        return fut

    def wake_fetchers(self) -> None:
        waiters, self._append_waiters = self._append_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def after_append(self, p: Partition, n: int) -> None:
        fm = self.settings.flush_messages
        if n and fm is not None and p.log.unflushed >= fm:
            p.log.flush()

    # -- ISR -------------------------------------------------------------------
    async def alter_isr(self, p: Partition, isr: Sequence[str]) -> None:
        """Propose an ISR to the controller (Kafka's AlterPartition). Until the outcome is
        known the partition's HW waits for the union of both ISRs (Partition.maximal_isr)."""
        if p.isr_change_inflight or p.meta is None or p.role != "leader":
            return
        ctrl = self._controller_target()
        if ctrl is None:
            return  # electing: the ISR loop proposes again once a controller is known
        p.isr_change_inflight = True
        isr = list(p.propose_isr(tuple(isr)))
        m = p.meta
        try:
            resp = await self.peer(ctrl).call(
                {"type": "alter_partition", "node": self.node, "partition": p.pid,
                 "leader_epoch": m.leader_epoch, "partition_epoch": p.pending_base_epoch,
                 "isr": isr}, timeout_s=2.0)
            if resp.get("error"):
                p.isr_change_failed(str(resp["error"]))
                if resp["error"] == "NOT_CONTROLLER":
                    self._controller_moved(ctrl, resp)
                log.info("p%d: isr change to %s: %s %s%s", p.pid, isr, resp["error"],
                         resp.get("message"),
                         "; kept pending" if p.pending_maybe_applied else "")
            else:
                new = PartitionMeta(p.pid, tuple(resp["replicas"]), resp["leader"],
                                    int(resp["leader_epoch"]), int(resp["partition_epoch"]),
                                    tuple(resp["isr"]))
                if new.leader_epoch == p.leader_epoch:
                    log.info("p%d: isr %s -> %s", p.pid, list(m.isr), list(new.isr))
                    p.update_meta(new)
        except RpcError as e:
            p.isr_change_unknown()
            log.info("p%d: isr change to %s: no answer (%s); kept pending", p.pid, isr, e)
        finally:
            p.isr_change_inflight = False

    async def _isr_loop(self) -> None:
        interval_s = min(0.25, self.settings.replica_lag_time_max_ms / 4000)
        while True:
            await asyncio.sleep(interval_s)
            now = self.clock.now_ms()
            for p in list(self.partitions.values()):
                if p.role == "leader" and not p.isr_change_inflight:
                    if p.pending_isr is not None and p.pending_maybe_applied:
                        # settle it first: sent again, it is applied, or refused as stale
                        # (then the metadata brings what the controller holds)
                        self.spawn(self.alter_isr(p, p.pending_isr))
                        continue
                    lagging = p.lagging(now)
                    if lagging:
                        isr = [r for r in p.isr if r not in lagging]
                        self.spawn(self.alter_isr(p, isr))

    async def _expire_loop(self) -> None:
        """Produce timeouts: acks=all writes whose HW did not pass them in time."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(0.02)
            now = loop.time()
            for p in self.partitions.values():
                p.expire_waiters(now)

    # -- durability ------------------------------------------------------------
    def _hws_to_checkpoint(self) -> list[tuple[Partition, int]]:
        return [(p, p.log.hw) for p in self.partitions.values() if p.hw_checkpointed != p.log.hw]

    def _write_hws(self, gen: int, hws: list[tuple[Partition, int]]) -> None:
        """Write HW checkpoints taken at generation `gen`, unless a newer snapshot was
        written first (a checkpoint never goes back to an older HW); thread-safe."""
        with self._checkpoint_lock:
            if gen < self._checkpoint_gen:
                return
            self._checkpoint_gen = gen
            for p, hw in hws:
                p.log.checkpoint_hw(hw)
                p.hw_checkpointed = hw

    def checkpoint_all(self) -> None:
        self._checkpoint_next += 1
        self._write_hws(self._checkpoint_next, self._hws_to_checkpoint())

    def flush_all(self) -> None:
        for p in self.partitions.values():
            p.log.flush()

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.hw_checkpoint_interval_ms / 1000)
            hws = self._hws_to_checkpoint()
            if hws:  # the fsyncs off the event loop: replies and fetches go on meanwhile
                self._checkpoint_next += 1
                await asyncio.to_thread(self._write_hws, self._checkpoint_next, hws)

    async def _flush_loop(self) -> None:
        flush_ms = self.settings.flush_ms
        if flush_ms is None:
            return
        last: dict[int, int] = {}
        while True:
            await asyncio.sleep(max(0.01, min(flush_ms, 100) / 1000))
            now = self.clock.now_ms()
            for p in self.partitions.values():
                if p.log.unflushed and now - last.get(p.pid, 0) >= flush_ms:
                    p.log.flush()
                    last[p.pid] = now

    async def _writeback_loop(self) -> None:
        """Emulate the OS writing dirty pages back once they are os.dirty.expire.ms old
        (Linux: vm.dirty_expire_centisecs): what an OS crash can lose is then only the
        recent tail. Off (null) by default: only fsyncs make data durable."""
        expire_ms = self.settings.os_dirty_expire_ms
        if expire_ms is None:
            return
        samples: dict[int, list[tuple[int, int]]] = {}
        period_s = max(0.05, min(1.0, expire_ms / 10_000))
        while True:
            await asyncio.sleep(period_s)
            now = self.clock.now_ms()
            for p in self.partitions.values():
                hist = samples.setdefault(p.pid, [])
                hist.append((now, p.log.leo))
                durable = None
                while hist and now - hist[0][0] >= expire_ms:
                    durable = hist.pop(0)[1]
                if durable is not None:
                    p.log.mark_written_back(durable)

    def shutdown(self) -> None:
        """A clean stop: flush and checkpoint, as Kafka's controlled shutdown does."""
        for t in self._tasks:
            t.cancel()
        for f in self.fetchers.values():
            if f.task is not None:
                f.task.cancel()
        self.flush_all()
        self.checkpoint_all()
        for p in self.partitions.values():
            p.log.close()

    # -- views -----------------------------------------------------------------
    def local_view(self) -> dict[str, Any]:
        return {str(pid): p.local_view() for pid, p in sorted(self.partitions.items())
                if pid < self.cfg.topic.partitions}

    def dump_rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for pid, p in sorted(self.partitions.items()):
            if pid >= self.cfg.topic.partitions:
                continue
            epoch = p.leader_epoch if p.meta else p.log.latest_epoch
            rows.extend(p.log.dump_rows(self.node, pid, epoch))
        return rows

