"""One real 3-node Kafka cluster shared by the kafka tests (jars resolved on first use)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from harness import leftovers
from harness.control.launcher import Launcher
from harness.control.local import free_port
from systems.kafka import config, jars
from systems.kafka.admin import KafkaAdmin
from systems.kafka.local import LocalKafka
from tests.kafka.cluster import PARTITIONS, SETTINGS, Cluster


@pytest.fixture(scope="session")
def kafka_jars() -> jars.KafkaJars:
    """The newest 4.x (Maven resolves it the first time on a fresh machine)."""
    if shutil.which("java") is None:
        pytest.fail("java is not on PATH (scripts/bootstrap installs openjdk-17-jdk-headless)")
    return jars.resolve()


@pytest.fixture(scope="session")
def kafka_cluster(kafka_jars: jars.KafkaJars,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("kafka")
    state = root / "state"
    old = os.environ.get(leftovers.STATE_ENV)
    os.environ[leftovers.STATE_ENV] = str(state)  # the run's folder is fixed at its first item
    # one run id per cluster: heal_run kills every process marked with it, so a worker that
    # tears its cluster down must not name the other worker's (`-n 2` without loadgroup)
    run_id = f"kafka-tests-{os.getpid()}"
    launcher = Launcher(run_id)
    nodes = config.make_nodes(("n1", "n2", "n3"), "127.0.0.1", free_port)
    kafka = LocalKafka(kafka_jars, nodes, root, SETTINGS, partitions=PARTITIONS,
                       launcher=launcher)
    admin = KafkaAdmin(kafka.bootstrap, {n.node_id: n.name for n in nodes.values()})
    try:
        try:
            kafka.prepare()
            for n in nodes:
                kafka.start(None, n)
        finally:
            if old is None:
                del os.environ[leftovers.STATE_ENV]
            else:
                os.environ[leftovers.STATE_ENV] = old
        c = Cluster(kafka, admin, root, state / run_id, run_id)
        c.ready(timeout_s=120)
        yield c
    finally:
        kafka.close()
        launcher.close()
        leftovers.heal_run(run_id, state / run_id)
        leftovers.end_run(run_id, state / run_id)
