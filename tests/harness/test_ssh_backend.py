"""The ssh backend through real paramiko, against three sshd containers."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import core, leftovers
from harness.control.ssh import SshNode, load_cluster_file, parse_host, ssh_nodes
from harness.protocols import Run
from harness.runfiles import NEMESIS, Op, RunPaths
from harness.spec import SpecError, build_spec
from harness.spec import TestSpec as Spec  # not collected as a test class

from .claims import assert_faults_say_whether_they_landed, assert_lose_unflushed_lands

# -- parsing (fast) ---------------------------------------------------------------------


def test_parse_host_and_cluster_file(tmp_path: Path) -> None:
    assert parse_host("h1", user="u", key_file=None) == SshNode("h1", 22, "u", None)
    assert parse_host("10.0.0.1:2222", user="root", key_file="/k").port == 2222
    with pytest.raises(SpecError, match="HOST:PORT"):
        parse_host("h1:x", user="u", key_file=None)
    f = tmp_path / "cluster.json"
    f.write_text(json.dumps({"nodes": [
        {"externally_routable_ip": "10.0.0.11",
         "ssh_config": {"host": "w1", "hostname": "192.0.2.11", "user": "ubuntu", "port": 2200,
                        "identityfile": "/keys/id", "password": "hunter2"}},
        {"ssh_config": {"hostname": "192.0.2.12"}}]}))
    a, b = load_cluster_file(f)
    assert (a.host, a.port, a.user, a.key_file, a.ip) == ("192.0.2.11", 2200, "ubuntu",
                                                          "/keys/id", "10.0.0.11")
    assert "hunter2" not in repr(a) and "hunter2" not in str(a)
    assert (b.user, b.port, b.ip) == ("root", 22, "192.0.2.12")
    f.write_text(json.dumps({"nodes": [{"ssh_config": {"port": 22}}]}))
    with pytest.raises(SpecError, match=r"nodes\[0\].ssh_config needs hostname"):
        load_cluster_file(f)
    with pytest.raises(SpecError, match="no such file"):
        load_cluster_file(tmp_path / "missing.json")
    spec = build_spec({"backend": "ssh", "hosts": ["a", "b:2022"],
                       "broker": {"replication_factor": 2}})
    assert [str(h) for h in ssh_nodes(spec).values()] == ["root@a:22", "root@b:2022"]


# -- against sshd containers ------------------------------------------------------------------


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    """Three sshd containers with a key made now; yields (cluster.json, their backend)."""
    from harness.control.sshd_hosts import sshd_hosts
    from harness.image import ImageError

    monkeypatch.setenv(leftovers.STATE_ENV, str(tmp_path / "state"))
    stack = contextlib.ExitStack()
    try:
        up = stack.enter_context(sshd_hosts(tmp_path / "sshd", ready_timeout_s=120))
    except ImageError as e:
        pytest.skip(f"no Docker engine for the sshd hosts: {e}")
    with stack:
        yield up


def _ssh_run(tmp_path: Path, cluster: Path | None = None, spec: Spec | None = None) -> Run:
    """A run on the sshd hosts: of the cluster file's, or of the spec given."""
    if spec is None:
        spec = build_spec({"backend": "ssh", "cluster_file": str(cluster), "keys": 4})
    root = tmp_path / "run"
    root.mkdir()
    return Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root), log=logging.getLogger("ssh"))


def _first_record(c: Any, key: int) -> list[tuple[int, int]]:
    """The key's first record once a fetch returns it (the new leader's HW catches up), or
    [] after 20 s."""
    deadline = time.monotonic() + 20
    got: list[tuple[int, int]] = []
    while not got and time.monotonic() < deadline:
        got = c.fetch(key, 0)[:1]
        time.sleep(0.2)
    return got


def _host_state(docker_hosts: Any, node: str, key: str) -> tuple[str, str, str]:
    """(broker processes, tagged iptables rules, run dir listing) on an sshd container."""
    from harness.control.docker import DockerRemote

    r = DockerRemote(docker_hosts.client, docker_hosts.containers)
    procs = r.exec(node, ["sh", "-c", "ps -eo args | grep '[-]m broker' || true"]).stdout
    rules = r.exec(node, ["sh", "-c", f"iptables -w -S | grep {key} || true"]).stdout
    files = r.exec(node, ["sh", "-c", f"ls /var/tmp/undertow/{key} 2>/dev/null || true"]).stdout
    return procs.strip(), rules.strip(), files.strip()


