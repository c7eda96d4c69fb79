"""Runs a RaftNode on asyncio over any transport that can carry a JSON-able dict to a node.

The driver owns the node: every event (timer, message, proposal) goes through one task, so the
sans-IO node needs no locks. Each Ready is handled as the core demands: persist (fsync, off the
event loop), then send, then restore/apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from .core import NotLeaderError, RaftConfig, RaftNode, Ready
from .messages import Entry, Message, Snapshot, from_dict, to_dict
from .storage import Storage

log = logging.getLogger("broker.raft")


class RaftTransport(Protocol):
    def send(self, dest: str, message: dict[str, Any]) -> None:
        """Hand a message to the network. Must not block; may drop (Raft retries)."""
        ...


class ProposalLost(Exception):
    """The proposed record's offset was committed with another leader's record: it is gone."""


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RaftDriver:
    def __init__(
        self,
        node_id: str,
        voters: tuple[str, ...] | list[str],
        storage: Storage,
        transport: RaftTransport,
        *,
        config: RaftConfig | None = None,
        seed: int | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        on_commit: Callable[[Entry], None] | None = None,
        on_restore: Callable[[Snapshot], None] | None = None,
        snapshot_state: Callable[[], object] | None = None,
    ) -> None:
        """`on_commit` gets every committed entry in order (control entries too: skip them);
        `on_restore` replaces the state machine; `snapshot_state` (optional) returns the state
        after everything handed to on_commit, enabling snapshots past the config's threshold."""
        self.node_id = node_id
        self.voters = tuple(voters)
        self.storage = storage
        self.transport = transport
        self.config = config or RaftConfig()
        self.rng = random.Random(seed)
        self.clock_ms = clock_ms
        self.on_commit = on_commit
        self.on_restore = on_restore
        self.snapshot_state = snapshot_state
        self.node: RaftNode | None = None
        self._inbox: asyncio.Queue[tuple[str, Any, Any]] = asyncio.Queue()
        self._waiters: dict[int, tuple[int, asyncio.Future[int]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._stopping = False

    # ----- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        persisted = await asyncio.to_thread(self.storage.load)
        self.node = RaftNode(self.node_id, self.voters, persisted, config=self.config,
                             rng=self.rng, now_ms=self.clock_ms())
        await self._handle(self.node.tick(self.clock_ms()))
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"raft-{self.node_id}")

    async def stop(self) -> None:
        """Stop at once, like a crash: whatever was persisted stays, nothing else is sent."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for _, fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(NotLeaderError(self.node_id, None, self.epoch))
        self._waiters.clear()

    # ----- inputs ------------------------------------------------------------------------

    def deliver(self, src: str, message: dict[str, Any]) -> None:
        """A message from `src` arrived; raises MessageError (naming the field) if malformed."""
        self._inbox.put_nowait(("msg", src, from_dict(message)))

    async def propose(self, record: object, *, timeout_s: float = 5.0) -> int:
        """Append `record` at the leader and wait until it is committed; returns its offset.

        Raises NotLeaderError (with a leader hint), ProposalLost, or TimeoutError (unknown)."""
        placed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._inbox.put_nowait(("propose", record, placed))
        async with asyncio.timeout(timeout_s):
            offset = await placed
        committed = self._waiters[offset][1]
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(committed)
        finally:
            self._waiters.pop(offset, None)

    # ----- views -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def epoch(self) -> int:
        return 0 if self.node is None else self.node.epoch

    @property
    def leader(self) -> str | None:
        return None if self.node is None else self.node.leader

    @property
    def leader_ready(self) -> bool:
        return self.node is not None and self.node.leader_ready

    def status(self) -> dict[str, Any]:
        if self.node is None:
            return {"node": self.node_id, "role": "stopped", "voters": list(self.voters)}
        return self.node.status()

    async def wait_until(self, pred: Callable[[RaftDriver], bool], timeout_s: float) -> None:
        """Wait (bounded) until `pred(self)` holds; it is re-checked after every event."""
        async def loop() -> None:
            while not pred(self):
                self._changed.clear()
                await self._changed.wait()
        async with asyncio.timeout(timeout_s):
            await loop()

    # ----- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        node = self.node
        assert node is not None
        while not self._stopping:
            wait_ms = node.next_timer_ms() - self.clock_ms()
            item: tuple[str, Any, Any] | None = None
            if wait_ms > 0:
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait_ms / 1000):
                        item = await self._inbox.get()
            else:
                await asyncio.sleep(0)  # never starve the loop, whatever the node's timer says
                if not self._inbox.empty():
                    item = self._inbox.get_nowait()
            now = self.clock_ms()
            try:
                if item is None:
                    ready = node.tick(now)
                elif item[0] == "msg":
                    ready = node.receive(now, item[1], item[2])
                else:
                    ready = self._propose(now, item[1], item[2])
                await self._handle(ready)
                if node.next_timer_ms() <= self.clock_ms():
                    await self._handle(node.tick(self.clock_ms()))
            except Exception:
                log.exception("raft %s: the driver stops (the node now looks crashed)",
                              self.node_id)
                raise
            self._changed.set()

    def _propose(self, now: int, record: object, placed: asyncio.Future[int]) -> Ready:
        assert self.node is not None
        try:
            offset, ready = self.node.propose(now, record)
        except NotLeaderError as exc:
            if not placed.done():
                placed.set_exception(exc)
            return Ready()
        committed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters[offset] = (self.node.epoch, committed)
        if not placed.done():
            placed.set_result(offset)
        return ready

    async def _handle(self, ready: Ready) -> None:
        node = self.node
        assert node is not None
        if ready.persist:
            await asyncio.to_thread(self.storage.apply, ready.persist)
        for out in ready.messages:
            self.transport.send(out.dest, to_dict(out.message))
        if ready.restore is not None:
            if self.on_restore is not None:
                self.on_restore(ready.restore)
            for off, (_, fut) in list(self._waiters.items()):
                if off < ready.restore.end_offset and not fut.done():
                    fut.set_exception(ProposalLost(f"offset {off} was replaced by a snapshot"))
        for e in ready.committed:
            if self.on_commit is not None:
                self.on_commit(e)
            waiter = self._waiters.get(e.offset)
            if waiter is not None and not waiter[1].done():
                if waiter[0] == e.epoch:
                    waiter[1].set_result(e.offset)
                else:
                    waiter[1].set_exception(ProposalLost(
                        f"offset {e.offset} committed in epoch {e.epoch}, proposed in {waiter[0]}"))
        if self.snapshot_state is not None and node.wants_snapshot():
            await self._handle(node.take_snapshot(node.applied_offset, self.snapshot_state()))


def decode(message: dict[str, Any]) -> Message:
    """Decode a wire dict (for transports that validate before delivering)."""
    return from_dict(message)
