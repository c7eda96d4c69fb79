"""GroupMember on a real 3-node cluster: members share the keys, a leave hands them over."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from unittest.mock import ANY

import pytest
from broker.localcluster import LocalCluster

from systems.undertow.assignors import TopicPartition
from systems.undertow.client import BrokerClient
from systems.undertow.group_member import GroupMember, commit_sync, run_member

pytestmark = pytest.mark.slow
KEYS = 8
EVERY = [("queue", k) for k in range(KEYS)]


class Runner:
    """A member in its own thread (run_member), with the assignments it was handed."""

    def __init__(self, addrs: dict[str, str], name: str) -> None:
        self.client = BrokerClient(addrs, timeout_s=10)
        self.member = GroupMember(self.client, "g", ["queue"], {"queue": KEYS},
                                  strategy="sticky", client_id=name, session_timeout_ms=3000,
                                  rebalance_timeout_ms=10_000)
        self.stop = threading.Event()
        self.seen: list[tuple[int, tuple[TopicPartition, ...]]] = []
        self.thread = threading.Thread(
            target=run_member, args=(self.member, self.stop, self.on_assignment), daemon=True)
        self.thread.start()

    def on_assignment(self, generation: int, assignment: tuple[TopicPartition, ...]) -> None:
        self.seen.append((generation, assignment))

    def close(self, leave: bool) -> None:
        self.stop.set()
        self.thread.join(20)
        if leave:
            self.member.leave()
        self.client.close()


def settled(runners: list[Runner]) -> int | None:
    """The generation all runners hold, if they share one and their keys cover every key once."""
    last = [r.seen[-1] for r in runners if r.seen]
    if len(last) != len(runners) or len({g for g, _ in last}) != 1:
        return None
    keys = sorted(tp for _, a in last for tp in a)
    return last[0][0] if keys == EVERY else None


def test_members_share_the_keys_and_a_leave_moves_only_the_leavers(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "c", settings={"offsets.topic.num.partitions": 3,
                                               "min.insync.replicas": 2})
    runners: list[Runner] = []
    try:
        c.start_all()
        c.wait_ready(20)
        runners = [Runner(c.addrs, f"m{i}") for i in range(3)]
        gen = c.wait(lambda: settled(runners), 30, "three members settled")
        before = {r.member.member_id: set(r.seen[-1][1]) for r in runners}
        assert sorted(len(a) for a in before.values()) == [2, 3, 3]

        leaver = runners.pop()
        start = time.monotonic()
        leaver.close(leave=True)
        new = c.wait(lambda: (g := settled(runners)) is not None and g > gen and g, 30,
                     "two members settled")
        took = time.monotonic() - start
        assert new > gen and took < 10
        for r in runners:  # sticky: each keeps what it had and takes over the leaver's
            assert before[r.member.member_id] <= set(r.seen[-1][1])
            assert len(r.seen[-1][1]) == KEYS // 2

        m = runners[0].member
        mine = {tp: 40 + tp[1] for tp in m.assignment}
        assert m.commit(mine)
        assert m.committed(EVERY) == mine
        # commit_sync (a `commit` operation): refused for certain in a generation that
        # ended, acknowledged in the member's own
        later = {tp: o + 1 for tp, o in mine.items()}
        assert commit_sync(m.client, "g", m.member_id, gen, later) == ("fail", ANY)
        assert m.committed(EVERY) == mine
        assert commit_sync(m.client, "g", m.member_id, m.generation, later) == ("ok", None)
        assert m.committed(EVERY) == later
    finally:
        for r in runners:
            r.close(leave=False)
        c.close()


def test_cooperative_sticky_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'cooperative-sticky' is not one of range"):
        GroupMember(BrokerClient({"n1": "127.0.0.1:1"}), "g", ["queue"], {"queue": 1},
                    strategy="cooperative-sticky")
