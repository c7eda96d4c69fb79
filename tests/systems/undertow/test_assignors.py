"""The assignors against Kafka's documented examples and the properties Kafka's tests check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from systems.undertow.assignors import (
    ASSIGNORS,
    Assignment,
    Member,
    TopicPartition,
    assignor,
    cooperative_sticky_assign,
    kept_partitions,
    range_assign,
    round_robin_assign,
    sticky_assign,
)

TOPICS = ("t0", "t1", "t2")
Group = tuple[dict[str, int], list[Member]]


def tps(*names: str) -> tuple[TopicPartition, ...]:
    """'t0p2' -> ('t0', 2), in (topic, partition) order as the assignors return them."""
    return tuple(sorted((n.split("p")[0], int(n.split("p")[1])) for n in names))


def member(mid: str, *topics: str, owned: Sequence[str] = (), generation: int = 1) -> Member:
    return Member(mid, frozenset(topics), frozenset(tps(*owned)), generation)


def again(members: Sequence[Member], out: Assignment, generation: int = 1) -> list[Member]:
    """The members rejoining, each owning what it was just given."""
    return [Member(m.member_id, m.topics, frozenset(out[m.member_id]), generation) for m in members]


def all_partitions(partitions: Mapping[str, int], members: Sequence[Member]) -> set[TopicPartition]:
    """The partitions some member subscribes to: exactly these must be assigned."""
    topics = {t for m in members for t in m.topics}
    return {(t, p) for t in topics for p in range(partitions.get(t, 0))}


def assert_valid(partitions: Mapping[str, int], members: Sequence[Member], out: Assignment) -> None:
    """Every member listed; each partition once, to a member subscribed to its topic."""
    assert set(out) == {m.member_id for m in members}
    given_out = [tp for tps_ in out.values() for tp in tps_]
    assert len(given_out) == len(set(given_out)), out
    assert set(given_out) == all_partitions(partitions, members)
    for m in members:
        assert all(t in m.topics for t, _ in out[m.member_id])


def assert_balanced(members: Sequence[Member], out: Assignment) -> None:
    """Kafka's balance rule: counts differ by at most one, or no partition of a member can go to
    a member with two fewer partitions that subscribes to its topic."""
    topics = {m.member_id: m.topics for m in members}
    for a, held in out.items():
        for b, other in out.items():
            if len(held) > len(other) + 1:
                assert not [tp for tp in held if tp[0] in topics[b]], (a, b, out)


# Kafka's documented examples (the assignors' javadoc and their unit tests)

def test_range_javadoc_example() -> None:
    ms = [member("C0", "t0", "t1"), member("C1", "t0", "t1")]
    assert range_assign({"t0": 3, "t1": 3}, ms) == {
        "C0": tps("t0p0", "t0p1", "t1p0", "t1p1"), "C1": tps("t0p2", "t1p2")}


def test_range_mixed_topics() -> None:
    ms = [member("c1", "t1"), member("c2", "t1", "t2"), member("c3", "t1")]
    assert range_assign({"t1": 3, "t2": 2}, ms) == {
        "c1": tps("t1p0"), "c2": tps("t1p1", "t2p0", "t2p1"), "c3": tps("t1p2")}


def test_roundrobin_javadoc_examples() -> None:
    ms = [member("C0", "t0", "t1"), member("C1", "t0", "t1")]
    assert round_robin_assign({"t0": 3, "t1": 3}, ms) == {
        "C0": tps("t0p0", "t0p2", "t1p1"), "C1": tps("t0p1", "t1p0", "t1p2")}
    ms = [member("C0", "t0"), member("C1", "t0", "t1"), member("C2", "t0", "t1", "t2")]
    assert round_robin_assign({"t0": 1, "t1": 2, "t2": 3}, ms) == {
        "C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1", "t2p0", "t2p1", "t2p2")}


def test_roundrobin_mixed_topics() -> None:
    ms = [member("c1", "t1"), member("c2", "t1", "t2"), member("c3", "t1")]
    assert round_robin_assign({"t1": 3, "t2": 2}, ms) == {
        "c1": tps("t1p0"), "c2": tps("t1p1", "t2p0", "t2p1"), "c3": tps("t1p2")}


def test_sticky_javadoc_example_1_keeps_everything_when_a_member_leaves() -> None:
    parts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    ms = [member(c, "t0", "t1", "t2", "t3") for c in ("C0", "C1", "C2")]
    first = sticky_assign(parts, ms)
    assert first == {"C0": tps("t0p0", "t1p1", "t3p0"), "C1": tps("t0p1", "t2p0", "t3p1"),
                     "C2": tps("t1p0", "t2p1")}
    second = sticky_assign(parts, again([ms[0], ms[2]], first))
    assert second == {"C0": tps("t0p0", "t1p1", "t3p0", "t2p0"),
                      "C2": tps("t1p0", "t2p1", "t0p1", "t3p1")}


def test_sticky_javadoc_example_2_balances_unequal_subscriptions() -> None:
    parts = {"t0": 1, "t1": 2, "t2": 3}
    ms = [member("C0", "t0"), member("C1", "t0", "t1"), member("C2", "t0", "t1", "t2")]
    first = sticky_assign(parts, ms)
    assert first == {"C0": tps("t0p0"), "C1": tps("t1p0", "t1p1"),
                     "C2": tps("t2p0", "t2p1", "t2p2")}
    second = sticky_assign(parts, again(ms[1:], first))
    assert second == {"C1": tps("t1p0", "t1p1", "t0p0"), "C2": tps("t2p0", "t2p1", "t2p2")}


def test_sticky_fills_members_under_their_quota() -> None:
    ms = [member("c1", "t1", "t2", owned=["t1p0"]), member("c2", "t1", "t2", owned=["t1p1"]),
          member("c3", "t1", "t2")]
    assert sticky_assign({"t1": 2, "t2": 3}, ms) == {
        "c1": tps("t1p0", "t2p1"), "c2": tps("t1p1", "t2p2"), "c3": tps("t2p0")}


def test_sticky_takes_from_a_member_over_its_quota() -> None:
    ms = [member("c1", "t1", "t2", owned=["t1p0", "t2p0"]),
          member("c2", "t1", "t2", owned=["t1p1", "t2p1"]), member("c3", "t1", "t2")]
    assert sticky_assign({"t1": 2, "t2": 2}, ms) == {
        "c1": tps("t1p0"), "c2": tps("t1p1", "t2p1"), "c3": tps("t2p0")}


def test_sticky_leaves_members_at_quota_alone() -> None:
    every = ("t0", "t1", "t2", "t3")
    ms = [member("c1", *every, generation=-1),
          member("c2", *every, owned=["t0p0", "t2p0", "t1p0"], generation=9),
          member("c3", *every, owned=["t3p2", "t2p2", "t1p1"], generation=8),
          member("c4", *every, owned=["t3p1", "t0p1", "t0p2"], generation=7)]
    out = sticky_assign(dict.fromkeys(every, 3), ms)
    assert out["c1"] == tps("t1p2", "t2p1", "t3p0")
    assert all(set(out[m.member_id]) == m.owned for m in ms[1:])


def test_sticky_a_stale_generation_loses_a_contested_partition() -> None:
    ms = [member("c1", "t0", "t1", owned=["t0p0", "t0p2", "t1p1"], generation=10),
          member("c2", "t0", "t1", owned=["t0p0", "t0p2", "t1p1"], generation=9)]
    assert sticky_assign({"t0": 3, "t1": 3}, ms) == {
        "c1": tps("t0p0", "t0p2", "t1p1"), "c2": tps("t0p1", "t1p0", "t1p2")}


def test_sticky_the_highest_generation_keeps_each_partition() -> None:
    every = ("t0", "t1", "t2")
    ms = [member("c1", *every, owned=["t0p0", "t1p0", "t2p0"], generation=10),
          member("c2", *every, owned=["t0p1", "t1p1", "t2p1"], generation=9),
          member("c3", *every, owned=["t1p1", "t2p0", "t2p2"], generation=8)]
    out = sticky_assign(dict.fromkeys(every, 3), ms)
    assert out == {"c1": tps("t0p0", "t1p0", "t2p0"), "c2": tps("t0p1", "t1p1", "t2p1"),
                   "c3": tps("t0p2", "t1p2", "t2p2")}


def test_sticky_a_partition_claimed_twice_in_one_generation_is_nobodys() -> None:
    ms = [member("c1", "t", owned=["tp0", "tp1"]), member("c2", "t", owned=["tp0", "tp2"]),
          member("c3", "t")]
    assert sticky_assign({"t": 3}, ms) == {"c1": tps("tp1"), "c2": tps("tp2"), "c3": tps("tp0")}
    # cooperative: tp0 is still owned by c1 and c2, so c3 gets it only after they revoke it
    assert cooperative_sticky_assign({"t": 3}, ms) == {"c1": tps("tp1"), "c2": tps("tp2"), "c3": ()}
    ms4 = [member("c1", "t", owned=["tp0", "tp1"]), member("c2", "t", owned=["tp0", "tp2"]),
           member("c3", "t")]
    assert cooperative_sticky_assign({"t": 4}, ms4) == {
        "c1": tps("tp1", "tp3"), "c2": tps("tp2"), "c3": ()}


def test_cooperative_sticky_hands_a_partition_over_in_two_rebalances() -> None:
    parts = {"t": 3}
    ms = [member("c1", "t", owned=["tp0", "tp1", "tp2"]), member("c2", "t")]
    first = cooperative_sticky_assign(parts, ms)
    assert first == {"c1": tps("tp0", "tp1"), "c2": ()}  # c1 revokes tp2; c2 waits for it
    second = cooperative_sticky_assign(parts, again(ms, first, generation=2))
    assert second == {"c1": tps("tp0", "tp1"), "c2": tps("tp2")}


def test_nonexistent_topics_and_empty_groups_assign_nothing() -> None:
    for assign in ASSIGNORS.values():
        assert assign({"t0": 2}, [member("c", "nope")]) == {"c": ()}
        assert assign({"t0": 2}, []) == {}


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="'c' appears twice"):
        sticky_assign({"t0": 1}, [member("c", "t0"), member("c", "t0")])
    with pytest.raises(ValueError, match="'t0' has a negative partition count"):
        range_assign({"t0": -1}, [member("c", "t0")])
    with pytest.raises(ValueError, match="unknown assignor 'rr': one of range, roundrobin"):
        assignor("rr")
    assert assignor("cooperative-sticky") is cooperative_sticky_assign


# Properties, over random groups

@st.composite
def groups(draw: st.DrawFn, *, uniform: bool = False) -> Group:
    """Topics with 0..7 partitions; 1..7 members; each partition owned by no one, one present
    member or one that left; a few contested claims with random generations."""
    parts = {t: draw(st.integers(0, 7)) for t in TOPICS}
    n = draw(st.integers(1, 7))
    topic_sets = st.frozensets(st.sampled_from(TOPICS), min_size=1)
    subs = [draw(topic_sets)] * n if uniform else [draw(topic_sets) for _ in range(n)]
    owned: list[set[TopicPartition]] = [set() for _ in range(n)]
    for tp in sorted((t, p) for t, k in parts.items() for p in range(k)):
        owner = draw(st.integers(-1, n + 1))
        if 0 <= owner < n:
            owned[owner].add(tp)
    gens = [draw(st.integers(1, 3)) for _ in range(n)]
    return parts, [Member(f"m{i}", subs[i], frozenset(owned[i]), gens[i]) for i in range(n)]


@st.composite
def contested(draw: st.DrawFn) -> Group:
    """As groups, plus stale claims: members also claim partitions others own."""
    parts, ms = draw(groups())
    every = sorted((t, p) for t, k in parts.items() for p in range(k))
    extra = [draw(st.frozensets(st.sampled_from(every))) if every else frozenset() for _ in ms]
    return parts, [Member(m.member_id, m.topics, m.owned | e, m.generation)
                   for m, e in zip(ms, extra, strict=True)]


@settings(max_examples=200, deadline=None)
@given(contested(), st.sampled_from(["range", "roundrobin", "sticky"]))
def test_every_partition_is_assigned_once_to_a_subscriber(group: Group, name: str) -> None:
    parts, ms = group
    assert_valid(parts, ms, assignor(name)(parts, ms))


@settings(max_examples=200, deadline=None)
@given(groups(uniform=True))
def test_roundrobin_counts_differ_by_at_most_one_when_subscriptions_are_equal(
        group: Group) -> None:
    parts, ms = group
    counts = [len(v) for v in round_robin_assign(parts, ms).values()]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(groups())
def test_range_counts_per_topic_differ_by_at_most_one(group: Group) -> None:
    parts, ms = group
    out = range_assign(parts, ms)
    for topic in TOPICS:
        counts = [sum(1 for t, _ in out[m.member_id] if t == topic)
                  for m in ms if topic in m.topics]
        if counts:
            assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(contested())
def test_sticky_is_as_balanced_as_the_subscriptions_allow(group: Group) -> None:
    parts, ms = group
    assert_balanced(ms, sticky_assign(parts, ms))


def most_keepable(parts: Mapping[str, int], ms: Sequence[Member]) -> int:
    """With equal subscriptions, the most owned partitions any balanced assignment keeps: the
    members owning most get the one-larger shares."""
    total = len(all_partitions(parts, ms))
    base, larger = divmod(total, len(ms))
    kept = sorted((len(k) for k in kept_partitions(parts, ms).values()), reverse=True)
    return sum(min(k, base + (1 if i < larger else 0)) for i, k in enumerate(kept))


def kept_count(ms: Sequence[Member], out: Assignment,
               kept: Mapping[str, set[TopicPartition]]) -> int:
    return sum(len(kept[m.member_id] & set(out[m.member_id])) for m in ms)


@settings(max_examples=200, deadline=None)
@given(groups(uniform=True))
def test_sticky_moves_the_fewest_partitions_balance_allows(group: Group) -> None:
    parts, ms = group
    out = sticky_assign(parts, ms)
    assert_valid(parts, ms, out)
    counts = [len(v) for v in out.values()]
    assert max(counts) - min(counts) <= 1
    kept = kept_partitions(parts, ms)
    assert kept_count(ms, out, kept) == most_keepable(parts, ms)
    # roundrobin is balanced here too (range is not: it balances per topic), and keeps no more
    assert kept_count(ms, out, kept) >= kept_count(ms, round_robin_assign(parts, ms), kept)


@settings(max_examples=200, deadline=None)
@given(contested())
def test_sticky_changes_nothing_when_nothing_changed(group: Group) -> None:
    parts, ms = group
    out = sticky_assign(parts, ms)
    assert sticky_assign(parts, again(ms, out, generation=4)) == out


@settings(max_examples=200, deadline=None)
@given(contested())
def test_cooperative_sticky_never_gives_what_another_member_still_owns(
        group: Group) -> None:
    parts, ms = group
    out = cooperative_sticky_assign(parts, ms)
    target = sticky_assign(parts, ms)
    for m in ms:
        assert set(out[m.member_id]) <= set(target[m.member_id])
        others = set().union(*(o.owned for o in ms if o is not m))
        assert not (set(out[m.member_id]) - m.owned) & others
    # the members revoke and rejoin: the next rebalance completes a valid, balanced assignment
    rounds = 1
    while any(set(target[m.member_id]) != set(out[m.member_id]) for m in ms):
        ms = again(ms, out, generation=4 + rounds)
        out = cooperative_sticky_assign(parts, ms)
        target = sticky_assign(parts, ms)
        rounds += 1
        assert rounds <= 2, out
    assert_valid(parts, ms, out)
    assert_balanced(ms, out)
