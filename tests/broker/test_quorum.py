"""The controller quorum on real processes: three voters, the active controller killed or paused.

After each fault a new active controller (higher quorum epoch) takes over, partitions led by
the lost node get new leaders, acks=all writes (RF 3, min ISR 2) keep succeeding, and no
acknowledged write is lost. The admin `metadata` answer shows the quorum.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from broker.config import ConfigError, parse_config
from broker.localcluster import LocalCluster, request

from tests.broker.producers import Producers, read_all

pytestmark = pytest.mark.slow

VOTERS = ["n1", "n2", "n3"]
SAFE = {"min.insync.replicas": 2, "truncation": "leader-epoch",
        "unclean.leader.election.enable": False, "replica.lag.time.max.ms": 2000,
        "broker.session.timeout.ms": 3000}
FAILOVER_BOUND_S = 12.0  # generous for a loaded 2-core machine; bench.failover measures it


def new_controller(c: LocalCluster, live: list[str], old: str, old_epoch: int) -> tuple[str, int]:
    def check() -> tuple[str, int] | None:
        ctrl, epoch = c.active_controller(live, timeout_s=0.5)
        return (ctrl, epoch) if ctrl is not None and ctrl != old and epoch > old_epoch else None
    found: tuple[str, int] = c.wait(check, FAILOVER_BOUND_S, f"a controller other than {old}")
    return found


def leaders_avoid(c: LocalCluster, node: str, ask: str) -> bool:
    parts = c.metadata(ask)["partitions"]
    return bool(parts) and all(p["leader"] not in (None, node) for p in parts.values())


def three_voters(make_cluster: Callable[..., LocalCluster], **settings: Any) -> LocalCluster:
    c = make_cluster(voters=VOTERS, settings={**SAFE, **settings}, partitions=6)
    c.start_all()
    c.wait_ready(30)
    return c


def test_admin_metadata_shows_the_quorum(make_cluster: Callable[..., LocalCluster]) -> None:
    c = three_voters(make_cluster)
    ctrl, epoch = c.active_controller()
    assert ctrl in VOTERS and epoch >= 1
    metas = {n: c.metadata(n) for n in VOTERS}
    for n, m in metas.items():
        q = m["quorum"]
        assert m["controller"] == ctrl and q["leader"] == ctrl and q["epoch"] == epoch, (n, m)
        assert q["voters"] == VOTERS and q["high_watermark"] <= q["log_end_offset"]
        assert q["role"] == ("leader" if n == ctrl else "follower")
    states = metas[ctrl]["quorum"]["voter_states"]
    assert set(states) == set(VOTERS)
    c.wait(lambda: all(s["log_end_offset"] == c.metadata(ctrl)["quorum"]["log_end_offset"]
                       for s in c.metadata(ctrl)["quorum"]["voter_states"].values()),
           10, "every voter's log end acknowledged")
    # a voter that is not active refuses controller requests and names the active one
    other = next(n for n in VOTERS if n != ctrl)
    r = request(c.addrs[other], {"type": "heartbeat", "node": "n1", "incarnation": "x",
                                 "metadata_offset": 0})
    assert r["error"] == "NOT_CONTROLLER" and r["controller"] == ctrl


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_losing_the_active_controller_fails_over_and_loses_no_acked_write(
        make_cluster: Callable[..., LocalCluster], fault: str) -> None:
    c = three_voters(make_cluster)
    ctrl, epoch = c.active_controller()
    assert ctrl is not None
    live = [n for n in VOTERS if n != ctrl]
    with Producers(c.addrs, keys=6) as prod:
        c.wait(lambda: prod.count() > 50, 20, "some writes acknowledged")
        t0 = time.monotonic()
        if fault == "kill":
            c.kill(ctrl)
        else:
            c.pause(ctrl)
        new, new_epoch = new_controller(c, live, ctrl, epoch)
        failover_s = time.monotonic() - t0
        assert new in live
        # elections keep working: the lost node's partitions move to live replicas
        c.wait(lambda: all(leaders_avoid(c, ctrl, n) for n in live), 15,
               f"every partition led by a node other than {ctrl}")
        before = prod.count()
        c.wait(lambda: prod.count() > before + 20, 20, "acks=all writes after the failover")
        if fault == "kill":
            c.start(ctrl)
        else:
            c.resume(ctrl)
        # the old controller rejoins as a follower of the new epoch (no second controller)
        c.wait(lambda: c.metadata(ctrl)["quorum"]["leader"] not in (None, ctrl)
               and c.metadata(ctrl)["quorum"]["epoch"] >= new_epoch, 20,
               f"{ctrl} follows the new controller")
        after = prod.count()
        c.wait(lambda: prod.count() > after + 20, 20, "writes with all nodes back")
    c.wait_ready(20)
    got = read_all(c.addrs, 6)
    lost = prod.lost(got)
    assert not lost, f"acknowledged writes lost: {lost}"
    assert failover_s < FAILOVER_BOUND_S


def test_a_voter_without_the_controller_role_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="lack 'controller'"):
        parse_config({"node_id": "n2", "listen": "127.0.0.1:2", "data_dir": "/tmp/x",
                      "peers": {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"},
                      "process_roles": ["broker"], "controller_quorum_voters": ["n1", "n2"]})
