"""The docker backend against the real engine: containers, iptables, brokers, cleanup."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import core, leftovers
from harness.iptables import IptablesNet
from harness.protocols import Run
from harness.runfiles import NEMESIS, Op, RunPaths
from harness.spec import build_spec
from nemesis.compose import Composed, compose
from systems.undertow.remote_db import RemoteBroker

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _docker() -> Any:
    try:
        from harness.image import docker_client

        return docker_client()
    except Exception as e:
        pytest.skip(f"no Docker engine (start it with `just docker-up`): {e}")


def _run(tmp_path: Path, **spec: object) -> Run:
    s = build_spec({"backend": "docker", "keys": 4, **spec})
    root = tmp_path / "run"
    root.mkdir()
    return Run(spec=s, nodes=s.nodes, paths=RunPaths(root), log=logging.getLogger("test"))


def _ours(client: Any, key: str) -> tuple[list[str], list[str]]:
    label = {"label": f"undertow.run={key}"}
    cs = [c.name for c in client.containers.list(all=True, filters=label)]
    ns = [n.name for n in client.networks.list(filters=label)]
    return cs, ns


def _connects(run: Run, src: str, ip: str, port: int = 9092) -> bool:
    probe = f"import socket; socket.create_connection(('{ip}', {port}), timeout=1.5)"
    assert run.remote is not None
    return run.remote.exec(src, ["python3", "-c", probe], timeout_s=10).ok


def _host_connects(ip: str, port: int = 9092) -> bool:
    try:
        socket.create_connection((ip, port), timeout=1.5).close()
        return True
    except OSError:
        return False


@pytest.fixture
def containers(tmp_path: Path, state: Path) -> Iterator[tuple[Run, Any]]:
    """Three bare containers (no broker), each with a TCP listener on 9092."""
    from harness.control.docker import DockerBackend

    client = _docker()
    run = _run(tmp_path)
    backend = DockerBackend(image=_broker_image())
    try:
        run.db = RemoteBroker(backend.provision(run, 9092))  # our broker's DB, nothing started
        assert run.remote is not None
        for n in run.nodes:
            r = run.remote.exec(n, ["sh", "-c", "nohup python3 -m http.server 9092 "
                                    ">/dev/null 2>&1 & true"])
            assert r.ok, r
        deadline = time.monotonic() + 10
        while not all(_host_connects(ip) for ip in backend.ips.values()):
            assert time.monotonic() < deadline, "listeners did not come up"
            time.sleep(0.1)
        yield run, backend
    finally:
        core.cluster_down(backend, run)
    assert _ours(client, backend.key) == ([], []), "down left containers or the network"
    assert not (state / backend.key).exists() or not any(
        p.name != "run.json" for p in (state / backend.key).iterdir())


def _broker_image() -> str:
    """Our broker's node image (built if missing): bare containers with python3 in them."""
    from harness.image import ensure_images
    from systems.undertow.system import system

    built = ensure_images(system.node_image()).node
    assert built is not None
    return built.tag


def iptables_net(run: Run) -> IptablesNet:
    """The run's Net, as the class a docker run uses (its rules are what these tests read)."""
    assert isinstance(run.net, IptablesNet), run.net
    return run.net


def docker_db(run: Run) -> RemoteBroker:
    assert isinstance(run.db, RemoteBroker) and run.db.freezer is not None, run.db
    return run.db


def test_partition_really_cuts_traffic_and_heal_removes_exactly_our_rules(
        containers: tuple[Run, Any]) -> None:
    run, backend = containers
    ips = backend.ips
    net = iptables_net(run)
    assert net is not None and run.remote is not None
    # a rule that is not ours must survive every heal
    foreign = ["iptables", "-w", "-A", "INPUT", "-s", "192.0.2.77", "-j", "DROP"]
    assert run.remote.exec("n1", foreign).ok
    assert _connects(run, "n2", ips["n1"])

    net.partition(run, {"n1": ["n2"]})  # n1 drops n2: one way
    assert not _connects(run, "n2", ips["n1"])
    assert _connects(run, "n3", ips["n1"])
    assert _connects(run, "n1", ips["n3"])
    assert [r.chain for r in net.rules("n1")] == ["INPUT"]

    net.partition(run, {"n3": ["n1"], "n1": ["client"]})  # replaces the grudge in force
    assert _connects(run, "n2", ips["n1"])
    assert not _connects(run, "n1", ips["n3"])
    assert not _host_connects(ips["n1"])
    assert _host_connects(ips["n2"])

    net.heal(run)
    assert _connects(run, "n1", ips["n3"]) and _host_connects(ips["n1"])
    for n in run.nodes:
        assert net.rules(n) == []
    listed = run.remote.exec("n1", ["iptables", "-w", "-S", "INPUT"]).stdout
    assert "192.0.2.77" in listed, "heal removed a rule the harness did not add"


