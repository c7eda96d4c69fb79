"""What the group and the transaction coordinators share: state kept as records of a
partition of an internal topic, owned by that partition's leader.

A coordinator serves an id only while this broker leads the id's partition; it
loads (replays) a partition when it leads it at a new leader epoch and drops
what it loaded once it no longer does, so it moves with the partition's leader.
Its writes are appended with acks=all and count once committed (or, where a setting
says so, acks=1: once in this broker's own log).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .protocol import LEADER_NOT_AVAILABLE, ProtocolError, dumps, loads

if TYPE_CHECKING:
    from .broker import Broker
    from .partition import Partition

NOT_COORDINATOR = "NOT_COORDINATOR"
APPEND_TIMEOUT_S = 10.0


class InternalPartitions:
    """The loading, leadership and write plumbing of one internal topic's coordinator."""

    topic = "internal"  # names the topic in errors and logs
    tick_s = 0.1

    def __init__(self, broker: Broker, log: logging.Logger) -> None:
        self.b = broker
        self.cfg = broker.cfg
        self.log = log
        self.loaded: dict[int, int] = {}  # partition -> leader epoch it was loaded at
        self._task: asyncio.Task[None] | None = None

    # -- to be provided -------------------------------------------------------------------
    @property
    def pids(self) -> Sequence[int]:
        raise NotImplementedError

    def _load(self, pid: int, p: Partition) -> None:
        raise NotImplementedError

    def _unload(self, pid: int) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------
    def find_leader(self, pid: int) -> dict[str, Any]:
        """Any broker answers: the leader of the partition, as its metadata says."""
        m = self.b.meta.partitions.get(pid)
        if m is None or m.leader is None:
            raise ProtocolError(LEADER_NOT_AVAILABLE, f"{self.topic} partition {pid} has no leader")
        return {"node": m.leader, "partition": pid}

    def led(self, pid: int, what: str) -> Partition:
        """Partition `pid` if this broker leads it, loaded at its current leader epoch."""
        p = self.b.partitions.get(pid)
        if p is None or p.role != "leader":
            raise ProtocolError(NOT_COORDINATOR, f"{self.cfg.node_id} does not coordinate "
                                f"{what} ({self.topic} partition {pid})")
        if self.loaded.get(pid) != p.leader_epoch:
            self._load(pid, p)
        return p

    @staticmethod
    def records(p: Partition) -> list[dict[str, Any]]:
        """The partition's whole log as the coordinator's JSON records, in order."""
        return [rec for r in p.log.read(0, p.log.leo) if isinstance(r.value, str)
                for rec in [loads(r.value.encode())] if isinstance(rec, dict)]

    def append_committed(self, p: Partition, record: dict[str, Any],
                         done: Callable[[ProtocolError | None], None], *,
                         local: bool = False) -> None:
        """Append with acks=all; `done(None)` once committed, `done(error)` if it cannot be.
        `local`: acks=1, `done(None)` once in this broker's own log. Raises ProtocolError at
        once when the partition refuses writes (e.g. min ISR, for acks=all)."""
        loop = asyncio.get_running_loop()

        def committed(_offset: int | None, err: ProtocolError | None) -> None:
            done(err)

        def appended(offset: int | None, err: ProtocolError | None) -> None:
            if err is not None or offset is None:
                done(err or ProtocolError(NOT_COORDINATOR, "record not appended"))
            elif local:
                done(None)
            else:
                p.wait_committed(offset, loop.time() + APPEND_TIMEOUT_S, committed)

        p.check_produce("1" if local else "all")
        p.pending.append((dumps(record).decode(), None, False, appended))
        self.b.schedule_append(p)

    def drop_unled(self) -> None:
        """Unload the partitions this broker no longer leads at the epoch it loaded."""
        for pid, epoch in list(self.loaded.items()):
            p = self.b.partitions.get(pid)
            if p is None or p.role != "leader" or p.leader_epoch != epoch:
                self.log.info("%s partition %d no longer led here", self.topic, pid)
                self._unload(pid)

    def start(self) -> None:
        if self.pids and self._task is None:
            self._task = asyncio.create_task(self._tick_loop())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            try:
                self.tick()
            except Exception:  # a bug must not stop sessions and timeouts from expiring
                self.log.exception("%s: tick failed", self.topic)
