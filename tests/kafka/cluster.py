"""The shared Kafka cluster's handle and settings, and a transactional member of its group
(the fixtures are in conftest.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from harness.runfiles import Op
from harness.spec import BrokerSettings, ConsumerSettings
from systems.kafka.admin import KafkaAdmin
from systems.kafka.client import KafkaQueueClient
from systems.kafka.group_client import KafkaGroupClient
from systems.kafka.local import LocalKafka
from systems.kafka.txn_client import KafkaTxnClient

PARTITIONS = 4
SETTINGS = BrokerSettings(replication_factor=3, min_insync_replicas=2)


@dataclass
class Cluster:
    kafka: LocalKafka
    admin: KafkaAdmin
    root: Path
    state: Path  # the leftovers folder of the cluster's JVMs

    def ready(self, timeout_s: float = 60.0) -> None:
        """Every node up and every partition led with a full ISR (after a test's faults)."""
        for n in self.kafka.nodes:
            self.kafka.resume(None, n)
            self.kafka.start(None, n)
        self.admin.wait_ready(len(self.kafka.nodes), PARTITIONS, SETTINGS.replication_factor,
                              SETTINGS.min_insync_replicas, timeout_s=timeout_s)


def txn_member(cluster: Cluster) -> KafkaTxnClient:
    """A transactional client in the cluster's consumer group (commits only in
    transactions), subscribed to every partition."""
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=3.0,
                             bootstrap=cluster.kafka.bootstrap)
    group = KafkaGroupClient(queue, partitions=PARTITIONS,
                             settings=ConsumerSettings(commit="off"))
    c = KafkaTxnClient(queue, group=group).open(None, "n1")
    assert c.invoke(None, Op("invoke", 0, "subscribe", list(range(PARTITIONS)))).type == "ok"
    return c


def known_leader(admin: KafkaAdmin, key: int, timeout_s: float = 30.0) -> str | None:
    """The key's leader once a metadata answer names one. Right after another answer named
    it, the next may still lack it: it can come from a broker that has not yet learnt the
    leader (each follows the controller's log on its own) or time out on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while (leader := admin.leader_of(key)) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return leader
