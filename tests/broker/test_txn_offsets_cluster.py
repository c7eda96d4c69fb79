"""Consumer offsets sent inside a transaction (consume, transform, produce) on a real 3-node
cluster: invisible until the commit marker, dropped at an abort, refused for a fenced
generation, and whole across a coordinator failover."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from broker.localcluster import LocalCluster

from systems.undertow.client import BrokerClient, ClientError
from systems.undertow.group_member import GroupMember, fetch_committed
from systems.undertow.txn_producer import Outcome, TxnProducer

pytestmark = pytest.mark.slow

SETTINGS = {"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
            "min.insync.replicas": 2, "broker.session.timeout.ms": 1500}
KEYS = 4
TOPIC = "queue"
COMMITTED = "read_committed"


def member(c: LocalCluster, group: str) -> tuple[GroupMember, BrokerClient]:
    cl = BrokerClient(c.addrs, timeout_s=15)
    m = GroupMember(cl, group, [TOPIC], {TOPIC: KEYS}, session_timeout_ms=60_000,
                    rebalance_timeout_ms=20_000)
    return m, cl


def committed(cl: BrokerClient, group: str) -> dict[int, int]:
    """Without waiting for stability: what the group holds committed now."""
    reply = cl.group_request({"type": "offset_fetch", "group": group,
                              "partitions": [[TOPIC, k] for k in range(KEYS)]}, timeout_s=20)
    assert reply.get("error") is None, reply
    return {p: o for _t, p, o in reply["offsets"]}


def stable(cl: BrokerClient, group: str, timeout_s: float = 30) -> dict[int, int]:
    got = fetch_committed(cl, group, [(TOPIC, k) for k in range(KEYS)], timeout_s=timeout_s)
    return {p: o for (_t, p), o in got.items()}


def read(cl: BrokerClient, key: int) -> list[int]:
    records, _next = cl.fetch_next(key, 0, max_records=1000, isolation=COMMITTED)
    return [v for _o, v in records]


def test_offsets_in_a_transaction_count_at_its_commit_and_not_at_its_abort(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    m, mcl = member(c, "eos")
    pcl = BrokerClient(c.addrs, timeout_s=15, retries=3)
    p = TxnProducer(pcl, "t-eos", transaction_timeout_ms=60_000)
    other, ocl = member(c, "eos")
    try:
        m.join()
        assert m.commit({(TOPIC, 0): 1})
        assert committed(mcl, "eos") == {0: 1}

        p.begin()
        p.add_partitions([1])
        pcl.produce(1, 10)
        p.send_offsets("eos", {(TOPIC, 0): 5}, generation=m.generation, member_id=m.member_id)
        # pending: the group's committed offset stays; a fetch that requires it stable waits
        assert committed(mcl, "eos") == {0: 1}
        with pytest.raises(ClientError) as unstable:
            stable(mcl, "eos", timeout_s=0.5)
        assert unstable.value.code == "UNSTABLE_OFFSET_COMMIT"
        assert p.end(commit=True) is Outcome.COMMITTED
        assert stable(mcl, "eos") == {0: 5}
        assert read(mcl, 1) == [10]

        # aborted: the offsets sent in it are dropped, the output with them
        p.begin()
        p.add_partitions([1])
        pcl.produce(1, 11)
        p.send_offsets("eos", {(TOPIC, 0): 9, (TOPIC, 2): 3}, generation=m.generation,
                       member_id=m.member_id)
        assert p.end(commit=False) is Outcome.ABORTED
        assert stable(mcl, "eos") == {0: 5}
        assert read(mcl, 1) == [10]

        # offsets alone (no send) also ride on the transaction
        p.begin()
        p.send_offsets("eos", {(TOPIC, 3): 2}, generation=m.generation, member_id=m.member_id)
        assert p.end(commit=True) is Outcome.COMMITTED
        assert stable(mcl, "eos") == {0: 5, 3: 2}

        # a second member joins: generation moves on, and the first member's old generation
        # is refused (KIP-447); its transaction can only abort
        old_generation = m.generation
        t = threading.Thread(target=other.join)
        t.start()
        assert c.wait(lambda: not m.heartbeat(), 20, "the first member told to rejoin")
        m.join()
        t.join(30)
        assert m.generation > old_generation == other.generation - 1
        p.begin()
        p.add_partitions([2])
        pcl.produce(2, 20)
        with pytest.raises(ClientError) as fenced:
            p.send_offsets("eos", {(TOPIC, 0): 50}, generation=old_generation,
                           member_id=m.member_id)
        assert fenced.value.code == "ILLEGAL_GENERATION"
        p.abandon()
        p.begin()  # initialises again, which aborts the fenced transaction
        assert p.end(commit=False) is Outcome.ABORTED
        assert stable(mcl, "eos") == {0: 5, 3: 2}
        assert read(mcl, 2) == []
    finally:
        for x in (mcl, pcl, ocl):
            x.close()


def test_a_group_coordinator_killed_mid_commit_keeps_offsets_and_output_together(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    probe = BrokerClient(c.addrs, timeout_s=15)
    # a group whose coordinator is not the (single) controller, so killing it fails over
    group = next(g for g in (f"fo-{i}" for i in range(50))
                 if probe.group_request({"type": "find_coordinator", "group": g})["node"]
                 != c.controller)
    coordinator = probe.group_request({"type": "find_coordinator", "group": group})["node"]
    m, mcl = member(c, group)
    pcl = BrokerClient(c.addrs, timeout_s=15, retries=3)
    p = TxnProducer(pcl, f"t-{group}", transaction_timeout_ms=5_000)
    try:
        m.join()
        assert m.commit({(TOPIC, 0): 1})
        p.begin()
        p.add_partitions([1, 2])
        pcl.produce(1, 100)
        pcl.produce(2, 200)
        p.send_offsets(group, {(TOPIC, 0): 7}, generation=m.generation,
                       member_id=m.member_id)
        outcome: list[Outcome] = []
        t = threading.Thread(target=lambda: outcome.append(p.end(commit=True)))
        t.start()
        c.kill(coordinator)
        t.join(60)
        assert outcome, "end_txn never returned"
        # the new coordinator replays the pending offsets and applies the marker it gets
        offsets = stable(probe, group, timeout_s=60)
        seen = (read(probe, 1), read(probe, 2))
        whole: tuple[dict[int, int], tuple[list[int], list[int]]] = ({0: 7}, ([100], [200]))
        none: tuple[dict[int, int], tuple[list[int], list[int]]] = ({0: 1}, ([], []))
        assert (offsets, seen) in (whole, none), (offsets, seen)  # never half
        if outcome[0] is Outcome.COMMITTED:
            assert (offsets, seen) == whole
        elif outcome[0] is Outcome.ABORTED:
            assert (offsets, seen) == none
        c.start(coordinator)
    finally:
        for x in (probe, mcl, pcl):
            x.close()
