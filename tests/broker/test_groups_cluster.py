"""Consumer groups on a real 3-node cluster: rebalances, fencing, offsets, coordinator failover."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from broker.localcluster import LocalCluster

from systems.undertow.assignors import Member, range_assign
from systems.undertow.client import BrokerClient

pytestmark = pytest.mark.slow

SETTINGS = {"offsets.topic.num.partitions": 3, "min.insync.replicas": 2,
            "broker.session.timeout.ms": 1500}
SESSION_MS = 3000
KEYS = 8


def join(cl: BrokerClient, group: str, member_id: str = "") -> dict[str, Any]:
    return cl.group_request({"type": "join_group", "group": group, "member_id": member_id,
                             "client_id": "t", "protocols": [["range", {"topics": ["queue"]}]],
                             "session_timeout_ms": SESSION_MS, "rebalance_timeout_ms": 10_000},
                            timeout_s=20)


def sync(cl: BrokerClient, group: str, reply: dict[str, Any]) -> dict[str, Any]:
    """The member's sync; the leader assigns with the range assignor."""
    assignments: dict[str, Any] = {}
    if "members" in reply:
        members = [Member(m, frozenset(meta["topics"])) for m, meta in reply["members"].items()]
        assignments = {m: [list(tp) for tp in tps]
                       for m, tps in range_assign({"queue": KEYS}, members).items()}
    return cl.group_request({"type": "sync_group", "group": group,
                             "member_id": reply["member_id"], "generation": reply["generation"],
                             "assignments": assignments}, timeout_s=20)


def heartbeat(cl: BrokerClient, group: str, member: str, generation: int) -> Any:
    return cl.group_request({"type": "group_heartbeat", "group": group, "member_id": member,
                             "generation": generation}, timeout_s=20)["error"]


def commit(cl: BrokerClient, group: str, member: str, generation: int,
           offsets: dict[int, int]) -> Any:
    return cl.group_request({"type": "offset_commit", "group": group, "member_id": member,
                             "generation": generation,
                             "offsets": [["queue", k, o] for k, o in offsets.items()]},
                            timeout_s=20)["error"]


def committed(cl: BrokerClient, group: str) -> dict[int, int]:
    reply = cl.group_request({"type": "offset_fetch", "group": group,
                              "partitions": [["queue", k] for k in range(KEYS)]}, timeout_s=20)
    return {p: o for _t, p, o in reply["offsets"]}


