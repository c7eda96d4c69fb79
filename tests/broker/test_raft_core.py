"""RaftNode rules one at a time, driven by hand: elections, the up-to-date vote rule, fetch
replication, KRaft's own-epoch commit rule, diverging-epoch truncation, snapshots."""

from __future__ import annotations

import random

import pytest
from broker.raft.core import NotLeaderError, RaftConfig, RaftNode, Ready, Role
from broker.raft.messages import (
    BeginQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    Snapshot,
    VoteRequest,
    VoteResponse,
)
from broker.raft.storage import MemoryStorage, Persisted, SaveQuorumState

CFG = RaftConfig(election_timeout_ms=100, fetch_interval_ms=10, check_quorum_timeout_ms=1000,
                 snapshot_threshold_entries=5)
VOTERS = ("a", "b", "c")


def make(node: str, persisted: Persisted | None = None, *, voters: tuple[str, ...] = VOTERS,
         unsafe: bool = False) -> RaftNode:
    return RaftNode(node, voters, persisted or Persisted(), config=CFG, rng=random.Random(1),
                    unsafe_skip_log_up_to_date_check=unsafe)


def msgs(r: Ready, kind: type) -> list[tuple[str, Message]]:
    return [(o.dest, o.message) for o in r.messages if isinstance(o.message, kind)]


class Cluster:
    """Instant, lossless delivery between nodes, with storage applied as the host must."""

    def __init__(self, nodes: dict[str, RaftNode]) -> None:
        self.nodes = nodes
        self.storage = {n: MemoryStorage() for n in nodes}
        self.committed: dict[str, list[Entry]] = {n: [] for n in nodes}
        self.now = 0

    def run(self, src: str, ready: Ready, *, limit: int = 10_000) -> None:
        pending = [(src, ready)]
        while pending and limit > 0:
            limit -= 1
            n, r = pending.pop(0)
            self.storage[n].apply(r.persist)
            self.committed[n].extend(r.committed)
            for o in r.messages:
                if o.dest in self.nodes:
                    pending.append((o.dest, self.nodes[o.dest].receive(self.now, n, o.message)))

    def advance(self, ms: int) -> None:
        for _ in range(ms):
            self.now += 1
            for n, node in self.nodes.items():
                if node.next_timer_ms() <= self.now:
                    self.run(n, node.tick(self.now))

    def leader(self) -> RaftNode:
        leaders = [n for n in self.nodes.values() if n.role is Role.LEADER]
        assert len(leaders) == 1, [n.status() for n in self.nodes.values()]
        return leaders[0]


def test_single_voter_elects_itself_and_commits_at_once() -> None:
    node = make("a", voters=("a",))
    r = node.tick(1000)
    assert node.role is Role.LEADER and node.epoch == 1
    assert [e.control for e in r.committed] == [True]  # the LeaderChange record
    assert isinstance(r.persist[0], SaveQuorumState)
    offset, r = node.propose(1001, {"k": 1})
    assert offset == 1 and [e.record for e in r.committed] == [{"k": 1}]


def test_three_voters_elect_replicate_and_commit_by_majority() -> None:
    c = Cluster({n: make(n) for n in VOTERS})
    c.advance(300)
    leader = c.leader()
    off, r = leader.propose(c.now, "x")
    c.run(leader.id, r)
    c.advance(50)
    for n in VOTERS:
        assert [e.record for e in c.committed[n] if not e.control] == ["x"], n
        assert c.nodes[n].high_watermark == off + 1
    status = leader.status()
    assert status["leader"] == leader.id
    assert status["voter_states"][leader.id]["log_end_offset"] == 2
    follower = next(n for n in c.nodes.values() if n.role is Role.FOLLOWER)
    with pytest.raises(NotLeaderError):
        follower.propose(c.now, "y")


