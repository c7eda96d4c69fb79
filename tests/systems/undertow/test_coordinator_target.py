"""The `coordinator` target on our broker: the node it names coordinates the run's group,
and after that node is killed another one does."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker.localcluster import LocalCluster

from systems.undertow import admin
from systems.undertow.client import BrokerClient
from workloads.options import GROUP_ID

pytestmark = pytest.mark.slow


def test_the_coordinator_is_the_node_members_talk_to_and_moves_when_killed(
        tmp_path: Path) -> None:
    settings = {"offsets.topic.num.partitions": 3, "min.insync.replicas": 2,
                "broker.session.timeout.ms": 1500}
    with LocalCluster(tmp_path / "c", settings=settings, partitions=4) as c:
        c.start_all()
        c.wait_ready(60)
        cl = BrokerClient(c.addrs, timeout_s=20)
        try:
            reply = cl.group_request({"type": "offset_fetch", "group": GROUP_ID,
                                      "partitions": [["queue", 0]]})
            assert not reply.get("error"), reply
            first = admin.coordinator(c.addrs.items(), GROUP_ID)
            assert first == cl._coordinators[GROUP_ID]  # where the member's request went
            c.kill(first)
            live = {n: a for n, a in c.addrs.items() if n != first}
            moved = c.wait(lambda: (n := admin.coordinator(live.items(), GROUP_ID)) != first
                           and n, timeout_s=60, what="a new coordinator")
            assert moved in live
            reply = cl.group_request({"type": "offset_fetch", "group": GROUP_ID,
                                      "partitions": [["queue", 0]]}, timeout_s=30)
            assert not reply.get("error"), reply
            assert cl._coordinators[GROUP_ID] == moved
        finally:
            cl.close()
    assert admin.coordinator([("n1", "127.0.0.1:1")], GROUP_ID) is None  # nobody answers
