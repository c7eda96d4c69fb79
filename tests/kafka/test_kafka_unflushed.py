"""lose-unflushed on real Kafka: a node's logs cut back to their recovery points.

A topic with one replica, on the node alone, so that nothing can fetch the lost records
back after the restart: the first records are written with `flush.messages=1`
(each fsynced, the recovery point follows them), the rest without (page cache
only). After SIGKILL, the cut and a restart, the node serves exactly the flushed ones."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from systems.kafka import unflushed
from tests.kafka.cluster import Cluster

pytestmark = pytest.mark.kafka

FLUSHED, UNFLUSHED = 30, 20


def _send(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for v in values:  # one batch each, so the recovery point moves record by record
        p.produce(topic, value=str(v).encode(), partition=0)
        assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if (err := m.error()) is not None:
                if err.code() == -191:  # _PARTITION_EOF: everything read
                    return out
                continue
            out.append(int(m.value() or b"-1"))
        raise AssertionError(f"no end of partition in 60 s; read {out}")
    finally:
        c.close()


def _wait_recovery_point(data_dir: Path, part: str, wanted: int) -> None:
    deadline = time.monotonic() + 30
    while unflushed.recovery_points(data_dir).get(part, -1) < wanted:
        assert time.monotonic() < deadline, \
            f"{part}: recovery point {unflushed.recovery_points(data_dir).get(part)} < {wanted}"
        time.sleep(0.2)


def test_lose_unflushed_cuts_a_node_back_to_its_recovery_point(kafka_cluster: Cluster) -> None:
    kafka, admin = kafka_cluster.kafka, kafka_cluster.admin.client
    topic = f"cut-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"flush.messages": "1",
                                          "min.insync.replicas": "1"})])[topic].result()
    try:
        deadline = time.monotonic() + 30
        while (leader := admin.list_topics(topic, timeout=5).topics[topic].partitions) == {} \
                or leader[0].leader < 0:
            assert time.monotonic() < deadline, "the topic has no leader"
            time.sleep(0.2)
        node = kafka_cluster.admin.names[leader[0].leader]
        _send(kafka.bootstrap, topic, range(FLUSHED))
        data = kafka.data_dir(node)
        _wait_recovery_point(data, f"{topic}-0", FLUSHED)
        res = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry("flush.messages", None,
                        incremental_operation=AlterConfigOpType.DELETE)])
        admin.incremental_alter_configs([res])[res].result()
        time.sleep(1.0)  # every broker has the new config before the next sends
        _send(kafka.bootstrap, topic, range(FLUSHED, FLUSHED + UNFLUSHED))
        time.sleep(1.5)  # the checkpoint is rewritten: it must still say FLUSHED

        kafka.kill(None, node)
        with pytest.raises(RuntimeError, match="running"):
            kafka.start(None, node)
            kafka.lose_unflushed(None, node)
        kafka.kill(None, node)
        plan = unflushed.plan(data)
        cut = {c.partition: c for c in plan.cuts}[f"{topic}-0"]
        assert (cut.recovery_point, cut.log_end) == (FLUSHED, FLUSHED + UNFLUSHED)
        assert unflushed.METADATA_DIR not in {c.partition for c in plan.cuts}
        meta = sorted((data / unflushed.METADATA_DIR).iterdir())
        meta_sizes = [p.stat().st_size for p in meta]
        kafka.lose_unflushed(None, node)
        assert unflushed.plan(data).dropped == {}  # nothing left past any recovery point
        assert [p.stat().st_size for p in meta] == meta_sizes  # the metadata log untouched
        kafka.start(None, node)

        assert _read_all(kafka.bootstrap, topic) == list(range(FLUSHED))
    finally:
        admin.delete_topics([topic])[topic].result()
        kafka_cluster.ready(timeout_s=120)
