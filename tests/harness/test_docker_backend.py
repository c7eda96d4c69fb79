"""The docker backend against the real engine: containers, iptables, cleanup (our broker on
them, and the evidence of each fault: test_docker_brokers.py)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness import core, leftovers
from harness.iptables import IptablesNet
from harness.protocols import Grudge, LinkSeen, Run
from harness.runfiles import NEMESIS, Op, RunPaths
from harness.spec import build_spec
from nemesis.netfaults import Partition
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


class MisaimedNet:
    """A planted miss: the run's iptables Net, its cut of n2 aimed at an address nobody
    uses (TEST-NET-1's 192.0.2.99) while its probes still go to n2's real address."""

    def __init__(self, net: IptablesNet) -> None:
        self.net = net

    def partition(self, run: Run, grudge: Grudge) -> None:
        real = self.net.addrs["n2"]
        self.net.addrs["n2"] = "192.0.2.99"
        try:
            self.net.partition(run, grudge)
        finally:
            self.net.addrs["n2"] = real

    def heal(self, run: Run) -> None:
        self.net.heal(run)

    def slow(self, run: Run, nodes: Collection[str], delay_ms: float, jitter_ms: float) -> None:
        self.net.slow(run, nodes, delay_ms, jitter_ms)

    def lossy(self, run: Run, nodes: Collection[str], drop_probability: float) -> None:
        self.net.lossy(run, nodes, drop_probability)

    def fast(self, run: Run) -> None:
        self.net.fast(run)

    def probe(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LinkSeen]:
        return self.net.probe(pairs)


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

    # a planted miss: the rule is in n1's iptables and n1 still reaches n2, so the
    # nemesis's probe from inside n1 sees traffic flowing: the partition did not land
    missed = replace(run, net=MisaimedNet(net))
    op = Op(type="invoke", process=NEMESIS, f="partition", value={"grudge": {"n1": ["n2"]}})
    try:
        out = Partition(1).setup(missed).invoke(missed, op)
        assert [r.spec[:2] for r in net.rules("n1")] == [("-s", "192.0.2.99/32")]
        assert out.extra == {"landed": False, "evidence": "n1->n2 flowing"}, out.extra
    finally:
        net.heal(run)
    assert net.rules("n1") == []


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
