"""Controller decisions as metadata records: elections, fencing, ISR changes, restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from broker.clock import Clock
from broker.config import parse_config
from broker.controller import Controller
from broker.metadata import FileMetadataLog, MetadataState
from broker.protocol import ProtocolError


async def make(tmp_path: Path, **settings: Any) -> Controller:
    cfg = parse_config({
        "node_id": "n1", "listen": "127.0.0.1:1", "data_dir": str(tmp_path),
        "peers": {n: f"127.0.0.1:{i + 1}" for i, n in enumerate(("n1", "n2", "n3"))},
        "controller_quorum_voters": ["n1"], "topic": {"partitions": 3, "replication_factor": 3},
        "settings": {"leader.election.grace.ms": 60_000, **settings}})
    c = Controller(cfg, FileMetadataLog(tmp_path / "meta.log"), Clock(None))
    await c.start()
    return c


def part(c: Controller, p: int = 0) -> dict[str, Any]:
    return c.state.partitions[p].view()


def test_elects_preferred_leaders_and_fences(tmp_path: Path) -> None:
    async def body() -> None:
        c = await make(tmp_path)
        for n in ("n1", "n2", "n3"):
            await c.heartbeat(n, f"{n}-a", 0)
        assert [part(c, p)["leader"] for p in range(3)] == ["n1", "n2", "n3"]
        await c.fence("n1")
        p0 = part(c, 0)
        assert p0["leader"] == "n2" and p0["leader_epoch"] == 2 and p0["isr"] == ["n2", "n3"]
        assert part(c, 1)["isr"] == ["n2", "n3"] and part(c, 1)["leader_epoch"] == 1
        await c.fence("n2")
        await c.fence("n3")
        p0 = part(c, 0)
        assert p0["leader"] is None and p0["isr"] == ["n3"]    # the last ISR member stays
        await c.heartbeat("n1", "n1-b", 0)   # not in the ISR: no clean leader
        assert part(c, 0)["leader"] is None
        await c.heartbeat("n3", "n3-b", 0)
        assert part(c, 0)["leader"] == "n3"
    asyncio.run(body())


def test_a_fence_and_the_partitions_it_changes_are_one_entry(tmp_path: Path) -> None:
    """One Raft round, and a fence proposed just before the leader lost its quorum takes
    effect together with its partitions when that log is committed later."""
    async def body() -> None:
        c = await make(tmp_path)
        for n in ("n1", "n2", "n3"):
            await c.heartbeat(n, f"{n}-a", 0)
        appended: list[list[Any]] = []
        append = c.log.append

        async def recording(records: list[Any]) -> int:
            appended.append(list(records))
            return await append(records)

        c.log.append = recording  # type: ignore[method-assign]
        await c.fence("n1")
        assert len(appended) == 1 and appended[0][0] == {"type": "fence", "node": "n1"}
        assert sorted(r["partition"] for r in appended[0][1:]) == [0, 1, 2]
        assert part(c, 0)["leader"] == "n2" and "n1" not in part(c, 1)["isr"]

    asyncio.run(body())


def test_unclean_election_picks_an_out_of_sync_replica(tmp_path: Path) -> None:
    async def body() -> None:
        c = await make(tmp_path, **{"unclean.leader.election.enable": True})
        for n in ("n1", "n2", "n3"):
            await c.heartbeat(n, n, 0)
        for n in ("n1", "n2", "n3"):
            await c.fence(n)
        await c.heartbeat("n1", "n1-b", 0)
        p0 = part(c, 0)
        assert p0["leader"] == "n1" and p0["isr"] == ["n1"]
    asyncio.run(body())


def test_alter_partition_checks_epochs(tmp_path: Path) -> None:
    async def body() -> None:
        c = await make(tmp_path)
        for n in ("n1", "n2", "n3"):
            await c.heartbeat(n, n, 0)
        p0 = part(c, 0)
        out = await c.alter_partition("n1", 0, p0["leader_epoch"], p0["partition_epoch"],
                                      ["n1", "n3"])
        assert out["isr"] == ["n1", "n3"] and out["partition_epoch"] == p0["partition_epoch"] + 1
        with pytest.raises(ProtocolError) as e:
            await c.alter_partition("n1", 0, p0["leader_epoch"], p0["partition_epoch"], ["n1"])
        assert e.value.code == "STALE_STATE"
        with pytest.raises(ProtocolError):
            await c.alter_partition("n2", 0, p0["leader_epoch"], out["partition_epoch"], ["n2"])
        with pytest.raises(ProtocolError):
            await c.alter_partition("n1", 0, p0["leader_epoch"], out["partition_epoch"], ["n2"])
    asyncio.run(body())


def test_restarted_leader_hands_over_and_state_survives_controller_restart(
        tmp_path: Path) -> None:
    async def body() -> None:
        c = await make(tmp_path)
        for n in ("n1", "n2", "n3"):
            await c.heartbeat(n, n, 0)
        await c.heartbeat("n2", "n2-restarted", 0)
        p1 = part(c, 1)
        assert p1["leader"] == "n3" and p1["leader_epoch"] == 2 and "n2" in p1["isr"]
        c.log.close()  # type: ignore[attr-defined]
        again = await make(tmp_path)
        assert part(again, 1) == p1
        replay = MetadataState()
        for off, rec in again.records_since(0):
            replay.apply(off, rec)
        assert replay.view() == again.view()
    asyncio.run(body())


def test_expire_fences_silent_brokers(tmp_path: Path) -> None:
    async def body() -> None:
        c = await make(tmp_path, **{"broker.session.timeout.ms": 10_000})
        for n in ("n1", "n2", "n3"):
            await c.heartbeat(n, n, 0)
        c.last_seen_ms["n3"] -= 20_000
        await c.expire()
        assert not c.state.alive("n3") and c.state.alive("n1")
        assert part(c, 2)["leader"] in ("n1", "n2")
    asyncio.run(body())
