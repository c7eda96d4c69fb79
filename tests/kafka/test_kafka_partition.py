"""Kafka in a network namespace per node: with its leader cut off, a partition takes acks=all
writes again on the majority side; heal brings the old leader back into the ISR."""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from harness import netns
from harness.control.launcher import Launcher
from harness.control.local import free_port
from systems.kafka import config, jars
from systems.kafka.admin import KafkaAdmin
from systems.kafka.client import KafkaQueueClient
from systems.kafka.local import LocalKafka
from systems.kafka.options import KafkaOptions
from tests.kafka.cluster import known_leader

pytestmark = [pytest.mark.kafka, pytest.mark.slow,
              pytest.mark.skipif(netns.supported() is not None,
                                 reason=f"netns: {netns.supported()}")]
SETTINGS = KafkaOptions(replication_factor=3, min_insync_replicas=2)


def test_a_leader_cut_off_from_its_peers_is_replaced(
        state: Path, tmp_path: Path, kafka_jars: jars.KafkaJars) -> None:
    names = ("n1", "n2", "n3")
    ns = netns.Namespaces("kafka-netns-test", names)
    launcher = Launcher("kafka-netns-test")
    try:
        addrs = ns.up()
        nodes = {n: replace(k, host=addrs[n])
                 for n, k in config.make_nodes(names, "127.0.0.1", free_port).items()}
        kafka = LocalKafka(kafka_jars, nodes, tmp_path, SETTINGS, partitions=2,
                           launcher=launcher, prefixes={n: ns.prefix(n) for n in names})
        kafka.prepare()
        for n in names:
            kafka.start(None, n)
        admin = KafkaAdmin(kafka.bootstrap, {k.node_id: k.name for k in nodes.values()})
        admin.wait_ready(3, 2, 3, 2, timeout_s=120)
        old = known_leader(admin, 0)
        assert old in names
        others = [n for n in names if n != old]
        ns.partition(None, {old: set(others), **{n: {old} for n in others}})
        # The cut-off leader still answers metadata naming itself, so ask the data path:
        # librdkafka follows leader epochs to the leader the majority elected.
        # A fresh client per attempt, as the workload reopens one after an indeterminate
        # send: librdkafka asks one broker at random for its producer id, and the cut-off
        # one answers "coordinator load in progress" for as long as the partition lasts.
        template = KafkaQueueClient(keys=2, acks="all", timeout_s=5.0, bootstrap=kafka.bootstrap)
        deadline = time.monotonic() + 90
        offset: int | None = None
        while offset is None and time.monotonic() < deadline:
            client = template.open(None, others[0])
            try:
                with contextlib.suppress(KafkaException):
                    offset = client.produce(0, 1)
            finally:
                client.close(None)
        assert offset is not None, f"no acks=all write on key 0 with {old} cut off"
        ns.heal(None)
        admin.wait_ready(3, 2, 3, 2, timeout_s=120)  # the old leader catches up: full ISR
        kafka.close()
    finally:
        launcher.close()
        ns.down()