def test_lossy_link_drops_and_fast_restores(containers: tuple[Run, Any]) -> None:
    run, backend = containers
    ips = backend.ips
    net = iptables_net(run)
    assert net is not None
    net.lossy(run, ["n1"], 1.0)  # every answer n1 sends on the broker port is dropped
    assert not _connects(run, "n2", ips["n1"])
    assert not _host_connects(ips["n1"])
    assert not _connects(run, "n1", ips["n2"])  # n1's own SYNs to :9092 drop too
    net.fast(run)
    assert _connects(run, "n2", ips["n1"]) and _host_connects(ips["n1"])
    assert net.rules("n1") == []
    with pytest.raises(ValueError, match="drop_probability"):
        net.lossy(run, ["n1"], 1.5)
    with pytest.raises(ValueError, match="unknown node"):
        net.partition(run, {"n9": ["n1"]})


def _connect_s(ip: str, port: int = 9092) -> float:
    """Median time for the host to open a TCP connection (SYN, then n's SYN-ACK)."""
    times = []
    for _ in range(5):
        t = time.monotonic()
        socket.create_connection((ip, port), timeout=5).close()
        times.append(time.monotonic() - t)
    return sorted(times)[2]


def _delayers() -> list[str]:
    ps = subprocess.run(["pgrep", "-af", "harness.nfqdelay"], capture_output=True, text=True)
    return [line for line in ps.stdout.splitlines() if "pgrep" not in line]


def test_slow_delays_a_nodes_egress_and_fast_restores(containers: tuple[Run, Any]) -> None:
    """netem where the kernel has it; otherwise an NFQUEUE rule and a delayer process."""
    run, backend = containers
    net = iptables_net(run)
    assert net is not None and run.remote is not None
    ip1, ip2 = backend.ips["n1"], backend.ips["n2"]
    # delays are compared with the configured delay and with each other, never with a fixed
    # figure for an unshaped connection: a busy machine makes every connection slower
    net.slow(run, ["n1"], 200.0, 0.0)
    assert net.in_force() == ["slow n1 +200ms"]
    if "netem" not in run.remote.exec("n1", ["tc", "qdisc", "show"]).stdout:
        assert [r.spec[-4:] for r in net.rules("n1")] == [
            ("NFQUEUE", "--queue-num", str(net.queue_num), "--queue-bypass")]
        assert len(_delayers()) == 1
    slow_200 = _connect_s(ip1)
    assert slow_200 >= 0.19  # n1's SYN-ACK waits 200 ms
    assert _connect_s(ip2) < 0.19  # only n1 is slow
    assert _connects(run, "n2", ip1)  # slow, not cut
    net.slow(run, ["n1"], 50.0, 0.0)  # a new delay replaces the old one
    slow_50 = _connect_s(ip1)
    assert 0.045 <= slow_50 < slow_200
    net.lossy(run, ["n1"], 1.0)  # drops come before the queue rule, whose accept ends the chain
    assert net.rules("n1")[0].spec[-1] == "DROP", net.rules("n1")
    assert not _host_connects(ip1)
    net.lossy(run, ["n1"], 0.0)
    net.fast(run)
    assert _connect_s(ip1) < 0.045  # the 50 ms delay is gone
    assert net.in_force() == [] and net.rules("n1") == []
    assert "netem" not in run.remote.exec("n1", ["tc", "qdisc", "show"]).stdout
    assert _delayers() == []


def test_remote_upload_download_and_pause(containers: tuple[Run, Any], tmp_path: Path) -> None:
    run, backend = containers
    remote, db = run.remote, docker_db(run)
    assert remote is not None and db is not None
    src = tmp_path / "d"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("hello")
    remote.upload("n2", src, "/tmp/up")
    assert remote.exec("n2", ["cat", "/tmp/up/sub/f.txt"]).stdout == "hello"
    remote.download("n2", "/tmp/up", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "f.txt").read_text() == "hello"
    db.pause(run, "n2")
    assert not remote.exec("n2", ["true"]).ok  # frozen: not even an exec gets in
    assert run.net is not None
    run.net.partition(run, {"n2": ["n1"]})  # a fault on a paused node still applies
    db.resume(run, "n2")
    assert not _connects(run, "n1", backend.ips["n2"])
    run.net.heal(run)
    assert _connects(run, "n1", backend.ips["n2"])
    db.resume(run, "n2")  # idempotent
    assert remote.exec("n2", ["true"]).ok


