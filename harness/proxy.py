"""The harness's own link proxy: partitions, slow and lossy links without root.

One asyncio loop in one dedicated thread of the harness process serves every link of a
run (harness.proxylinks: a link, its connections, and what each fault does to them);
callers in any thread change shapes, read counters and probe through it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from harness.proxylinks import CLEAN, Link, LinkInfo, Shape, accepting, split_addr
from harness.proxyprobe import LinkCounters, LinkProbe, LinkTiming, Prober, counters

__all__ = ["CLEAN", "LinkInfo", "LinkProxy", "Links", "Shape"]

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (several times less CPU per forwarded chunk), else asyncio's."""
    if os.environ.get("UNDERTOW_PROXY_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
        except ImportError:
            pass
    return asyncio.new_event_loop()


class Links(Protocol):
    """What ProxyNet and the backend need of a proxy: LinkProxy or ProxyProcess."""

    def add_link(self, src: str, dst: str, target: str, port: int = 0) -> LinkInfo: ...
    def links(self) -> list[LinkInfo]: ...
    def link(self, src: str, dst: str) -> LinkInfo: ...
    def shape(self, src: str, dst: str) -> tuple[Shape, Shape]: ...
    def set_shapes(self, shapes: Iterable[tuple[str, str, Shape, Shape]]) -> None: ...
    def connection_count(self) -> int: ...
    def counters(self) -> dict[tuple[str, str], LinkCounters]: ...
    def probe(self, links: Sequence[tuple[str, str]],
              timeout_s: float) -> dict[tuple[str, str], LinkProbe]: ...
    def round_trips(self, links: Sequence[tuple[str, str]],
                    budget_s: float) -> dict[tuple[str, str], LinkTiming]: ...
    def stop(self) -> None: ...


class LinkProxy:
    """All of a run's links, served by one event loop in one thread.

    Methods are called from any thread; each returns once the change is in force.
    `stop()` closes every port and connection and joins the thread; idempotent.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._links: dict[tuple[str, str], Link] = {}
        self._loop = _new_loop()
        self._thread = threading.Thread(target=self._serve, name="undertow-link-proxy",
                                        daemon=True)
        self._stopped = False
        self._probe: Prober | None = None
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()
        # stop() has closed everything; let the closing callbacks run, then close.
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()

    def _call(self, fn: Callable[[], T], timeout_s: float = 10.0) -> T:
        if self._stopped:
            raise RuntimeError("the link proxy is stopped")
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:  # handed to the calling thread
                fut.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return fut.result(timeout=timeout_s)

    def _acall(self, make: Callable[[], Any], timeout_s: float = 10.0) -> Any:
        if self._stopped:
            raise RuntimeError("the link proxy is stopped")
        return asyncio.run_coroutine_threadsafe(make(), self._loop).result(timeout=timeout_s)

    def add_link(self, src: str, dst: str, target: str, port: int = 0) -> LinkInfo:
        """Open a port (`port`, or one the kernel picks) that carries src's connections
        to dst's listener at `target`."""
        if (src, dst) in self._links:
            raise ValueError(f"link {src}->{dst} exists already")
        split_addr(target)

        async def open_link() -> LinkInfo:
            link = Link(self._loop, LinkInfo(src, dst, "", target))
            server = await self._loop.create_server(lambda: accepting(link),
                                                    self.host, port, backlog=256)
            bound = server.sockets[0].getsockname()[1]
            link.server = server
            link.info = LinkInfo(src, dst, f"{self.host}:{bound}", target)
            self._links[(src, dst)] = link
            return link.info

        info: LinkInfo = self._acall(open_link)
        return info

    def links(self) -> list[LinkInfo]:
        return [link.info for link in self._links.values()]

    def link(self, src: str, dst: str) -> LinkInfo:
        return self._links[(src, dst)].info

    def shape(self, src: str, dst: str) -> tuple[Shape, Shape]:
        s = self._links[(src, dst)].shapes
        return s["fwd"], s["bwd"]

    def set_shapes(self, shapes: Iterable[tuple[str, str, Shape, Shape]]) -> None:
        """Set (src, dst, fwd, bwd) for many links at once, atomically for the loop."""
        todo = list(shapes)
        for src, dst, _, _ in todo:
            if (src, dst) not in self._links:
                raise KeyError(f"no link {src}->{dst}")

        def apply() -> None:
            for src, dst, fwd, bwd in todo:
                self._links[(src, dst)].reshape(fwd, bwd)

        self._call(apply)

    def connection_count(self) -> int:
        return self._call(lambda: sum(len(link.conns) for link in self._links.values()))

    def counters(self) -> dict[tuple[str, str], LinkCounters]:
        return self._call(lambda: {k: counters(link) for k, link in self._links.items()})

    def _prober(self) -> Prober:
        if self._probe is None:
            self._probe = Prober(self._loop, self.host)
        return self._probe

    def probe(self, links: Sequence[tuple[str, str]],
              timeout_s: float) -> dict[tuple[str, str], LinkProbe]:
        """A probe connection through each link at once (harness.proxyprobe)."""
        todo = [self._links[k] for k in links]
        prober = self._prober()
        got = self._acall(lambda: prober.probe(todo, timeout_s), timeout_s + 10.0)
        return dict(zip(links, got, strict=True))

    def round_trips(self, links: Sequence[tuple[str, str]],
                    budget_s: float) -> dict[tuple[str, str], LinkTiming]:
        """1-byte round trips through each link at once, for about budget_s."""
        todo = [self._links[k] for k in links]
        prober = self._prober()
        got = self._acall(lambda: prober.round_trips(todo, budget_s), budget_s + 15.0)
        return dict(zip(links, got, strict=True))

    def stop(self) -> None:
        """Close every port and connection, end the thread. Never raises."""
        if self._stopped:
            return

        async def close_all() -> None:
            if self._probe is not None:
                self._probe.close()
            for link in self._links.values():
                if link.server is not None:
                    link.server.close()
                for c in list(link.conns):
                    c.close()
                    for t in (c.down, c.up):
                        if t is not None:
                            t.abort()
            for link in self._links.values():
                if link.server is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(link.server.wait_closed(), 2.0)

        try:
            self._acall(close_all)
        except Exception:
            pass
        self._stopped = True
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5.0)

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
