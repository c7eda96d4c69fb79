"""KIP-101's two data-loss sequences, driven step by step against real broker processes.

Two brokers (n1, n2) hold the one partition (RF 2, min ISR 1, acks all); n3 is
the controller only. Follower fetchers start paused and move one fetch at a
time (test_fetcher step), HW checkpoints and flushes happen only when the test
asks, and the controller fences a killed broker when told (test_fence), so
every kill lands at the exact point of the KIP's timeline.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from broker.localcluster import LocalCluster

from systems.undertow.client import BrokerClient, admin_dump, admin_request

pytestmark = pytest.mark.slow


def scenario_cluster(make_cluster: Callable[..., LocalCluster], truncation: str) -> LocalCluster:
    c = make_cluster(
        nodes=("n1", "n2", "n3"), partitions=1, replication_factor=2, controller="n3",
        roles={"n3": ["controller"]}, brokers=["n1", "n2"],
        settings={"truncation": truncation, "min.insync.replicas": 1,
                  "test.controls.enable": True, "test.fetcher.start.paused": True,
                  "replica.lag.time.max.ms": 600_000, "broker.session.timeout.ms": 600_000,
                  "replica.high.watermark.checkpoint.interval.ms": 3_600_000,
                  "leader.election.grace.ms": 60_000})
    c.start_all()
    c.wait(lambda: role(c, "n1") == "leader" and role(c, "n2") == "follower", 20, "n1 leads")
    return c


def role(c: LocalCluster, node: str) -> str | None:
    local = c.metadata(node)["local"].get("0")
    return local["role"] if local else None


def local(c: LocalCluster, node: str) -> dict[str, Any]:
    out: dict[str, Any] = c.metadata(node)["local"]["0"]
    return out


def step(c: LocalCluster, node: str, times: int = 1) -> None:
    for _ in range(times):
        admin_request(c.addrs[node], {"type": "test_fetcher", "action": "step"})


def stepping(c: LocalCluster, node: str, pred: Callable[[str], bool]) -> Callable[[], bool]:
    """A wait condition on `node` that first lets it fetch once (its fetcher waits for
    steps)."""
    def check() -> bool:
        step(c, node)
        return pred(node)
    return check


def control(c: LocalCluster, at: str, kind: str, **kw: Any) -> None:
    admin_request(c.addrs[at], {"type": kind, **kw})


def acked_produce(c: LocalCluster, follower: str, value: int) -> int:
    """produce with acks=all while stepping the follower until the write commits."""
    result: dict[str, Any] = {}

    def send() -> None:
        cl = BrokerClient({n: c.addrs[n] for n in ("n1", "n2")}, timeout_s=20)
        try:
            result["offset"] = cl.produce(0, value, acks="all")
        except Exception as e:  # reported below
            result["error"] = e
        finally:
            cl.close()

    t = threading.Thread(target=send)
    t.start()
    for _ in range(100):
        if not t.is_alive():
            break
        step(c, follower)
        t.join(0.05)
    t.join(20)
    assert "offset" in result, result
    return int(result["offset"])


def values(c: LocalCluster, node: str) -> dict[int, int]:
    return {r["offset"]: r["value"] for r in admin_dump(c.addrs[node]) if "offset" in r}


def hw(c: LocalCluster, node: str) -> int:
    return next(int(r["hw"]) for r in admin_dump(c.addrs[node]) if "hw" in r)


def fail_over(c: LocalCluster, dead: str, to: str) -> None:
    c.kill(dead)
    control(c, "n3", "test_fence", node=dead)
    c.wait(lambda: role(c, to) == "leader", 20, f"{to} leads")


def restart_as_follower(c: LocalCluster, node: str) -> None:
    c.start(node)
    c.wait(lambda: role(c, node) == "follower", 20, f"{node} follows")


def run_loss_scenario(
        c: LocalCluster) -> tuple[dict[int, int], dict[int, int], int, dict[int, int]]:
    """Scenario 1: the follower restarts after fetching m1 but before checkpointing HW 2."""
    assert acked_produce(c, "n2", 100) == 0
    control(c, "n1", "test_checkpoint")
    control(c, "n2", "test_checkpoint")          # both checkpoint HW 1
    assert acked_produce(c, "n2", 101) == 1      # m1 acknowledged: HW 2 on the leader
    control(c, "n1", "test_checkpoint")          # the leader's checkpoint says 2
    c.kill("n2")                                 # n2 dies with HW 2 only in memory
    restart_as_follower(c, "n2")                 # hw rule: truncate to checkpoint 1
    fail_over(c, "n1", "n2")                     # the leader dies before n2 refetches
    restart_as_follower(c, "n1")
    step(c, "n1")                                # n1's fetch offset vs n2's log end
    cl = BrokerClient({n: c.addrs[n] for n in ("n1", "n2")}, timeout_s=10)
    try:
        offset = cl.produce(0, 102, acks="1")
        step(c, "n1", 3)
        read = dict(cl.fetch(0, 0))
    finally:
        cl.close()
    return values(c, "n1"), values(c, "n2"), offset if offset is not None else -1, read


def test_kip101_scenario1_hw_truncation_loses_acknowledged_write(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = scenario_cluster(make_cluster, "hw")
    n1, n2, offset, read = run_loss_scenario(c)
    assert 101 not in n1.values() and 101 not in n2.values()  # acknowledged, on no replica
    assert n1 == n2 == {0: 100, 1: 102}
    assert read == {0: 100, 1: 102}  # a consumer reads past the acknowledged offset 1
    assert offset == 1  # the new write took the lost write's offset


def test_kip101_scenario1_leader_epoch_keeps_acknowledged_write(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = scenario_cluster(make_cluster, "leader-epoch")
    n1, n2, offset, read = run_loss_scenario(c)
    assert n1 == n2 == {0: 100, 1: 101, 2: 102}
    assert read == n1
    assert offset == 2


def run_divergence_scenario(c: LocalCluster) -> tuple[dict[int, int], dict[int, int]]:
    """Scenario 2: both crash, n2 loses its unflushed m1, restarts first and takes m2."""
    assert acked_produce(c, "n2", 200) == 0
    control(c, "n1", "test_flush")
    control(c, "n2", "test_flush")               # m0 is on disk on both
    assert acked_produce(c, "n2", 201) == 1      # m1 only in the page cache
    step(c, "n2")                                # n2 learns HW 2
    control(c, "n1", "test_checkpoint")
    control(c, "n2", "test_checkpoint")          # both checkpoint HW 2
    c.kill("n1")
    c.kill("n2")
    out = subprocess.run([sys.executable, "-m", "broker.tools", "lose-unflushed",
                          "--data-dir", str(c.data_dir("n2"))],
                         capture_output=True, text=True, timeout=30, check=True)
    assert '"dropped": 1' in out.stdout          # n2's OS crash took m1
    control(c, "n3", "test_fence", node="n1")
    control(c, "n3", "test_fence", node="n2")
    c.start("n2")                                # the shorter log comes back first
    c.wait(lambda: role(c, "n2") == "leader", 20, "n2 leads")
    cl = BrokerClient({"n2": c.addrs["n2"]}, timeout_s=10)
    try:
        assert cl.produce(0, 202, acks="all") == 1
    finally:
        cl.close()
    restart_as_follower(c, "n1")
    step(c, "n1", 3)
    assert hw(c, "n1") >= 2 and hw(c, "n2") >= 2  # offset 1 is committed on both
    return values(c, "n1"), values(c, "n2")


def test_kip101_scenario2_hw_truncation_diverges(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = scenario_cluster(make_cluster, "hw")
    n1, n2 = run_divergence_scenario(c)
    assert n1 == {0: 200, 1: 201}
    assert n2 == {0: 200, 1: 202}  # same offset, different values, both below the HW


def test_kip101_scenario2_leader_epoch_does_not_diverge(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = scenario_cluster(make_cluster, "leader-epoch")
    n1, n2 = run_divergence_scenario(c)
    assert n1 == n2 == {0: 200, 1: 202}


def stepped_cluster(make_cluster: Callable[..., LocalCluster],
                    min_insync_replicas: int) -> tuple[LocalCluster, str]:
    """Three brokers n1-n3 and a controller n4, with leader-epoch truncation and every
    timer long: followers fetch only when a test steps them, so a race can be replayed
    one request at a time. Returns the cluster and its first leader."""
    c = make_cluster(
        nodes=("n1", "n2", "n3", "n4"), partitions=1, replication_factor=3, controller="n4",
        roles={"n4": ["controller"]}, brokers=["n1", "n2", "n3"],
        settings={"truncation": "leader-epoch", "min.insync.replicas": min_insync_replicas,
                  "test.controls.enable": True, "test.fetcher.start.paused": True,
                  "replica.lag.time.max.ms": 600_000, "broker.session.timeout.ms": 600_000,
                  "replica.high.watermark.checkpoint.interval.ms": 3_600_000,
                  "leader.election.grace.ms": 60_000})
    c.start_all()
    brokers = ("n1", "n2", "n3")
    leader = c.wait(lambda: next((n for n in brokers if role(c, n) == "leader"), None), 20,
                    "a leader")
    return c, leader


def test_a_stale_epoch_answer_from_a_paused_old_leader_cuts_no_committed_record(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """KIP-320's race, as a safe 120 s run found it (seed 201): a restarted follower asks
    its leader where its epoch ends; the leader is paused, so the answer waits; meanwhile the
    controller elects another leader and the follower replicates new records from it; then
    the old leader wakes and answers. Applying that stale answer would truncate the records
    the new leader had committed (and lose them if the follower led next)."""
    c, leader = stepped_cluster(make_cluster, min_insync_replicas=1)
    replicas = c.metadata(leader)["partitions"]["0"]["replicas"]
    successor, follower = [n for n in replicas if n != leader]  # the controller's next pick
    c.wait(lambda: role(c, follower) == "follower" and role(c, successor) == "follower", 20,
           "both follow")

    def produce(at: str, values: range) -> None:
        cl = BrokerClient({at: c.addrs[at]}, timeout_s=10)
        try:
            for v in values:
                cl.produce(0, v, acks="1")
        finally:
            cl.close()

    produce(leader, range(300, 305))
    for n in (follower, successor):
        c.wait(stepping(c, n, lambda m: len(values(c, m)) == 5), 10, f"{n} has 5 records")
    c.kill(follower)
    restart_as_follower(c, follower)  # it must ask the leader where its epoch ends ...
    c.pause(leader)                   # ... and the leader cannot answer yet
    asked = threading.Thread(target=lambda: _quietly(step, c, follower))
    asked.start()
    try:
        control(c, "n4", "test_fence", node=leader)
        c.wait(lambda: role(c, successor) == "leader", 20, f"{successor} leads")
        c.wait(lambda: c.metadata(follower)["partitions"]["0"]["leader"] == successor, 20,
               f"{follower} follows {successor}")
        produce(successor, range(305, 310))
        c.wait(stepping(c, follower, lambda m: len(values(c, m)) == 10), 10,
               f"{follower} has the new leader's records")
    finally:
        c.resume(leader)              # the stale answer ("your epoch ends at 5") arrives
        asked.join(15)
    assert not asked.is_alive()
    # no step since: what the follower holds now is what the stale answer left it
    assert values(c, follower) == {i: 300 + i for i in range(10)}


def _quietly(fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except Exception:  # the paused leader may time the step out; its effect is what counts
        pass
