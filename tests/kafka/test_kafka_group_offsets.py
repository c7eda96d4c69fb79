"""A group member whose committed-offset fetch for a newly assigned key hits a coordinator
that has moved is answered NOT_COORDINATOR for the whole request, and librdkafka then
never fetches that key (librdkafka #5586): the group client assigns it again, so its
polls read again. A CI run once read nothing for three minutes this way."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from systems.kafka.client import KafkaQueueClient
from systems.kafka.group_client import (
    OFFSET_FETCH_FAILED,
    GroupConsumer,
    KafkaGroupClient,
    group_config,
)
from tests.kafka.cluster import OFFSETS, PARTITIONS, Cluster, place_internal
from workloads.options import ConsumerSettings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(5_000_000)


def _read(group: KafkaGroupClient, timeout_s: float) -> tuple[list[list[int]], list[str]]:
    """Polls until one reads key 0's records, or timeout_s: what it read, and the errors
    the polls before it returned."""
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        read, error = group.fetch_batch()
        if error is not None:
            errors.append(error)
        if read.get("0"):
            return read["0"], errors
    return [], errors


def test_a_key_whose_committed_offset_fetch_hit_a_moved_coordinator_is_read_again(
        kafka_cluster: Cluster, tmp_path: Path) -> None:
    cluster = kafka_cluster
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=3.0,
                             bootstrap=cluster.kafka.bootstrap).open(None, "n1")
    group = KafkaGroupClient(queue, partitions=PARTITIONS,
                             settings=ConsumerSettings(commit="off"))
    # A member that assigns its key itself: librdkafka fetches the key's committed offset
    # from the cached coordinator, as for a key the group assigned it, but no heartbeat
    # learns of the coordinator's move before the next assignment's fetch.
    group.consumer = GroupConsumer({**group_config(queue.bootstrap, group.settings,
                                                   timeout_s=queue.timeout_s),
                                    "coordinator.query.interval.ms": 600_000})
    key0 = [TopicPartition(queue.topic, 0)]
    before: list[int] = []
    try:
        queue.produce(0, next(_values))
        group.consumer.assign(key0)
        first, errors = _read(group, 30)
        assert first, f"nothing read before the move: {errors}"
        md = cluster.admin.client.list_topics(timeout=5)  # the fetch made __consumer_offsets
        before = list(md.topics[OFFSETS].partitions[0].replicas)
        old = md.topics[OFFSETS].partitions[0].leader
        others = sorted(n.node_id for n in cluster.kafka.nodes.values() if n.node_id != old)
        place_internal(cluster, {OFFSETS: [others[0], others[1], old]}, tmp_path)

        queue.produce(0, next(_values))
        for _ in range(20):
            # fetched from the old coordinator: NOT_COORDINATOR once it has let go of the
            # group (it learns of the move from the controller's log on its own; until then
            # it still answers, and remains the member's coordinator)
            group.consumer.assign(key0)
            again, errors = _read(group, 30)
            if errors:
                break
            time.sleep(0.5)
        assert any(OFFSET_FETCH_FAILED in e and "NOT_COORDINATOR" in e for e in errors), errors
        assert again, f"nothing read after the move: {errors}"
        assert again[0] == first[0], (first, again)  # from the group's committed offset again
    finally:
        group.consumer.close()
        group.consumer = None
        queue.close(None)
        if before:
            place_internal(cluster, {OFFSETS: before}, tmp_path)