@pytest.mark.ssh
@pytest.mark.slow
def test_ssh_backend_end_to_end(hosts: tuple[Path, Any], tmp_path: Path,
                                caplog: pytest.LogCaptureFixture) -> None:
    from harness.control.ssh import SshBackend
    from systems.undertow.client import BrokerClient
    from systems.undertow.remote_db import RemoteBroker

    cluster, docker_hosts = hosts
    caplog.set_level(logging.DEBUG)
    run = _ssh_run(tmp_path, cluster)
    backend = SshBackend()
    try:
        core.cluster_up(backend, run)
        db, net, remote = run.db, run.net, run.remote
        assert isinstance(db, RemoteBroker)
        assert db is not None and net is not None and remote is not None
        c = BrokerClient(run.client_addrs, timeout_s=5.0)
        offset = c.produce(1, 7)
        leader = db.leader_of(run, 1)
        assert leader in run.nodes
        db.kill(run, leader)
        assert "-m broker" not in _host_state(docker_hosts, leader, backend.key)[0]
        db.start(run, leader)
        db.pause(run, "n2")
        stat = remote.exec("n2", ["sh", "-c", "ps -o stat= -p $(cat "
                                  f"/var/tmp/undertow/{backend.key}/broker.pid)"]).stdout
        assert stat.startswith("T"), stat
        db.resume(run, "n2")
        assert_faults_say_whether_they_landed(run, paused_shows=r"\d+ of \d+ threads stopped")
        assert_lose_unflushed_lands(run)  # the cut run over ssh, its bytes named
        net.partition(run, {"n1": ["n2"], "n2": ["n1"]})
        assert backend.key in _host_state(docker_hosts, "n1", backend.key)[1]
        probe = "import socket; socket.create_connection(('%s', 9092), timeout=1.5)"
        assert not remote.exec("n2", ["python3", "-c", probe % docker_hosts.ips["n1"]]).ok
        net.heal(run)
        assert remote.exec("n2", ["python3", "-c", probe % docker_hosts.ips["n1"]]).ok
        _links_say_whether_they_landed(run)
        db.wait_ready(run, 60)
        assert _first_record(c, 1) == [(offset, 7)]
        c.close()
        for n in run.nodes:
            db.collect(run, n, run.paths.node_dir(n))
            assert (run.paths.node_dir(n) / "broker.log").stat().st_size > 0
            assert (run.paths.node_dir(n) / "NODE.json").exists()
    finally:
        core.cluster_down(backend, run)
    for n in run.nodes:
        assert _host_state(docker_hosts, n, backend.key) == ("", "", ""), n
    key_file = json.loads(cluster.read_text())["nodes"][0]["ssh_config"]["identityfile"]
    key_body = Path(key_file).read_text().splitlines()[1]
    assert key_body not in caplog.text, "a private key's contents reached the log"


def _links_say_whether_they_landed(run: Run) -> None:
    """The nemesis's lossy and fast on ssh hosts land as TCP handshakes the harness times
    with each host's broker port show (harness.handshake); slow lands where the hosts' kernel
    has netem, and where it has not (these hosts) it is refused: no delayer runs over ssh."""
    from nemesis.compose import compose
    from nemesis.netfaults import Links

    nem = compose(Links(1))
    nem.setup(run)

    def inv(f: str, value: dict[str, Any]) -> Op:
        return nem.invoke(run, Op(type="invoke", process=NEMESIS, f=f, value=value))

    try:
        lossy = inv("lossy", {"nodes": ["n3"], "drop_probability": 0.3})
        assert lossy.error is None and lossy.extra["landed"] is True, lossy
        assert " round trips stalled >= 150 ms (" in lossy.extra["evidence"], lossy.extra
        slow = inv("slow", {"nodes": ["n2"], "delay_ms": 100, "jitter_ms": 0})
        if slow.error is None:
            assert slow.extra["landed"] is True, slow
        else:
            assert "no netem qdisc" in slow.error and "landed" not in slow.extra, slow
        fast = inv("fast", {})
        assert fast.error is None and fast.extra["landed"] is True, fast
        # n3 alone: n2 was never shaped when its slow was refused
        assert "n3: round trip " in fast.extra["evidence"] and (
            slow.error is not None) == ("n2:" not in fast.extra["evidence"]), fast.extra
    finally:
        nem.teardown(run)


@pytest.mark.ssh
@pytest.mark.slow
def test_heal_undoes_an_ssh_run_left_behind(hosts: tuple[Path, Any], tmp_path: Path) -> None:
    from harness.control.ssh import SshBackend

    cluster, docker_hosts = hosts
    run = _ssh_run(tmp_path, cluster)
    backend = SshBackend()
    core.cluster_up(backend, run)  # and never down: as if the harness died
    assert run.net is not None
    run.net.partition(run, {"n3": ["n1"]})
    run.net.lossy(run, ["n2"], 0.5)
    assert _host_state(docker_hosts, "n3", backend.key)[1]
    assert backend.remote is not None
    backend.remote.close()
    lines = leftovers.heal_run(backend.key)
    assert len(lines) == 3, lines
    for n in run.nodes:
        assert _host_state(docker_hosts, n, backend.key) == ("", "", ""), (n, lines)


@pytest.mark.ssh
@pytest.mark.slow
def test_node_hosts_take_the_ssh_backend_s_own_options(hosts: tuple[Path, Any],
                                                       tmp_path: Path) -> None:
    """`--node` hosts with the backend's own options (`[ssh]`): the key given (the agent
    has none for them) and a broker port of its own, which clients and partitions use."""
    from harness.control.ssh import SshBackend
    from systems.undertow.client import BrokerClient

    cluster, docker_hosts = hosts
    cfg = [n["ssh_config"] for n in json.loads(cluster.read_text())["nodes"]]
    spec = build_spec({"backend": "ssh", "hosts": [f"{c['hostname']}:{c['port']}" for c in cfg],
                       "keys": 4, "ssh": {"ssh_user": cfg[0]["user"], "broker_port": 9192,
                                          "ssh_key_file": cfg[0]["identityfile"]}})
    assert spec.options["ssh"]["broker_port"] == 9192
    run = _ssh_run(tmp_path, spec=spec)
    backend = SshBackend()
    try:
        core.cluster_up(backend, run)
        assert set(run.client_addrs.values()) == {f"{c['hostname']}:9192" for c in cfg}
        c = BrokerClient(run.client_addrs, timeout_s=5.0)
        offset = c.produce(1, 5)
        assert run.net is not None and run.remote is not None
        run.net.partition(run, {"n1": ["n2"], "n2": ["n1"]})
        probe = "import socket; socket.create_connection(('%s', 9192), timeout=1.5)"
        assert not run.remote.exec("n2", ["python3", "-c", probe % docker_hosts.ips["n1"]]).ok
        run.net.heal(run)
        assert _first_record(c, 1) == [(offset, 5)]
        c.close()
    finally:
        core.cluster_down(backend, run)
    for n in run.nodes:
        assert _host_state(docker_hosts, n, backend.key) == ("", "", ""), n
