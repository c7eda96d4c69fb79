"""The group coordinator on a broker: the groups whose offsets partition this broker leads.

A group lives in one partition of the internal offsets topic
(`group.coordinator_partition`); that partition's leader coordinates it, so the
coordinator moves when the leader does. Group state and committed offsets are
records of that partition, replicated like any other: a broker that becomes
its leader replays the partition's log at the first request or tick after, and
carries on from there (members keep their generation; their sessions restart).
A reply that a record holds back is sent once the record is committed (the HW
passed it); if it cannot be, the member is told NOT_COORDINATOR and looks again.
With `offsets.commit.required.acks` 1 (Kafka's old setting) a
member's commit counts and is answered once in the coordinator's own log, before
it replicates: a coordinator that fails then takes it along, and its successor
serves the older offset. Offsets committed inside a transaction stay pending until the transaction
coordinator's marker is committed in the group's partition (`txn_marker`, called
by the broker that leads the partition and wrote it); a replay applies the
markers the log holds, in order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .group import UNSTABLE_OFFSET_COMMIT, Append, Effect, Group, Reply, coordinator_partition
from .internal import NOT_COORDINATOR, InternalPartitions
from .protocol import INVALID_REQUEST, ProtocolError

if TYPE_CHECKING:
    from .broker import Broker
    from .partition import Partition

log = logging.getLogger("broker.groups")
GROUPS_OFF = "GROUPS_OFF"
INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"


class Coordinator(InternalPartitions):
    topic = "offsets"
    tick_s = 0.05

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker, log)
        self.groups: dict[str, Group] = {}
        self.waiting: dict[tuple[str, str, str], asyncio.Future[dict[str, Any]]] = {}

    @property
    def pids(self) -> Sequence[int]:
        return self.cfg.offsets_pids

    # -- where a group lives -------------------------------------------------------
    def pid_of(self, group_id: str) -> int:
        pids = self.cfg.offsets_pids
        if not pids:
            raise ProtocolError(GROUPS_OFF, "consumer groups are off "
                                "(settings.offsets.topic.num.partitions is 0)")
        return pids[coordinator_partition(group_id, len(pids))]

    def find(self, group_id: str) -> dict[str, Any]:
        """Any broker answers: the leader of the group's partition, as its metadata says."""
        return self.find_leader(self.pid_of(group_id))

    def group(self, group_id: str) -> Group:
        """The group, if this broker coordinates it; a partition led anew is replayed first."""
        if not group_id:
            raise ProtocolError(INVALID_REQUEST, "group id must not be empty")
        self.led(self.pid_of(group_id), f"group {group_id!r}")
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    def _load(self, pid: int, p: Partition) -> None:
        self._unload(pid)
        records = self.records(p)
        now = self.b.clock.now_ms()
        for gid in sorted({str(r["group"]) for r in records if "group" in r}):
            self.groups[gid] = Group.replay(gid, records, now)
        self.loaded[pid] = p.leader_epoch
        log.info("groups: offsets partition %d loaded at leader epoch %d: %d records, groups %s",
                 pid, p.leader_epoch, len(records), sorted(g for g in self.groups
                                                           if self.pid_of(g) == pid))

    def _unload(self, pid: int) -> None:
        """Forget the partition's groups; whoever waits on them must look again."""
        self.loaded.pop(pid, None)
        for gid in [g for g in self.groups if self.pid_of(g) == pid]:
            del self.groups[gid]
            for key in [k for k in self.waiting if k[0] == gid]:
                self._resolve(key, {"error": NOT_COORDINATOR, "message": "coordinator moved"})

    # -- effects ----------------------------------------------------------------------
    def _resolve(self, key: tuple[str, str, str], body: dict[str, Any]) -> None:
        fut = self.waiting.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(body)

    def run(self, group_id: str, effects: Iterable[Effect]) -> None:
        for e in effects:
            if isinstance(e, Reply):
                self._resolve((group_id, e.member_id, e.kind), e.body)
            else:
                self.append(group_id, e)

    def append(self, group_id: str, app: Append, *, local: bool = False) -> asyncio.Future[bool]:
        """Append the record with acks=all (`local`: acks=1); once committed (in this log),
        what it releases goes out."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        pid = self.pid_of(group_id)
        p = self.b.partitions.get(pid)

        def failed(message: str) -> None:
            g = self.groups.get(group_id)
            if g is not None:
                self.run(group_id, g.append_failed(app.record, self.b.clock.now_ms()))
            for r in app.then:
                self._resolve((group_id, r.member_id, r.kind),
                              {"error": NOT_COORDINATOR, "message": message})
            if not done.done():
                done.set_result(False)

        def committed(err: ProtocolError | None) -> None:
            if err is not None:
                failed(f"group record not committed: {err.code}")
                return
            g = self.groups.get(group_id)
            if g is not None:
                self.run(group_id, g.appended(app.record))
            self.run(group_id, app.then)
            if not done.done():
                done.set_result(True)

        if p is None or p.role != "leader":
            failed("no longer the leader of the offsets partition")
            return done
        try:
            self.append_committed(p, app.record, committed, local=local)
        except ProtocolError as e:
            failed(f"{e.code}: {e}")
        return done

    # -- requests -----------------------------------------------------------------------
    async def _wait(self, key: tuple[str, str, str], effects_of: Any,
                    timeout_s: float) -> dict[str, Any]:
        """Register the reply `key` is owed, then act; the reply may be among the effects."""
        old = self.waiting.pop(key, None)
        if old is not None and not old.done():
            old.set_result({"error": NOT_COORDINATOR, "message": "superseded by a new request"})
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[key] = fut
        self.run(key[0], effects_of())
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return {"error": "REQUEST_TIMED_OUT", "message": f"no {key[2]} reply in time"}
        finally:
            if self.waiting.get(key) is fut:
                del self.waiting[key]

    async def join(self, req: dict[str, Any]) -> dict[str, Any]:
        gid, mid = req["group"], req["member_id"]
        session, rebalance = req["session_timeout_ms"], req["rebalance_timeout_ms"]
        s = self.cfg.settings
        if not s.group_min_session_timeout_ms <= session <= s.group_max_session_timeout_ms:
            raise ProtocolError(INVALID_SESSION_TIMEOUT, f"session timeout {session} ms outside "
                                f"[{s.group_min_session_timeout_ms}, "
                                f"{s.group_max_session_timeout_ms}]")
        protocols = req["protocols"]
        if not all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                   for x in protocols):
            raise ProtocolError(INVALID_REQUEST, "join_group: protocols must be [[name, metadata]]")
        g = self.group(gid)
        new_id = "" if mid else f"{req['client_id']}-{uuid.uuid4().hex[:12]}"
        now = self.b.clock.now_ms()
        return await self._wait(
            (gid, mid or new_id, "join"),
            lambda: g.join(mid, req["client_id"], [(n, m) for n, m in protocols], session,
                           max(rebalance, 1), now, new_id=new_id or None),
            max(rebalance, session) / 1000 + 5)

    async def sync(self, req: dict[str, Any]) -> dict[str, Any]:
        gid, mid = req["group"], req["member_id"]
        g = self.group(gid)
        now = self.b.clock.now_ms()
        m = g.members.get(mid)
        timeout_s = (m.rebalance_timeout_ms if m else 0) / 1000 + 5
        return await self._wait((gid, mid, "sync"),
                                lambda: g.sync(mid, req["generation"], req["assignments"], now),
                                timeout_s)

    async def heartbeat(self, req: dict[str, Any]) -> dict[str, Any]:
        g = self.group(req["group"])
        return g.heartbeat(req["member_id"], req["generation"], self.b.clock.now_ms())

    async def leave(self, req: dict[str, Any]) -> dict[str, Any]:
        gid = req["group"]
        body, effects = self.group(gid).leave(req["member_id"], self.b.clock.now_ms())
        self.run(gid, effects)
        return body

    async def commit(self, req: dict[str, Any]) -> dict[str, Any]:
        """offset_commit, and txn_offset_commit (a transactional producer's, pending until
        its transaction's marker: `producer_id`, `producer_epoch`)."""
        gid = req["group"]
        offsets: dict[tuple[str, int], int] = {}
        for item in req["offsets"]:
            if (not isinstance(item, list) or len(item) != 3 or not isinstance(item[0], str)
                    or not all(isinstance(x, int) and x >= 0 for x in item[1:])):
                raise ProtocolError(INVALID_REQUEST, f"{req['type']}: offsets must be "
                                    "[[topic, partition, offset]] with offsets >= 0")
            offsets[(item[0], item[1])] = item[2]
        producer = None
        if req["type"] == "txn_offset_commit":
            producer = (req["producer_id"], req["producer_epoch"])
        effects = self.group(gid).commit(req["member_id"], req["generation"], offsets,
                                         self.b.clock.now_ms(), producer)
        local = producer is None and self.cfg.settings.offsets_commit_acks == 1
        for e in effects:
            if isinstance(e, Reply):
                return e.body
            ok = await self.append(gid, Append(e.record), local=local)
            if not ok:
                return {"error": NOT_COORDINATOR, "message": "commit not replicated"}
        return {"error": None}

    async def fetch_offsets(self, req: dict[str, Any]) -> dict[str, Any]:
        """The committed offsets; with `require_stable`, refused (retriable) while a
        transaction holds offsets of a partition asked for pending (Kafka's requireStable)."""
        g = self.group(req["group"])
        wanted = [(str(t), int(p)) for t, p in req["partitions"]]
        if req.get("require_stable") and (held := g.unstable(wanted)):
            return {"error": UNSTABLE_OFFSET_COMMIT,
                    "message": f"pending transactional offsets of {held}"}
        got = g.committed(wanted)
        return {"offsets": [[t, p, got[(t, p)]] for t, p in wanted if (t, p) in got]}

    def txn_marker(self, p: Partition, producer_id: int, commit: bool) -> None:
        """A transaction marker is committed in offsets partition `p` (led here): the
        producer's pending offsets in its groups are committed or dropped. A partition not
        loaded at this leader epoch replays the marker from its log when it loads."""
        if self.loaded.get(p.pid) != p.leader_epoch:
            return
        for gid, g in self.groups.items():
            if self.pid_of(gid) == p.pid:
                g.txn_marker(producer_id, commit)

    # -- time ---------------------------------------------------------------------------
    def tick(self) -> None:
        """Unload partitions no longer led; expire sessions and missed rebalance deadlines."""
        self.drop_unled()
        now = self.b.clock.now_ms()
        for gid, g in list(self.groups.items()):
            self.run(gid, g.tick(now))
