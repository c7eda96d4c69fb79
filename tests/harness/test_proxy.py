"""The link proxy over real sockets: a threaded echo server behind it."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from harness.proxy import CLEAN, LinkProxy, Shape


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, EchoServer)
        with server.lock:
            server.accepted += 1
        sock = self.request
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            with server.lock:
                server.received += len(data)
            sock.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Echo)
        self.lock = threading.Lock()
        self.accepted = 0
        self.received = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    t = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy() -> Iterator[LinkProxy]:
    p = LinkProxy()
    yield p
    p.stop()


def dial(addr: str, timeout_s: float = 2.0) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout_s)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def roundtrip(s: socket.socket, msg: bytes) -> bytes:
    s.sendall(msg)
    return recv_exactly(s, len(msg))


def test_clean_link_forwards_both_ways(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    assert link.listen != echo.addr
    with dial(link.listen) as s:
        for i in range(200):
            msg = f"hello {i}".encode()
            assert roundtrip(s, msg) == msg
        big = os.urandom(3 << 20)  # more than the flow-control high water mark
        s.sendall(big[: 1 << 20])
        got = recv_exactly(s, 1 << 20)
        assert got == big[: 1 << 20]
    assert echo.accepted == 1


def test_blocked_forward_holds_bytes_until_heal(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    with dial(link.listen) as s:
        assert roundtrip(s, b"before") == b"before"
        proxy.set_shapes([("n1", "n2", Shape(blocked=True), CLEAN)])
        s.settimeout(0.3)
        s.sendall(b"during")
        with pytest.raises(TimeoutError):
            s.recv(100)
        received = echo.received
        proxy.set_shapes([("n1", "n2", CLEAN, CLEAN)])
        s.settimeout(2.0)
        assert recv_exactly(s, 6) == b"during"  # held, not lost: TCP retransmits
        assert echo.received == received + 6


def test_blocked_backward_is_one_way(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    with dial(link.listen) as s:
        assert roundtrip(s, b"x") == b"x"
        proxy.set_shapes([("n1", "n2", CLEAN, Shape(blocked=True))])
        s.settimeout(0.3)
        s.sendall(b"request")
        deadline = time.monotonic() + 2
        while echo.received < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert echo.received == 8  # the request arrived ...
        with pytest.raises(TimeoutError):
            s.recv(100)  # ... its answer did not


def test_new_connection_during_partition_never_reaches_dst(echo: EchoServer,
                                                           proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    proxy.set_shapes([("n1", "n2", Shape(blocked=True), Shape(blocked=True))])
    with dial(link.listen, timeout_s=0.3) as s:
        s.sendall(b"ping")
        with pytest.raises(TimeoutError):
            s.recv(10)
        assert echo.accepted == 0
        proxy.set_shapes([("n1", "n2", CLEAN, CLEAN)])
        s.settimeout(2.0)
        assert recv_exactly(s, 4) == b"ping"
    assert echo.accepted == 1


def test_a_dialer_that_gave_up_during_the_cut_never_reaches_dst_after_it(
        echo: EchoServer, proxy: LinkProxy) -> None:
    """Under a DROP its SYN never arrived: the heal must not dial dst for a connection
    whose dialer closed meanwhile (the proxy holds it with reading paused, FIN unread)."""
    link = proxy.add_link("n1", "n2", echo.addr)
    proxy.set_shapes([("n1", "n2", Shape(blocked=True), Shape(blocked=True))])
    dial(link.listen).close()
    still = dial(link.listen)  # and one that is still waiting is dialled at the heal
    deadline = time.monotonic() + 5
    while proxy.connection_count() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    proxy.set_shapes([("n1", "n2", CLEAN, CLEAN)])
    with still:
        assert roundtrip(still, b"up") == b"up"
    time.sleep(0.3)  # a late dial would be accepted by now
    assert echo.accepted == 1


def test_no_handshake_while_answers_are_dropped(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    proxy.set_shapes([("n1", "n2", CLEAN, Shape(blocked=True))])
    with dial(link.listen, timeout_s=0.3) as s:
        s.sendall(b"ping")
        with pytest.raises(TimeoutError):
            s.recv(10)
        assert echo.accepted == 0 and echo.received == 0
        proxy.set_shapes([("n1", "n2", CLEAN, CLEAN)])
        s.settimeout(2.0)
        assert recv_exactly(s, 4) == b"ping"


def test_delay_and_jitter_keep_order(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    proxy.set_shapes([("n1", "n2", Shape(delay_ms=100, jitter_ms=20), CLEAN)])
    with dial(link.listen) as s:
        t0 = time.monotonic()
        assert roundtrip(s, b"a") == b"a"
        assert time.monotonic() - t0 >= 0.079
        payload = b"".join(f"{i:05d}".encode() for i in range(300))
        for i in range(300):  # separate chunks, each with its own jittered delay
            s.sendall(payload[i * 5:(i + 1) * 5])
        assert recv_exactly(s, len(payload)) == payload
    proxy.set_shapes([("n1", "n2", CLEAN, CLEAN)])
    with dial(link.listen) as s:
        rtts = []
        for _ in range(5):
            t0 = time.monotonic()
            roundtrip(s, b"b")
            rtts.append(time.monotonic() - t0)
        assert min(rtts) < 0.06  # clean again (generous: the machine is loaded)


def test_loss_stalls_like_retransmission(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    proxy.set_shapes([("n1", "n2", Shape(loss=1.0), CLEAN)])
    with dial(link.listen) as s:
        t0 = time.monotonic()
        assert roundtrip(s, b"lost-once") == b"lost-once"
        assert time.monotonic() - t0 >= 0.19


def test_dst_down_resets_the_dialer(proxy: LinkProxy) -> None:
    with socket.socket() as tmp:
        tmp.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{tmp.getsockname()[1]}"
    link = proxy.add_link("n1", "n2", dead)
    host, port = link.listen.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2.0) as s:
            data = s.recv(10)
    except ConnectionError:  # reset (even during connect), as a refused connection looks
        data = b""
    assert data == b""


def test_close_propagates_and_conns_are_forgotten(echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    socks = [dial(link.listen) for _ in range(5)]
    for s in socks:
        assert roundtrip(s, b"x") == b"x"
    assert proxy.connection_count() == 5
    for s in socks:
        s.close()
    deadline = time.monotonic() + 2
    while proxy.connection_count() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.connection_count() == 0


def test_connections_abandoned_during_a_partition_are_forgotten_after_it(
        echo: EchoServer, proxy: LinkProxy) -> None:
    link = proxy.add_link("n1", "n2", echo.addr)
    old = dial(link.listen)
    assert roundtrip(old, b"x") == b"x"
    proxy.set_shapes([("n1", "n2", Shape(blocked=True), Shape(blocked=True))])
    socks = [dial(link.listen) for _ in range(5)]
    for s in socks:
        s.sendall(b"hi")
        s.close()  # the dialer gives up, as a timed-out peer does
    old.close()
    proxy.set_shapes([("n1", "n2", CLEAN, CLEAN)])
    deadline = time.monotonic() + 5
    while proxy.connection_count() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proxy.connection_count() == 0


def test_stop_frees_ports_and_thread(echo: EchoServer) -> None:
    threads_before = set(threading.enumerate())
    fds_before = len(os.listdir("/proc/self/fd"))
    p = LinkProxy()
    links = [p.add_link(f"n{i}", "n0", echo.addr) for i in range(6)]
    held = dial(links[0].listen)
    assert roundtrip(held, b"x") == b"x"
    p.stop()
    p.stop()  # idempotent
    for li in links:
        with pytest.raises(OSError):
            dial(li.listen, timeout_s=0.5).close()
    assert held.recv(10) == b""  # held connections were closed
    held.close()
    # the proxy's own threads are gone (compared by identity: a thread some earlier test left
    # behind that ends meanwhile is not ours to count); bounded wait for them to finish
    deadline = time.monotonic() + 5
    while (left := set(threading.enumerate()) - threads_before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, [t.name for t in left]
    time.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) <= fds_before
    with pytest.raises(RuntimeError):
        p.add_link("a", "b", echo.addr)
