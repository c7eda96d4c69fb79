"""The shared Kafka cluster's handle and settings (the fixtures are in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.spec import BrokerSettings
from systems.kafka.admin import KafkaAdmin
from systems.kafka.local import LocalKafka

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
