"""The shared Kafka cluster's handle and settings, and a transactional member of its group
(the fixtures are in conftest.py)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import ElectionType, KafkaException, TopicPartition

from harness.runfiles import Op
from systems.kafka import config
from systems.kafka.admin import KafkaAdmin, PartitionView
from systems.kafka.client import KafkaQueueClient
from systems.kafka.group_client import KafkaGroupClient
from systems.kafka.local import LocalKafka
from systems.kafka.options import KafkaOptions
from systems.kafka.txn_client import KafkaTxnClient
from workloads.options import ConsumerSettings

PARTITIONS = 4
OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"  # one partition each
SETTINGS = KafkaOptions(replication_factor=3, min_insync_replicas=2)


@dataclass
class Cluster:
    kafka: LocalKafka
    admin: KafkaAdmin
    root: Path
    state: Path  # the leftovers folder of the cluster's JVMs
    run_id: str  # what its JVMs are marked with (UNDERTOW_RUN_ID): this cluster's alone

    def ready(self, timeout_s: float = 60.0) -> None:
        """Every node up and every partition led with a full ISR (after a test's faults)."""
        for n in self.kafka.nodes:
            self.kafka.resume(None, n)
            self.kafka.start(None, n)
        self.admin.wait_ready(len(self.kafka.nodes), PARTITIONS, SETTINGS.replication_factor,
                              SETTINGS.min_insync_replicas, timeout_s=timeout_s)


def txn_member(cluster: Cluster, topic: str = config.TOPIC, timeout_s: float = 3.0
               ) -> KafkaTxnClient:
    """A transactional client in the cluster's consumer group (commits only in
    transactions), subscribed to every partition of `topic`."""
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=timeout_s,
                             bootstrap=cluster.kafka.bootstrap, topic=topic)
    group = KafkaGroupClient(queue, partitions=PARTITIONS,
                             settings=ConsumerSettings(commit="off"))
    c = KafkaTxnClient(queue, group=group).open(None, "n1")
    assert c.invoke(None, Op("invoke", 0, "subscribe", list(range(PARTITIONS)))).type == "ok"
    return c


def known_partitions(admin: KafkaAdmin, timeout_s: float = 30.0) -> dict[int, PartitionView]:
    """The topic's partitions once a metadata answer names every one: an answer from a
    broker that has not yet learnt of the topic says it does not exist."""
    deadline = time.monotonic() + timeout_s
    parts: dict[int, PartitionView] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):  # a metadata request that timed out
            if len(parts := admin.partitions()) == PARTITIONS:
                break
        time.sleep(0.1)
    return parts


def known_leader(admin: KafkaAdmin, key: int, timeout_s: float = 30.0) -> str | None:
    """The key's leader once a metadata answer names one. Right after another answer named
    it, the next may still lack it: it can come from a broker that has not yet learnt the
    leader (each follows the controller's log on its own) or time out on a loaded machine."""
    deadline = time.monotonic() + timeout_s
    while (leader := admin.leader_of(key)) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return leader


def place_internal(cluster: Cluster, replicas: dict[str, list[int]], tmp: Path) -> None:
    """Give partition 0 of each internal topic these replicas, the first leading (Kafka's
    own reassignment tool, then a preferred-leader election)."""
    plan = {"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": r}
                                         for t, r in replicas.items()]}
    (tmp / "plan.json").write_text(json.dumps(plan))
    tool = subprocess.run([cluster.kafka.java, *config.TOOL_OPTS, "-cp",
                           cluster.kafka.jars.classpath,
                           "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                           "--bootstrap-server", cluster.kafka.bootstrap,
                           "--reassignment-json-file", str(tmp / "plan.json"), "--execute"],
                          capture_output=True, text=True, timeout=120)
    assert tool.returncode == 0, f"reassignment refused: {tool.stdout[-2000:]}{tool.stderr[-2000:]}"
    deadline = time.monotonic() + 60
    while True:
        try:
            cluster.admin.client.elect_leaders(
                ElectionType.PREFERRED, [TopicPartition(t, 0) for t in replicas]).result()
        except Exception:  # ELECTION_NOT_NEEDED once led as asked; retried otherwise
            pass
        md = cluster.admin.client.list_topics(timeout=5)
        now = {t: md.topics[t].partitions[0] for t in replicas}
        if all(p.leader == replicas[t][0] and sorted(p.replicas) == sorted(replicas[t])
               and sorted(p.isrs) == sorted(replicas[t]) for t, p in now.items()):
            return
        assert time.monotonic() < deadline, f"not placed as asked: {now}"
        time.sleep(0.5)
