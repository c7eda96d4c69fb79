"""The admin view of real Kafka (leaders, ISR, controller) and `undertow heal` on its JVMs."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from harness import leftovers
from harness.protocols import Run
from harness.runfiles import RunPaths
from harness.spec import build_spec
from systems.kafka.admin import active_controller
from tests.harness.claims import assert_node_faults_say_whether_they_landed
from tests.kafka.cluster import PARTITIONS, Cluster, known_leader, known_partitions

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _controller(c: Cluster) -> tuple[str | None, int]:
    states = c.kafka.quorum_states()
    names = {n.node_id: n.name for n in c.kafka.nodes.values()}
    epoch = max((int(s.get("leaderEpoch", -1)) for s in states.values()), default=-1)
    return active_controller(states, names), epoch


def test_leaders_isr_and_controller(kafka_cluster: Cluster) -> None:
    parts = known_partitions(kafka_cluster.admin)
    nodes = set(kafka_cluster.kafka.nodes)
    assert sorted(parts) == list(range(PARTITIONS))
    for view in parts.values():
        assert view.leader in nodes and set(view.isr) == set(view.replicas) == nodes
    assert known_leader(kafka_cluster.admin, 0) == parts[0].leader
    ctrl, epoch = _controller(kafka_cluster)
    assert ctrl in nodes and epoch >= 1


def test_a_killed_controller_is_replaced(kafka_cluster: Cluster) -> None:
    ctrl, epoch = _controller(kafka_cluster)
    assert ctrl is not None
    try:
        kafka_cluster.kafka.kill(None, ctrl)
        deadline = time.monotonic() + 30
        new: str | None = ctrl
        new_epoch = epoch
        while time.monotonic() < deadline and (new == ctrl or new_epoch <= epoch):
            time.sleep(0.2)
            new, new_epoch = _controller(kafka_cluster)
        assert new != ctrl and new_epoch > epoch, (ctrl, epoch, new, new_epoch)
    finally:
        kafka_cluster.ready()


def test_heal_kills_the_kafka_jvms(kafka_cluster: Cluster) -> None:
    pids = [kafka_cluster.kafka.pid(n) for n in kafka_cluster.kafka.nodes]
    assert all(pids)
    try:
        done = leftovers.heal_run(kafka_cluster.run_id, kafka_cluster.state)
        assert sum("killed" in line for line in done) == len(pids), done
        deadline = time.monotonic() + 10  # a killed JVM's threads take a moment to exit
        while time.monotonic() < deadline and any(map(kafka_cluster.kafka.is_running,
                                                      kafka_cluster.kafka.nodes)):
            time.sleep(0.05)
        for n in kafka_cluster.kafka.nodes:
            assert not kafka_cluster.kafka.is_running(n)
    finally:
        kafka_cluster.ready(timeout_s=90)


def test_kills_and_pauses_of_kafka_say_whether_they_landed(kafka_cluster: Cluster,
                                                           tmp_path: Path) -> None:
    """The nemesis on Kafka's JVMs, its claims read in /proc: a kill, a start with a new
    pid, a pause with every thread stopped and its resume land; the planted misses (a
    kill of a node already down, a pause of a process that exited) say why not."""
    run = Run(spec=build_spec({"system": "kafka"}), nodes=tuple(kafka_cluster.kafka.nodes),
              paths=RunPaths(tmp_path / "run"), log=logging.getLogger("test"))
    run.db = kafka_cluster.kafka  # type: ignore[assignment]  # kill, pause, /proc: all it needs
    try:
        assert_node_faults_say_whether_they_landed(
            run, paused_shows=r"n2: pid \d+, (\d+) of \1 threads stopped")
    finally:
        kafka_cluster.ready()
