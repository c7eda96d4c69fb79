"""offsets.commit.required.acks: with 1 the coordinator answers a commit once it is in its
own log (Kafka's old setting), with -1 (the default) only once it is replicated."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from broker.config import ConfigError, parse_settings
from broker.localcluster import LocalCluster

from systems.undertow.client import BrokerClient
from systems.undertow.group_member import commit_sync, fetch_committed

GROUP = "g"
TP = ("queue", 0)


def test_only_minus_one_and_one_are_accepted() -> None:
    assert parse_settings({}).offsets_commit_acks == -1
    assert parse_settings({"offsets.commit.required.acks": 1}).offsets_commit_acks == 1
    for bad in (0, "all", True, -2):
        with pytest.raises(ConfigError, match=r"offsets\.commit\.required\.acks"):
            parse_settings({"offsets.commit.required.acks": bad})


@pytest.mark.slow
@pytest.mark.parametrize("acks", [1, -1])
def test_a_coordinator_whose_followers_stopped_answers_a_commit_only_with_acks_1(
        make_cluster: Callable[..., LocalCluster], acks: int) -> None:
    c = make_cluster(settings={"offsets.topic.num.partitions": 1, "min.insync.replicas": 2,
                               "offsets.commit.required.acks": acks})
    c.start_all()
    c.wait_ready(20)
    cl = BrokerClient(c.addrs, timeout_s=10)
    try:
        # an empty group takes commits from anyone (no member id, no generation)
        assert commit_sync(cl, GROUP, "", -1, {TP: 5}) == ("ok", None)
        coordinator = cl.group_request({"type": "find_coordinator", "group": GROUP})["node"]
        others = [n for n in c.addrs if n != coordinator]
        for n in others:
            c.pause(n)
        try:
            t0 = time.monotonic()
            typ, _why = commit_sync(cl, GROUP, "", -1, {TP: 9}, timeout_s=2)
            asked = BrokerClient({coordinator: c.addrs[coordinator]}, timeout_s=2)
            try:
                got = fetch_committed(asked, GROUP, [TP])
            finally:
                asked.close()
        finally:
            for n in others:
                c.resume(n)
        if acks == 1:  # answered from its own log at once, and served from there
            assert typ == "ok" and time.monotonic() - t0 < 2 and got == {TP: 9}
        else:  # not replicated: no answer, and the committed offset has not moved
            assert typ == "info" and got == {TP: 5}
    finally:
        cl.close()
