"""Kafka's client-side partition assignors, pure functions: range, roundrobin, (cooperative-)sticky.

A consumer group's leader runs one of them over every member's subscription and
hands the result to the coordinator, as Kafka's classic protocol does. They
follow the rules of Kafka's assignors of the same names (without racks and
static membership, which our broker does not have), so a run on our broker and
a run on Kafka move partitions between consumers for the same reasons:

- range: per topic, partitions in order cut into contiguous ranges over the
  subscribed members in member-id order; the first members get one extra;
- roundrobin: all partitions (topics in name order) dealt to the members in
  member-id order, skipping members not subscribed to the partition's topic;
- sticky: as balanced as the subscriptions allow (counts differ by at most one,
  or no partition of a member can go to a member with two fewer that subscribes
  to it, not even through members between them), keeping each member's owned
  partitions where that balance allows;
- cooperative-sticky: sticky's target, less the partitions another member still
  owns: those are revoked first and handed over in the rebalance that follows.

An owned partition claimed by several members goes to the claim of the highest
generation; a tie at that generation means no one keeps it (as in Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Assignment = dict[str, tuple[TopicPartition, ...]]
Held = set[TopicPartition]
Chain = list[tuple[TopicPartition, str, str]]  # (partition, from, to) hops
NO_GENERATION = -1


@dataclass(frozen=True)
class Member:
    """One member's join: its subscription; for the sticky ones, what it owns and since when."""

    member_id: str
    topics: frozenset[str]
    owned: frozenset[TopicPartition] = frozenset()
    generation: int = NO_GENERATION


Assignor = Callable[[Mapping[str, int], Sequence[Member]], Assignment]


def _check(partitions: Mapping[str, int], members: Sequence[Member]) -> None:
    """Bad input is a ValueError naming what is wrong, before any assignment is made."""
    seen: set[str] = set()
    for m in members:
        if m.member_id in seen:
            raise ValueError(f"assignor: member {m.member_id!r} appears twice")
        seen.add(m.member_id)
    for topic, n in partitions.items():
        if n < 0:
            raise ValueError(f"assignor: topic {topic!r} has a negative partition count {n}")


