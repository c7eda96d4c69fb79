"""Where a broker sends its controller requests (heartbeats, ISR changes): beside a voter,
to the leader that voter knows, and nowhere while it knows none."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.broker import Broker
from broker.clock import Clock
from broker.config import parse_config
from broker.metadata import PartitionMeta


def make(tmp_path: Path) -> Broker:
    cfg = parse_config({
        "node_id": "n1", "listen": "127.0.0.1:1", "data_dir": str(tmp_path),
        "peers": {n: f"127.0.0.1:{i + 1}" for i, n in enumerate(("n1", "n2", "n3"))},
        "controller_quorum_voters": ["n1", "n2", "n3"],
        "topic": {"partitions": 1, "replication_factor": 3}})
    return Broker(cfg, Clock(None))


def test_a_broker_beside_a_voter_follows_the_leader_that_voter_knows(tmp_path: Path) -> None:
    b = make(tmp_path)
    assert b._controller_target() == "n1"  # no voter beside it: the guess (the first voter)
    known: list[str | None] = [None]
    b.local_leader = lambda: known[0]
    assert b._controller_target() is None  # electing: ask nobody (no timeouts on cut voters)
    known[0] = "n3"
    assert b._controller_target() == "n3" and b.controller_guess == "n3"


def test_no_isr_change_is_proposed_while_no_controller_is_known(tmp_path: Path) -> None:
    async def body() -> None:
        b = make(tmp_path)
        b.local_leader = lambda: None
        p = b.partition(0)
        p.become_leader(PartitionMeta(0, ("n1", "n2", "n3"), "n1", 1, 1, ("n1", "n2", "n3")), 0)
        await b.alter_isr(p, ["n1", "n2"])
        assert not p.isr_change_inflight and p.pending_isr is None and p.isr == ("n1", "n2", "n3")

    asyncio.run(body())
