"""The link proxy in a child process: same behaviour over the pipe, gone with its stdin."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import asdict

import pytest

from harness import leftovers
from harness.net import ProxyNet
from harness.proxy import CLEAN, LinkProxy, Shape
from harness.proxy_process import ProxyProcess, serve
from harness.proxyprobe import counters_from, probe_from, timing_from

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


def test_the_child_s_commands_and_errors(echo: EchoServer) -> None:
    """serve(), the child's side of the pipe, on a real proxy in this process: every
    command's answer carries the request's id; a bad line or an unknown op is an error
    answer, never the end of the loop."""
    proxy = LinkProxy()
    try:
        requests = [
            {"op": "ping", "id": 1},
            {"op": "add_link", "id": 2, "src": "n1", "dst": "n2", "target": echo.addr},
            {"op": "set_shapes", "id": 3,
             "shapes": [["n1", "n2", asdict(Shape(blocked=True)), asdict(CLEAN)]]},
            {"op": "probe", "id": 4, "links": [["n1", "n2"]], "probe_timeout_s": 0.3},
            {"op": "set_shapes", "id": 5, "shapes": [["n1", "n2", asdict(CLEAN), asdict(CLEAN)]]},
            {"op": "round_trips", "id": 6, "links": [["n1", "n2"]], "budget_s": 0.2},
            {"op": "counters", "id": 7},
            {"op": "connection_count", "id": 8},
            {"op": "add_link", "id": 9, "src": "n1", "dst": "n2", "target": echo.addr},
            {"op": "reboot", "id": 10},
        ]
        lines = [json.dumps(r) + "\n" for r in requests] + ["not json\n"]
        out = io.StringIO()
        serve(proxy, io.StringIO("".join(lines)), out)
    finally:
        proxy.stop()
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [a["id"] for a in answers] == [*range(1, 11), None]
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["result"] == "pong"
    assert by_id[2]["result"]["src"] == "n1" and by_id[2]["result"]["target"] == echo.addr
    assert probe_from(by_id[4]["result"][0]).cut  # held by the cut link
    timing = timing_from(by_id[6]["result"][0])
    assert timing.outcome.startswith("connected") and timing.rtts_ms, timing
    (src, dst, seen), = by_id[7]["result"]
    assert (src, dst) == ("n1", "n2") and counters_from(seen).accepted >= 2
    assert isinstance(by_id[8]["result"], int)
    assert "exists already" in by_id[9]["error"]
    assert by_id[10]["error"] == "ValueError: unknown op 'reboot'"
    assert answers[-1]["error"].startswith("JSONDecodeError")


def test_probes_counters_and_round_trips_come_back_over_the_pipe(echo: EchoServer) -> None:
    p = ProxyProcess()
    try:
        p.add_link("n1", "n2", echo.addr)
        p.set_shapes([("n1", "n2", Shape(blocked=True), CLEAN)])
        assert p.probe([("n1", "n2")], 0.3)[("n1", "n2")].cut
        p.set_shapes([("n1", "n2", CLEAN, CLEAN)])
        timing = p.round_trips([("n1", "n2")], 0.2)[("n1", "n2")]
        assert timing.outcome.startswith("connected") and timing.rtts_ms, timing
        seen = p.counters()[("n1", "n2")]
        assert seen.blocked == () and seen.accepted >= 2
    finally:
        p.stop()
