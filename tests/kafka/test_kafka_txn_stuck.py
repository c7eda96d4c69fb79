"""librdkafka's send_offsets_to_transaction can outlive its own timeout, for ever, when the
group's cached coordinator went down while the transactions' stays up (librdkafka issues
#5456 and #5511: the coordinator request's timeout is never checked, and a decommissioned
coordinator never wakes it). The txn client bounds the call itself, so a transaction
whose offsets cannot be sent fails in bounded time and the next one commits on a new
producer, instead of the run waiting for ever for the operation (as a CI run once did)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from harness.runfiles import Op
from systems.kafka.txn_client import KafkaTxnClient
from tests.kafka.cluster import (
    OFFSETS,
    PARTITIONS,
    TXN_STATE,
    Cluster,
    place_internal,
    txn_member,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(4_000_000)


def _consume(member: KafkaTxnClient, deadline: float) -> None:
    """Commit records, then begin a transaction that polls until it consumed some (again
    after a rebalance, or after polls that found nothing)."""
    tries: list[str] = []  # why each try read nothing, for the failure's message
    while True:
        assert time.monotonic() < deadline, f"no records read: {tries[-5:]}"
        sends = [["send", k, next(_values)] for k in range(PARTITIONS)]
        done = member.invoke(None, Op("invoke", 0, "txn", sends))
        if done.type != "ok":
            tries.append(f"send txn {done.type}: {done.error}")
            continue
        assert member.begin(set()) is None
        for _ in range(20):
            _, error = member.poll()
            if error is not None or member.moved:
                break
        if error is None and member.moved:
            return
        tries.append(f"poll: {error or 'nothing read'}, assigned {member.extra()}")
        member.abort()


def test_send_offsets_ends_in_bounded_time_when_the_group_coordinator_was_decommissioned(
        kafka_cluster: Cluster, tmp_path: Path) -> None:
    """The group coordinator is killed and drops out of the producer's metadata, which
    decommissions it while it is still the producer's cached coordinator: without the
    client's bound, send_offsets_to_transaction then never returns (#5511)."""
    cluster = kafka_cluster
    member = txn_member(cluster)  # its subscribe made __consumer_offsets
    # librdkafka forgets a coordinator unused for metadata.max.age.ms (3 s with the
    # clients' 1 s refresh) and then looks it up afresh, which does not hang: the hang
    # needs the coordinator still cached when it is decommissioned. In a run each
    # transaction's send_offsets keeps it cached; here it is kept for the whole test.
    member.producer_config["metadata.max.age.ms"] = 120_000
    deadline = time.monotonic() + 180
    sends = [["send", k, next(_values)] for k in range(PARTITIONS) for _ in range(3)]
    assert member.invoke(None, Op("invoke", 0, "txn", sends)).type == "ok"  # made TXN_STATE
    md = cluster.admin.client.list_topics(timeout=5)
    before = {t: list(md.topics[t].partitions[0].replicas) for t in (TXN_STATE, OFFSETS)}
    ids = sorted(n.node_id for n in cluster.kafka.nodes.values())
    group_node = cluster.admin.names[ids[1]]
    # the group's coordinator alone goes down: the transactions' coordinator and log are
    # on the other nodes
    place_internal(cluster, {TXN_STATE: [ids[0], ids[2]], OFFSETS: [ids[1], ids[0], ids[2]]},
                   tmp_path)
    try:
        # a transaction that sends offsets and commits: the producer caches the coordinator
        _consume(member, deadline)
        assert member.send_offsets() is None
        assert member.commit() == ("ok", None)
        assert cluster.admin.coordinator() == group_node

        cluster.kafka.kill(None, group_node)
        while ids[1] in cluster.admin.client.list_topics(timeout=5).brokers:  # fenced
            assert time.monotonic() < deadline, f"{group_node} still registered"
            time.sleep(0.2)
        assert member.producer is not None
        assert ids[1] not in member.producer.list_topics(timeout=5).brokers  # decommissioned
        _consume(member, deadline)
        t0 = time.monotonic()
        error = member.send_offsets()
        took = time.monotonic() - t0
        assert error is not None and took < member.offsets_deadline_s + 2.0, (error, took)
        member.abort()
    finally:
        cluster.kafka.start(None, group_node)
        cluster.ready()
        place_internal(cluster, before, tmp_path)
    # the next transaction, on a new producer that fenced the stuck one, commits
    done = None
    while done is None or done.type != "ok":
        assert time.monotonic() < deadline, done
        done = member.invoke(None, Op("invoke", 0, "txn", [["poll"], ["send", 0, next(_values)]]))
    member.close(None)
    assert member.group is not None
    member.group.spares.close_all()
