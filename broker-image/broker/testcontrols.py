"""The test controls of a node's port (off unless settings.test.controls.enable): pause,
resume or step the replica fetchers, checkpoint or flush every log, fence a broker, hold
a broker's metadata, answer the controller's ISR commits REQUEST_TIMED_OUT.

Requests that only tests send, kept apart from the protocol's own handlers in server.py;
each asks the server for its broker or controller as the protocol's handlers do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .protocol import DISABLED, INVALID_REQUEST, ProtocolError

if TYPE_CHECKING:
    from .server import Server


class TestControls:
    """The `test_*` requests of one server."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def _on(self) -> None:
        if not self.server.cfg.settings.test_controls:
            raise ProtocolError(DISABLED, "test controls are off (settings.test.controls.enable)")

    async def test_fetcher(self, req: dict[str, Any]) -> dict[str, Any]:
        self._on()
        b = self.server._broker()
        action = req["action"]
        if action == "pause":
            b.fetch_paused = True
            b.fetch_resumed.clear()
            return {}
        if action == "resume":
            b.fetch_paused = False
            b.fetch_resumed.set()
            b._ensure_fetchers()
            return {}
        if action == "step":
            result: dict[str, Any] = {}
            leaders = sorted({p.meta.leader for p in b.partitions.values()
                              if p.role == "follower" and p.meta and p.meta.leader})
            for leader in leaders:
                f = b.fetcher_for(leader)
                async with f.lock:
                    result[leader] = await f.round(0)
            return {"fetched": result}
        raise ProtocolError(INVALID_REQUEST, f"test_fetcher: action {action!r} is not "
                            "pause, resume or step")

    async def test_checkpoint(self, req: dict[str, Any]) -> dict[str, Any]:
        self._on()
        self.server._broker().checkpoint_all()
        return {}

    async def test_flush(self, req: dict[str, Any]) -> dict[str, Any]:
        self._on()
        self.server._broker().flush_all()
        return {}

    async def test_fence(self, req: dict[str, Any]) -> dict[str, Any]:
        self._on()
        c = self.server._controller()
        if req["node"] not in self.server.cfg.brokers:
            raise ProtocolError(INVALID_REQUEST, f"test_fence: no broker {req['node']!r}")
        await c.fence(req["node"])
        c.last_seen_ms[req["node"]] = self.server.clock.now_ms()
        return {"metadata": c.view()}

    async def test_metadata(self, req: dict[str, Any]) -> dict[str, Any]:
        """Hold (or apply again) the metadata a broker's heartbeats bring: it keeps its
        session but acts on no controller decision, e.g. an ISR change it was not told of."""
        self._on()
        b = self.server._broker()
        action = req["action"]
        if action not in ("hold", "apply"):
            raise ProtocolError(INVALID_REQUEST, f"test_metadata: action {action!r} is not "
                                "hold or apply")
        b.metadata_held = action == "hold"
        return {}

    async def test_alter_timeout(self, req: dict[str, Any]) -> dict[str, Any]:
        """The active controller's ISR commits answer REQUEST_TIMED_OUT ("it may still
        commit") although they committed, as when a commit outlives the request's timeout
        (on: bool)."""
        self._on()
        c = self.server._controller()
        c.test_alter_times_out = bool(req["on"])
        return {}
