"""Network faults through the link proxy say whether they landed, from the proxy's own
probes: partitions and heals, slow and lossy links and `fast`. A real proxy process,
real echo servers as the nodes' listeners; the planted misses are a Net that is told
to cut or slow and does not, a node the proxy carries no link for, a heal with
nothing to undo."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator

import pytest

from harness.net import CLIENT, ProxyNet, checked_grudge
from harness.protocols import Grudge, Run
from harness.proxy_process import ProxyProcess
from harness.runfiles import NEMESIS, Op, RunPaths
from harness.spec import build_spec
from nemesis.compose import Composed, compose
from nemesis.netfaults import Links, Partition

from ..harness.test_proxy import EchoServer

NODES = ("n1", "n2", "n3")


class DeafNet(ProxyNet):
    """A planted miss: told to partition or slow, it checks the request and does nothing."""

    def partition(self, run: Run | None, grudge: Grudge) -> None:
        checked_grudge(grudge, {*self.nodes, CLIENT})

    def slow(self, run: Run | None, nodes: Collection[str], delay_ms: float,
             jitter_ms: float = 0.0) -> None:
        self._check(nodes, "slow")

    def lossy(self, run: Run | None, nodes: Collection[str], drop_probability: float) -> None:
        self._check(nodes, "lossy")


class RefusingNet(ProxyNet):
    """A Net that cannot slow (as iptables on a kernel without netem, over ssh)."""

    def slow(self, run: Run | None, nodes: Collection[str], delay_ms: float,
             jitter_ms: float = 0.0) -> None:
        raise NotImplementedError("slow: no netem here")


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, ProxyProcess]]:
    servers = {n: EchoServer() for n in NODES}
    for s in servers.values():
        threading.Thread(target=s.serve_forever, args=(0.05,), daemon=True).start()
    proxy = ProxyProcess()
    try:
        for src in (*NODES, CLIENT):
            for dst in NODES:
                if src != dst:
                    proxy.add_link(src, dst, servers[dst].addr)
        spec = build_spec({})
        run = Run(spec=spec, nodes=NODES, paths=RunPaths(tmp_path_factory.mktemp("net") / "run"),
                  log=logging.getLogger("test"))
        yield run, proxy
    finally:
        proxy.stop()
        for s in servers.values():
            s.shutdown()
            s.server_close()


def nemesis(run: Run, net: ProxyNet) -> Composed:
    run.net = net
    nem = compose(Partition(1), Links(1))
    nem.setup(run)
    return nem


def invoke(run: Run, nem: Composed, f: str, value: object) -> Op:
    out = nem.invoke(run, Op(type="invoke", process=NEMESIS, f=f, value=value))
    assert out.type == "info" and out.error is None, out
    return out


def test_partition_and_heal_land_as_the_proxy_sees_them(
        proxied: tuple[Run, ProxyProcess]) -> None:
    run, proxy = proxied
    nem = nemesis(run, ProxyNet(proxy, NODES))
    out = invoke(run, nem, "partition", {"grudge": {"n3": ["n1"], "n1": ["n3"]}})
    assert out.extra["landed"] is True, out.extra
    ev = out.extra["evidence"]
    assert ev.startswith("n1->n3 dropped (n1->n3 held 0.") and ", n3->n1 dropped (" in ev
    assert ev.count("; 0 B crossed the cut)") == 2, ev
    healed = invoke(run, nem, "heal", {})
    assert healed.extra["landed"] is True, healed.extra
    assert healed.extra["evidence"].startswith("n1->n3 flowing (n1->n3 connected in ")
    idle = invoke(run, nem, "heal", {})  # nothing was cut: nothing to claim
    assert "landed" not in idle.extra
    answers = invoke(run, nem, "partition", {"grudge": {"client": ["n2"]}})
    assert answers.extra["landed"] is True
    assert answers.extra["evidence"].startswith("client->n2 dropped (client->n2 held 0.")
    invoke(run, nem, "heal", {})
    nem.teardown(run)


def test_a_partition_that_did_not_cut_says_so(proxied: tuple[Run, ProxyProcess]) -> None:
    run, proxy = proxied
    nem = nemesis(run, DeafNet(proxy, NODES))
    out = invoke(run, nem, "partition", {"grudge": {"n2": ["n1"]}})
    assert out.extra["landed"] is False, out.extra
    assert out.extra["evidence"].startswith("n2->n1 flowing (n2->n1 connected in ")
    nem.teardown(run)
    # a node the proxy carries no link for: nothing can be seen, so no claim
    elsewhere = nemesis(run, ProxyNet(proxy, (*NODES, "n4")))
    run.nodes = (*NODES, "n4")
    try:
        out = invoke(run, elsewhere, "partition", {"grudge": {"n4": ["n1"]}})
    finally:
        run.nodes = NODES
    assert "landed" not in out.extra, out.extra
    elsewhere.teardown(run)


def test_slow_lossy_and_fast_land_as_round_trips_show(
        proxied: tuple[Run, ProxyProcess]) -> None:
    run, proxy = proxied
    nem = nemesis(run, ProxyNet(proxy, NODES))
    slow = invoke(run, nem, "slow", {"nodes": ["n2"], "delay_ms": 60, "jitter_ms": 0})
    assert slow.extra["landed"] is True, slow.extra
    assert slow.extra["evidence"].startswith("n2: round trip ")
    assert slow.extra["evidence"].endswith(" ms of 60 asked")
    lossy = invoke(run, nem, "lossy", {"nodes": ["n3"], "drop_probability": 0.5})
    assert lossy.extra["landed"] is True, lossy.extra
    assert "round trips stalled >= 150 ms" in lossy.extra["evidence"]
    fast = invoke(run, nem, "fast", {})
    assert fast.extra["landed"] is True, fast.extra
    assert fast.extra["evidence"].startswith("n2: round trip ") and "; n3: " in \
        fast.extra["evidence"]
    assert "landed" not in invoke(run, nem, "fast", {}).extra  # nothing was shaped
    nem.teardown(run)


def test_slow_and_lossy_that_did_not_shape_say_so(proxied: tuple[Run, ProxyProcess]) -> None:
    run, proxy = proxied
    nem = nemesis(run, DeafNet(proxy, NODES))
    slow = invoke(run, nem, "slow", {"nodes": ["n1"], "delay_ms": 100, "jitter_ms": 50})
    assert slow.extra["landed"] is False, slow.extra
    lossy = invoke(run, nem, "lossy", {"nodes": ["n2"], "drop_probability": 0.5})
    assert lossy.extra["landed"] is False and lossy.extra["evidence"].startswith(
        "n2: 0 of "), lossy.extra
    rare = invoke(run, nem, "lossy", {"nodes": ["n2"], "drop_probability": 0.001})
    assert "landed" not in rare.extra  # too few round trips to expect a stall: no claim
    nem.teardown(run)



def test_a_slow_that_was_refused_leaves_fast_nothing_to_judge(
        proxied: tuple[Run, ProxyProcess]) -> None:
    run, proxy = proxied
    nem = nemesis(run, RefusingNet(proxy, NODES))
    slow = nem.invoke(run, Op(type="invoke", process=NEMESIS, f="slow", value={"nodes": ["n1"]}))
    assert slow.error == "NotImplementedError: slow: no netem here" and "landed" not in slow.extra
    assert "landed" not in invoke(run, nem, "fast", {}).extra  # n1 was never shaped
    nem.teardown(run)
