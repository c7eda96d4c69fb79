"""The queue workload's client on real Kafka: offsets from delivery reports, reads, errors."""

from __future__ import annotations

import itertools

import pytest

from harness.runfiles import Op
from systems.kafka.client import KafkaQueueClient
from tests.kafka.cluster import PARTITIONS, Cluster, known_leader

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(1_000_000)

def _op(f: str, value: object, **extra: object) -> Op:
    return Op(type="invoke", process=0, f=f, value=value, time=0, extra=dict(extra))


def _client(cluster: Cluster, acks: str = "all") -> KafkaQueueClient:
    return KafkaQueueClient(keys=PARTITIONS, acks=acks, timeout_s=5.0,
                            bootstrap=cluster.kafka.bootstrap).open(None, "n1")


def test_sends_get_offsets_and_polls_read_them(kafka_cluster: Cluster) -> None:
    c = _client(kafka_cluster)
    try:
        sent: dict[int, list[list[int]]] = {}
        for i in range(12):
            key, value = i % PARTITIONS, next(_values)
            done = c.invoke(None, _op("send", [["send", key, value]]))
            assert done.type == "ok", done
            (_, k, (offset, v)), = done.value
            assert (k, v) == (key, value) and isinstance(offset, int)
            sent.setdefault(key, []).append([offset, value])
        for records in sent.values():
            offsets = [o for o, _ in records]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        assert c.invoke(None, _op("assign", sorted(sent), seek_to_beginning=True)).type == "ok"
        read: dict[str, list[list[int]]] = {}
        for _ in range(50):
            done = c.invoke(None, _op("poll", [["poll"]]))
            assert done.type == "ok", done
            for k, recs in done.value[0][1].items():
                read.setdefault(k, []).extend(recs)
            if all(str(k) in read and read[str(k)][-1][0] >= recs[-1][0]
                   for k, recs in sent.items()):
                break
        for key, records in sent.items():
            got = {o: v for o, v in read[str(key)]}
            assert all(got.get(o) == v for o, v in records), (key, records, read[str(key)])
    finally:
        c.close(None)


def test_send_to_a_missing_partition_fails(kafka_cluster: Cluster) -> None:
    c = _client(kafka_cluster, acks="1")
    try:
        done = c.invoke(None, _op("send", [["send", PARTITIONS + 3, next(_values)]]))
        assert done.type == "fail" and "_UNKNOWN_PARTITION" in (done.error or ""), done
    finally:
        c.close(None)


def test_acks_all_with_the_followers_paused_is_not_ok(kafka_cluster: Cluster) -> None:
    """With two of three paused, an acks=all write cannot be acknowledged: info, never ok."""
    leader = known_leader(kafka_cluster.admin, 0)
    assert leader is not None
    c = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=3.0,
                         bootstrap=kafka_cluster.kafka.bootstrap).open(None, leader)
    followers = [n for n in kafka_cluster.kafka.nodes if n != leader]
    try:
        for n in followers:
            kafka_cluster.kafka.pause(None, n)
        done = c.invoke(None, _op("send", [["send", 0, next(_values)]]))
        assert done.type == "info", done
    finally:
        c.close(None)
        kafka_cluster.ready()
