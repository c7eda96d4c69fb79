"""ProxyNet: grudges, client links, slow/lossy rules, over a real proxy and real echo servers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from harness.net import CLIENT, ProxyNet
from harness.protocols import complete_grudge
from harness.proxy import CLEAN, LinkProxy, Shape

from .test_proxy import EchoServer, dial, recv_exactly

NODES = ("n1", "n2", "n3")
Cluster = tuple[ProxyNet, dict[str, EchoServer]]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    servers = {n: EchoServer() for n in NODES}
    for s in servers.values():
        threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True).start()
    proxy = LinkProxy()
    for src in NODES:
        for dst in NODES:
            if src != dst:
                proxy.add_link(src, dst, servers[dst].addr)
    for dst in NODES:
        proxy.add_link(CLIENT, dst, servers[dst].addr)
    yield ProxyNet(proxy, NODES), servers
    proxy.stop()
    for s in servers.values():
        s.shutdown()
        s.server_close()


def shapes(net: ProxyNet) -> dict[tuple[str, str], tuple[Shape, Shape]]:
    return {(li.src, li.dst): net.proxy.shape(li.src, li.dst) for li in net.proxy.links()}


def blocked(net: ProxyNet) -> set[tuple[str, str, str]]:
    out = set()
    for (src, dst), (fwd, bwd) in shapes(net).items():
        if fwd.blocked:
            out.add((src, dst, "fwd"))
        if bwd.blocked:
            out.add((src, dst, "bwd"))
    return out


def reaches(net: ProxyNet, src: str, dst: str, timeout_s: float = 0.3) -> bool:
    """Does an echo come back within timeout_s? (short: used for both answers)"""
    with dial(net.proxy.link(src, dst).listen, timeout_s=timeout_s) as s:
        s.sendall(b"ping")
        try:
            return recv_exactly(s, 4) == b"ping"
        except TimeoutError:
            return False


def test_one_way_grudge_blocks_packets_into_the_node(cluster: Cluster) -> None:
    net, _ = cluster
    net.partition(None, {"n1": ["n2"]})
    # n2's requests to n1 are dropped; n1's requests reach n2 but the answers are dropped.
    assert blocked(net) == {("n2", "n1", "fwd"), ("n1", "n2", "bwd")}
    assert net.in_force() == ["partition: n1 drops n2"]
    net.heal(None)
    assert blocked(net) == set()
    assert net.in_force() == []


def test_complete_grudge_cuts_both_ways_but_not_clients(cluster: Cluster) -> None:
    net, servers = cluster
    net.partition(None, complete_grudge([{"n1"}, {"n2", "n3"}]))
    assert not reaches(net, "n1", "n2")
    assert not reaches(net, "n2", "n1")
    assert not reaches(net, "n3", "n1")
    assert reaches(net, "n2", "n3", timeout_s=3)
    # a partition between nodes never cuts clients
    assert all(reaches(net, CLIENT, n, timeout_s=3) for n in NODES)
    accepted = servers["n1"].accepted
    net.heal(None)
    assert reaches(net, "n2", "n1", timeout_s=3)
    assert servers["n1"].accepted > accepted


def test_clients_are_cut_only_when_named(cluster: Cluster) -> None:
    net, _ = cluster
    net.partition(None, {"n1": [CLIENT], CLIENT: ["n2"]})
    assert blocked(net) == {(CLIENT, "n1", "fwd"), (CLIENT, "n2", "bwd")}
    assert not reaches(net, CLIENT, "n1")
    assert not reaches(net, CLIENT, "n2")
    assert reaches(net, CLIENT, "n3", timeout_s=3)
    net.partition(None, {"n3": ["n1"]})  # a new grudge replaces the old one
    assert blocked(net) == {("n1", "n3", "fwd"), ("n3", "n1", "bwd")}


def test_bad_grudges_and_nodes_are_refused(cluster: Cluster) -> None:
    net, _ = cluster
    with pytest.raises(ValueError, match=r"unknown node.*n9"):
        net.partition(None, {"n1": ["n9"]})
    with pytest.raises(ValueError, match="unknown node"):
        net.slow(None, ["n7"], 10, 0)
    with pytest.raises(ValueError, match="drop_probability"):
        net.lossy(None, ["n1"], 1.5)
    with pytest.raises(ValueError, match="must not be negative"):
        net.slow(None, ["n1"], -5, 0)
    assert blocked(net) == set() and net.grudge == {}


def test_the_grudge_in_force_and_a_failed_observation(cluster: Cluster) -> None:
    """`grudge` is what partition set; a probe or timing that cannot be made (the proxy is
    gone) says so as `unknown` evidence, and never fails the fault it judges."""
    net, _ = cluster
    net.partition(None, {"n1": ["n2"]})
    assert net.grudge == {"n1": frozenset({"n2"})}
    assert net.probe([("n1", "n2")])[("n1", "n2")].seen == "dropped"
    net.proxy.stop()
    seen = net.probe([("n1", "n2")])[("n1", "n2")]
    assert seen.seen == "unknown" and seen.how.startswith("probe failed: "), seen
    assert net.round_trips(["n1"], 0.1) == {"n1": []}


def test_slow_and_lossy_act_on_a_nodes_egress(cluster: Cluster) -> None:
    net, _ = cluster
    net.slow(None, ["n1"], 40, 5)
    net.lossy(None, ["n2"], 0.25)
    s = shapes(net)
    assert s[("n1", "n2")][0] == Shape(delay_ms=40, jitter_ms=5)  # n1 sends
    assert s[("n2", "n1")] == (Shape(loss=0.25), Shape(delay_ms=40, jitter_ms=5))
    assert s[(CLIENT, "n1")] == (CLEAN, Shape(delay_ms=40, jitter_ms=5))
    assert s[("n3", "n1")] == (CLEAN, Shape(delay_ms=40, jitter_ms=5))
    assert s[("n3", "n2")] == (CLEAN, Shape(loss=0.25))
    assert s[(CLIENT, "n3")] == (CLEAN, CLEAN)
    assert net.in_force() == ["slow n1 +40ms±5", "lossy n2 25%"]
    t0 = time.monotonic()
    assert reaches(net, CLIENT, "n1", timeout_s=2)
    assert time.monotonic() - t0 >= 0.03
    net.fast(None)
    assert all(v == (CLEAN, CLEAN) for v in shapes(net).values())
    assert net.in_force() == []


def test_complete_grudge() -> None:
    g = complete_grudge([{"n1"}, {"n2", "n3"}])
    assert g == {"n1": {"n2", "n3"}, "n2": {"n1"}, "n3": {"n1"}}
    assert complete_grudge([{"n1", "n2"}]) == {}  # one component: nobody drops anything
    with pytest.raises(ValueError, match="n2 in two components"):
        complete_grudge([{"n1", "n2"}, {"n2", "n3"}])
