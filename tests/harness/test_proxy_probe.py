"""The link proxy observing its own faults: probes through its links, its counters, round
trips; over real proxies (in a thread and in its own process) and real echo servers."""

from __future__ import annotations

import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from harness.net import CLIENT, ProxyNet
from harness.proxy import CLEAN, LinkProxy, Links, Shape
from harness.proxy_process import ProxyProcess

from .test_proxy import EchoServer, dial, recv_exactly, roundtrip

NODES = ("n1", "n2", "n3")
Cluster = tuple[ProxyNet, dict[str, EchoServer]]


def accepted_by(servers: dict[str, EchoServer], want: dict[str, int]) -> dict[str, int]:
    """Each echo server's accepted count once it reaches `want` (or after 10 s): a probe
    is "connected" when the kernel completes the handshake, and the server's thread
    accepts it whenever it is next scheduled."""
    deadline = time.monotonic() + 10.0
    while True:
        got = {n: s.accepted for n, s in servers.items()}
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def _cluster(proxy: Links) -> Iterator[Cluster]:
    servers = {n: EchoServer() for n in NODES}
    for s in servers.values():
        threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True).start()
    try:
        for src in (*NODES, CLIENT):
            for dst in NODES:
                if src != dst:
                    proxy.add_link(src, dst, servers[dst].addr)
        yield ProxyNet(proxy, NODES), servers
    finally:
        proxy.stop()
        for s in servers.values():
            s.shutdown()
            s.server_close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    yield from _cluster(LinkProxy())


@pytest.fixture
def child_cluster() -> Iterator[Cluster]:
    yield from _cluster(ProxyProcess())


def test_a_cut_is_seen_held_and_a_heal_flowing_in_the_proxy_process(
        child_cluster: Cluster) -> None:
    """Through the proxy's own process, as the default run has it: a one-way grudge holds
    the probes of both links of the pair, no byte crosses the cut while a node keeps
    sending on it, and once healed the probes reach the peer's real listener."""
    net, servers = child_cluster
    with dial(net.proxy.link("n2", "n1").listen) as s:
        assert roundtrip(s, b"up") == b"up"
        net.partition(None, {"n1": ["n2"]})  # n1 drops n2: n2->n1 requests, n1->n2 answers
        s.sendall(b"during the cut")
        accepted = {n: s.accepted for n, s in servers.items()}
        seen = net.probe([("n1", "n2"), ("n1", "n3")])
        cut, free = seen[("n1", "n2")], seen[("n1", "n3")]
        assert cut.seen == "dropped", cut
        assert re.fullmatch(r"n1->n2 held 0\.\d s, n2->n1 held 0\.\d s; 0 B crossed the cut",
                            cut.how), cut.how
        assert free.seen == "flowing", free
        assert re.fullmatch(r"n1->n3 connected in \d+ ms, n3->n1 connected in \d+ ms",
                            free.how), free.how
        # dialled the real listeners of n1 and n3, never n2's through the cut
        want = {**accepted, "n1": accepted["n1"] + 1, "n3": accepted["n3"] + 1}
        assert accepted_by(servers, want) == want
        counters = net.proxy.counters()
        assert counters[("n2", "n1")].blocked == ("fwd",)
        assert counters[("n1", "n2")].blocked == ("bwd",)
        assert counters[("n2", "n1")].queued == 0  # not read at all: held in the kernel
        before = counters[("n2", "n1")].sent_fwd
        net.heal(None)
        s.settimeout(3.0)
        assert recv_exactly(s, 14) == b"during the cut"  # held, then delivered
    assert accepted_by(servers, want) == want  # s was connected all along: no new dial
    accepted = want
    healed = net.probe([("n1", "n2")])[("n1", "n2")]
    assert healed.seen == "flowing", healed
    assert healed.how.startswith("n1->n2 connected in ") and ", n2->n1 connected in " in healed.how
    want = {**accepted, "n1": accepted["n1"] + 1, "n2": accepted["n2"] + 1}
    assert accepted_by(servers, want) == want  # and the held probe is not dialled late
    after = net.proxy.counters()[("n2", "n1")]
    assert after.blocked == () and after.sent_fwd == before + 14
    assert after.accepted >= 3  # the node's connection and two probes


