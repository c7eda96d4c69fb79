"""RaftDriver on asyncio with real timers and fsync'ed files: elections, commits, failover after
a crash or an isolation, restart from disk."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from broker.raft.config import (
    QuorumConfigError,
    Voter,
    parse_process_roles,
    parse_quorum_voters,
    quorum_membership,
)
from broker.raft.core import NotLeaderError, RaftConfig
from broker.raft.driver import RaftDriver
from broker.raft.loopback import LoopbackNetwork
from broker.raft.messages import Entry, MessageError
from broker.raft.metadata_log import RaftMetadataLog
from broker.raft.storage import FileStorage

FAST = RaftConfig(election_timeout_ms=150, fetch_interval_ms=20, begin_epoch_resend_ms=20,
                  check_quorum_timeout_ms=400, snapshot_threshold_entries=10)
VOTERS = ("n1", "n2", "n3")


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.net = LoopbackNetwork()
        self.applied: dict[str, list[object]] = {n: [] for n in VOTERS}

    async def start(self, node: str, seed: int = 0) -> RaftDriver:
        self.applied[node] = []
        applied = self.applied[node]

        def on_commit(e: Entry) -> None:
            if not e.control:
                applied.append(e.record)

        def on_restore(s: object) -> None:
            applied[:] = list(s.state)  # type: ignore[attr-defined]

        d = RaftDriver(node, VOTERS, FileStorage(self.root / node), self.net.transport(node),
                       config=FAST, seed=seed, on_commit=on_commit, on_restore=on_restore,
                       snapshot_state=lambda: list(applied))
        self.net.drivers[node] = d
        await d.start()
        return d

    async def leader(self, timeout_s: float = 5.0, exclude: str | None = None) -> RaftDriver:
        async def find() -> RaftDriver:
            while True:
                for n, d in self.net.drivers.items():
                    if n != exclude and d.running and d.leader_ready:
                        return d
                await asyncio.sleep(0.01)
        return await asyncio.wait_for(find(), timeout_s)

    async def stop_all(self) -> None:
        for d in self.net.drivers.values():
            await d.stop()


def committed(log: RaftMetadataLog, offset: int) -> Callable[[RaftDriver], bool]:
    """A wait condition: `log` has committed everything before `offset`."""
    return lambda _driver: log.committed_offset == offset

def run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


def test_commit_failover_and_restart_from_disk(tmp_path: Path) -> None:
    async def scenario() -> None:
        c = Cluster(tmp_path)
        for i, n in enumerate(VOTERS):
            await c.start(n, seed=i)
        try:
            leader = await c.leader()
            for i in range(15):  # past the snapshot threshold
                await leader.propose({"i": i})
            follower = next(d for d in c.net.drivers.values() if d is not leader)
            with pytest.raises(NotLeaderError) as info:
                await follower.propose("x")
            assert info.value.leader == leader.node_id
            # crash the leader: the others elect a new one that has every committed record
            old = leader.node_id
            await leader.stop()
            new = await c.leader(exclude=old)
            assert new.epoch > leader.epoch
            await new.propose({"i": 15})
            # the crashed node restarts from its files and catches up
            back = await c.start(old, seed=9)
            await back.wait_until(lambda d: len(c.applied[old]) == 16, 5)
            expected = [{"i": i} for i in range(16)]
            for n in VOTERS:
                await c.net.drivers[n].wait_until(lambda d: len(c.applied[d.node_id]) == 16, 5)
                assert c.applied[n] == expected, n
            assert (tmp_path / new.node_id / "snapshot.json").exists()
            st = new.status()
            assert st["role"] == "leader" and set(st["voter_states"]) == set(VOTERS)
        finally:
            await c.stop_all()
    run(scenario())


def test_an_isolated_leader_resigns_and_the_majority_fails_over(tmp_path: Path) -> None:
    async def scenario() -> None:
        c = Cluster(tmp_path)
        for i, n in enumerate(VOTERS):
            await c.start(n, seed=i)
        try:
            leader = await c.leader()
            await leader.propose("before")
            c.net.isolate(leader.node_id)
            with pytest.raises((NotLeaderError, TimeoutError)):
                await leader.propose("cut off", timeout_s=1.0)
            new = await c.leader(exclude=leader.node_id)
            await new.propose("after")
            await leader.wait_until(lambda d: not d.leader_ready, 3)  # check quorum: resigned
            c.net.heal()
            # its stale log (no "after") cannot win: it follows whoever leads now, and catches up
            await leader.wait_until(lambda d: d.leader not in (None, d.node_id) and len(
                c.applied[d.node_id]) == 2, 10)
            assert c.applied[leader.node_id] == ["before", "after"]
        finally:
            await c.stop_all()
    run(scenario())


def test_malformed_messages_are_refused_by_name(tmp_path: Path) -> None:
    d = RaftDriver("n1", VOTERS, FileStorage(tmp_path), LoopbackNetwork().transport("n1"))
    with pytest.raises(MessageError, match="epoch"):
        d.deliver("n2", {"type": "Vote", "epoch": None})


def test_roles_and_voters_parse_like_kafka() -> None:
    assert parse_process_roles("broker,controller") == {"broker", "controller"}
    assert parse_process_roles(["broker"]) == {"broker"}
    with pytest.raises(QuorumConfigError, match=r"process\.roles"):
        parse_process_roles("broker,zookeeper")
    assert parse_quorum_voters("1@h1:9093,2@h2:9093") == (Voter("1", "h1:9093"),
                                                           Voter("2", "h2:9093"))
    voters = parse_quorum_voters(["n1", "n2", "n3"])
    assert [v.node_id for v in voters] == ["n1", "n2", "n3"]
    with pytest.raises(QuorumConfigError, match="duplicate"):
        parse_quorum_voters("n1,n1")
    with pytest.raises(QuorumConfigError, match="bad entry"):
        parse_quorum_voters("1@nohost")
    assert quorum_membership("n1", frozenset({"broker", "controller"}), voters) == "voter"
    assert quorum_membership("n4", frozenset({"broker"}), voters) == "observer"
    with pytest.raises(QuorumConfigError, match="not in"):
        quorum_membership("n4", frozenset({"controller"}), voters)
    with pytest.raises(QuorumConfigError, match="lacks controller"):
        quorum_membership("n1", frozenset({"broker"}), voters)


def test_metadata_log_commits_on_the_active_controller_and_observers_read_it(
        tmp_path: Path) -> None:

    async def scenario() -> None:
        net = LoopbackNetwork()
        logs = {n: RaftMetadataLog(n, VOTERS, tmp_path / n, net.transport(n), config=FAST,
                                   seed=i) for i, n in enumerate((*VOTERS, "b4"))}
        for n, m in logs.items():
            net.drivers[n] = m.driver
            await m.start()
        try:
            async def active() -> RaftMetadataLog:
                while True:
                    for m in logs.values():
                        if m.is_active:
                            return m
                    await asyncio.sleep(0.01)
            ctl = await asyncio.wait_for(active(), 5)
            assert logs["b4"].driver.status()["role"] == "observer"
            assert await ctl.append([{"type": "topic", "name": "q"}]) == 1
            assert await ctl.append([{"type": "register", "node": "n1"},
                                     {"type": "fence", "node": "n2"}]) == 3
            other = next(m for m in logs.values() if m is not ctl)
            with pytest.raises(NotLeaderError):
                await other.append([{"type": "x"}])
            for m in logs.values():
                await m.driver.wait_until(committed(m, 3), 5)
                assert [r["type"] for _, r in m.read(0)] == ["topic", "register", "fence"]
                assert m.read(2) == [(2, {"type": "fence", "node": "n2"})]
            view = ctl.quorum_view()
            assert view["leader"] == ctl.driver.node_id and view["metadata_offset"] == 3
            assert set(view["voter_states"]) == set(VOTERS)
        finally:
            for m in logs.values():
                await m.stop()
    run(scenario())
