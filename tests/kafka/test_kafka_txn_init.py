"""The Kafka txn client resumes an init_transactions that timed out on the same
producer, as librdkafka asks, instead of starting a second InitProducerId."""

from __future__ import annotations

import itertools

import pytest

from harness.runfiles import Op
from systems.kafka.client import KafkaQueueClient
from systems.kafka.txn_client import KafkaTxnClient
from tests.kafka.cluster import PARTITIONS, Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(2_000_000)


def _txn() -> Op:
    return Op(type="invoke", process=0, f="txn", time=0,
              value=[["send", 0, next(_values)], ["send", 1, next(_values)]])


def test_a_timed_out_init_is_resumed_on_the_same_producer(kafka_cluster: Cluster) -> None:
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=3.0,
                             bootstrap=kafka_cluster.kafka.bootstrap)
    c = KafkaTxnClient(queue).open(None, "n1")
    try:
        for n in kafka_cluster.kafka.nodes:
            kafka_cluster.kafka.pause(None, n)
        failed = c.invoke(None, _txn())
        assert failed.type == "fail" and "_TIMED_OUT" in (failed.error or ""), failed
        stalled = c.producer
        assert stalled is not None and c.resume_init
        kafka_cluster.ready()
        done = c.invoke(None, _txn())
        for _ in range(5):  # the coordinator may still be loading after the pause
            if done.type == "ok":
                break
            done = c.invoke(None, _txn())
        assert done.type == "ok", done
        assert c.producer is stalled  # the same producer finished its init
    finally:
        kafka_cluster.ready()
        c.close(None)
