"""Namespaces per node: links cut and healed by blackhole routes; `undertow heal` removes them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import leftovers, netns

pytestmark = pytest.mark.skipif(netns.supported() is not None,
                                reason=f"netns: {netns.supported()}")

SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7777))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"hi")
    c.close()
"""
CLIENT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 7777), timeout=1).recv(2)
except OSError:
    sys.exit(1)
"""


def _reaches(ns: netns.Namespaces, src: str | None, dst: str) -> bool:
    cmd = [*(ns.prefix(src) if src else []), sys.executable, "-c", CLIENT, ns.addr[dst]]
    return subprocess.run(cmd, timeout=10, check=False).returncode == 0


def test_partition_heal_and_leftovers(state: Path) -> None:
    ns = netns.Namespaces("netns-test", ("n1", "n2", "n3"))
    servers: list[subprocess.Popen[bytes]] = []
    try:
        addrs = ns.up()
        assert len(set(addrs.values())) == 3
        for n in ns.nodes:
            servers.append(subprocess.Popen([*ns.prefix(n), sys.executable, "-c", SERVER,
                                             addrs[n]]))
        time.sleep(0.5)
        assert all(_reaches(ns, a, b) for a in ns.nodes for b in ns.nodes if a != b)
        ns.partition(None, {"n1": {"n2"}})
        assert not _reaches(ns, "n1", "n2") and not _reaches(ns, "n2", "n1")
        assert _reaches(ns, "n1", "n3") and _reaches(ns, None, "n1")  # the harness is never cut
        ns.heal(None)
        assert _reaches(ns, "n1", "n2") and _reaches(ns, "n2", "n1")
    finally:
        for p in servers:
            p.kill()
            p.wait()
    done = leftovers.heal_all(force=True)  # as after a killed harness
    assert any("removed link" in line for line in done), done
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(name in listed for name in ns.ns.values())
    assert leftovers.heal_all(force=True) == []  # safe twice
