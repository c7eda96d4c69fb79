"""harness.handshake against real sockets on this machine: a listener gives round trips, a
closed port and an address nobody answers give none (no claim), never a stall."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from harness.handshake import Refused, handshake_ms, resolve, time_handshakes


@pytest.fixture
def listener() -> Iterator[tuple[str, int]]:
    """A listening port that accepts and closes every connection."""
    srv = socket.create_server(("127.0.0.1", 0), backlog=128)
    srv.settimeout(0.05)  # so that the accepting thread sees `stop`
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[:2]
    finally:
        stop.set()
        srv.close()
        t.join(5)


def _closed_port() -> tuple[str, int]:
    s = socket.create_server(("127.0.0.1", 0))
    host, port = s.getsockname()[:2]
    s.close()
    return str(host), int(port)


def test_a_listener_is_timed_and_a_closed_port_is_not(listener: tuple[str, int]) -> None:
    target = resolve(listener)
    assert target is not None
    ms = handshake_ms(target)
    assert ms is not None and ms >= 0
    closed = _closed_port()
    target = resolve(closed)
    assert target is not None
    with pytest.raises(Refused):
        handshake_ms(target)
    # as many handshakes as asked, however busy the machine: late ones start at once
    got = time_handshakes({"n1": listener, "n2": closed, "n3": listener}, 0.07, max_per_node=7)
    assert len(got["n1"]) == 7 and len(got["n3"]) == 7
    assert got["n2"] == []  # refused: the node is down, no round trip and no stall


def test_an_address_that_never_answers_gives_no_round_trip() -> None:
    """192.0.2.1 (TEST-NET-1) is not routed, or routed nowhere: unreachable at once, or no
    answer within the timeout; either way nothing is timed, and nothing raises."""
    assert time_handshakes({"n1": ("192.0.2.1", 9)}, 0.1, timeout_s=0.3) == {"n1": []}
    assert time_handshakes({}, 0.1) == {}
