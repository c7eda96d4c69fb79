"""Our broker on containers, one cluster for the module: the DB's abilities (kill keeps
data, pause, partition, clock, collect), and the evidence each fault gives of landing:
kill and pause read off the container, partitions probed from inside the nodes, slow,
lossy and fast timed as TCP handshakes with the brokers' port (harness.handshake), clock
faults read back from the brokers."""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterator
from typing import Any

import pytest

from harness import core, leftovers
from harness.iptables import IptablesNet
from harness.protocols import Run
from harness.runfiles import NEMESIS, Op
from nemesis.compose import Composed, compose

from .claims import (
    assert_clock_faults_land,
    assert_faults_say_whether_they_landed,
    assert_lose_unflushed_lands,
)
from .test_docker_backend import _docker, _ours, _run, docker_db, iptables_net

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Our broker on three containers, shared by the tests below: each leaves it serving,
    every fault healed. Its own leftovers state, as tests/conftest.py's `state` gives a test."""
    from harness.control.docker import DockerBackend

    client = _docker()
    root = tmp_path_factory.mktemp("brokers")
    run = _run(root)
    backend = DockerBackend()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(leftovers.STATE_ENV, str(root / "state"))
        try:
            t0 = time.monotonic()
            core.cluster_up(backend, run)
            run.log.info("docker cluster ready in %.1f s", time.monotonic() - t0)
            yield run
        finally:
            core.cluster_down(backend, run)
            leftovers.heal_all(force=True)  # only what this fixture's own state lists
    assert _ours(client, backend.key) == ([], [])


def test_brokers_up_kill_start_pause_partition_collect(brokers: Run) -> None:
    """The whole DB on containers: ready, leaders, kill keeps data, pause, partition, collect."""
    run = brokers
    db = docker_db(run)
    assert db is not None and run.net is not None
    assert set(run.client_addrs) == {"n1", "n2", "n3"}
    from systems.undertow.client import BrokerClient

    c = BrokerClient(run.client_addrs, timeout_s=5.0)
    offset = c.produce(0, 1)
    assert offset is not None
    leader = db.leader_of(run, 0)
    assert leader in run.nodes and db.controller(run) in run.nodes

    db.kill(run, leader)
    assert not db.running(leader)
    db.start(run, leader)
    db.wait_ready(run, 60)
    deadline = time.monotonic() + 20  # the new leader's HW catches up with the followers
    got: list[tuple[int, int]] = []
    while not got and time.monotonic() < deadline:
        got = c.fetch(0, 0)[:1]
        time.sleep(0.2)
    assert got == [(offset, 1)], "an acknowledged write did not survive the leader's kill"

    db.pause(run, "n3")
    assert db.frozen("n3") and db.running("n3")
    db.start(run, "n3")  # running, only frozen: start leaves it paused
    assert db.frozen("n3")
    db.kill(run, "n3")  # SIGKILL reaches a frozen broker too
    assert not db.frozen("n3") and not db.running("n3")
    db.start(run, "n3")
    assert db.running("n3")
    db.pause(run, "n3")
    db.resume(run, "n3")
    assert not db.frozen("n3")
    # clock faults: the test of their own below
    assert_faults_say_whether_they_landed(run, paused_shows="cgroup frozen", clock=False)
    run.net.partition(run, {"n1": ["n2", "n3"]})
    run.net.heal(run)
    db.shift_clock(run, "n2", 5_000_000_000)
    assert run.remote is not None
    assert run.remote.exec("n2", ["cat", "/var/lib/undertow/clock_offset_ns"]).stdout.strip() \
        == "5000000000"
    db.reset_clock(run, "n2")
    c.close()
    rows = db.dump_replicas(run)
    assert {r["node"] for r in rows} == {"n1", "n2", "n3"}
    for n in run.nodes:
        db.collect(run, n, run.paths.node_dir(n))
        assert (run.paths.node_dir(n) / "broker.log").stat().st_size > 0
        assert (run.paths.node_dir(n) / "data").is_dir()


class DeafIptablesNet(IptablesNet):
    """A planted miss: told to slow, it checks the request and does nothing."""

    def slow(self, run: Run | None, nodes: Collection[str], delay_ms: float,
             jitter_ms: float = 0.0) -> None:
        self._check(nodes, "slow")


def _links(run: Run) -> Composed:
    from nemesis.netfaults import Links

    nem = compose(Links(1))
    nem.setup(run)
    return nem


def _inv(run: Run, nem: Composed, f: str, value: dict[str, Any]) -> Op:
    out = nem.invoke(run, Op(type="invoke", process=NEMESIS, f=f, value=value))
    assert out.type == "info" and out.error is None, out
    return out


def _syn_acks_counted(run: Run, node: str) -> int:
    """Packets a counting rule of this test's own (first in OUTPUT, no target) saw: the
    SYN-ACKs the node sent the harness from its broker port, on their way to the shaping."""
    assert run.remote is not None
    out = run.remote.exec(node, ["iptables", "-w", "-L", "OUTPUT", "-v", "-x", "-n"]).stdout
    return sum(int(line.split()[0]) for line in out.splitlines() if "test-counts-syn-acks" in line)


