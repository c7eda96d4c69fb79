"""Apache Kafka on the docker backend: a container per node from the Kafka node image
(Debian's JRE + the cached jars), faults on real JVMs, a whole run, nothing left behind."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException

from harness import core
from harness.protocols import Run
from harness.runfiles import RunPaths
from harness.spec import build_spec
from systems.kafka import jars
from systems.kafka.remote import KafkaRemoteDB
from tests.harness.claims import assert_each_fault_landed
from tests.kafka.cluster import known_leader
from tests.kafka.test_kafka_unflushed import cut_on_a_remote_cluster
from workloads.options import partitions

pytestmark = [pytest.mark.kafka, pytest.mark.docker, pytest.mark.slow]


def _docker() -> Any:
    try:
        from harness.image import docker_client

        return docker_client()
    except Exception as e:
        pytest.skip(f"no Docker engine (start it with `just docker-up`): {e}")


def _ours(client: Any, key: str) -> tuple[list[str], list[str]]:
    label = {"label": f"undertow.run={key}"}
    return ([c.name for c in client.containers.list(all=True, filters=label)],
            [n.name for n in client.networks.list(filters=label)])


def _until(what: str, ok: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.5)


# at night (a cluster of its own: 71 s of the suite); the suite's docker run below kills,
# pauses, partitions (each fault seen to land and heal), dumps and collects on containers,
# and tests/harness/test_docker_backend.py cuts real traffic and heals exactly our rules
@pytest.mark.nightly
def test_kill_pause_partition_dump_on_containers(tmp_path: Path, state: Path,
                                                 kafka_jars: jars.KafkaJars) -> None:
    """The DB on containers: ready, kill and restart, a frozen node, a partition that
    really takes a node out of every ISR (and its heal), replicas dumped, logs collected."""
    from harness.control.docker import DockerBackend

    client = _docker()
    spec = build_spec({"system": "kafka", "backend": "docker", "keys": 2, "key_pool": 2})
    root = tmp_path / "run"
    root.mkdir()
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root), log=logging.getLogger("test"))
    backend = DockerBackend()
    try:
        core.cluster_up(backend, run)
        db = run.db
        assert isinstance(db, KafkaRemoteDB) and db.admin is not None and run.net is not None
        assert db.controller(run) in run.nodes
        leader = known_leader(db.admin, 0)
        assert leader in run.nodes

        db.kill(run, leader)
        assert not db.is_running(leader)
        _until("a new leader for key 0", lambda: db.leader_of(run, 0) not in (None, leader))
        db.start(run, leader)
        db.wait_ready(run, 90)

        db.pause(run, "n3")
        assert db.proc.frozen("n3") and db.is_running("n3")
        db.kill(run, "n3")  # SIGKILL reaches a frozen JVM too
        assert not db.proc.frozen("n3") and not db.is_running("n3")
        db.start(run, "n3")
        db.wait_ready(run, 90)

        # the harness is cut from n3 too: cut off, n3 would still answer with its stale view
        run.net.partition(run, {"n3": ["n1", "n2", "client"], "n1": ["n3"], "n2": ["n3"]})

        def isr_without_n3() -> bool:
            try:
                parts = db.admin.partitions() if db.admin is not None else {}
            except KafkaException:  # asked n3, which does not answer the harness now
                return False
            return bool(parts) and all("n3" not in p.isr for p in parts.values())

        _until("n3 out of every ISR while cut off", isr_without_n3)
        run.net.heal(run)
        db.wait_ready(run, 90)  # a full ISR again

        rows = db.dump_replicas(run)
        assert {r["node"] for r in rows if "hw" in r} == {"n1", "n2", "n3"}
        assert sum("hw" in r for r in rows) == 3 * partitions(spec)
        for n in run.nodes:
            db.collect(run, n, run.paths.node_dir(n))
            assert "Kafka version" in (run.paths.node_dir(n) / "kafka.log").read_text()
            assert (run.paths.node_dir(n) / "server.properties").is_file()
    finally:
        core.cluster_down(backend, run)
    assert _ours(client, backend.key) == ([], [])


def test_a_short_docker_run_with_kills_pauses_and_partitions_is_valid(
        tmp_path: Path, state: Path, kafka_jars: jars.KafkaJars) -> None:
    client = _docker()
    spec = build_spec({"name": "kafka-docker", "system": "kafka", "backend": "docker",
                       "nemesis": ("kill", "pause", "partition"), "time_limit_s": 20.0,
                       # the controller target reads the containers' quorum-state files
                       "nemesis_targets": ("one", "controller"),
                       "nemesis_interval_s": 4.0, "seed": 11, "keys": 4, "key_pool": 16,
                       "results_dir": str(tmp_path)})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["backend"] == "docker"
    assert test["system_info"]["name"] == "kafka"
    assert test["system_info"]["version"] == kafka_jars.version
    rows = (outcome.run_dir / "replicas.jsonl").read_text().splitlines()
    assert sum('"hw"' in r for r in rows) == 3 * partitions(spec)
    history = (outcome.run_dir / "history.jsonl").read_text()
    for f in ("kill", "pause", "partition"):
        assert f'"f":"{f}"' in history.replace(" ", ""), f"no {f} in the history"
    assert '"controller":"n' in history.replace(" ", ""), "no fault found the controller"
    assert_each_fault_landed(history, ("kill", "start", "pause", "resume", "partition", "heal"))
    assert (outcome.run_dir / "nodes" / "n2" / "kafka.log").is_file()
    log = (outcome.run_dir / "harness.log").read_text()
    m = re.search(r"docker: network (\S+)-net on", log)
    assert m is not None, "the run's docker network is not in harness.log"
    assert _ours(client, m[1]) == ([], []), "the run left containers or its network"


# at night (a cluster of its own); the suite cuts a node's tail on the local backend
# (tests/kafka/test_kafka_unflushed.py), whose plan is the same code
@pytest.mark.nightly
def test_lose_unflushed_cuts_a_container_node_back_to_its_recovery_point(
        tmp_path: Path, state: Path, kafka_jars: jars.KafkaJars) -> None:
    """lose-unflushed on containers: planned on a copy of the node's log dir, applied in the
    container; after the restart the node serves exactly its flushed records."""
    from harness.control.docker import DockerBackend

    client = _docker()
    backend = DockerBackend()
    cut_on_a_remote_cluster(backend, build_spec({"system": "kafka", "backend": "docker",
                                                 "keys": 2, "key_pool": 2}), tmp_path)
    assert _ours(client, backend.key) == ([], [])
