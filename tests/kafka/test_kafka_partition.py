"""Kafka in a network namespace per node: a partitioned leader is replaced, and heal undoes it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness import netns
from harness.control.launcher import Launcher
from harness.control.local import free_port
from harness.spec import BrokerSettings
from systems.kafka import config, jars
from systems.kafka.admin import KafkaAdmin
from systems.kafka.local import LocalKafka

pytestmark = [pytest.mark.kafka, pytest.mark.slow,
              pytest.mark.skipif(netns.supported() is not None,
                                 reason=f"netns: {netns.supported()}")]
SETTINGS = BrokerSettings(replication_factor=3, min_insync_replicas=2)


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
        old = admin.leader_of(0)
        assert old in names
        others = [n for n in names if n != old]
        ns.partition(None, {old: set(others), **{n: {old} for n in others}})
        deadline = time.monotonic() + 60
        new: str | None = old
        while time.monotonic() < deadline and new in (old, None):
            time.sleep(0.5)
            new = admin.leader_of(0)
        assert new in others, (old, new)
        ns.heal(None)
        admin.wait_ready(3, 2, 3, 2, timeout_s=120)  # the old leader catches up: full ISR
        kafka.close()
    finally:
        launcher.close()
        ns.down()