def test_slow_lossy_and_fast_land_as_handshakes_show(brokers: Run) -> None:
    """Slow (netem, or here, with no netem, the NFQUEUE delayer), lossy and fast on
    containers say whether they landed, from TCP handshakes the harness times with each
    node's broker port (harness.handshake): the node's SYN-ACKs pass its shaping rules."""
    run = brokers
    net = iptables_net(run)
    assert run.remote is not None and net.client_addr
    docker_db(run).wait_ready(run, 60)
    count = ["OUTPUT", "-p", "tcp", "--sport", "9092", "-d", net.client_addr, "--tcp-flags",
             "SYN,ACK", "SYN,ACK", "-m", "comment", "--comment", "test-counts-syn-acks"]
    assert run.remote.exec("n2", ["iptables", "-w", "-I", *count[:1], "1", *count[1:]]).ok
    nem = _links(run)
    try:
        syn_acks = _syn_acks_counted(run, "n2")
        slow = _inv(run, nem, "slow", {"nodes": ["n2"], "delay_ms": 100, "jitter_ms": 20})
        assert slow.extra["landed"] is True, slow.extra
        ev = re.fullmatch(r"n2: round trip (\d+) ms \(median of (\d+)\), ([\d.]+) ms before: "
                          r"\+(\d+) ms of 100 asked", slow.extra["evidence"])
        assert ev is not None, slow.extra
        assert int(ev[1]) >= 50 and int(ev[4]) >= 50  # the delay's half at least: the judge's
        # every handshake timed was answered by a SYN-ACK leaving n2 from its broker port,
        # the traffic the slow and lossy rules match (-m multiport --ports 9092 on OUTPUT)
        assert _syn_acks_counted(run, "n2") - syn_acks >= int(ev[2])
        assert any("NFQUEUE" in r.spec for r in net.rules("n2")) or "netem" in \
            run.remote.exec("n2", ["tc", "qdisc", "show"]).stdout
        # lossy on the slowed n2 too: its drops come before the delayer's queue
        lossy = _inv(run, nem, "lossy", {"nodes": ["n2", "n3"], "drop_probability": 0.3})
        assert lossy.extra["landed"] is True, lossy.extra
        assert re.fullmatch(r"n2: [1-9]\d* of \d+ round trips stalled >= 150 ms \(\d+%, 30% "
                            r"asked\); n3: [1-9]\d* of \d+ round trips stalled >= 150 ms "
                            r"\(\d+%, 30% asked\)", lossy.extra["evidence"]), lossy.extra
        fast = _inv(run, nem, "fast", {})
        assert fast.extra["landed"] is True, fast.extra
        assert re.fullmatch(r"n2: round trip [\d.]+ ms \(median of \d+\), [\d.]+ ms before it "
                            r"was shaped, \d+ stalled; n3: .*", fast.extra["evidence"]), fast.extra
        assert net.in_force() == [] and net.rules("n2") == [] and net.rules("n3") == []
        assert "landed" not in _inv(run, nem, "fast", {}).extra  # nothing was shaped
    finally:
        nem.teardown(run)
        run.remote.exec("n2", ["iptables", "-w", "-D", *count])


def test_a_slow_that_did_not_slow_says_so(brokers: Run) -> None:
    """A planted miss: a Net told to slow n1 that does not; and a node that is down, or
    cut off from clients, cannot be timed: no claim for it."""
    run = brokers
    net = iptables_net(run)
    deaf = DeafIptablesNet(net.remote, net.addrs, tag=net.tag, broker_port=net.broker_port,
                           client_addr=net.client_addr)
    docker_db(run).wait_ready(run, 60)
    run.net = deaf
    nem = _links(run)
    try:
        slow = _inv(run, nem, "slow", {"nodes": ["n1"], "delay_ms": 100, "jitter_ms": 50})
        assert slow.extra["landed"] is False, slow.extra
        assert re.fullmatch(r"n1: round trip \d+ ms \(median of \d+\), [\d.]+ ms before: "
                            r"\+-?\d+ ms of 100 asked", slow.extra["evidence"]), slow.extra
        net.partition(run, {"client": ["n1"]})  # n1's answers to clients are dropped
        got = net.round_trips(["n1", "n2"], 0.5)
        assert got["n1"] == [] and len(got["n2"]) == 50, got  # no answer: no claim, no stall
        net.heal(run)
        db = docker_db(run)
        db.kill(run, "n3")
        got = net.round_trips(["n3", "n2"], 0.5)
        assert got["n3"] == [] and len(got["n2"]) == 50, got  # refused: no round trip
        db.start(run, "n3")
    finally:
        run.net = net
        nem.teardown(run)
        net.heal(run)
        docker_db(run).start(run, "n3")
    docker_db(run).wait_ready(run, 60)


def test_lose_unflushed_on_containers_says_what_it_cut(brokers: Run) -> None:
    """The cut runs in the container (broker.tools over docker exec): its evidence names the
    bytes each log file lost, between the kill and the start."""
    run = brokers
    db = docker_db(run)
    db.wait_ready(run, 60)
    try:
        assert_lose_unflushed_lands(run)
    finally:
        db.start(run, "n3")
    db.wait_ready(run, 60)


def test_clock_faults_on_containers_are_read_back_and_land(brokers: Run) -> None:
    """clock-bump, clock-skew and clock-reset on containers: each broker's clock, read back
    from the broker (the admin `clock` request), runs the offset asked for."""
    from nemesis.faults import Clock

    run = brokers
    db = docker_db(run)
    db.wait_ready(run, 60)
    nem = compose(Clock(1))
    nem.setup(run)
    try:
        assert_clock_faults_land(lambda f, v: _inv(run, nem, f, v), slack_s=0.05)
    finally:
        nem.teardown(run)
