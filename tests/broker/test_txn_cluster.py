"""Transactions on a real 3-node cluster: commit and abort under both isolation levels, the
last stable offset, fencing of an older epoch, and a coordinator killed mid-commit."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from broker.localcluster import LocalCluster, request

from systems.undertow.client import BrokerClient, ClientError
from systems.undertow.txn_producer import Outcome, TxnProducer

pytestmark = pytest.mark.slow

SETTINGS = {"transaction.state.log.num.partitions": 3, "min.insync.replicas": 2,
            "broker.session.timeout.ms": 1500}
COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"


def read(cl: BrokerClient, key: int, isolation: str) -> list[int]:
    records, _next = cl.fetch_next(key, 0, max_records=1000, isolation=isolation)
    return [v for _o, v in records]


def producer(c: LocalCluster, tid: str, timeout_ms: int = 60_000) -> tuple[TxnProducer,
                                                                            BrokerClient]:
    cl = BrokerClient(c.addrs, timeout_s=15, retries=3)
    return TxnProducer(cl, tid, transaction_timeout_ms=timeout_ms), cl


def test_commit_and_abort_under_both_isolation_levels_and_the_lso(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    p, cl = producer(c, "a")
    reader = BrokerClient(c.addrs, timeout_s=15)
    try:
        p.begin()
        p.add_partitions([0, 1])
        first = cl.produce(0, 1)
        cl.produce(1, 2)
        # open: read_uncommitted sees it (acks=all: below the HW), read_committed stops at it
        assert read(reader, 0, UNCOMMITTED) == [1]
        assert read(reader, 0, COMMITTED) == []
        _recs, nxt = reader.fetch_next(0, 0, isolation=COMMITTED)
        assert nxt == first == 0
        assert p.end(commit=True) is Outcome.COMMITTED
        c.wait(lambda: read(reader, 0, COMMITTED) == [1] and read(reader, 1, COMMITTED) == [2],
               20, "the commit markers")

        p.begin()
        p.add_partitions([0])
        cl.produce(0, 3)
        assert p.end(commit=False) is Outcome.ABORTED
        # the abort marker moves the LSO past the aborted record, which only read_uncommitted
        # returns; a later committed record is read past it
        p.begin()
        p.add_partitions([0])
        cl.produce(0, 4)
        assert p.end(commit=True) is Outcome.COMMITTED
        # the marker is appended before it is committed: wait for both
        c.wait(lambda: read(reader, 0, COMMITTED) == [1, 4]
               and reader.fetch_next(0, 0, isolation=UNCOMMITTED)[1] == 6, 20,
               "the second commit")
        assert read(reader, 0, UNCOMMITTED) == [1, 3, 4]
        # offsets of markers are gaps: records at 0 (1), 2 (3), 4 (4)
        records, nxt = reader.fetch_next(0, 0, isolation=UNCOMMITTED)
        assert [o for o, _v in records] == [0, 2, 4] and nxt == 6
        rows = request(c.addrs["n1"], {"type": "dump"}, timeout_s=10)["rows"]
        dumped = [r for r in rows if r.get("key") == 0 and "offset" in r]
        assert [r["value"] for r in dumped] == [1, 3, 4]
    finally:
        cl.close()
        reader.close()


def test_a_new_instance_fences_the_old_epoch_and_aborts_its_transaction(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    old, old_cl = producer(c, "z")
    new, new_cl = producer(c, "z")
    reader = BrokerClient(c.addrs, timeout_s=15)
    try:
        old.begin()
        old.add_partitions([2])
        old_cl.produce(2, 10)
        assert old_cl.producer is not None
        new.begin()  # init: the old instance's transaction is aborted, its epoch fenced
        assert new_cl.producer is not None and new_cl.producer[0] == old_cl.producer[0]
        assert new_cl.producer[1] > old_cl.producer[1]
        assert old.end(commit=True) is Outcome.ABORTED
        with pytest.raises(ClientError) as e:  # the abort marker fenced epoch 0 in p2
            old_cl.produce_attempt(2, 11, "all", 1)
        assert e.value.code == "INVALID_PRODUCER_EPOCH" and e.value.definite
        new.add_partitions([2])
        new_cl.produce(2, 12)
        assert new.end(commit=True) is Outcome.COMMITTED
        c.wait(lambda: read(reader, 2, COMMITTED) == [12], 20, "the new instance's commit")
        assert read(reader, 2, UNCOMMITTED) == [10, 12]
    finally:
        for x in (old_cl, new_cl, reader):
            x.close()


def test_a_coordinator_killed_mid_commit_leaves_the_transaction_whole(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    reader = BrokerClient(c.addrs, timeout_s=15)
    # an id whose coordinator is not the (single) controller, so killing it fails over
    for i in range(50):
        p, cl = producer(c, f"f{i}", timeout_ms=3000)
        coordinator = p._find(10**12)
        if coordinator != c.controller:
            break
        cl.close()
    try:
        p.begin()
        keys = list(range(8))
        p.add_partitions(keys)
        for k in keys:
            cl.produce(k, 100 + k)
        outcome: list[Outcome] = []
        t = threading.Thread(target=lambda: outcome.append(p.end(commit=True)))
        t.start()
        c.kill(coordinator)
        t.join(60)
        assert outcome, "end_txn never returned"

        def settled() -> bool:  # every partition's LSO passed the transaction
            try:
                return all(reader.fetch_next(k, 0, isolation=COMMITTED)[1] >= 2 for k in keys)
            except ClientError:
                return False

        c.wait(settled, 60, "markers in every partition")
        seen = {k: read(reader, k, COMMITTED) for k in keys}
        whole = {k: [100 + k] for k in keys}
        assert seen in (whole, {k: [] for k in keys}), seen  # never half
        if outcome[0] is Outcome.COMMITTED:
            assert seen == whole
        elif outcome[0] is Outcome.ABORTED:
            assert seen == {k: [] for k in keys}
        c.start(coordinator)
    finally:
        cl.close()
        reader.close()


def test_back_to_back_transactions_stay_whole_across_a_coordinator_failover(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """Each next transaction's add waits only for the previous one's markers (its record
    stands for Complete): over overlapping partitions, then a failover, read_committed
    shows exactly the committed transactions' records, in order."""
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    reader = BrokerClient(c.addrs, timeout_s=15)
    for i in range(50):
        p, cl = producer(c, f"b{i}")
        coordinator = p._find(10**12)
        if coordinator != c.controller:
            break
        cl.close()
    keys = range(4)
    sent: dict[int, list[int]] = {k: [] for k in keys}
    committed: dict[int, list[int]] = {k: [] for k in keys}
    again, again_cl = producer(c, p.tid)
    try:
        for i in range(30):
            txn = {i % 4: 1000 + 2 * i, (i + 1) % 4: 1001 + 2 * i}
            p.begin()
            p.add_partitions(txn)
            for k, v in txn.items():
                cl.produce(k, v)
                sent[k].append(v)
            commit = i % 3 != 2
            assert p.end(commit=commit) is (Outcome.COMMITTED if commit else Outcome.ABORTED)
            for k, v in txn.items():
                if commit:
                    committed[k].append(v)
        c.kill(coordinator)  # the last transaction's markers may still be under way
        again.begin()  # a new instance, on the new coordinator
        again.add_partitions(keys)
        for k in keys:
            again_cl.produce(k, 5000 + k)
            sent[k].append(5000 + k)
            committed[k].append(5000 + k)
        assert again.end(commit=True) is Outcome.COMMITTED

        def whole() -> bool:
            try:
                return all(read(reader, k, COMMITTED) == committed[k] for k in keys)
            except ClientError:
                return False

        c.wait(whole, 60, "every committed transaction, and no aborted one")
        assert {k: read(reader, k, UNCOMMITTED) for k in keys} == sent
        c.start(coordinator)
    finally:
        for x in (cl, again_cl, reader):
            x.close()


