"""The follower side of replication: one fetcher per leader, pulling all partitions it leads.

Each round: first, in `leader-epoch` mode, replicas that just became followers
ask the leader OffsetsForLeaderEpoch and truncate to the end of their latest
epoch; then one replica_fetch carries every partition's fetch offset (its LEO)
and leader epoch, long-polls on the leader, and appends what comes back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .protocol import OFFSET_OUT_OF_RANGE
from .rpc import RpcError

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("broker.fetcher")


class Fetcher:
    def __init__(self, broker: Broker, leader: str) -> None:
        self.broker = broker
        self.leader = leader
        self.lock = asyncio.Lock()
        self.task: asyncio.Task[None] | None = None
        self.errors = 0

    def partitions(self) -> list[Any]:
        return [p for p in self.broker.partitions.values()
                if p.role == "follower" and p.meta is not None and p.meta.leader == self.leader]

    async def run(self) -> None:
        b = self.broker
        backoff_s = 0.05
        while self.partitions():
            if b.fetch_paused:
                await b.fetch_resumed.wait()
                continue
            try:
                async with self.lock:
                    self.errors = 0
                    await self.round(b.settings.fetch_wait_max_ms)
                if self.errors:  # e.g. the leader has not seen the new epoch yet
                    await asyncio.sleep(0.05)
                backoff_s = 0.05
            except RpcError as e:
                log.debug("fetch from %s: %s", self.leader, e)
                await asyncio.sleep(backoff_s)
                backoff_s = min(1.0, backoff_s * 2)
            except Exception:  # a bad reply must not stop replication
                log.exception("fetch from %s failed", self.leader)
                await asyncio.sleep(backoff_s)
                backoff_s = min(1.0, backoff_s * 2)

    def _still_follows(self, p: Any, leader_epoch: int) -> bool:
        """p still follows this leader at the epoch a request was sent under.

        An answer that comes back after the partition moved on (a paused old leader waking
        up, KIP-320's case) describes a log that is no longer ours to match: applying it
        would cut records the new leader has since replicated and committed.
        """
        return (p.role == "follower" and p.meta is not None and p.meta.leader == self.leader
                and p.leader_epoch == leader_epoch)

    async def _truncate_by_epoch(self, p: Any) -> None:
        b = self.broker
        epoch = p.log.latest_epoch
        if epoch < 0:
            p.needs_epoch_truncation = False
            return
        leader_epoch = p.leader_epoch
        resp = await b.peer(self.leader, "fetch").call(
            {"type": "offsets_for_leader_epoch", "node": b.node, "partition": p.pid,
             "epoch": epoch, "leader_epoch": leader_epoch}, timeout_s=5.0)
        if not self._still_follows(p, leader_epoch):
            log.info("p%d: stale epoch answer from %s (epoch %d) ignored", p.pid, self.leader,
                     leader_epoch)
            return
        if resp.get("error"):
            self.errors += 1
            return  # retried next round, once metadata agrees
        end_epoch, end = int(resp["epoch"]), int(resp["end_offset"])
        target = min(end, p.log.leo) if end_epoch >= 0 else min(p.log.hw, p.log.leo)
        if end_epoch >= 0 and end_epoch < epoch:
            # KIP-279: the leader ends at an older epoch; keep only what we had of that one
            _e, ours = p.log.end_offset_for_epoch(end_epoch)
            target = min(target, ours)
        dropped = p.log.truncate(target)
        if dropped:
            log.info("p%d: epoch %d ends at %d on %s: truncated %d records",
                     p.pid, epoch, end, self.leader, dropped)
        p.needs_epoch_truncation = False

    async def round(self, max_wait_ms: int) -> dict[str, Any]:
        """One fetch from the leader for every partition it leads; returns what changed."""
        b = self.broker
        parts = self.partitions()
        for p in parts:
            if p.needs_epoch_truncation:
                await self._truncate_by_epoch(p)
        parts = [p for p in self.partitions() if not p.needs_epoch_truncation]
        if not parts:
            return {}
        sent = {p.pid: p.leader_epoch for p in parts}
        req = {"type": "replica_fetch", "node": b.node, "max_wait_ms": max_wait_ms,
               "partitions": [[p.pid, p.leader_epoch, p.log.leo] for p in parts]}
        resp = await b.peer(self.leader, "fetch").call(req, timeout_s=max_wait_ms / 1000 + 5.0)
        if resp.get("error"):
            self.errors += 1
        out: dict[str, Any] = {}
        for item in resp.get("partitions", []):
            p = b.partitions.get(int(item["partition"]))
            if p is None or p.pid not in sent or not self._still_follows(p, sent[p.pid]):
                continue
            err = item.get("error")
            if err == OFFSET_OUT_OF_RANGE and item.get("leo") is not None:
                leader_leo = int(item["leo"])
                if p.log.leo > leader_leo:  # past the leader's end: drop what it never had
                    dropped = p.log.truncate(leader_leo)
                    log.info("p%d: fetch offset past leader %s end %d: truncated %d",
                             p.pid, self.leader, leader_leo, dropped)
                continue
            if err:
                self.errors += 1
                continue
            before = p.log.leo
            p.apply_fetched(item["records"], int(item["hw"]))
            b.after_append(p, p.log.leo - before)
            out[str(p.pid)] = {"leo": p.log.leo, "hw": p.log.hw}
        return out
