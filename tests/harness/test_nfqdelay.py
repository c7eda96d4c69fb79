"""harness.nfqdelay: the delay rule alone, then a real NFQUEUE in a network namespace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.nfqdelay import Delayer


class FakePacket:
    def __init__(self, name: str, released: list[tuple[str, float]]) -> None:
        self.name, self.released = name, released

    def accept(self) -> None:
        self.released.append((self.name, time.monotonic()))


def test_each_packet_is_held_for_the_delay_and_released_in_order() -> None:
    released: list[tuple[str, float]] = []
    d = Delayer(80.0, 0.0)
    timer = threading.Thread(target=d.run)
    timer.start()
    held_at = {}
    for i in range(5):
        held_at[str(i)] = time.monotonic()
        d.hold(FakePacket(str(i), released))
        time.sleep(0.01)
    time.sleep(0.3)
    d.stop()
    timer.join(5)
    assert [n for n, _ in released] == ["0", "1", "2", "3", "4"]
    for name, at in released:
        assert at - held_at[name] >= 0.079


def test_stop_releases_everything_still_held_at_once() -> None:
    released: list[tuple[str, float]] = []
    d = Delayer(10_000.0, 0.0)
    timer = threading.Thread(target=d.run)
    timer.start()
    for i in range(3):
        d.hold(FakePacket(str(i), released))
    assert d.held == 3
    t = time.monotonic()
    d.stop()
    timer.join(5)
    assert not timer.is_alive()
    assert len(released) == 3 and time.monotonic() - t < 5.0  # not after the 10 s delay


def test_jitter_stays_within_its_bounds_and_bad_values_are_refused() -> None:
    d = Delayer(50.0, 20.0, seed=1)
    assert d.delay_s == 0.05 and d.jitter_s == 0.02
    with pytest.raises(ValueError, match="must be >= 0"):
        Delayer(-1.0, 0.0)


def test_the_cli_refuses_bad_arguments() -> None:
    r = subprocess.run([sys.executable, "-m", "harness.nfqdelay", "--queue", "70000",
                        "--delay-ms", "10"], capture_output=True, text=True)
    assert r.returncode == 2 and "--queue 70000" in r.stderr


# -- a real queue in a throwaway network namespace ------------------------------------------

PORT = 9099


def _have_netns() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None \
        and shutil.which("iptables") is not None


@pytest.fixture
def netns() -> Iterator[str]:
    if not _have_netns():
        pytest.skip("needs root, ip and iptables")
    name = f"ut-nfq-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


ECHO = f"""
import socket, sys, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", {PORT})); srv.listen()
print("up", flush=True)
c, _ = srv.accept()
while (d := c.recv(100)):
    c.sendall(d)
"""

PROBE = f"""
import socket, sys, time
c = socket.create_connection(("127.0.0.1", {PORT}))
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for line in sys.stdin:
    t = time.monotonic(); c.sendall(b"x"); c.recv(1)
    print(f"{{(time.monotonic() - t) * 1000:.1f}}", flush=True)
"""


def _in(ns: str, *argv: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], text=True,
                            cwd=str(Path(__file__).resolve().parents[2]), **kw)


def test_a_real_queue_delays_a_live_connection_and_a_dead_parent_frees_it(netns: str) -> None:
    pytest.importorskip("fnfqueue")
    echo = _in(netns, sys.executable, "-c", ECHO, stdout=subprocess.PIPE)
    parent = subprocess.Popen(["sleep", "60"])
    delayer = None
    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "up"
        probe = _in(netns, sys.executable, "-c", PROBE, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE)
        assert probe.stdin is not None and probe.stdout is not None

        def rtt_ms() -> float:
            assert probe.stdin is not None and probe.stdout is not None
            probe.stdin.write("\n")
            probe.stdin.flush()
            return float(probe.stdout.readline())

        # below the 150 ms delay means not delayed: a busy machine slows every round trip
        assert rtt_ms() < 150
        subprocess.run(["ip", "netns", "exec", netns, "iptables", "-A", "OUTPUT", "-p", "tcp",
                        "--dport", str(PORT), "-j", "NFQUEUE", "--queue-num", "7",
                        "--queue-bypass"], check=True)
        assert rtt_ms() < 150  # nobody bound to the queue: bypassed, not stuck
        delayer = _in(netns, sys.executable, "-m", "harness.nfqdelay", "--queue", "7",
                      "--delay-ms", "150", "--parent", str(parent.pid), "--ready-file", "-",
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert delayer.stdout is not None
        assert delayer.stdout.readline().strip().isdigit()
        slow = [rtt_ms() for _ in range(3)]
        assert all(x >= 150 for x in slow), slow  # the connection was open before
        parent.kill()  # the harness that started it is gone ...
        delayer.wait(timeout=5)  # ... so the delayer lets everything go and exits
        assert rtt_ms() < 150
        probe.stdin.close()
        probe.wait(timeout=5)
    finally:
        for p in (echo, parent, delayer):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
