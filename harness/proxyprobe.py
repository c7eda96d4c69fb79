"""The link proxy observing itself: a probe connection through a link, and round trips.

Why: a partition, a slow or a lossy link made by the proxy is a fault's evidence only if
it is seen acting on traffic, not only written in its table. A probe dials the link's
own listening port, as the node does, and the proxy reports what it did with that
connection: held (the link is cut: dst was never dialled), or dialled dst's real
listener (connected, refused when dst is down, or no answer when dst's process is paused
and its listen backlog full: either way the link carries traffic). The link's counters
around the probe say whether any byte crossed a cut direction meanwhile. Round trips go
through the same pipes (so the same delay, jitter and loss) to an echo listener of the
proxy's own instead of dst, since a broker does not echo: a 1-byte ping, again and again
for a time budget.

Every link is probed at once in the proxy's loop. The proxy says at once that it held
a probe (it decided not to dial: the link is cut), and the probe is called held once it
stayed so for HELD_FOR_S, so a partition costs about that and a heal a few
milliseconds; the nemesis is free again before the plan's next step (a probe that
waited out its timeout held the nemesis a second, which stretched short fault windows).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.protocols import LinkSeen

if TYPE_CHECKING:
    from harness.proxylinks import Link

PROBE_TIMEOUT_S = 1.0   # as harness.linkprobe: a probe nobody answers is given up then
HELD_FOR_S = 0.1        # a probe the proxy said it holds is called held after this long
MAX_PINGS = 50
HELD = "held"


@dataclass(slots=True)
class Probe:
    """A connection the proxy dials through one of its own links: `dialled` is set when
    the link starts dialling its upstream (`redirect`, else dst's listener), `outcome`
    when that dial is answered, `held` when the link decided not to dial (it is cut)."""

    outcome: asyncio.Future[str]
    held: asyncio.Future[None]
    redirect: str | None = None
    dialled: str | None = None


@dataclass(frozen=True, slots=True)
class LinkCounters:
    """What one link has done since it opened, and holds now: a fault's evidence."""

    blocked: tuple[str, ...]  # directions cut now: "fwd", "bwd"
    accepted: int             # connections src made
    refused: int              # of those, refused by dst's listener (dst down)
    held: int                 # open now and not dialled through: the link is cut
    sent_fwd: int             # bytes delivered src -> dst
    sent_bwd: int             # bytes delivered dst -> src
    queued: int               # bytes read and not yet delivered (held by a cut or a delay)


def counters(link: Link) -> LinkCounters:
    """The link's counters now (in the proxy's loop)."""
    return LinkCounters(
        blocked=tuple(d for d in ("fwd", "bwd") if link.shapes[d].blocked),
        accepted=link.accepted, refused=link.refused,
        held=sum(1 for c in link.conns if c.up is None and not c.connecting),
        sent_fwd=link.sent["fwd"], sent_bwd=link.sent["bwd"],
        queued=sum(len(b) for c in link.conns for p in (c.fwd, c.bwd) for _, b in p.queue))


@dataclass(frozen=True, slots=True)
class LinkProbe:
    """One probe through one link: what the proxy did with it, and the link's counters
    just before and after."""

    outcome: str  # "held", "connected to ADDR", "refused by ADDR: why",
    #               "dialled ADDR, no answer" (a paused peer's full backlog), "error: why"
    waited_ms: float
    before: LinkCounters
    after: LinkCounters

    @property
    def cut(self) -> bool:
        return self.outcome == HELD

    @property
    def flowing(self) -> bool:
        return self.outcome.startswith(("connected", "refused", "dialled"))

    def crossed_cut(self) -> int:
        """Bytes delivered, while the probe waited, in a direction that is cut."""
        moved = {"fwd": self.after.sent_fwd - self.before.sent_fwd,
                 "bwd": self.after.sent_bwd - self.before.sent_bwd}
        return sum(moved[d] for d in self.after.blocked)

    def describe(self) -> str:
        if self.cut:
            return f"held {self.waited_ms / 1e3:.1f} s"
        if self.outcome.startswith("connected"):
            return f"connected in {self.waited_ms:.0f} ms"
        if self.outcome.startswith("refused"):
            return f"refused by the peer's port in {self.waited_ms:.0f} ms"
        if self.outcome.startswith("dialled"):
            return (f"dialled the peer's port, no answer in {self.waited_ms / 1e3:.1f} s "
                    "(the peer is not accepting: paused or overloaded)")
        return self.outcome


@dataclass(frozen=True, slots=True)
class LinkTiming:
    """Round trips through one link: its outcome as a probe's, and each ping's time."""

    outcome: str
    rtts_ms: tuple[float, ...]


class _Echo(asyncio.Protocol):
    transport: Any = None  # uvloop's transports are no subclass of asyncio's

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


class Prober:
    """Probes through the links of one proxy; its methods run in the proxy's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str) -> None:
        self.loop = loop
        self.host = host
        self.echo: asyncio.Server | None = None
        self.echo_addr = ""

    async def _echo_addr(self) -> str:
        if self.echo is None:
            self.echo = await self.loop.create_server(_Echo, self.host, 0)
            self.echo_addr = f"{self.host}:{self.echo.sockets[0].getsockname()[1]}"
        return self.echo_addr

    async def _dial(self, link: Link, timeout_s: float,
                    redirect: str | None) -> tuple[str, socket.socket | None, float]:
        """Connect to the link's port as src does; the outcome once the proxy dialled
        upstream, or "held" after timeout_s. The socket is open unless it failed."""
        host, _, port = link.info.listen.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.monotonic()
        local = -1
        try:
            sock.bind((host, 0))
            local = sock.getsockname()[1]
            probe = link.probes[local] = Probe(self.loop.create_future(),
                                               self.loop.create_future(), redirect)
            await asyncio.wait_for(self.loop.sock_connect(sock, (host, int(port))), timeout_s)
            left = max(0.0, timeout_s - (time.monotonic() - t0))
            either: set[asyncio.Future[Any]] = {probe.outcome, probe.held}
            await asyncio.wait(either, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            if not probe.outcome.done() and probe.held.done():  # still held a moment later?
                left = max(0.0, timeout_s - (time.monotonic() - t0))
                await asyncio.wait({probe.outcome}, timeout=min(HELD_FOR_S, left))
            if probe.outcome.done():
                outcome = probe.outcome.result()
            else:  # held by a cut, or dialled and the peer did not answer
                outcome = HELD if probe.dialled is None else f"dialled {probe.dialled}, no answer"
        except (OSError, TimeoutError) as e:
            sock.close()
            return f"error: {type(e).__name__}: {e}", None, (time.monotonic() - t0) * 1e3
        finally:
            link.probes.pop(local, None)
        return outcome, sock, (time.monotonic() - t0) * 1e3

    async def probe(self, links: Sequence[Link], timeout_s: float) -> list[LinkProbe]:
        async def one(link: Link) -> LinkProbe:
            before = counters(link)
            outcome, sock, waited_ms = await self._dial(link, timeout_s, None)
            after = counters(link)
            if sock is not None:
                sock.close()
            return LinkProbe(outcome, waited_ms, before, after)

        return list(await asyncio.gather(*(one(link) for link in links)))

    async def round_trips(self, links: Sequence[Link], budget_s: float) -> list[LinkTiming]:
        echo = await self._echo_addr()

        async def one(link: Link) -> LinkTiming:
            outcome, sock, _ = await self._dial(link, PROBE_TIMEOUT_S, echo)
            if sock is None or not outcome.startswith("connected"):
                if sock is not None:
                    sock.close()
                return LinkTiming(outcome, ())
            rtts: list[float] = []
            deadline = time.monotonic() + budget_s
            with contextlib.closing(sock):
                while len(rtts) < MAX_PINGS and time.monotonic() < deadline:
                    t0 = time.monotonic()
                    try:
                        await self.loop.sock_sendall(sock, b"p")
                        got = await asyncio.wait_for(self.loop.sock_recv(sock, 1),
                                                     deadline - t0 + 2.0)
                    except (OSError, TimeoutError):
                        break
                    if not got:
                        break
                    rtts.append((time.monotonic() - t0) * 1e3)
            return LinkTiming(outcome, tuple(rtts))

        return list(await asyncio.gather(*(one(link) for link in links)))

    def close(self) -> None:
        if self.echo is not None:
            self.echo.close()


def counters_from(d: dict[str, Any]) -> LinkCounters:
    """LinkCounters from its asdict() (over the proxy process's pipe)."""
    return LinkCounters(**{**d, "blocked": tuple(d["blocked"])})


def probe_from(d: dict[str, Any]) -> LinkProbe:
    return LinkProbe(d["outcome"], float(d["waited_ms"]), counters_from(d["before"]),
                     counters_from(d["after"]))


def timing_from(d: dict[str, Any]) -> LinkTiming:
    return LinkTiming(d["outcome"], tuple(float(x) for x in d["rtts_ms"]))


def pair_seen(probes: Sequence[tuple[tuple[str, str], LinkProbe]]) -> LinkSeen:
    """A pair of nodes judged by the probes of its links (both ways where both exist):
    dropped when every link held its probe and no byte crossed a cut direction, flowing
    when every link dialled its peer, partial when some did and some did not."""
    if not probes:
        return LinkSeen("unknown", "no link of the proxy carries this pair")
    how = ", ".join(f"{s}->{d} {p.describe()}" for (s, d), p in probes)
    if any(p.cut for _, p in probes):
        how += f"; {sum(p.crossed_cut() for _, p in probes)} B crossed the cut"
    if any(p.outcome.startswith("error") for _, p in probes):
        return LinkSeen("unknown", how)
    if all(p.cut and p.crossed_cut() == 0 for _, p in probes):
        return LinkSeen("dropped", how)
    if all(p.flowing for _, p in probes):
        return LinkSeen("flowing", how)
    return LinkSeen("partial", how)
