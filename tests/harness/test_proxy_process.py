"""The link proxy in a child process: same behaviour over the pipe, gone with its stdin."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from harness import leftovers
from harness.net import ProxyNet
from harness.proxy import CLEAN, Shape
from harness.proxy_process import ProxyProcess

from .test_proxy import EchoServer, dial, recv_exactly, roundtrip


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_forwards_blocks_and_heals_over_the_pipe(echo: EchoServer) -> None:
    p = ProxyProcess()
    try:
        link = p.add_link("n1", "n2", echo.addr)
        assert p.link("n1", "n2") == link and p.links() == [link]
        with dial(link.listen) as s:
            assert roundtrip(s, b"hello") == b"hello"
            assert p.connection_count() == 1
            p.set_shapes([("n1", "n2", Shape(blocked=True), CLEAN)])
            assert p.shape("n1", "n2") == (Shape(blocked=True), CLEAN)
            s.settimeout(0.3)
            s.sendall(b"held")
            with pytest.raises(TimeoutError):
                s.recv(10)
            ProxyNet(p, ["n1", "n2"]).heal(None)
            s.settimeout(3)
            assert recv_exactly(s, 4) == b"held"
        with pytest.raises(RuntimeError, match="exists already"):
            p.add_link("n1", "n2", echo.addr)  # the child's error comes back by name
    finally:
        p.stop()
    assert p.proc.returncode == 0
    with pytest.raises(OSError):
        dial(link.listen, timeout_s=0.5).close()
    p.stop()  # idempotent
    with pytest.raises(RuntimeError, match="stopped"):
        p.connection_count()


def test_the_child_exits_when_its_stdin_closes(echo: EchoServer) -> None:
    p = ProxyProcess()
    start = leftovers.proc_start_time(p.pid)
    assert p.proc.stdin is not None
    p.proc.stdin.close()  # as when the harness dies
    assert p.proc.wait(timeout=10) == 0
    assert not leftovers.same_process(p.pid, start)


def test_a_stuck_child_times_out_and_a_late_answer_is_skipped(echo: EchoServer) -> None:
    p = ProxyProcess()
    try:
        p.add_link("n1", "n2", echo.addr)
        os.kill(p.pid, signal.SIGSTOP)
        with pytest.raises(RuntimeError, match="no answer within"):
            p._rpc("connection_count", timeout_s=0.3)
        os.kill(p.pid, signal.SIGCONT)
        assert p.connection_count() == 0  # the late answer to the first call is skipped
        p.set_shapes([("n1", "n2", Shape(blocked=True), CLEAN)])
    finally:
        os.kill(p.pid, signal.SIGCONT)
        p.stop()