def test_vote_denied_to_a_candidate_with_a_shorter_log_unless_unsafe() -> None:
    log = (Entry(0, 1, "p"), Entry(1, 1, "q"))
    stale = VoteRequest(epoch=2, candidate="b", last_epoch=1, log_end=1)
    voter = make("a", Persisted(epoch=1, entries=log))
    r = voter.receive(0, "b", stale)
    assert msgs(r, VoteResponse) == [("b", VoteResponse(2, False, None))]
    unsafe = make("a", Persisted(epoch=1, entries=log), unsafe=True)
    assert msgs(unsafe.receive(0, "b", stale), VoteResponse)[0][1] == VoteResponse(2, True, None)
    # a higher last epoch beats a longer log
    newer = VoteRequest(epoch=2, candidate="b", last_epoch=2, log_end=1)
    assert msgs(make("a", Persisted(epoch=1, entries=log)).receive(0, "b", newer),
                VoteResponse)[0][1].granted  # type: ignore[union-attr]


def test_one_vote_per_epoch_survives_a_restart() -> None:
    store = MemoryStorage()
    a = make("a")
    r = a.receive(0, "b", VoteRequest(3, "b", 0, 0))
    store.apply(r.persist)
    assert msgs(r, VoteResponse)[0][1] == VoteResponse(3, True, None)
    restarted = make("a", store.load())
    r = restarted.receive(0, "c", VoteRequest(3, "c", 0, 0))
    assert msgs(r, VoteResponse)[0][1] == VoteResponse(3, False, None)


def _leader_at_epoch2() -> RaftNode:
    """'a' has an old epoch-1 entry and wins epoch 2 (appending its LeaderChange at offset 1)."""
    a = make("a", Persisted(epoch=1, entries=(Entry(0, 1, "old"),)))
    a.tick(10_000)
    assert (a.role, a.epoch) == (Role.FOLLOWER, 1)  # asking for pre-votes first
    a.receive(10_000, "b", VoteResponse(1, True, None, pre_vote=True))
    assert (a.role, a.epoch) == (Role.CANDIDATE, 2)
    a.receive(10_001, "b", VoteResponse(2, True))
    assert a.role == Role.LEADER
    return a


def test_commit_waits_for_an_entry_of_the_leaders_own_epoch() -> None:
    a = _leader_at_epoch2()
    # b acknowledges offset 1: the epoch-1 entry is on a majority, but it is not the leader's epoch
    r = a.receive(10_002, "b", FetchRequest(2, "b", 1, 1))
    assert a.high_watermark == 0 and not r.committed
    resp = msgs(r, FetchResponse)[0][1]
    assert isinstance(resp, FetchResponse) and [e.offset for e in resp.entries] == [1]
    r = a.receive(10_003, "b", FetchRequest(2, "b", 2, 2))
    assert a.high_watermark == 2 and [e.offset for e in r.committed] == [0, 1]


def test_diverging_follower_truncates_to_the_leader_and_catches_up() -> None:
    a = _leader_at_epoch2()  # log: (0, e1) (1, e2)
    b = make("b", Persisted(epoch=1, leader="c",
                            entries=(Entry(0, 1, "old"), Entry(1, 1, "lost"), Entry(2, 1, "x"))))
    b.receive(10_001, "a", BeginQuorumEpoch(2, "a"))
    fetch = msgs(b.tick(10_002), FetchRequest)[0][1]
    assert fetch == FetchRequest(2, "b", 3, 1)
    resp = msgs(a.receive(10_002, "b", fetch), FetchResponse)[0][1]
    assert isinstance(resp, FetchResponse) and resp.diverging == OffsetAndEpoch(1, 1)
    r = b.receive(10_003, "a", resp)
    assert b.log.end_offset == 1
    refetch = msgs(r, FetchRequest)[0][1]
    assert refetch == FetchRequest(2, "b", 1, 1)
    r = b.receive(10_004, "a", msgs(a.receive(10_004, "b", refetch), FetchResponse)[0][1])
    assert [(e.offset, e.epoch) for e in b.log.entries] == [(0, 1), (1, 2)]


def test_late_and_duplicated_fetch_responses_are_ignored() -> None:
    a = _leader_at_epoch2()
    b = make("b")
    b.receive(10_001, "a", BeginQuorumEpoch(2, "a"))
    fetch = msgs(b.tick(10_002), FetchRequest)[0][1]
    resp = msgs(a.receive(10_002, "b", fetch), FetchResponse)[0][1]
    b.receive(10_003, "a", resp)
    assert b.log.end_offset == 2
    r = b.receive(10_004, "a", resp)  # duplicate: must not append twice
    assert b.log.end_offset == 2 and not r.persist