def test_client_links_and_a_peer_that_is_down(cluster: Cluster) -> None:
    """Clients are a pair like any other through the proxy; a link whose peer is down is
    not cut: its probe is refused by the peer's port, and that is traffic flowing."""
    net, _ = cluster
    net.partition(None, {CLIENT: ["n2"]})  # clients drop n2's answers
    assert net.probe([(CLIENT, "n2")])[(CLIENT, "n2")].seen == "dropped"
    net.heal(None)
    with socket.socket() as tmp:
        tmp.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{tmp.getsockname()[1]}"
    net.proxy.add_link("n1", "n9", dead)
    down = net.probe([("n1", "n9")])[("n1", "n9")]
    assert down.seen == "flowing" and down.how.startswith("n1->n9 refused by the peer's port in ")
    assert net.proxy.counters()[("n1", "n9")].refused == 1


@pytest.fixture
def paused_listener() -> Iterator[str]:
    """A real process listening with a backlog of one, its backlog filled and the process
    stopped (SIGSTOP): as a paused broker whose clients kept reconnecting. The kernel drops
    further SYNs, so a dial to it is never answered."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import socket, time; s = socket.socket(); "
         "s.bind(('127.0.0.1', 0)); s.listen(0); print(s.getsockname()[1], flush=True); "
         "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    fillers: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        os.kill(proc.pid, signal.SIGSTOP)
        for _ in range(3):  # one completes into the queue; the rest wait in SYN_SENT
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        for f in fillers:
            f.close()
        proc.kill()
        proc.wait()


def test_a_paused_peer_is_not_a_cut(cluster: Cluster, paused_listener: str) -> None:
    """A heal's probe to a peer that is paused is dialled and not answered: the link
    carries traffic (the proxy dialled), so it is flowing, not held as by a cut."""
    net = ProxyNet(cluster[0].proxy, (*NODES, "n8"))
    net.proxy.add_link("n1", "n8", paused_listener)
    seen = net.probe([("n1", "n8")])[("n1", "n8")]
    assert seen.seen == "flowing", seen
    assert re.fullmatch(r"n1->n8 dialled the peer's port, no answer in 1\.\d s "
                        r"\(the peer is not accepting: paused or overloaded\)", seen.how), seen.how
    net.partition(None, {"n8": ["n1"]})  # a cut of the same link is still a cut
    cut = net.probe([("n1", "n8")])[("n1", "n8")]
    assert cut.seen == "dropped" and cut.how.startswith("n1->n8 held 0."), cut


def test_planted_misses_make_no_claim(cluster: Cluster) -> None:
    """A pair no link of the proxy carries is unknown (nothing to see), and a cut that
    holds one link of a pair and not the other is partial: neither is dropped."""
    net, _ = cluster
    nowhere = net.probe([("n1", "n7")])[("n1", "n7")]
    assert nowhere.seen == "unknown" and nowhere.how == "no link of the proxy carries this pair"
    net.proxy.set_shapes([("n1", "n2", CLEAN, Shape(blocked=True))])  # behind the Net's back
    half = net.probe([("n1", "n2")])[("n1", "n2")]
    assert half.seen == "partial", half
    assert half.how.startswith("n1->n2 held 0.") and ", n2->n1 connected in " in half.how


def test_round_trips_show_the_delay_and_the_stalls(cluster: Cluster) -> None:
    net, _ = cluster
    clean = net.round_trips(["n1"], 0.2)["n1"]
    assert len(clean) >= 5  # five links touch n1, several pings each
    net.slow(None, ["n1"], 80.0, 0.0)
    slow = net.round_trips(["n1"], 0.5)["n1"]
    # n1's egress, once per round trip on each link
    assert slow and min(slow) >= 80.0
    net.fast(None)
    net.lossy(None, ["n2"], 1.0)
    lossy = net.round_trips(["n2"], 0.3)["n2"]
    assert lossy and min(lossy) >= 200.0  # every chunk waits a retransmission timeout
    net.fast(None)
    net.partition(None, {"n3": ["n1", "n2", CLIENT]})
    assert net.round_trips(["n3"], 0.2) == {"n3": []}  # every link of n3 holds its probe
    assert statistics.median(clean) < 80.0
