"""Namespaces per node: links cut and healed by blackhole routes; `undertow heal` removes them."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness import leftovers, netns
from harness.protocols import Run
from harness.runfiles import NEMESIS, Op, RunPaths
from harness.spec import build_spec
from nemesis.netfaults import Partition

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


ECHO = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7778))
s.listen()
c, _ = s.accept()
while data := c.recv(100):
    with open(sys.argv[2], "ab") as f:
        f.write(data)
    c.sendall(data)
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
        pairs = [("n1", "n2"), ("n2", "n1"), ("n1", "n3")]  # a partition's evidence
        assert {k: v.seen for k, v in ns.probe(pairs).items()} == {
            ("n1", "n2"): "dropped", ("n2", "n1"): "dropped", ("n1", "n3"): "flowing"}
        ns.heal(None)
        assert _reaches(ns, "n1", "n2") and _reaches(ns, "n2", "n1")
        assert {v.seen for v in ns.probe(pairs).values()} == {"flowing"}
    finally:
        for p in servers:
            p.kill()
            p.wait()
    done = leftovers.heal_all(force=True)  # as after a killed harness
    assert any("removed link" in line for line in done), done
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(name in listed for name in ns.ns.values())
    assert leftovers.heal_all(force=True) == []  # safe twice


class Misaimed(netns.Namespaces):
    """A planted miss: while `misaimed`, a cut of n2 routes an address nobody uses (in
    the nodes' subnet, on no node) into the blackhole instead of n2's."""

    misaimed = True

    def partition(self, run: Any, grudge: Mapping[str, Collection[str]]) -> None:
        real = self.addr["n2"]
        if self.misaimed:
            self.addr["n2"] = real.rsplit(".", 1)[0] + ".250"
        try:
            super().partition(run, grudge)
        finally:
            self.addr["n2"] = real


def test_a_cut_aimed_at_an_address_nobody_uses_did_not_land(state: Path, tmp_path: Path) -> None:
    """The misaimed cut leaves n1 reaching n2: the nemesis's probe from inside n1 sees
    traffic flowing, and the completion says it did not land. Aimed right, it lands."""
    ns = Misaimed("netns-miss", ("n1", "n2", "n3"))
    run = Run(spec=build_spec({}), nodes=ns.nodes, paths=RunPaths(tmp_path / "run"),
              log=logging.getLogger("test"))
    run.net = ns
    nem = Partition(1).setup(run)

    def partition() -> dict[str, object]:
        op = Op(type="invoke", process=NEMESIS, f="partition", value={"grudge": {"n1": ["n2"]}})
        return dict(nem.invoke(run, op).extra)

    try:
        ns.up()
        missed = partition()
        assert missed == {"landed": False, "evidence": "n1->n2 flowing"}, missed
        ns.heal(None)
        ns.misaimed = False
        assert partition() == {"landed": True, "evidence": "n1->n2 dropped"}
    finally:
        ns.heal(None)
        ns.down()


def test_clients_lose_a_nodes_answers_while_it_serves_them(state: Path, tmp_path: Path) -> None:
    """{"client": ["n1"]}: on a connection opened before, n1 still gets and serves each
    request (it writes it down), and its answers never come back; heal lets them through."""
    ns = netns.Namespaces("netns-answers", ("n1", "n2"))
    served = tmp_path / "served"
    server: subprocess.Popen[bytes] | None = None
    try:
        addrs = ns.up()
        server = subprocess.Popen([*ns.prefix("n1"), sys.executable, "-c", ECHO, addrs["n1"],
                                   str(served)])
        deadline = time.monotonic() + 10
        while True:
            try:
                conn = socket.create_connection((addrs["n1"], 7778), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with conn:
            conn.sendall(b"a")
            assert conn.recv(1) == b"a"
            with pytest.raises(ValueError, match="cannot drop clients' requests alone"):
                ns.partition(None, {"n1": {"client"}})
            ns.partition(None, {"client": {"n1"}})
            with pytest.raises(OSError):  # no new connection either (its SYN-ACK is lost)
                socket.create_connection((addrs["n1"], 7778), timeout=1).close()
            conn.sendall(b"b")
            with pytest.raises(TimeoutError):
                conn.recv(1)
            assert served.read_bytes() == b"ab"  # served although unanswered
            ns.heal(None)
            conn.settimeout(30)  # n1's retransmission timer decides when the answer comes
            assert conn.recv(1) == b"b"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        ns.down()