def test_a_follower_behind_the_snapshot_fetches_and_restores_it() -> None:
    a = make("a", voters=("a", "b"))
    a.tick(10_000)
    a.receive(10_000, "b", VoteResponse(0, True, None, pre_vote=True))
    a.receive(10_000, "b", VoteResponse(1, True))
    assert a.role is Role.LEADER
    a.receive(10_001, "b", FetchRequest(1, "b", 1, 1))  # b has the LeaderChange: commit works
    for i in range(6):
        a.propose(10_002, i)
    a.receive(10_003, "b", FetchRequest(1, "b", 7, 1))
    assert a.high_watermark == 7 and a.wants_snapshot()
    a.take_snapshot(7, {"sum": 15})
    assert a.log.start_offset == 7 and a.log.entries == []
    fresh = make("b", voters=("a", "b"))
    fresh.receive(10_004, "a", BeginQuorumEpoch(1, "a"))
    resp = msgs(a.receive(10_004, "b", msgs(fresh.tick(10_005), FetchRequest)[0][1]),
                FetchResponse)[0][1]
    assert isinstance(resp, FetchResponse) and resp.snapshot_id == OffsetAndEpoch(7, 1)
    req = msgs(fresh.receive(10_006, "a", resp), FetchSnapshotRequest)[0][1]
    snap_resp = msgs(a.receive(10_006, "b", req), FetchSnapshotResponse)[0][1]
    r = fresh.receive(10_007, "a", snap_resp)
    assert r.restore == Snapshot(7, 1, {"sum": 15})
    assert fresh.log.start_offset == 7 and fresh.high_watermark == 7


def test_a_leader_that_loses_its_majority_resigns() -> None:
    a = _leader_at_epoch2()
    a.tick(10_001 + CFG.check_quorum_timeout_ms + 1)
    assert a.role is Role.FOLLOWER and a.leader is None


def test_observer_finds_the_leader_and_never_votes() -> None:
    o = make("o")
    assert o.role is Role.OBSERVER
    r = o.receive(0, "b", VoteRequest(1, "b", 0, 0))
    assert msgs(r, VoteResponse)[0][1] == VoteResponse(1, False, None)
    fetch_to = msgs(o.tick(5), FetchRequest)[0][0]
    assert fetch_to in VOTERS
    o.receive(6, fetch_to, FetchResponse(1, "a", "NOT_LEADER", 0, 0, 0))
    assert o.leader == "a"


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="fetch_interval_ms"):
        RaftConfig(fetch_interval_ms=0)
    with pytest.raises(ValueError, match="voters"):
        make("a", voters=())


def test_an_expired_timer_asks_for_pre_votes_without_raising_the_epoch() -> None:
    a = make("a", Persisted(epoch=3))
    r = a.tick(10_000)
    asks = msgs(r, VoteRequest)
    assert sorted(d for d, _ in asks) == ["b", "c"]
    assert all(m == VoteRequest(4, "a", 0, 0, pre_vote=True) for _, m in asks)
    assert a.epoch == 3 and a.role is Role.FOLLOWER and not r.persist


def test_a_pre_vote_changes_nothing_and_is_refused_while_a_leader_is_heard() -> None:
    b = make("b", Persisted(epoch=2, leader="c"))
    b.receive(0, "c", BeginQuorumEpoch(2, "c"))  # heard from c just now
    r = b.receive(1, "a", VoteRequest(3, "a", 0, 0, pre_vote=True))
    assert msgs(r, VoteResponse) == [("a", VoteResponse(2, False, "c", pre_vote=True))]
    assert (b.epoch, b.leader, b.voted_for) == (2, "c", None) and not r.persist
    # once the leader has been silent for an election timeout, the same question is granted
    late = b.receive(10_000, "a", VoteRequest(3, "a", 0, 0, pre_vote=True))
    assert msgs(late, VoteResponse)[0][1] == VoteResponse(2, True, "c", pre_vote=True)
    # and never to a candidate whose log is behind ours
    c = make("c", Persisted(epoch=1, entries=(Entry(0, 1, "x"),)))
    r = c.receive(0, "a", VoteRequest(2, "a", 0, 0, pre_vote=True))
    assert msgs(r, VoteResponse)[0][1] == VoteResponse(1, False, None, pre_vote=True)