def _result(members: Sequence[Member], owned: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    """Every member appears, each with its partitions in (topic, partition) order."""
    return {m.member_id: tuple(sorted(owned.get(m.member_id, ()))) for m in members}


def _subscribed(partitions: Mapping[str, int], member: Member) -> set[str]:
    """The member's topics that exist: a subscription to an unknown topic assigns nothing."""
    return {t for t in member.topics if partitions.get(t, 0) > 0}


def range_assign(partitions: Mapping[str, int], members: Sequence[Member]) -> Assignment:
    """Kafka's RangeAssignor: each topic cut into contiguous ranges, the first ones longer."""
    _check(partitions, members)
    out: dict[str, list[TopicPartition]] = {}
    for topic in sorted(partitions):
        subs = sorted(m.member_id for m in members if topic in _subscribed(partitions, m))
        if not subs:
            continue
        per, extra = divmod(partitions[topic], len(subs))
        start = 0
        for i, mid in enumerate(subs):
            length = per + (1 if i < extra else 0)
            out.setdefault(mid, []).extend((topic, p) for p in range(start, start + length))
            start += length
    return _result(members, out)


def round_robin_assign(partitions: Mapping[str, int], members: Sequence[Member]) -> Assignment:
    """Kafka's RoundRobinAssignor: partitions dealt in turn, skipping members not subscribed."""
    _check(partitions, members)
    order = sorted(members, key=lambda m: m.member_id)
    subs = {m.member_id: _subscribed(partitions, m) for m in order}
    topics = sorted(set().union(*subs.values())) if subs else []
    out: dict[str, list[TopicPartition]] = {}
    turn = 0
    for topic in topics:
        for p in range(partitions[topic]):
            while topic not in subs[order[turn % len(order)].member_id]:
                turn += 1
            out.setdefault(order[turn % len(order)].member_id, []).append((topic, p))
            turn += 1
    return _result(members, out)


def kept_partitions(partitions: Mapping[str, int], members: Sequence[Member]) -> dict[str, Held]:
    """What each member may keep of what it owns: the partition exists, it still subscribes to its
    topic, and its claim is the only one at the highest generation among the claims."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for m in members:
        subs = _subscribed(partitions, m)
        for tp in m.owned:
            if tp[0] in subs and 0 <= tp[1] < partitions[tp[0]]:
                claims.setdefault(tp, []).append((m.generation, m.member_id))
    kept: dict[str, set[TopicPartition]] = {m.member_id: set() for m in members}
    for tp, cs in claims.items():
        top = max(g for g, _ in cs)
        winners = [mid for g, mid in cs if g == top]
        if len(winners) == 1:
            kept[winners[0]].add(tp)
    return kept


def sticky_assign(partitions: Mapping[str, int], members: Sequence[Member]) -> Assignment:
    """Kafka's StickyAssignor: balance first, then keep as many owned partitions as it allows."""
    _check(partitions, members)
    subs = {m.member_id: _subscribed(partitions, m) for m in members}
    kept = kept_partitions(partitions, members)
    held = {mid: set(tps) for mid, tps in kept.items()}
    options: dict[TopicPartition, list[str]] = {}
    for mid in sorted(subs):
        for topic in subs[mid]:
            for p in range(partitions[topic]):
                options.setdefault((topic, p), []).append(mid)
    taken = set().union(*held.values()) if held else set()
    # the partitions with the fewest candidates first, each to its least loaded candidate
    for tp in sorted(set(options) - taken, key=lambda tp: (len(options[tp]), tp)):
        mid = min(options[tp], key=lambda c: (len(held[c]), c))
        held[mid].add(tp)
    while chain := _balancing_moves(held, subs, kept):
        for tp, src, dst in chain:
            held[src].remove(tp)
            held[dst].add(tp)
    return _result(members, held)


def _balancing_moves(held: Mapping[str, Held], subs: Mapping[str, set[str]],
                     kept: Mapping[str, Held]) -> Chain:
    """A chain of hand-overs from a member to one holding two fewer; [] when there is none.

    Each hop gives a partition to a member subscribed to its topic, so a member that cannot
    take from the most loaded one directly still gets one through members between them
    (Kafka's rule checks pairs only; chains balance what pairs leave uneven). The most
    loaded member gives first, to the least loaded it reaches by the fewest hops; a chain that
    moves no owned partition goes before any that does. Each chain lowers the sum of squared
    counts, so balancing ends.
    """
    for owned_too in (False, True):
        for src in sorted(held, key=lambda m: (-len(held[m]), m)):
            chain = _chain(src, held, subs, kept, owned_too)
            if chain:
                return chain
    return []


def _chain(src: str, held: Mapping[str, Held], subs: Mapping[str, set[str]],
           kept: Mapping[str, Held], owned_too: bool) -> Chain:
    """Breadth-first from src: the hops to the least loaded member it reaches, two below src."""
    hop: dict[str, tuple[TopicPartition, str]] = {}
    frontier = [src]
    while frontier:
        nxt: list[str] = []
        for a in frontier:
            for b in sorted(held):
                if b == src or b in hop:
                    continue
                movable = [tp for tp in held[a]
                           if tp[0] in subs[b] and (owned_too or tp not in kept[a])]
                if movable:
                    hop[b] = (max(movable, key=lambda tp: (tp not in kept[a], tp)), a)
                    nxt.append(b)
        frontier = nxt
    light = [b for b in hop if len(held[b]) + 1 < len(held[src])]
    if not light:
        return []
    dst = min(light, key=lambda b: (len(held[b]), b))
    chain: Chain = []
    while dst != src:
        tp, giver = hop[dst]
        chain.append((tp, giver, dst))
        dst = giver
    return chain[::-1]


def cooperative_sticky_assign(partitions: Mapping[str, int],
                              members: Sequence[Member]) -> Assignment:
    """Kafka's CooperativeStickyAssignor: sticky's target, less each partition that another member
    still owns; that member revokes it and the next rebalance hands it over."""
    target = sticky_assign(partitions, members)
    revoked = {tp for m in members for tp in m.owned if tp not in target[m.member_id]}
    return {mid: tuple(tp for tp in tps if tp in owned or tp not in revoked)
            for mid, tps, owned in ((m.member_id, target[m.member_id], m.owned) for m in members)}


ASSIGNORS: Mapping[str, Assignor] = {
    "range": range_assign,
    "roundrobin": round_robin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}


def assignor(name: str) -> Assignor:
    """The assignor of a `partition.assignment.strategy` name; a ValueError lists the names."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}: one of {', '.join(ASSIGNORS)}") from None
