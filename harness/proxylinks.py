"""One link of the harness's link proxy (harness.proxy): its connections, and what a
fault does to their bytes.

One asyncio loop in one dedicated thread of the harness process. Each directed
link (node -> node, or clients -> node) has its own listening port on
127.0.0.1; whoever dials through that port is, by definition, `src` talking to
`dst`. A TCP connection carries bytes both ways, so each link has two
directions: `fwd` (src -> dst, the dialer's requests) and `bwd` (dst -> src,
the answers).

Faults act on directions, modelled on what the kernel does to packets:

- blocked (a partition, like iptables DROP): the proxy stops reading in that
  direction and holds what it has already read. Nothing is discarded: a TCP
  stream cannot lose bytes in the middle, and a real dropped packet is
  retransmitted, so after a heal the held bytes flow again (if the endpoints
  still wait for them). Peers see silence and time out, as with DROP. A new
  connection while either direction is blocked is accepted by the proxy's
  kernel but never reaches `dst` until the heal (the SYN, or the SYN-ACK, goes
  nowhere); an established connection keeps flowing in its open direction.
- delay_ms / jitter_ms (netem delay): every chunk is delivered after
  delay + uniform(-jitter, +jitter) ms, never before an earlier chunk (TCP does
  not reorder).
- loss (netem loss): a lost TCP segment shows up to the application as a stall
  until it is retransmitted, so with probability `loss` a chunk is held back an
  extra retransmission timeout (200 ms, doubling for consecutive losses up to
  1.6 s). Bytes are never dropped, connections never reset by loss.

A clean link forwards on a fast path: bytes go straight from one transport to
the other in the callback that read them, with flow control only.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass

from harness.proxyprobe import Probe

RTO_S = 0.2  # Linux's minimum retransmission timeout
RTO_MAX_S = 1.6
HIGH_WATER_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Shape:
    """What is done to one direction of a link."""

    blocked: bool = False
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.blocked and self.delay_ms <= 0 and self.jitter_ms <= 0 and self.loss <= 0


CLEAN = Shape()


@dataclass(frozen=True, slots=True)
class LinkInfo:
    """A link as callers see it: who dials whom, and where."""

    src: str
    dst: str
    listen: str  # host:port the src dials
    target: str  # host:port of dst's real listener


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host, int(port)


class _Pipe:
    """One direction of one proxied connection: reads `src_t`, writes `dst_t`."""

    def __init__(self, conn: _Conn, direction: str) -> None:
        self.conn = conn
        self.direction = direction
        self.src_t: asyncio.Transport | None = None
        self.dst_t: asyncio.Transport | None = None
        self.queue: deque[tuple[float, bytes]] = deque()
        self.last_at = 0.0
        self.losses = 0
        self.flow_paused = False  # dst's buffer is full
        self.reading = True
        self.eof = False  # src closed: close dst once the queue is empty
        self.timer: asyncio.TimerHandle | None = None

    @property
    def shape(self) -> Shape:
        return self.conn.link.shape(self.direction)

    def update_reading(self) -> None:
        want = not self.flow_paused and not self.shape.blocked and not self.eof
        if self.src_t is None or self.src_t.is_closing() or want == self.reading:
            return
        self.reading = want
        if want:
            self.src_t.resume_reading()
        else:
            self.src_t.pause_reading()

    def feed(self, data: bytes) -> None:
        shape = self.shape
        if shape.clean and not self.queue and self.dst_t is not None:
            self.dst_t.write(data)
            self.conn.link.sent[self.direction] += len(data)
            return
        # dated by the clock itself: loop.time() is the loop's clock as cached at the start
        # of its iteration (uvloop's in whole ms), so a delay counted from it came out
        # short by that much (79.96 ms for 80 was seen); pump compares with it, late at worst
        now = time.monotonic()
        jitter_ms = random.uniform(-shape.jitter_ms, shape.jitter_ms)
        at = now + max(0.0, shape.delay_ms + jitter_ms) / 1e3
        if shape.loss > 0 and random.random() < shape.loss:
            self.losses += 1
            at += min(RTO_MAX_S, RTO_S * 2 ** (self.losses - 1))
        else:
            self.losses = 0
        at = max(at, self.last_at)
        self.last_at = at
        self.queue.append((at, data))
        self.pump()

    def pump(self) -> None:
        """Deliver what is due; re-arm a timer for the rest."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.dst_t is None or self.dst_t.is_closing():
            return
        if self.shape.blocked:
            return  # held until the heal pumps again
        loop = self.conn.link.loop
        now = loop.time()
        while self.queue and self.queue[0][0] <= now:
            data = self.queue.popleft()[1]
            self.dst_t.write(data)
            self.conn.link.sent[self.direction] += len(data)
        if self.queue:
            self.timer = loop.call_at(self.queue[0][0], self.pump)
        elif self.eof:
            self.conn.close()

    def src_closed(self) -> None:
        self.eof = True
        if not self.queue:
            self.conn.close()


class _Side(asyncio.Protocol):
    """The protocol on one socket of a proxied connection."""

    def __init__(self, out: _Pipe, into: _Pipe) -> None:
        self.out = out  # bytes read here go out through this pipe
        self.into = into  # this pipe writes into our transport

    def data_received(self, data: bytes) -> None:
        self.out.feed(data)

    def eof_received(self) -> bool | None:
        self.out.src_closed()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.out.src_closed()

    def pause_writing(self) -> None:
        self.into.flow_paused = True
        self.into.update_reading()

    def resume_writing(self) -> None:
        self.into.flow_paused = False
        self.into.update_reading()