def test_heal_removes_what_a_dead_harness_left(tmp_path: Path, state: Path) -> None:
    """A harness killed mid-run leaves containers and a network; `heal` removes them."""
    client = _docker()
    script = textwrap.dedent(f"""
        import logging, os
        from pathlib import Path
        from harness.control.docker import DockerBackend
        from harness.protocols import Run
        from harness.runfiles import RunPaths
        from harness.spec import build_spec
        s = build_spec({{"backend": "docker", "node_count": 2,
                        "broker": {{"replication_factor": 2}}}})
        root = Path({str(tmp_path / 'dead')!r}); root.mkdir()
        run = Run(spec=s, nodes=s.nodes, paths=RunPaths(root), log=logging.getLogger("t"))
        from harness.image import ensure_images
        from systems.undertow.system import system
        b = DockerBackend(image=ensure_images(system.node_image()).node.tag)
        b.provision(run, 9092)
        print(b.key, flush=True)
        os._exit(0)  # dies without down()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env={**os.environ, leftovers.STATE_ENV: str(state)})
    assert out.returncode == 0, out.stderr
    key = out.stdout.split()[-1]
    cs, ns = _ours(client, key)
    assert len(cs) == 2 and len(ns) == 1
    lines = leftovers.heal_all()
    assert _ours(client, key) == ([], []), lines
    assert any("removed network" in line for line in lines)
    assert leftovers.heal_all() == []  # twice is safe


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
    _faults_say_whether_they_landed(run)
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


def _faults_say_whether_they_landed(run: Run) -> None:
    """The nemesis's kill and pause on containers: each completion's `landed` and evidence,
    read in the container's /proc or from its frozen cgroup; those that cannot land say so."""
    from nemesis.faults import Kill, Pause
    from nemesis.netfaults import Partition

    nem = compose(Kill(1), Pause(1), Partition(1))
    nem.setup(run)

    def inv(f: str, value: dict[str, Any]) -> dict[str, Any]:
        out = nem.invoke(run, Op(type="invoke", process=NEMESIS, f=f, value=value))
        return dict(out.extra)

    killed = inv("kill", {"nodes": ["n3"]})
    assert killed["landed"] is True and killed["evidence"].endswith(" gone"), killed
    again = inv("kill", {"nodes": ["n3"]})
    assert again["landed"] is False
    assert again["evidence"].startswith("n3: nothing to kill: no live process on n3"), again
    frozen_empty = inv("pause", {"nodes": ["n3"]})  # the container freezes, nothing runs in it
    assert frozen_empty["landed"] is False and "no process to pause" in frozen_empty["evidence"]
    inv("resume", {})
    started = inv("start", {})
    assert started["landed"] is True and "n3: new pid " in started["evidence"], started
    paused = inv("pause", {"nodes": ["n2"]})
    assert paused["landed"] is True and paused["evidence"].endswith("cgroup frozen"), paused
    resumed = inv("resume", {})
    assert resumed["landed"] is True and resumed["evidence"].endswith("running again"), resumed
    cut = inv("partition", {"grudge": {"n1": ["n2"]}})  # probes from inside n1's namespace
    assert cut == {"landed": True, "evidence": "n1->n2 dropped"}, cut
    healed = inv("heal", {})
    assert healed == {"landed": True, "evidence": "n1->n2 flowing"}, healed


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
        bump = _inv(run, nem, "clock-bump", {"nodes": ["n2"], "delta_ns": 3_000_000_000})
        assert bump.extra["landed"] is True, bump.extra
        read = re.match(r"n2: clock reads ([+-][\d.]+) s against the harness's \(±([\d.]+) s\)",
                        bump.extra["evidence"])
        assert read is not None, bump.extra["evidence"]
        assert abs(float(read[1]) - 3.0) <= float(read[2]) + 0.05
        assert bump.extra["evidence"].endswith("offset +3.000 s in force, +3.000 s asked")
        skew = _inv(run, nem, "clock-skew", {})
        assert set(skew.value["offsets_ns"]) == set(run.nodes)
        assert skew.extra["landed"] is True and skew.extra["evidence"].count("clock reads") == 3
        reset = _inv(run, nem, "clock-reset", {})
        assert reset.extra["landed"] is True and reset.extra["evidence"].count(
            "offset +0.000 s in force, +0.000 s asked") == 3, reset.extra
        assert "landed" not in _inv(run, nem, "clock-reset", {}).extra  # nothing to undo
    finally:
        nem.teardown(run)


def test_a_broker_image_pruned_by_another_build_is_rebuilt(tmp_path: Path, state: Path) -> None:
    """Another run rebuilt the broker and pruned our tag between choosing and creating."""
    from harness.control.docker import DockerBackend
    from harness.image import ensure_images
    from systems.undertow.system import system as undertow

    client = _docker()
    built = ensure_images(undertow.node_image()).node
    assert built is not None
    current = built.tag
    run = _run(tmp_path, node_count=1, broker={"replication_factor": 1,
                                               "min_insync_replicas": 1})
    backend = DockerBackend()
    backend.image, backend._auto_image = "undertow/broker:000000000000", True
    backend._node_image = undertow.node_image()
    try:
        backend.provision(run, undertow.port)
        assert backend.image == current
        assert client.containers.get(backend.containers["n1"]).image.tags
    finally:
        core.cluster_down(backend, run)
    assert _ours(client, backend.key) == ([], [])
