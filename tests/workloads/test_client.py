"""The native client against real brokers: leader changes, definite failures, unknown outcomes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker.localcluster import LocalCluster, free_ports

from systems.undertow.client import (
    BrokerClient,
    ClientError,
    admin_dump,
    admin_metadata,
    admin_request,
)

SAFE = {"min.insync.replicas": 2, "broker.session.timeout.ms": 1500,
        "test.controls.enable": True, "replica.lag.time.max.ms": 60_000}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "c", settings=SAFE, partitions=3)
    try:
        c.start_all()
        c.wait_ready(15)
        yield c
    finally:
        c.close()


def test_unreachable_cluster_is_a_definite_failure_within_the_timeout() -> None:
    ports = free_ports(2)
    cl = BrokerClient({f"n{i}": f"127.0.0.1:{p}" for i, p in enumerate(ports)}, timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(ClientError) as e:
        cl.produce(0, 1)
    assert e.value.definite and e.value.code == "CONNECTION"
    assert time.monotonic() - t0 < 3
    with pytest.raises(ClientError) as e:
        admin_metadata(f"127.0.0.1:{ports[0]}", timeout_s=0.5)
    assert e.value.code == "CONNECTION"


@pytest.mark.slow
def test_produce_fetch_metadata_and_dump(cluster: LocalCluster) -> None:
    cl = BrokerClient(cluster.addrs, timeout_s=5)
    try:
        assert [cl.produce(1, v) for v in (10, 11, 12)] == [0, 1, 2]
        assert cl.produce(1, 13, acks="1") == 3
        assert cl.produce(1, 14, acks="0") is None
        cluster.wait(lambda: cl.end_offset(1) == 5, 10, "hw 5")
        assert cl.fetch(1, 0) == [(0, 10), (1, 11), (2, 12), (3, 13), (4, 14)]
        assert cl.fetch(1, 3, max_records=1) == [(3, 13)]
        assert cl.fetch(1, 5) == []
        with pytest.raises(ClientError) as e:
            cl.fetch(1, 99)
        assert e.value.code == "OFFSET_OUT_OF_RANGE" and e.value.definite
        with pytest.raises(ClientError) as e:
            cl.produce(7, 1)
        assert e.value.definite
    finally:
        cl.close()
    m = admin_metadata(cluster.addrs["n2"])
    assert m["node"] == "n2" and m["controller"] == "n1"
    assert m["brokers"]["n3"] == {"alive": True}
    p1 = m["partitions"]["1"]
    assert p1["leader"] == "n2" and p1["replicas"] == ["n2", "n3", "n1"] and p1["leader_epoch"] >= 1
    assert m["local"]["1"]["role"] == "leader" and m["local"]["1"]["leo"] == 5
    rows = admin_dump(cluster.addrs["n3"])
    assert {"node": "n3", "key": 1, "offset": 0, "value": 10, "epoch": 1} in rows


@pytest.mark.slow
def test_uncommitted_write_is_an_unknown_outcome(cluster: LocalCluster) -> None:
    for n in ("n2", "n3"):
        admin_request(cluster.addrs[n], {"type": "test_fetcher", "action": "pause"})
    time.sleep(0.6)  # let in-flight long polls finish
    cl = BrokerClient(cluster.addrs, timeout_s=1.0)
    try:
        with pytest.raises(ClientError) as e:
            cl.produce(0, 99, acks="all")
        assert not e.value.definite and e.value.code == "REQUEST_TIMED_OUT"
    finally:
        cl.close()
    for n in ("n2", "n3"):
        admin_request(cluster.addrs[n], {"type": "test_fetcher", "action": "resume"})
    cl = BrokerClient(cluster.addrs, timeout_s=5)
    try:  # it did happen: the write commits once followers fetch again
        cluster.wait(lambda: cl.fetch(0, 0) == [(0, 99)], 10, "the unknown write shows up")
    finally:
        cl.close()


@pytest.mark.slow
def test_client_follows_a_leader_change(cluster: LocalCluster) -> None:
    cl = BrokerClient(cluster.addrs, timeout_s=10)
    try:
        assert cl.produce(1, 1) == 0          # partition 1 is led by n2
        cluster.kill("n2")
        t0 = time.monotonic()
        off = cl.produce(1, 2)                # retried until n3 or n1 takes over
        assert off == 1 and time.monotonic() - t0 < 10
        assert cl.fetch(1, 0) == [(0, 1), (1, 2)]
        assert cl.metadata()["partitions"]["1"]["leader"] in ("n1", "n3")
    finally:
        cl.close()