def _dialer_gone(down: asyncio.BaseTransport) -> bool:
    """Whether the dialer closed (or reset) a connection the proxy held during a cut: its
    reading is paused while held, so its FIN is still unread; peeked on a duplicate of the
    socket, without reading or changing it."""
    sock = down.get_extra_info("socket")
    if sock is None:
        return False
    try:
        with socket.fromfd(sock.fileno(), socket.AF_INET, socket.SOCK_STREAM) as dup:
            return dup.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False  # open, nothing sent yet
    except OSError:
        return True  # reset


class _Conn:
    """One accepted connection and its upstream: two pipes."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.fwd = _Pipe(self, "fwd")
        self.bwd = _Pipe(self, "bwd")
        self.down: asyncio.Transport | None = None
        self.up: asyncio.Transport | None = None
        self.connecting = False
        self.closed = False
        self.probe: Probe | None = None  # set when the dialer is the proxy's own probe

    def accepted(self, transport: asyncio.Transport) -> None:
        self.down = transport
        self.fwd.src_t = transport
        self.bwd.dst_t = transport
        transport.pause_reading()  # until upstream is connected
        self.fwd.reading = False
        self.link.conns.add(self)
        self.link.accepted += 1
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.probe = self.link.probes.get(int(peer[1]))
        self.maybe_connect()

    def maybe_connect(self) -> None:
        """Dial dst, unless either direction is blocked (a handshake needs both): the SYN
        or the SYN-ACK 'goes nowhere' until the heal."""
        if self.closed or self.connecting or self.up is not None:
            return
        if self.link.shape("fwd").blocked or self.link.shape("bwd").blocked:
            if self.probe is not None and not self.probe.held.done():
                self.probe.held.set_result(None)  # the proxy's own probe: say it is held
            return
        if self.down is not None and _dialer_gone(self.down):
            self.close()  # it gave up during the cut: as under a DROP, dst never hears of it
            return
        self.connecting = True
        self.link.loop.create_task(self._connect())

    async def _connect(self) -> None:
        probe = self.probe
        target = probe.redirect if probe is not None and probe.redirect else self.link.info.target
        host, port = split_addr(target)
        if probe is not None:
            probe.dialled = target
        try:
            transport, _ = await self.link.loop.create_connection(
                lambda: _Side(self.bwd, self.fwd), host, port)
        except OSError as e:
            self.link.refused += 1
            if probe is not None and not probe.outcome.done():
                probe.outcome.set_result(f"refused by {target}: {e.strerror or e}")
            self.reset()  # dst is down: the dialer sees a refused/reset connection
            return
        if probe is not None and not probe.outcome.done():
            probe.outcome.set_result(f"connected to {target}")
        self.up = transport
        if self.closed or self.down is None or self.down.is_closing():
            self.close()  # the dialer gave up while we waited (e.g. during a partition)
            return
        self.bwd.src_t = transport
        self.fwd.dst_t = transport
        for t in (transport, self.down):
            sock = t.get_extra_info("socket")
            with contextlib.suppress(OSError, RuntimeError):
                if sock is not None:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                t.set_write_buffer_limits(high=HIGH_WATER_BYTES)
        self.bwd.reading = True
        self.bwd.update_reading()
        self.fwd.update_reading()
        self.fwd.pump()

    def reset(self) -> None:
        """Close both sides with RST, as a refused or torn connection looks."""
        for t in (self.down, self.up):
            if t is not None and not t.is_closing():
                sock = t.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                t.abort()
        self._forget()

    def close(self) -> None:
        for t in (self.down, self.up):
            if t is not None and not t.is_closing():
                t.close()
        self._forget()

    def _forget(self) -> None:
        self.closed = True
        for p in (self.fwd, self.bwd):
            if p.timer is not None:
                p.timer.cancel()
                p.timer = None
        self.link.conns.discard(self)

    def reshaped(self) -> None:
        self.maybe_connect()
        for p in (self.fwd, self.bwd):
            p.update_reading()
            p.pump()


class _DownSide(_Side):
    def __init__(self, conn: _Conn) -> None:
        super().__init__(conn.fwd, conn.bwd)
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn.accepted(transport)  # type: ignore[arg-type]  # uvloop's is no subclass


class Link:
    """One directed link: its shapes, its open connections, its counters and the probes
    dialling through it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, info: LinkInfo) -> None:
        self.loop = loop
        self.info = info
        self.shapes: dict[str, Shape] = {"fwd": CLEAN, "bwd": CLEAN}
        self.conns: set[_Conn] = set()
        self.server: asyncio.Server | None = None
        self.sent = {"fwd": 0, "bwd": 0}
        self.accepted = 0
        self.refused = 0
        self.probes: dict[int, Probe] = {}  # the probe's local port -> its probe

    def shape(self, direction: str) -> Shape:
        return self.shapes[direction]

    def reshape(self, fwd: Shape, bwd: Shape) -> None:
        self.shapes = {"fwd": fwd, "bwd": bwd}
        for c in list(self.conns):
            c.reshaped()


def accepting(link: Link) -> asyncio.Protocol:
    """The protocol of a connection accepted on a link's listening port."""
    return _DownSide(_Conn(link))