def test_a_refused_pre_vote_that_names_the_leader_makes_a_follower() -> None:
    a = make("a", Persisted(epoch=3))
    a.tick(10_000)
    a.receive(10_001, "b", VoteResponse(4, False, "c", pre_vote=True))
    assert (a.role, a.epoch, a.leader) == (Role.FOLLOWER, 4, "c")
    fetch = msgs(a.tick(10_002), FetchRequest)
    assert fetch and fetch[0][0] == "c"


def test_a_cut_off_voter_rejoins_without_deposing_the_leader() -> None:
    """Isolated for many election timeouts, it must not come back with an inflated epoch."""
    c = Cluster({n: make(n) for n in VOTERS})
    c.advance(300)
    leader = c.leader()
    epoch = leader.epoch
    loner = next(n for n in VOTERS if n != leader.id)
    cut = c.nodes.pop(loner)
    for _ in range(20 * CFG.election_timeout_ms):  # it keeps timing out alone; nothing arrives
        c.advance(1)
        if cut.next_timer_ms() <= c.now:
            cut.tick(c.now)
    assert cut.epoch == epoch and cut.role is Role.FOLLOWER
    c.nodes[loner] = cut
    c.advance(1000)
    assert c.leader() is leader and leader.epoch == epoch
    assert cut.leader == leader.id and cut.epoch == epoch


def test_an_observer_that_finds_no_leader_keeps_its_timer_ahead() -> None:
    """A timer left in the past would make the host call tick() in a busy loop."""
    o = make("o")
    for now in range(0, 5000, 7):  # no answers: no leader is ever found
        o.tick(now)
        assert o.next_timer_ms() > now, (now, o.next_timer_ms())


def test_a_restarted_follower_grants_pre_votes_until_it_hears_its_leader() -> None:
    """KRaft's hasFetchedFromLeader: a leader only remembered from before a restart may have
    resigned meanwhile, so the remembered name alone must not hold up an election."""
    b = make("b", Persisted(epoch=2, leader="c"))
    r = b.receive(1, "a", VoteRequest(3, "a", 0, 0, pre_vote=True))
    assert msgs(r, VoteResponse)[0][1] == VoteResponse(2, True, "c", pre_vote=True)
    b.receive(2, "c", FetchResponse(2, "c", None, 0, 0, 0))  # the leader answers a fetch
    r = b.receive(3, "a", VoteRequest(3, "a", 0, 0, pre_vote=True))
    assert msgs(r, VoteResponse)[0][1] == VoteResponse(2, False, "c", pre_vote=True)


def test_unanswered_vote_requests_go_again_until_the_round_ends() -> None:
    """Sent once, the request to a voter that was down was lost for the whole round."""
    cfg = RaftConfig(election_timeout_ms=1000, vote_resend_ms=50)
    a = RaftNode("a", VOTERS, Persisted(epoch=3), config=cfg, rng=random.Random(1))
    assert sorted(d for d, _ in msgs(a.tick(10_000), VoteRequest)) == ["b", "c"]
    a.receive(10_001, "b", VoteResponse(3, False, None, pre_vote=True))  # b answers, c is down
    assert a.next_timer_ms() == 10_050
    again = msgs(a.tick(10_050), VoteRequest)
    assert again == [("c", VoteRequest(4, "a", 0, 0, pre_vote=True))]
    # c is back: it grants the pre-vote, and the real vote goes out at once
    r = a.receive(10_060, "c", VoteResponse(3, True, None, pre_vote=True))
    assert a.role is Role.CANDIDATE and a.epoch == 4
    assert sorted(d for d, _ in msgs(r, VoteRequest)) == ["b", "c"]
    a.receive(10_061, "c", VoteResponse(4, True, None))
    assert a.leader == "a" and a.status()["role"] == "leader"
