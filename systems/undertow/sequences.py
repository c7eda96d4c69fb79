"""Our broker's known bugs' fault sequences, as data (harness.faultplan.FaultSequence).

Each cycle is kill/start/partition/heal/lose-unflushed steps whose targets are
resolved at injection time from the cluster (the leader and followers of a key
whose replicas avoid the controller, so the controller keeps electing), and named
with roles (`"as": "B"`, then `"role": "B"`) so a later step hits the same node.
The history holds the plain verbs, so reports shade them like any fault. The
system declares them (UndertowSystem.sequences) and the nemesis plans them, read
through harness.registry; why each breaks which setting is in scenarios.py.
"""

from __future__ import annotations

import random

from harness.faultkinds import KILL, LOSE_UNFLUSHED, PARTITION
from harness.faultplan import FaultSequence, Step


def kip101_loss(t: float, rng: random.Random) -> list[Step]:
    """KIP-101 case 1: the follower B dies right after a fetch (its HW checkpoint is behind
    its log), the leader A dies too, B comes back first, truncates to its stale HW and
    is elected (it never left the ISR); A comes back and truncates to B's shorter log."""
    first = rng.choice(("B", "A"))
    return [
        Step(t, KILL.start, {"target": "followers", "key": "auto", "as": "B", "leader_as": "A"}),
        Step(t + 0.05, KILL.start, {"role": "A"}),
        Step(t + 0.1, KILL.heal, {"role": first}),
        Step(t + 4.5, KILL.heal, {"role": "A" if first == "B" else "B"}),
    ]


def kip101_divergence(t: float, rng: random.Random) -> list[Step]:
    """KIP-101 case 2: both replicas crash; the one with the shorter log (the lower HW
    checkpoint) restarts first, is elected and takes writes past the other's HW; the
    other restarts, truncates only to its own HW and keeps records the leader rewrote.
    The scenario's session timeout (8 s) leaves time to read both HW checkpoints from
    disk and restart the shorter log before the controller fences it out of the ISR."""
    steps = [
        Step(t, KILL.start, {"target": "followers", "key": "auto", "as": "B", "leader_as": "A"}),
        Step(t + 0.05, KILL.start, {"role": "A"}),
        Step(t + 0.1, KILL.heal, {"shorter_of": ["B", "A"], "key_of": "B"}),
        Step(t + 15.0, KILL.heal, {"role": "A"}),
        Step(t + 15.05, KILL.heal, {"role": "B"}),
    ]
    return steps


def isr_shrink(t: float, rng: random.Random) -> list[Step]:
    """Kafka 2013: the leader L loses its followers (but not the controller), shrinks the
    ISR to itself and acknowledges alone (min ISR 1); L dies; a follower is elected
    uncleanly without L's writes; L comes back and truncates them away."""
    return [
        Step(t, PARTITION.start, {"kind": "followers", "key": "auto", "as": "F", "leader_as": "L"}),
        Step(t + 5.0, KILL.start, {"role": "L"}),
        Step(t + 8.0, PARTITION.heal, {}),
        Step(t + 9.5, KILL.heal, {"role": "L"}),
    ]


def unclean_kills(t: float, rng: random.Random) -> list[Step]:
    """Both followers die (the ISR shrinks to the leader), the leader acknowledges alone
    and then dies; the followers come back first and one is elected uncleanly."""
    return [
        Step(t, KILL.start, {"target": "followers", "key": "auto", "as": "F", "leader_as": "L"}),
        Step(t + 5.0, KILL.start, {"role": "L"}),
        Step(t + 5.1, KILL.heal, {"role": "F"}),
        Step(t + 10.0, KILL.heal, {"role": "L"}),
    ]


def unclean(t: float, rng: random.Random) -> list[Step]:
    """Partitions and kills: each cycle is one of the two ways to an unclean election."""
    return isr_shrink(t, rng) if rng.random() < 0.5 else unclean_kills(t, rng)


def last_replica(t: float, rng: random.Random) -> list[Step]:
    """The ISR shrinks to the leader L (its followers are cut off from it); L crashes as an
    OS would, losing its unflushed tail; as the last ISR member it is elected again with
    the shorter log, and the followers truncate to it when the partition heals. Clients
    lose L at the same moment, so the writes it acknowledged last are still unread when
    the crash loses them (which is what makes them `lost-write`, not only rewritten)."""
    return [
        Step(t, PARTITION.start, {"kind": "followers", "key": "auto", "as": "F", "leader_as": "L",
                                  "cut_clients": True}),
        Step(t + 2.5, LOSE_UNFLUSHED.start, {"role": "L"}),
        Step(t + 7.0, PARTITION.heal, {}),
    ]


def lost_answers(t: float, rng: random.Random) -> list[Step]:
    """Clients stop hearing a key's leader L (one way: L still gets and serves their
    requests on open connections) for longer than a produce attempt's timeout: producers
    time out on records L appended, and a producer with retries sends them again; the
    resend that gets through after the heal is appended once more unless the producer is
    idempotent."""
    return [
        Step(t, PARTITION.start, {"kind": "leader-answers", "key": "live", "as": "L"}),
        Step(t + 2.5, PARTITION.heal, {}),
    ]


def coordinator_cut(t: float, rng: random.Random) -> list[Step]:
    """The group's coordinator C is cut off from the other brokers and the controller while
    its clients still reach it; it dies 3.5 s later, before the controller can have
    moved its offsets partition (the scenario's broker session timeout is longer), so it
    never answers a read once a successor takes commits; it comes back after the heal.
    What C acknowledged alone never reached its successor. A cycle every 25 s leaves the
    group time to fail over and settle before the next one."""
    return [
        Step(t, PARTITION.start, {"kind": "coordinator", "as": "C"}),
        Step(t + 3.5, KILL.start, {"role": "C"}),
        Step(t + 5.0, PARTITION.heal, {}),
        Step(t + 7.0, KILL.heal, {"role": "C"}),
    ]


# kinds in the order the nemesis composes their injectors (kill, then partition, then
# lose-unflushed), as the sequences were planned when the nemesis package held them
SEQUENCES: dict[str, FaultSequence] = {s.name: s for s in (
    FaultSequence("kip101-loss", (KILL,), 12.0, kip101_loss),
    FaultSequence("kip101-divergence", (KILL,), 22.0, kip101_divergence),
    FaultSequence("isr-shrink", (KILL, PARTITION), 15.0, isr_shrink),
    FaultSequence("unclean", (KILL, PARTITION), 15.0, unclean),
    FaultSequence("last-replica", (KILL, PARTITION, LOSE_UNFLUSHED), 15.0, last_replica),
    FaultSequence("lost-answers", (PARTITION,), 8.0, lost_answers),
    FaultSequence("coordinator-cut", (KILL, PARTITION), 25.0, coordinator_cut),
)}
