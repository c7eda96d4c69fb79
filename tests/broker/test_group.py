"""The group coordinator's state machine: rebalances, fencing, timeouts, offsets, replay."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from broker.group import (
    COMPLETING,
    EMPTY,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    PREPARING,
    REBALANCE_IN_PROGRESS,
    STABLE,
    UNKNOWN_MEMBER_ID,
    Append,
    Effect,
    Group,
    Reply,
)
from broker.txnindex import marker_value
from hypothesis import given, settings
from hypothesis import strategies as st

SESSION_MS, REBALANCE_MS = 1000, 5000
PROTOS = [("range", {"topics": ["queue"]})]


def replies(effects: Sequence[Effect], kind: str) -> dict[str, dict[str, Any]]:
    return {e.member_id: e.body for e in effects if isinstance(e, Reply) and e.kind == kind}


def appends(effects: Sequence[Effect]) -> list[Append]:
    return [e for e in effects if isinstance(e, Append)]


def join(g: Group, mid: str, now: int, protocols: Sequence[tuple[str, Any]] = PROTOS,
         client: str = "c") -> list[Effect]:
    return g.join(mid, client, protocols, SESSION_MS, REBALANCE_MS, now)


def first_member(g: Group, now: int = 0) -> str:
    body = next(iter(replies(join(g, "", now), "join").values()))
    return str(body["member_id"])


def stable(g: Group, assignments: dict[str, Any], now: int) -> dict[str, dict[str, Any]]:
    """Every member syncs (the leader last), the group record commits: the sync replies."""
    assert g.state == COMPLETING and g.leader is not None
    out: list[Effect] = []
    for mid in [m for m in g.members if m != g.leader] + [g.leader]:
        out += g.sync(mid, g.generation, assignments if mid == g.leader else None, now)
    [app] = appends(out)
    assert app.record["type"] == "group" and app.record["generation"] == g.generation
    assert replies(out, "sync") == {}  # nothing before the record is committed
    got = replies(g.appended(app.record), "sync")
    assert g.state == STABLE
    return got


def test_a_lone_member_joins_leads_and_gets_its_assignment() -> None:
    g = Group("g")
    effects = join(g, "", 0, client="alice")
    [(mid, body)] = replies(effects, "join").items()
    assert mid.startswith("alice-") and body["member_id"] == mid
    assert body["generation"] == 1 and body["leader"] == mid and body["protocol"] == "range"
    assert body["members"] == {mid: {"topics": ["queue"]}}
    assert g.state == COMPLETING
    assert stable(g, {mid: [["queue", 0]]}, 10) == {mid: {"error": None,
                                                          "assignment": [["queue", 0]]}}
    assert g.heartbeat(mid, 1, 20) == {"error": None}


def test_a_second_join_makes_the_first_member_rejoin_then_both_get_a_new_generation() -> None:
    g = Group("g")
    a = first_member(g)
    stable(g, {a: "all"}, 1)
    assert replies(join(g, "", 2, client="b"), "join") == {}  # waits for a to rejoin
    assert g.state == PREPARING
    assert g.heartbeat(a, 1, 3)["error"] == REBALANCE_IN_PROGRESS
    got = replies(join(g, a, 4), "join")
    assert len(got) == 2 and {b["generation"] for b in got.values()} == {2}
    assert got[a]["leader"] == a and "members" in got[a]
    b = next(m for m in got if m != a)
    assert "members" not in got[b]
    assert stable(g, {a: "half", b: "other half"}, 5) == {
        a: {"error": None, "assignment": "half"}, b: {"error": None, "assignment": "other half"}}


def test_old_generations_and_strangers_are_fenced() -> None:
    g = Group("g")
    a = first_member(g)
    stable(g, {a: 1}, 1)
    assert replies(join(g, "", 2), "join") == {}
    b = next(m for m in g.members if m != a)
    join(g, a, 3)
    assert g.generation == 2
    # a's view of generation 1 is stale everywhere
    assert g.heartbeat(a, 1, 4)["error"] == ILLEGAL_GENERATION
    assert replies(g.sync(a, 1, {a: 1}, 4), "sync")[a]["error"] == ILLEGAL_GENERATION
    assert replies(g.commit(a, 1, {("queue", 0): 5}, 4), "commit")[a]["error"] == ILLEGAL_GENERATION
    # mid-rebalance (waiting for syncs) commits are refused, then accepted once stable
    assert replies(g.commit(b, 2, {("queue", 0): 5}, 4), "commit")[b]["error"] \
        == REBALANCE_IN_PROGRESS
    stable(g, {a: 1, b: 2}, 5)
    assert appends(g.commit(b, 2, {("queue", 0): 5}, 6))
    for stranger in ("nobody", ""):
        assert g.heartbeat(stranger, 2, 6)["error"] == UNKNOWN_MEMBER_ID
        assert replies(g.commit(stranger, 2, {}, 6), "commit")[stranger]["error"] \
            == UNKNOWN_MEMBER_ID
    assert replies(join(g, "nobody", 6), "join")["nobody"]["error"] == UNKNOWN_MEMBER_ID


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    g = Group("g")
    a = first_member(g)
    stable(g, {a: 1}, 0)
    join(g, "", 10)
    b = next(m for m in g.members if m != a)
    join(g, a, 20)
    stable(g, {a: 1, b: 2}, 30)
    assert g.heartbeat(a, 2, 900) == {"error": None}  # a heartbeats, b is silent
    assert g.tick(900 + SESSION_MS // 2) == []
    effects = g.tick(30 + SESSION_MS + 1)
    assert b not in g.members and g.state == PREPARING
    assert effects == [] and g.heartbeat(b, 2, 1100)["error"] == UNKNOWN_MEMBER_ID
    assert g.heartbeat(a, 2, 1100)["error"] == REBALANCE_IN_PROGRESS
    got = replies(join(g, a, 1200), "join")
    assert got[a]["generation"] == 3 and list(got[a]["members"]) == [a]


def test_a_member_that_does_not_rejoin_in_time_is_left_behind() -> None:
    g = Group("g")
    a = first_member(g)
    stable(g, {a: 1}, 0)
    join(g, "", 10)
    b = next(m for m in g.members if m != a)
    for now in range(100, REBALANCE_MS, 500):  # a keeps heartbeating but never rejoins
        assert g.heartbeat(a, 1, now)["error"] == REBALANCE_IN_PROGRESS
        assert g.tick(now) == []
    got = replies(g.tick(10 + REBALANCE_MS), "join")
    assert a not in g.members and got[b]["generation"] == 2 and got[b]["leader"] == b


def test_a_leader_that_never_syncs_is_removed_and_the_others_rejoin() -> None:
    g = Group("g")
    a = first_member(g)
    stable(g, {a: 1}, 0)
    join(g, "", 10)
    b = next(m for m in g.members if m != a)
    join(g, a, 20)
    assert g.leader == a
    assert g.sync(b, 2, None, 30) == []  # b waits for the leader's assignment
    effects = g.tick(20 + REBALANCE_MS)
    assert a not in g.members and g.state == PREPARING
    assert replies(effects, "sync")[b]["error"] == REBALANCE_IN_PROGRESS
    got = replies(join(g, b, 40 + REBALANCE_MS), "join")
    assert got[b]["generation"] == 3 and got[b]["leader"] == b


def test_an_assignment_that_cannot_be_committed_makes_the_group_rebalance() -> None:
    g = Group("g")
    a = first_member(g)
    [app] = appends(g.sync(a, 1, {a: "all"}, 1))
    effects = g.append_failed(app.record, 2)
    assert g.state == PREPARING
    assert replies(effects, "sync")[a]["error"] == REBALANCE_IN_PROGRESS
    assert g.appended(app.record) == []  # a late commit of it changes nothing now
    got = replies(join(g, a, 3), "join")
    assert got[a]["generation"] == 2
    assert stable(g, {a: "all"}, 4)[a]["assignment"] == "all"


def test_leaving_rebalances_and_the_last_one_out_empties_the_group() -> None:
    g = Group("g")
    a = first_member(g)
    stable(g, {a: 1}, 0)
    join(g, "", 10)
    b = next(m for m in g.members if m != a)
    join(g, a, 20)
    stable(g, {a: 1, b: 2}, 30)
    body, effects = g.leave(b, 40)
    assert body == {"error": None} and g.state == PREPARING and effects == []
    join(g, a, 50)
    stable(g, {a: 3}, 60)
    body, effects = g.leave(a, 70)
    [app] = appends(effects)
    assert g.state == EMPTY and app.record["members"] == {} and app.record["generation"] == 4
    assert g.leave(a, 80)[0]["error"] == UNKNOWN_MEMBER_ID


def test_members_agree_on_a_protocol_they_all_support() -> None:
    g = Group("g")
    join(g, "", 0, [("sticky", {}), ("range", {})])
    a = next(iter(g.members))
    stable(g, {}, 1)
    assert g.protocol == "sticky"
    [bad] = replies(join(g, "", 2, [("roundrobin", {})]), "join").values()
    assert bad["error"] == INCONSISTENT_GROUP_PROTOCOL and len(g.members) == 1
    join(g, "", 3, [("range", {"b": 1}), ("sticky", {"b": 2})])
    got = replies(join(g, a, 4, [("sticky", {}), ("range", {"a": 1})]), "join")
    # one vote each: the tie goes to the name first in order
    assert got[a]["protocol"] == "range" and sorted(got[a]["members"].values(), key=str) == [
        {"a": 1}, {"b": 1}]


def test_commits_count_once_appended_and_a_new_coordinator_replays_everything() -> None:
    g = Group("g")
    log: list[dict[str, Any]] = []

    def commit_all(effects: list[Effect]) -> list[Effect]:
        out: list[Effect] = []
        for e in effects:
            if isinstance(e, Append):
                log.append(e.record)
                out += g.appended(e.record)
                out += list(e.then)
            else:
                out.append(e)
        return out

    # a simple consumer's commit while the group is empty is allowed
    [app] = appends(g.commit("", -1, {("queue", 3): 7}, 0))
    assert g.committed([("queue", 3)]) == {}
    commit_all([app])
    assert g.committed([("queue", 3), ("queue", 4)]) == {("queue", 3): 7}
    a = next(iter(replies(commit_all(join(g, "", 1)), "join")))
    out = commit_all(g.sync(a, 1, {a: [["queue", 3]]}, 2))
    assert replies(out, "sync")[a]["assignment"] == [["queue", 3]]
    commit_all(g.commit(a, 1, {("queue", 3): 9}, 3))
    new = Group.replay("g", [*log, {"type": "offsets", "group": "other", "offsets": [
        ["queue", 3, 0]]}], now_ms=10_000)
    assert new.state == STABLE and new.generation == 1 and new.leader == a
    assert new.committed([("queue", 3)]) == {("queue", 3): 9}
    # the member carries on with the new coordinator; its session starts at the replay
    assert new.heartbeat(a, 1, 10_500) == {"error": None}
    assert replies(new.sync(a, 1, None, 10_500), "sync")[a]["assignment"] == [["queue", 3]]
    assert new.heartbeat(a, 0, 10_500)["error"] == ILLEGAL_GENERATION
    assert new.tick(10_000 + SESSION_MS) == []
    [app] = appends(new.tick(10_500 + SESSION_MS + 1))  # the last member gone: empty
    assert app.record["members"] == {} and new.state == EMPTY and new.generation == 2


def test_transactional_offsets_count_only_at_their_commit_marker_and_replay_so() -> None:
    g = Group("g")
    log: list[dict[str, Any]] = []

    def commit_all(effects: list[Effect]) -> list[Effect]:
        out: list[Effect] = []
        for e in effects:
            if isinstance(e, Append):
                log.append(e.record)
                out += g.appended(e.record)
                out += list(e.then)
            else:
                out.append(e)
        return out

    def marker(producer_id: int, commit: bool) -> None:
        log.append(json.loads(marker_value(producer_id, 0, commit)))
        g.txn_marker(producer_id, commit)

    a = next(iter(replies(commit_all(join(g, "", 1)), "join")))
    commit_all(g.sync(a, 1, {a: [["queue", 3], ["queue", 4]]}, 2))
    commit_all(g.commit(a, 1, {("queue", 3): 5}, 3))
    tp3, tp4 = ("queue", 3), ("queue", 4)
    # producer 7's offsets are pending: not committed, and fetches requiring stability wait
    out = commit_all(g.commit(a, 1, {tp3: 9, tp4: 2}, 4, producer=(7, 0)))
    assert replies(out, "commit")[a] == {"error": None}
    assert log[-1]["type"] == "txn_offsets" and log[-1]["producer_id"] == 7
    assert g.committed([tp3, tp4]) == {tp3: 5}
    assert g.unstable([tp3, tp4, ("queue", 0)]) == [tp3, tp4]
    marker(8, True)  # another producer's marker moves nothing
    assert g.committed([tp3]) == {tp3: 5} and g.unstable([tp3]) == [tp3]
    marker(7, False)  # aborted: the old offsets stay, and they are stable
    assert g.committed([tp3, tp4]) == {tp3: 5} and g.unstable([tp3, tp4]) == []
    commit_all(g.commit(a, 1, {tp3: 11}, 5, producer=(7, 1)))
    marker(7, True)
    assert g.committed([tp3, tp4]) == {tp3: 11} and g.unstable([tp3]) == []
    commit_all(g.commit(a, 1, {tp4: 6}, 6, producer=(7, 1)))  # left open at the failover
    # a fenced generation's and a stranger's transactional commits are refused
    refused = g.commit(a, 0, {tp3: 99}, 7, producer=(9, 0))
    assert replies(refused, "commit")[a]["error"] == ILLEGAL_GENERATION and not appends(refused)
    refused = g.commit("x", 1, {tp3: 99}, 7, producer=(9, 0))
    assert replies(refused, "commit")["x"]["error"] == UNKNOWN_MEMBER_ID
    # a new coordinator replays the markers in order: the open commit stays pending
    new = Group.replay("g", log, now_ms=10_000)
    assert new.committed([tp3, tp4]) == {tp3: 11} and new.unstable([tp3, tp4]) == [tp4]
    new.txn_marker(7, True)
    assert new.committed([tp3, tp4]) == {tp3: 11, tp4: 6} and new.unstable([tp4]) == []


OPS = st.lists(st.tuples(st.sampled_from(["new", "rejoin", "sync", "heartbeat", "leave",
                                          "commit", "tick", "stale"]),
                         st.integers(0, 5), st.integers(0, 3000)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_any_sequence_keeps_one_generation_one_leader_and_replays_to_the_same_group(
        ops: list[tuple[str, int, int]]) -> None:
    g = Group("g")
    log: list[dict[str, Any]] = []
    gen_of: dict[str, int] = {}   # what each member last learned from a join reply
    synced: dict[tuple[str, int], Any] = {}
    now = 0
    for op, pick, dt in ops:
        now += dt if op == "tick" else 1
        members = sorted(g.members)
        mid = members[pick % len(members)] if members else ""
        before = (g.generation, set(g.members))
        if op == "new":
            effects = join(g, "", now)
        elif op == "rejoin":
            effects = join(g, mid, now) if mid else []
        elif op == "sync":
            assignment = {m: [m] for m in g.members}
            effects = g.sync(mid, gen_of.get(mid, -1), assignment, now) if mid else []
        elif op == "heartbeat":
            effects, _ = [], g.heartbeat(mid, gen_of.get(mid, -1), now)
        elif op == "leave":
            effects = g.leave(mid, now)[1] if mid else []
        elif op == "commit":
            effects = g.commit(mid, gen_of.get(mid, -1), {("queue", pick): now}, now)
        elif op == "tick":
            effects = g.tick(now)
        else:  # a request from an old generation changes nothing
            body = g.heartbeat(mid or "ghost", g.generation - 1, now)
            assert body["error"] in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID)
            assert (g.generation, set(g.members)) == before
            continue
        while effects:  # every append commits at once, and what it released follows
            e, effects = effects[0], effects[1:]
            if isinstance(e, Append):
                log.append(e.record)
                effects = [*effects, *g.appended(e.record), *e.then]
                continue
            if e.kind == "join" and e.body["error"] is None:
                assert e.body["generation"] == g.generation and e.body["leader"] == g.leader
                assert ("members" in e.body) == (e.member_id == g.leader)
                gen_of[e.member_id] = e.body["generation"]
            if e.kind == "sync" and e.body["error"] is None:
                key = (e.member_id, g.generation)
                assert synced.setdefault(key, e.body["assignment"]) == e.body["assignment"]
        assert g.generation >= before[0]
        if g.state in (COMPLETING, STABLE):
            assert g.leader in g.members
        if g.state == EMPTY:
            assert not g.members
    if g.state in (STABLE, EMPTY) and g.assignment_appended:
        again = Group.replay("g", log, now)
        assert (again.generation, set(again.members), again.offsets) == (
            g.generation, set(g.members), g.offsets)
