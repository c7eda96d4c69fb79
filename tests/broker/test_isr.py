"""ISR changes in flight: the HW waits for a replica the controller may be adding.

Found by a safe-settings run with every fault (seed 401, 120 s): a leader asked the
controller to add a caught-up follower to the ISR; the answer was lost on a lossy link,
but the controller had applied it. The leader went on acknowledging writes with the
old ISR, so the follower was in the committed ISR without them; after a crash of all
three it was elected, and the others truncated to it: eight acknowledged writes lost.
Kafka's leader counts the "maximal ISR" (committed plus proposed) for the HW until the
change is settled; so does ours. Driven step by step against real broker processes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from broker.localcluster import LocalCluster

from systems.undertow.client import BrokerClient
from tests.broker.test_kip101 import control, role, step, stepped_cluster, stepping, values

pytestmark = pytest.mark.slow


def test_an_isr_expansion_whose_answer_was_lost_holds_the_hw_until_settled(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c, leader = stepped_cluster(make_cluster, min_insync_replicas=2)
    brokers = ("n1", "n2", "n3")
    f1, f3 = [n for n in brokers if n != leader]
    c.wait(lambda: role(c, f1) == "follower" and role(c, f3) == "follower", 20, "both follow")

    def produce(value: int, acks: str, out: dict[str, Any]) -> None:
        cl = BrokerClient({leader: c.addrs[leader]}, timeout_s=30)
        try:
            out["offset"] = cl.produce(0, value, acks=acks)
        except Exception as e:  # asserted by the caller
            out["error"] = e
        finally:
            cl.close()

    def isr(node: str) -> list[str]:
        return list(c.metadata(node)["partitions"]["0"]["isr"])

    def leader_view() -> dict[str, Any]:
        out: dict[str, Any] = c.metadata(leader)["local"]["0"]
        return out

    for v in range(5):
        produce(100 + v, "1", {})
    for n in (f1, f3):
        c.wait(stepping(c, n, lambda m: len(values(c, m)) == 5), 10, f"{n} has 5")
    # f3 leaves the ISR (its session "ended"); it re-registers at its next heartbeat
    control(c, "n4", "test_fence", node=f3)
    c.wait(lambda: sorted(leader_view().get("isr", [])) == sorted([leader, f1]), 20,
           "the leader's ISR without f3")
    for v in range(5, 7):
        produce(100 + v, "1", {})
    c.wait(stepping(c, f1, lambda _: leader_view()["hw"] == 7), 10, "HW 7 with f1")
    time.sleep(1.0)  # f3's heartbeat re-registers it: eligible to join the ISR again

    c.pause("n4")  # the controller hears nothing now: an ISR change gets no answer
    try:
        step(c, f3)  # fetches 5..6 (below the HW: not yet a candidate)
        step(c, f3)  # at the HW: the leader proposes ISR + f3 to the paused controller
        c.wait(lambda: leader_view().get("pending_isr") is not None, 10, "a pending change")
        acked: dict[str, Any] = {}
        t = threading.Thread(target=produce, args=(200, "all", acked))
        t.start()
        for _ in range(5):
            step(c, f1)  # f1 has offset 7 now; f3 does not
            t.join(0.1)
        # the change may be applied: the HW must wait for f3 as well
        assert t.is_alive(), f"acknowledged while f3 lacked it: {acked}"
        assert leader_view()["hw"] == 7
        time.sleep(2.5)  # the leader's request times out: outcome unknown, kept pending
    finally:
        c.resume("n4")  # the controller now applies the request it had received
    c.wait(lambda: f3 in isr("n4"), 20, "the controller added f3")
    c.wait(lambda: f3 in leader_view().get("isr", []) and "pending_isr" not in leader_view(),
           20, "the leader learnt it")
    assert t.is_alive() and leader_view()["hw"] == 7
    c.wait(stepping(c, f3, lambda _: not t.is_alive()), 10, "f3 fetched: the write commits")
    t.join(5)
    assert acked.get("offset") == 7, acked
    # the acknowledged write survives losing both other replicas: f3 has it
    for dead in (leader, f1):
        c.kill(dead)
        control(c, "n4", "test_fence", node=dead)
    c.wait(lambda: role(c, f3) == "leader", 20, "f3 leads")
    assert values(c, f3) == {**{i: 100 + i for i in range(7)}, 7: 200}


def test_an_isr_expansion_answered_request_timed_out_holds_the_hw_until_settled(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """The controller committed the expansion but answered REQUEST_TIMED_OUT ("it may
    still commit": its metadata commit outlived the request's wait). The leader dropped
    its pending change as if refused, so its HW no longer waited for the replica the
    controller's ISR now held: an acks=all write was acknowledged without it, and once it
    was elected the write was gone. The answer is no answer: the change stays pending
    (the HW counts the maximal ISR) until the controller or a newer partition epoch
    settles it. The leader's metadata is held meanwhile (a test control), so it cannot
    learn the outcome from its heartbeats first."""
    c, leader = stepped_cluster(make_cluster, min_insync_replicas=2)
    brokers = ("n1", "n2", "n3")
    f1, f3 = [n for n in brokers if n != leader]
    c.wait(lambda: role(c, f1) == "follower" and role(c, f3) == "follower", 20, "both follow")

    def produce(value: int, acks: str, out: dict[str, Any]) -> None:
        cl = BrokerClient({leader: c.addrs[leader]}, timeout_s=60)
        try:
            out["offset"] = cl.produce(0, value, acks=acks)
        except Exception as e:  # asserted by the caller
            out["error"] = e
        finally:
            cl.close()

    def isr(node: str) -> list[str]:
        return list(c.metadata(node)["partitions"]["0"]["isr"])

    def leader_view() -> dict[str, Any]:
        out: dict[str, Any] = c.metadata(leader)["local"]["0"]
        return out

    for v in range(5):
        produce(100 + v, "1", {})
    for n in (f1, f3):
        c.wait(stepping(c, n, lambda m: len(values(c, m)) == 5), 10, f"{n} has 5")
    control(c, "n4", "test_fence", node=f3)  # f3 leaves the ISR; its heartbeat re-registers it
    c.wait(lambda: sorted(leader_view().get("isr", [])) == sorted([leader, f1]), 20,
           "the leader's ISR without f3")
    for v in range(5, 7):
        produce(100 + v, "1", {})
    c.wait(stepping(c, f1, lambda _: leader_view()["hw"] == 7), 10, "HW 7 with f1")
    c.wait(lambda: c.metadata("n4")["brokers"][f3]["alive"], 20, "f3 registered again")

    control(c, leader, "test_metadata", action="hold")
    control(c, "n4", "test_alter_timeout", on=True)
    step(c, f3)  # fetches 5..6 (below the HW: not yet a candidate)
    step(c, f3)  # at the HW: the leader proposes ISR + f3
    c.wait(lambda: f3 in isr("n4"), 10, "the controller committed f3's return")
    c.wait(lambda: "pending_isr" not in leader_view() or leader_view()["pending_unknown"], 10,
           "the leader got its REQUEST_TIMED_OUT")
    acked: dict[str, Any] = {}
    t = threading.Thread(target=produce, args=(200, "all", acked))
    t.start()
    c.wait(lambda: leader_view()["leo"] == 8, 10, "the acks=all write appended")
    step(c, f1, 2)  # f1 fetches offset 7, then tells the leader it has it; f3 does not
    hw = leader_view()["hw"]
    if hw == 7:  # the HW waits for f3 too, as it must; then the outcome settles
        assert t.is_alive(), acked
        control(c, leader, "test_metadata", action="apply")
        c.wait(lambda: f3 in leader_view().get("isr", []) and "pending_isr" not in
               leader_view(), 20, "the leader learnt the committed ISR")
        assert t.is_alive() and leader_view()["hw"] == 7
        c.wait(stepping(c, f3, lambda _: not t.is_alive()), 10, "f3 fetched: the write commits")
    t.join(20)
    assert acked.get("offset") == 7, acked
    # the acknowledged write survives losing both other replicas: f3 has it
    for dead in (leader, f1):
        c.kill(dead)
        control(c, "n4", "test_fence", node=dead)
    c.wait(lambda: role(c, f3) == "leader", 20, "f3 leads")
    assert values(c, f3) == {**{i: 100 + i for i in range(7)}, 7: 200}, (
        f"acknowledged acks=all write at offset 7 lost: the leader's HW reached {hw} while "
        f"{f3}, in the controller's ISR, lacked it")
