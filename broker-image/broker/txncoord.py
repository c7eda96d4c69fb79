"""The transaction coordinator on a broker: the transactional.ids whose partition of the
internal transaction-state topic this broker leads (broker/txn.py holds the rules).

As with consumer groups, the state is records of that partition, replicated
like any other, and the coordinator moves with its leader: a broker that leads
the partition anew replays its log, once every record there is committed (the
HW reached the log end, so nothing it acts on can be lost to a failover), and
finishes any transaction found preparing. A state change counts, in memory and
in replies, only once its record is committed; a write that cannot be
committed unloads the partition, so the next request replays what the log holds.
A prepared transaction's markers go to each partition's leader, one request per
leader for all its partitions (`write_txn_markers`, each committed there before it
answers; this broker's own partitions are written without a request), then
Complete is written. A request
of the same id that waited for the markers acts on the completed state at once:
its own record (e.g. the next transaction's Ongoing) takes the place of
Complete, which it implies, since it is written only after every marker is
committed. So a producer's next transaction waits for its markers, not for one
more replicated write.
A consumer group's offsets join a transaction as the partition of the internal
offsets topic that holds the group (`add_offsets`, Kafka's AddOffsetsToTxn): it
gets a marker like any other, and the group coordinator, told once the marker is
committed there, commits or drops the offsets the producer sent it (broker/group.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import txn
from .internal import NOT_COORDINATOR, InternalPartitions
from .protocol import INVALID_REQUEST, NOT_CONTROLLER, NOT_LEADER, ProtocolError
from .rpc import RpcError
from .txn import TxnMeta
from .txnindex import marker_value

if TYPE_CHECKING:
    from .broker import Broker
    from .coordinator import Coordinator
    from .partition import Partition

log = logging.getLogger("broker.txn")
COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
TXNS_OFF = "TRANSACTIONS_OFF"
INVALID_TRANSACTION_TIMEOUT = "INVALID_TRANSACTION_TIMEOUT"
MARKER_TIMEOUT_S = 5.0
RETRY_S = 0.05


class TxnCoordinator(InternalPartitions):
    topic = "transaction"
    tick_s = 0.1

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker, log)
        self.txns: dict[str, TxnMeta] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        self.completing: set[str] = set()
        self.completed: dict[str, asyncio.Event] = {}  # set when a completion ends
        self.marked: dict[str, TxnMeta] = {}  # prepared states whose markers are committed
        self.waiting: dict[str, int] = {}  # requests of the id waiting for its markers
        self.groups: Coordinator | None = None  # told of markers in offsets partitions

    @property
    def pids(self) -> Sequence[int]:
        return self.cfg.txn_pids

    # -- where an id lives ------------------------------------------------------------
    def pid_of(self, tid: str) -> int:
        pids = self.cfg.txn_pids
        if not pids:
            raise ProtocolError(TXNS_OFF, "transactions are off "
                                "(settings.transaction.state.log.num.partitions is 0)")
        if not tid:
            raise ProtocolError(INVALID_REQUEST, "transactional id must not be empty")
        return pids[txn.coordinator_partition(tid, len(pids))]

    def find(self, tid: str) -> dict[str, Any]:
        return self.find_leader(self.pid_of(tid))

    def _led(self, tid: str) -> Partition:
        """The id's partition, if this broker coordinates it (loaded: replayed)."""
        return self.led(self.pid_of(tid), repr(tid))

    def _load(self, pid: int, p: Partition) -> None:
        self._unload(pid)
        if p.log.hw < p.log.leo:
            raise ProtocolError(COORDINATOR_LOAD_IN_PROGRESS, f"transaction partition {pid}: "
                                f"hw {p.log.hw} < leo {p.log.leo}")
        records = self.records(p)
        metas = txn.replay(records, self.b.clock.now_ms())
        self.txns.update(metas)
        self.loaded[pid] = p.leader_epoch
        log.info("txn: partition %d loaded at leader epoch %d: %d records, %d ids", pid,
                 p.leader_epoch, len(records), len(metas))
        for m in metas.values():
            if m.state in txn.PREPARING:
                self.b.spawn(self._complete(m.tid))

    def _unload(self, pid: int) -> None:
        self.loaded.pop(pid, None)
        for tid in [t for t in self.txns if self.pid_of(t) == pid]:
            del self.txns[tid]
            self.marked.pop(tid, None)

    def _current(self, tid: str) -> TxnMeta | None:
        """The id's state for a request: a prepared transaction whose markers are all
        committed is complete, whether or not its Complete record is written yet."""
        cur = self.txns.get(tid)
        if cur is not None and cur.state in txn.PREPARING and self.marked.get(tid) == cur:
            return txn.complete(cur)
        return cur

    def _lock(self, tid: str) -> asyncio.Lock:
        lock = self.locks.get(tid)
        if lock is None:
            lock = self.locks[tid] = asyncio.Lock()
        return lock

    # -- writes -------------------------------------------------------------------------
    async def _write(self, meta: TxnMeta) -> None:
        """Append the state with acks=all; once committed it is the id's state. Raises
        ProtocolError (NOT_COORDINATOR) when it cannot be known committed."""
        p = self._led(meta.tid)
        epoch = p.leader_epoch
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ProtocolError | None] = loop.create_future()

        def committed(err: ProtocolError | None) -> None:
            if not fut.done():
                fut.set_result(err)

        self.append_committed(p, meta.record(), committed)
        err = await fut
        if err is not None or p.role != "leader" or p.leader_epoch != epoch:
            self._unload(p.pid)  # what the log holds is replayed at the next request
            why = err.code if err else "leadership moved"
            raise ProtocolError(NOT_COORDINATOR, f"{meta.tid}: state not committed ({why})")
        self.txns[meta.tid] = meta
        self.marked.pop(meta.tid, None)

    async def _complete(self, tid: str) -> None:
        """Write the markers of a prepared transaction, then Complete, unless a request of
        the id waits for them: its own write takes Complete's place (else the tick writes
        Complete, should that request write nothing)."""
        if tid in self.completing:
            return
        self.completing.add(tid)
        ended = self.completed[tid] = asyncio.Event()
        try:
            meta = self.txns.get(tid)
            if meta is None or meta.state not in txn.PREPARING:
                return
            if self.marked.get(tid) != meta:
                pid = self.pid_of(tid)
                epoch = self.loaded.get(pid)
                ok = await self._markers(meta, pid, epoch)
                if not ok or self.txns.get(tid) != meta:
                    return
                self.marked[tid] = meta
            if self.waiting.get(tid):
                return
            async with self._lock(tid):
                if self.txns.get(tid) == meta:
                    await self._write(txn.complete(meta))
        except ProtocolError as e:
            log.info("txn %s: completion stopped: %s %s", tid, e.code, e)
        finally:
            self.completing.discard(tid)
            ended.set()
            if self.completed.get(tid) is ended:
                del self.completed[tid]

    async def _markers(self, meta: TxnMeta, pid: int, epoch: int | None) -> bool:
        """The transaction's markers, retried until each partition's leader has its marker
        committed: one request per leader for all its partitions, this broker's own written
        directly. False once this broker no longer coordinates the id (the next coordinator
        writes them)."""
        commit = meta.state == txn.PREPARE_COMMIT
        left = set(meta.partitions)
        while True:
            if epoch is None or self.loaded.get(pid) != epoch:
                return False
            here: list[Partition] = []
            remote: dict[str, list[int]] = {}
            for part in sorted(left):
                m = self.b.meta.partitions.get(part)
                p = self.b.partitions.get(part)
                if m is not None and m.leader == self.b.node and p is not None:
                    here.append(p)
                elif m is not None and m.leader is not None:
                    remote.setdefault(m.leader, []).append(part)
            done = await asyncio.gather(
                *(self._marker_here(meta, p, commit) for p in here),
                *(self._markers_at(meta, node, parts, commit) for node, parts in remote.items()))
            for parts_done in done:
                left.difference_update(parts_done)
            if not left:
                return True
            await asyncio.sleep(RETRY_S)

    async def _marker_here(self, meta: TxnMeta, p: Partition, commit: bool) -> list[int]:
        try:
            await self.write_marker(p, meta.producer_id, meta.epoch, commit)
            return [p.pid]
        except ProtocolError as e:
            log.debug("txn %s: marker to p%d: %s", meta.tid, p.pid, e.code)
            return []

    async def _markers_at(self, meta: TxnMeta, node: str, parts: list[int],
                          commit: bool) -> list[int]:
        """The markers of `parts` in one request to their leader `node`: those committed."""
        msg = {"type": "write_txn_markers", "partitions": parts,
               "producer_id": meta.producer_id, "producer_epoch": meta.epoch, "commit": commit}
        try:
            resp = await self.b.peer(node, "txn").call(msg, MARKER_TIMEOUT_S + 1)
        except RpcError:
            return []
        if resp.get("error") is not None:
            log.debug("txn %s: markers to %s: %s", meta.tid, node, resp.get("error"))
            return []
        failed = resp.get("errors") or {}
        if failed:
            log.debug("txn %s: markers to %s: %s", meta.tid, node, failed)
        return [part for part in parts if str(part) not in failed]

    async def write_marker(self, p: Partition, producer_id: int, producer_epoch: int,
                           commit: bool) -> None:
        """A transaction's commit or abort marker in `p`, led here: returns once committed
        (the HW passed it), so a failover of that partition keeps it; raises ProtocolError."""
        p.check_produce("all")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ProtocolError | None] = loop.create_future()

        def committed(_offset: int | None, err: ProtocolError | None) -> None:
            if not fut.done():
                fut.set_result(err)

        def appended(offset: int | None, err: ProtocolError | None) -> None:
            if err is not None or offset is None:
                committed(None, err or ProtocolError(NOT_LEADER, "marker not appended"))
            else:
                timeout_s = self.cfg.settings.request_timeout_ms / 1000
                p.wait_committed(offset, loop.time() + min(timeout_s, MARKER_TIMEOUT_S),
                                 committed)

        p.pending.append((marker_value(producer_id, producer_epoch, commit), None, False,
                          appended))
        self.b.schedule_append(p)
        err = await fut
        if err is not None:
            raise err
        if self.groups is not None and p.pid in self.cfg.offsets_pids:
            self.groups.txn_marker(p, producer_id, commit)

    async def _producer_id(self) -> int:
        """A producer id never handed out before, from the active controller."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        node = self.b.controller_known or self.b.controller_guess
        while loop.time() < deadline:
            try:
                resp = await self.b.peer(node).call({"type": "init_producer_id"}, 2.0)
                if resp.get("error") is None:
                    return int(resp["producer_id"])
                hint = resp.get("controller")
                if resp["error"] == NOT_CONTROLLER and isinstance(hint, str) \
                        and hint in self.cfg.peers:
                    node = hint
                    continue
            except RpcError:
                pass
            voters = self.cfg.controller_quorum_voters
            node = voters[(voters.index(node) + 1) % len(voters)] if node in voters else voters[0]
            await asyncio.sleep(RETRY_S)
        raise ProtocolError(NOT_COORDINATOR, "no producer id from the controller in time")

    async def _apply(self, step: txn.Step) -> dict[str, Any]:
        if step.write is not None:
            await self._write(step.write)
            if step.write.state in txn.PREPARING:
                self.b.spawn(self._complete(step.write.tid))
        if step.error is not None:
            return {"error": step.error, "message": step.message}
        return {}

    async def _settled(self, tid: str) -> None:
        """Let the id's previous transaction finish its markers before a request that needs
        it over (Kafka answers CONCURRENT_TRANSACTIONS and the producer asks again; waiting
        here saves the round trips). Bounded: after it the request is refused as usual."""
        ended = self.completed.get(tid)
        if ended is not None:
            self.waiting[tid] = self.waiting.get(tid, 0) + 1
            try:
                await asyncio.wait_for(ended.wait(), MARKER_TIMEOUT_S)
            except TimeoutError:
                pass
            finally:
                self.waiting[tid] -= 1
                if not self.waiting[tid]:
                    del self.waiting[tid]

    # -- requests -----------------------------------------------------------------------
    async def init(self, req: dict[str, Any]) -> dict[str, Any]:
        tid, timeout_ms = req["transactional_id"], req["timeout_ms"]
        if not 1 <= timeout_ms <= self.cfg.settings.txn_max_timeout_ms:
            raise ProtocolError(INVALID_TRANSACTION_TIMEOUT, f"timeout {timeout_ms} ms outside "
                                f"[1, {self.cfg.settings.txn_max_timeout_ms}]")
        self._led(tid)
        await self._settled(tid)
        async with self._lock(tid):
            self._led(tid)
            cur = self._current(tid)
            new_id = await self._producer_id() if cur is None else None
            step = txn.init(cur, tid, timeout_ms, new_id, self.b.clock.now_ms())
            out = await self._apply(step)
            if step.error is None and step.write is not None:
                out.update(producer_id=step.write.producer_id, producer_epoch=step.write.epoch)
            return out

    async def add_partitions(self, req: dict[str, Any], *,
                             internal: bool = False) -> dict[str, Any]:
        """`internal`: the partitions are of the offsets topic (add_offsets)."""
        tid = req["transactional_id"]
        parts = req["partitions"]
        if not internal and not all(isinstance(x, int) and 0 <= x < self.cfg.topic.partitions
                                    for x in parts):
            raise ProtocolError(INVALID_REQUEST, f"add_txn_partitions: partitions must be "
                                f"of the topic's {self.cfg.topic.partitions}")
        self._led(tid)
        await self._settled(tid)
        async with self._lock(tid):
            self._led(tid)
            step = txn.add_partitions(self._current(tid), tid, req["producer_id"],
                                      req["producer_epoch"], parts, self.b.clock.now_ms(),
                                      self.cfg.settings.txn_epoch_fencing)
            return await self._apply(step)

    async def add_offsets(self, req: dict[str, Any]) -> dict[str, Any]:
        """AddOffsetsToTxn: the partition of the offsets topic that holds `group` joins the
        transaction, so its marker decides the offsets the producer commits to the group."""
        if self.groups is None:
            raise ProtocolError(NOT_COORDINATOR, f"{self.cfg.node_id} is not a broker")
        part = self.groups.pid_of(req["group"])
        return await self.add_partitions({**req, "partitions": [part]}, internal=True)

    async def end(self, req: dict[str, Any]) -> dict[str, Any]:
        tid = req["transactional_id"]
        self._led(tid)
        async with self._lock(tid):
            self._led(tid)
            step = txn.end(self._current(tid), tid, req["producer_id"], req["producer_epoch"],
                           bool(req["commit"]), self.cfg.settings.txn_epoch_fencing)
            return await self._apply(step)

    # -- time ---------------------------------------------------------------------------
    def tick(self) -> None:
        """Unload partitions no longer led, load those led anew (their prepared transactions
        finish and their timeouts run without waiting for a request); abort transactions
        past their timeout."""
        self.drop_unled()
        for pid in self.cfg.txn_pids:
            p = self.b.partitions.get(pid)
            if p is not None and p.role == "leader" and self.loaded.get(pid) != p.leader_epoch:
                try:
                    self._load(pid, p)
                except ProtocolError:
                    pass  # its log is not all committed yet: the next tick tries again
        for meta in txn.expired(self.txns.values(), self.b.clock.now_ms()):
            if not self._lock(meta.tid).locked():
                self.b.spawn(self._expire(meta))
        for meta in list(self.txns.values()):  # a completion cut short (e.g. min ISR) resumes
            if meta.state in txn.PREPARING and meta.tid not in self.completing:
                self.b.spawn(self._complete(meta.tid))

    async def _expire(self, aborting: TxnMeta) -> None:
        async with self._lock(aborting.tid):
            cur = self.txns.get(aborting.tid)
            if cur is None or cur.state != txn.ONGOING or cur.epoch + 1 != aborting.epoch:
                return
            log.info("txn %s: timed out after %d ms: aborting", aborting.tid, cur.timeout_ms)
            try:
                await self._write(aborting)
            except ProtocolError as e:
                log.info("txn %s: timeout abort not written: %s", aborting.tid, e)
                return
        await self._complete(aborting.tid)
