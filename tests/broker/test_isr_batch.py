"""A restarted broker rejoins the ISR of all its partitions in a few metadata commits.

Found by replaying seed 3302's fault plan (`undertow run --nemesis kill,partition`, issue 33):
n1 restarted while n3 was cut off. Every partition's leader asked the controller to add n1
back to its ISR, and then to drop n3, each change a Raft entry of its own, committed one
after another under the controller's lock, about a quorum fetch interval (100 ms) apiece:
76 changes, some 8 s of queue. Broker heartbeats waited behind them, timed out, went to the
cut voter and back, and reached the controller more than a session timeout apart, so the
controller fenced n2, a healthy broker (the controller's own node): n1 led 26 partitions
with an ISR of one, 12 had no leader, and every send was refused with NOT_ENOUGH_REPLICAS
until the run ended. Kafka's leaders send every pending partition in one AlterPartition,
and its controller commits them in one batch; ours now commits the ISR changes waiting for
it together. Counted, not timed: the Raft entries the rejoin took against the ISR records
it committed (the quorum view's log end and metadata offset).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from broker.localcluster import LocalCluster

pytestmark = pytest.mark.slow

VOTERS = ["n1", "n2", "n3"]
PARTITIONS = 48
SETTINGS = {"min.insync.replicas": 2, "truncation": "leader-epoch",
            "unclean.leader.election.enable": False, "replica.lag.time.max.ms": 2000,
            "broker.session.timeout.ms": 2000}


def test_a_restarted_broker_rejoins_every_isr_in_a_few_metadata_commits(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(voters=VOTERS, settings=SETTINGS, partitions=PARTITIONS)
    c.start_all()
    c.wait_ready(60)
    ctrl, _epoch = c.active_controller()
    assert ctrl is not None
    gone = next(n for n in VOTERS if n != ctrl)  # a broker, not the active controller

    def parts() -> dict[str, Any]:
        out: dict[str, Any] = c.metadata(ctrl)["partitions"]
        return out

    c.wait(lambda: all(len(p["isr"]) == 3 for p in parts().values()), 30, "full ISRs")
    c.kill(gone)
    # its session ends: the controller drops it from every ISR (one fence, one commit)
    c.wait(lambda: all(gone not in p["isr"] and p["leader"] not in (None, gone)
                       for p in parts().values()), 30, f"{gone} out of every ISR")
    c.wait(lambda: c.active_controller([n for n in VOTERS if n != gone])[0] == ctrl, 10,
           "the controller unchanged")

    def quorum() -> tuple[int, int]:
        q = c.metadata(ctrl)["quorum"]
        return int(q["log_end_offset"]), int(q["metadata_offset"])

    entries0, records0 = quorum()
    c.start(gone)
    c.wait(lambda: all(gone in p["isr"] for p in parts().values()), 60,
           f"{gone} back in every ISR")
    c.wait(lambda: all(len(p["isr"]) == 3 for p in parts().values()), 30, "full ISRs again")
    assert c.active_controller()[0] == ctrl, "the controller moved: the count means nothing"
    entries1, records1 = quorum()
    entries, records = entries1 - entries0, records1 - records0
    # one register record, then an ISR expansion per partition (at least)
    assert records >= PARTITIONS + 1, (entries, records)
    # one entry per change (the bug) would make entries == records; the leaders ask in a few
    # bursts (one per fetch answer), each committed together, so a few entries take them
    assert entries <= records // 4, (
        f"{records} metadata records took {entries} Raft entries: ISR changes are "
        f"committed one by one")
    # no healthy broker was fenced while the changes were committed
    for n in VOTERS:
        m = c.metadata(n)
        assert all(p["leader"] is not None for p in m["partitions"].values()), (n, m)