def test_one_markers_request_writes_every_partition_its_broker_leads(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """write_txn_markers: the partitions led there each get a committed marker before the
    answer; those not led there are named in `errors`, and nothing is written for them."""
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    parts = c.metadata("n1")["partitions"]
    node = parts["0"]["leader"]
    here = [int(k) for k, m in parts.items() if m["leader"] == node]
    elsewhere = next(int(k) for k, m in parts.items() if m["leader"] != node)
    before = {k: v["leo"] for k, v in c.metadata(node)["local"].items()}
    reply = request(c.addrs[node], {"type": "write_txn_markers", "partitions": [
        *here, elsewhere, 999], "producer_id": 7, "producer_epoch": 0, "commit": False},
        timeout_s=10)
    assert reply["error"] is None
    assert reply["errors"] == {str(elsewhere): "NOT_LEADER", "999": "UNKNOWN_PARTITION"}
    local = c.metadata(node)["local"]
    for k in map(str, here):  # answered once committed: the HW is past each marker
        assert local[k]["leo"] == before[k] + 1 and local[k]["hw"] == local[k]["leo"]
    assert local[str(elsewhere)]["leo"] == before[str(elsewhere)]
    bad = request(c.addrs[node], {"type": "write_txn_markers", "partitions": ["a"],
                                  "producer_id": 7, "producer_epoch": 0, "commit": True})
    assert bad["error"] == "INVALID_REQUEST"