def test_a_group_rebalances_fences_commits_and_survives_its_coordinator(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    a_cl = BrokerClient(c.addrs, timeout_s=10)
    b_cl = BrokerClient(c.addrs, timeout_s=10)
    try:
        # a group whose coordinator is not the (single) controller, so killing it fails over
        group = next(g for g in (f"group-{i}" for i in range(50))
                     if a_cl.group_request({"type": "find_coordinator", "group": g})["node"]
                     != c.controller)
        coordinator = a_cl.group_request({"type": "find_coordinator", "group": group})["node"]

        first = join(a_cl, group)
        a = first["member_id"]
        assert first["error"] is None and first["generation"] == 1 and first["leader"] == a
        assert sync(a_cl, group, first)["assignment"] == [["queue", k] for k in range(KEYS)]
        assert heartbeat(a_cl, group, a, 1) is None

        with ThreadPoolExecutor(2) as pool:  # b's join waits until a rejoins
            b_join = pool.submit(join, b_cl, group)
            assert c.wait(lambda: heartbeat(a_cl, group, a, 1) == "REBALANCE_IN_PROGRESS",
                          10, "a told to rejoin")
            a_join = join(a_cl, group, a)
            b_reply = b_join.result(20)
            b = b_reply["member_id"]
            assert a_join["generation"] == b_reply["generation"] == 2
            assert a_join["leader"] == a and set(a_join["members"]) == {a, b}
            a_sync = pool.submit(sync, a_cl, group, a_join)
            b_got = sync(b_cl, group, b_reply)["assignment"]
            a_got = a_sync.result(20)["assignment"]
        assert sorted(map(tuple, a_got + b_got)) == [("queue", k) for k in range(KEYS)]
        assert len(a_got) == len(b_got) == KEYS // 2

        # fencing: generation 1 is over; strangers are not members
        assert heartbeat(a_cl, group, a, 1) == "ILLEGAL_GENERATION"
        assert commit(a_cl, group, a, 1, {0: 5}) == "ILLEGAL_GENERATION"
        assert heartbeat(a_cl, group, "stranger", 2) == "UNKNOWN_MEMBER_ID"
        assert commit(a_cl, group, a, 2, {p: 10 + p for _t, p in a_got}) is None
        assert commit(b_cl, group, b, 2, {p: 20 + p for _t, p in b_got}) is None
        want = {p: 10 + p for _t, p in a_got} | {p: 20 + p for _t, p in b_got}
        assert committed(a_cl, group) == want

        # the coordinator dies: the new leader of the group's offsets partition replays it
        c.kill(coordinator)
        assert c.wait(lambda: a_cl.group_request(
            {"type": "find_coordinator", "group": group})["node"] != coordinator, 20,
            "a new coordinator")
        assert committed(a_cl, group) == want
        assert heartbeat(a_cl, group, a, 2) is None  # generation 2 carries on
        assert heartbeat(a_cl, group, a, 1) == "ILLEGAL_GENERATION"
        assert commit(b_cl, group, b, 2, {b_got[0][1]: 99}) is None
        want[b_got[0][1]] = 99

        # b stops heartbeating: its session ends on the new coordinator and a must rejoin
        start = time.monotonic()
        assert c.wait(lambda: heartbeat(a_cl, group, a, 2) == "REBALANCE_IN_PROGRESS",
                      SESSION_MS / 1000 + 10, "b's session to expire")
        assert time.monotonic() - start >= SESSION_MS / 1000 - 1.5
        again = join(a_cl, group, a)
        assert again["generation"] == 3 and set(again["members"]) == {a}
        assert len(sync(a_cl, group, again)["assignment"]) == KEYS
        assert committed(b_cl, group) == want
        assert b_cl.group_request({"type": "leave_group", "group": group,
                                   "member_id": b})["error"] == "UNKNOWN_MEMBER_ID"
    finally:
        a_cl.close()
        b_cl.close()


def test_a_rebalance_cut_by_the_coordinators_death_completes_on_its_successor(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SETTINGS)
    c.start_all()
    c.wait_ready(20)
    a_cl = BrokerClient(c.addrs, timeout_s=10)
    b_cl = BrokerClient(c.addrs, timeout_s=10)
    try:
        group = next(g for g in (f"cut-{i}" for i in range(50))
                     if a_cl.group_request({"type": "find_coordinator", "group": g})["node"]
                     != c.controller)
        coordinator = a_cl.group_request({"type": "find_coordinator", "group": group})["node"]
        first = join(a_cl, group)
        a = first["member_id"]
        sync(a_cl, group, first)
        with ThreadPoolExecutor(1) as pool:
            b_join = pool.submit(join, b_cl, group)  # waits for a, who will not rejoin here
            assert c.wait(lambda: heartbeat(a_cl, group, a, 1) == "REBALANCE_IN_PROGRESS",
                          10, "the rebalance to start")
            c.kill(coordinator)  # mid-rebalance: b's join is cut off; b finds the new one
            # the successor replays generation 1 (a alone); b's renewed join rebalances it
            assert c.wait(lambda: heartbeat(a_cl, group, a, 1) == "REBALANCE_IN_PROGRESS",
                          20, "the successor to rebalance")
            a_join = join(a_cl, group, a)
            b_reply = b_join.result(20)
        assert a_join["generation"] == b_reply["generation"] == 2
        assert set(a_join["members"]) == {a, b_reply["member_id"]}
        assert a_cl.group_request({"type": "find_coordinator", "group": group})["node"] \
            != coordinator
    finally:
        a_cl.close()
        b_cl.close()
