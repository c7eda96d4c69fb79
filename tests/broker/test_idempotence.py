"""The idempotent producer on real broker processes: producer ids from the controller (kept
in the metadata log, so a new controller never hands one out again), and each partition
leader writing a resent record once, also after a leader change and a restart of every node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from broker.localcluster import LocalCluster, request

from tests.broker.test_quorum import VOTERS, new_controller, three_voters

pytestmark = pytest.mark.slow

SAFE = {"min.insync.replicas": 2, "broker.session.timeout.ms": 1500,
        "replica.lag.time.max.ms": 60_000}
KEY = 1  # replicas n2, n3, n1: led by n2, while n1 (the controller) stays up


def init_producer(c: LocalCluster, node: str) -> dict[str, Any]:
    return request(c.addrs[node], {"type": "init_producer_id"}, timeout_s=5)


def leader(c: LocalCluster, key: int, ask: str) -> str | None:
    got: str | None = c.metadata(ask)["partitions"][str(key)]["leader"]
    return got


def produce(c: LocalCluster, node: str, value: int, pid: int, seq: int) -> dict[str, Any]:
    return request(c.addrs[node], {"type": "produce", "partition": KEY, "value": value,
                                   "acks": "all", "timeout_ms": 5000, "producer_id": pid,
                                   "producer_epoch": 0, "sequence": seq}, timeout_s=8)


SETTLING = ("NOT_LEADER", "NOT_ENOUGH_REPLICAS", "LEADER_NOT_AVAILABLE")


def to_leader(c: LocalCluster, value: int, pid: int, seq: int) -> dict[str, Any]:
    """Produce to whoever leads KEY now, again while leaders and ISRs settle; the answer."""
    answers: list[dict[str, Any]] = []

    def attempt() -> bool:
        now = c.wait(lambda: leader(c, KEY, "n1"), 15, "a leader")
        answers.append(produce(c, now, value, pid, seq))
        return answers[-1].get("error") not in SETTLING

    c.wait(attempt, 20, f"an answer to sequence {seq}")
    return answers[-1]


def values(c: LocalCluster, node: str) -> list[int]:
    reply = request(c.addrs[node], {"type": "fetch", "partition": KEY, "offset": 0,
                                    "max_records": 100})
    return [v for _o, v in reply["records"]]


def test_resends_are_written_once_across_a_leader_change_and_a_restart(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SAFE, partitions=2)
    c.start_all()
    c.wait_ready(20)
    # a broker that is not the controller points to it
    refused = init_producer(c, "n2")
    assert refused["error"] == "NOT_CONTROLLER" and refused["controller"] == "n1"
    got = init_producer(c, "n1")
    pid = got["producer_id"]
    assert got["error"] is None and got["producer_epoch"] == 0
    assert init_producer(c, "n1")["producer_id"] == pid + 1  # never the same id twice
    lead = leader(c, KEY, "n1")
    assert lead == "n2"
    assert produce(c, lead, 100, pid, 0)["offset"] == 0
    assert produce(c, lead, 100, pid, 0)["offset"] == 0           # the resend: not written
    gap = produce(c, lead, 102, pid, 2)
    assert gap["error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(c, lead, 101, pid, 1)["offset"] == 1
    c.wait(lambda: values(c, lead) == [100, 101], 10, "both committed")

    # a new leader has the producer's sequences from the records it replicated
    c.kill(lead)
    c.wait(lambda: leader(c, KEY, "n1") not in (None, lead), 15, "a new leader")
    assert to_leader(c, 101, pid, 1)["offset"] == 1
    assert to_leader(c, 103, pid, 3)["error"] == "OUT_OF_ORDER_SEQUENCE_NUMBER"

    # every node restarted: each rebuilds the state from its log on disk
    for n in list(c.procs):
        c.kill(n)
    c.start_all()
    c.wait_ready(30)
    assert to_leader(c, 101, pid, 1)["offset"] == 1
    assert to_leader(c, 102, pid, 2)["offset"] == 2
    now = leader(c, KEY, "n1")
    assert now is not None and values(c, now) == [100, 101, 102]


def test_producer_ids_survive_controller_failover(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = three_voters(make_cluster)
    ctrl, epoch = c.active_controller()
    assert ctrl is not None
    before = [init_producer(c, ctrl)["producer_id"] for _ in range(3)]
    assert before == sorted(set(before))
    c.kill(ctrl)
    live = [n for n in VOTERS if n != ctrl]
    new, _epoch = new_controller(c, live, ctrl, epoch)
    after = c.wait(lambda: init_producer(c, new).get("producer_id"), 15, "an id from " + new)
    assert after > max(before)
