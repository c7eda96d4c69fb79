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
from dataclasses import dataclass
from typing import Any

import pytest
from broker.localcluster import LocalCluster

from systems.undertow.client import BrokerClient
from tests.broker.test_kip101 import control, role, step, stepped_cluster, stepping, values

pytestmark = pytest.mark.slow


def test_an_isr_expansion_whose_answer_was_lost_holds_the_hw_until_settled(
        make_cluster: Callable[..., LocalCluster]) -> None:
    s = _f3_fenced_out(make_cluster, produce_timeout_s=30)
    c, f1, f3 = s.c, s.f1, s.f3
    produce, isr, leader_view = s.produce, s.isr, s.leader_view
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
    _f3_alone(s)  # the acknowledged write must survive losing both other replicas
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
    s = _f3_fenced_out(make_cluster, produce_timeout_s=60)
    c, leader, f1, f3 = s.c, s.leader, s.f1, s.f3
    produce, isr, leader_view = s.produce, s.isr, s.leader_view
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
    _f3_alone(s)  # the acknowledged write must survive losing both other replicas
    assert values(c, f3) == {**{i: 100 + i for i in range(7)}, 7: 200}, (
        f"acknowledged acks=all write at offset 7 lost: the leader's HW reached {hw} while "
        f"{f3}, in the controller's ISR, lacked it")


@dataclass
class _Stage:
    """Key 0 on a stepped cluster: its leader, f1 in its ISR, f3 fenced out of it (and back
    in the controller's brokers); offsets 0..6 on the leader and f1, HW 7, f3 holding 0..4."""

    c: LocalCluster
    leader: str
    f1: str
    f3: str
    produce_timeout_s: float

    def produce(self, value: int, acks: str, out: dict[str, Any]) -> None:
        cl = BrokerClient({self.leader: self.c.addrs[self.leader]},
                          timeout_s=self.produce_timeout_s)
        try:
            out["offset"] = cl.produce(0, value, acks=acks)
        except Exception as e:  # asserted by the caller
            out["error"] = e
        finally:
            cl.close()

    def isr(self, node: str) -> list[str]:
        return list(self.c.metadata(node)["partitions"]["0"]["isr"])

    def leader_view(self) -> dict[str, Any]:
        out: dict[str, Any] = self.c.metadata(self.leader)["local"]["0"]
        return out


def _f3_fenced_out(make_cluster: Callable[..., LocalCluster], *,
                   produce_timeout_s: float) -> _Stage:
    """Both tests' start: five writes on all three, f3 fenced out of the ISR, two more on
    the leader and f1 only."""
    c, leader = stepped_cluster(make_cluster, min_insync_replicas=2)
    f1, f3 = [n for n in ("n1", "n2", "n3") if n != leader]
    c.wait(lambda: role(c, f1) == "follower" and role(c, f3) == "follower", 20, "both follow")
    s = _Stage(c, leader, f1, f3, produce_timeout_s)
    for v in range(5):
        s.produce(100 + v, "1", {})
    for n in (f1, f3):
        c.wait(stepping(c, n, lambda m: len(values(c, m)) == 5), 10, f"{n} has 5")
    control(c, "n4", "test_fence", node=f3)  # f3 leaves the ISR; its heartbeat re-registers it
    c.wait(lambda: sorted(s.leader_view().get("isr", [])) == sorted([leader, f1]), 20,
           "the leader's ISR without f3")
    for v in range(5, 7):
        s.produce(100 + v, "1", {})
    c.wait(stepping(c, f1, lambda _: s.leader_view()["hw"] == 7), 10, "HW 7 with f1")
    return s


def _f3_alone(s: _Stage) -> None:
    """The leader and f1 killed and fenced: f3 leads, with what it holds."""
    for dead in (s.leader, s.f1):
        s.c.kill(dead)
        control(s.c, "n4", "test_fence", node=dead)
    s.c.wait(lambda: role(s.c, s.f3) == "leader", 20, "f3 leads")
