"""The periodic HW checkpoint (its fsyncs run off the event loop) on a real cluster: each
replica's `hw` file follows its HW while it serves."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from broker.localcluster import LocalCluster
from broker.log import partition_dir, read_int

from systems.undertow.client import BrokerClient

pytestmark = pytest.mark.slow


def test_each_replica_checkpoints_its_hw_while_it_serves(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings={"min.insync.replicas": 2,
                               "replica.high.watermark.checkpoint.interval.ms": 50},
                     partitions=2)
    c.start_all()
    c.wait_ready(20)
    cl = BrokerClient(c.addrs, timeout_s=10)
    try:
        for v in range(20):
            assert cl.produce(v % 2, v) is not None
    finally:
        cl.close()

    def checkpointed(node: str, pid: int) -> int:
        return read_int(partition_dir(c.data_dir(node), "queue", pid) / "hw", -1)

    def all_at_hw() -> bool:
        return all(checkpointed(n, pid) == c.metadata(n)["local"][str(pid)]["hw"] == 10
                   for n in c.nodes for pid in (0, 1))
    c.wait(all_at_hw, 20, "every replica's hw file at its HW of 10")
