"""Apache Kafka over the ssh backend, against sshd containers that hold a JRE: the jars
uploaded over SFTP, the JVMs under the same control as our broker, nothing left behind."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import core, leftovers
from harness.protocols import Run
from harness.runfiles import RunPaths
from harness.spec import build_spec
from systems.kafka import jars
from systems.kafka.system import JRE_PACKAGES
from tests.harness.claims import assert_each_fault_landed
from tests.kafka.test_kafka_unflushed import cut_on_a_remote_cluster
from workloads.options import partitions

pytestmark = [pytest.mark.kafka, pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    """Three sshd containers with a JRE and a key made now; yields (cluster.json, backend)."""
    from harness.control.sshd_hosts import sshd_hosts
    from harness.image import ImageError

    monkeypatch.setenv(leftovers.STATE_ENV, str(tmp_path / "state"))
    stack = contextlib.ExitStack()
    try:
        up = stack.enter_context(sshd_hosts(tmp_path / "sshd", ready_timeout_s=120,
                                            packages=JRE_PACKAGES))
    except ImageError as e:
        pytest.skip(f"no Docker engine for the sshd hosts: {e}")
    with stack:
        yield up


def _host_state(docker_hosts: Any, node: str, key: str) -> tuple[str, str, str]:
    """(Kafka JVMs, the run's iptables rules, the run's folder) on an sshd container."""
    from harness.control.docker import DockerRemote

    r = DockerRemote(docker_hosts.client, docker_hosts.containers)
    procs = r.exec(node, ["sh", "-c", "ps -eo args | grep '[k]afka.Kafka' || true"]).stdout
    rules = r.exec(node, ["sh", "-c", f"iptables -w -S | grep {key} || true"]).stdout
    files = r.exec(node, ["sh", "-c", f"ls /var/tmp/undertow/{key} 2>/dev/null || true"]).stdout
    return procs.strip(), rules.strip(), files.strip()


def test_a_short_ssh_run_with_kills_pauses_and_partitions_is_valid(
        hosts: tuple[Path, Any], tmp_path: Path, kafka_jars: jars.KafkaJars) -> None:
    from harness.control.docker import run_key

    cluster, docker_hosts = hosts
    spec = build_spec({"name": "kafka-ssh", "system": "kafka", "backend": "ssh",
                       "cluster_file": str(cluster), "nemesis": ("kill", "pause", "partition"),
                       "time_limit_s": 20.0, "nemesis_interval_s": 4.0, "seed": 11, "keys": 4,
                       "key_pool": 16, "results_dir": str(tmp_path / "results")})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["backend"] == "ssh"
    assert test["system_info"]["name"] == "kafka"
    assert test["system_info"]["version"] == kafka_jars.version
    rows = (outcome.run_dir / "replicas.jsonl").read_text().splitlines()
    assert sum('"hw"' in r for r in rows) == 3 * partitions(spec)
    assert "Kafka version" in (outcome.run_dir / "nodes" / "n1" / "kafka.log").read_text()
    assert_each_fault_landed((outcome.run_dir / "history.jsonl").read_text(),
                             ("kill", "start", "pause", "resume", "partition", "heal"))
    key = run_key(Run(spec=spec, nodes=spec.nodes, paths=RunPaths(outcome.run_dir),
                      log=logging.getLogger("test")))
    for n in spec.nodes:
        assert _host_state(docker_hosts, n, key) == ("", "", ""), n


# at night (47 s of the suite); the suite keeps `undertow heal` of an ssh run left behind
# (tests/harness/test_ssh_backend.py), of Kafka's JVMs left by a killed harness
# (tests/kafka/test_kafka_heal.py), and the ssh run above leaving its hosts clean
@pytest.mark.nightly
def test_heal_stops_kafka_left_behind_on_ssh_hosts(
        hosts: tuple[Path, Any], tmp_path: Path, kafka_jars: jars.KafkaJars) -> None:
    """A harness that died with Kafka up over ssh: `undertow heal` kills the JVMs (their
    pid files), removes the rules and the run's folder."""
    from harness.control.ssh import SshBackend

    cluster, docker_hosts = hosts
    spec = build_spec({"system": "kafka", "backend": "ssh", "cluster_file": str(cluster),
                       "keys": 2, "key_pool": 2})
    root = tmp_path / "run"
    root.mkdir()
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root), log=logging.getLogger("test"))
    backend = SshBackend()
    core.cluster_up(backend, run)  # and never down: as if the harness died
    assert run.net is not None and backend.remote is not None
    run.net.partition(run, {"n3": ["n1"]})
    assert "kafka.Kafka" in _host_state(docker_hosts, "n1", backend.key)[0]
    assert _host_state(docker_hosts, "n3", backend.key)[1]
    backend.remote.close()
    lines = leftovers.heal_run(backend.key)
    assert len(lines) == 3, lines
    for n in run.nodes:
        assert _host_state(docker_hosts, n, backend.key) == ("", "", ""), (n, lines)


# at night (three sshd hosts and a cluster of their own); the suite cuts a node's tail on
# the local backend (tests/kafka/test_kafka_unflushed.py), whose plan is the same code
@pytest.mark.nightly
def test_lose_unflushed_cuts_an_ssh_node_back_to_its_recovery_point(
        hosts: tuple[Path, Any], tmp_path: Path, kafka_jars: jars.KafkaJars) -> None:
    """lose-unflushed over ssh: the log dir copied over SFTP, the cut applied on the host."""
    from harness.control.ssh import SshBackend

    cluster, docker_hosts = hosts
    spec = build_spec({"system": "kafka", "backend": "ssh", "cluster_file": str(cluster),
                       "keys": 2, "key_pool": 2})
    backend = SshBackend()
    cut_on_a_remote_cluster(backend, spec, tmp_path)
    for n in spec.nodes:
        assert _host_state(docker_hosts, n, backend.key) == ("", "", ""), n
