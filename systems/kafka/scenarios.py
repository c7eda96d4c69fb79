"""Scenarios on real Kafka: the safe settings, two ways Kafka loses acknowledged writes, and
aborted reads at read_uncommitted.

The unsafe ones run 4 nodes, n1 a dedicated KRaft controller (`controller_voters`
1) and n2..n4 brokers, so the sequences below can stop every replica of a
partition while the controller quorum stays up to elect. Each names the
options that fix it: the same faults with them must be valid.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from harness.scenarios import Scenario
from nemesis.faults import Kill, Pause
from nemesis.kinds import KILL, PAUSE
from nemesis.packages import Fault, register
from nemesis.plan import Step
from nemesis.sequences import cycles
from systems.kafka import kip101


def unclean_pauses(t: float, rng: random.Random) -> list[Step]:
    """The followers F stop (paused: fenced and out of the ISR after 2 s); the leader L
    acknowledges alone (min ISR 1) and dies; F come back and, with unclean election on,
    one is elected without L's writes; L returns and truncates them."""
    return [
        Step(t, PAUSE.start, {"target": "followers", "key": "auto", "as": "F", "leader_as": "L"}),
        Step(t + 5.0, KILL.start, {"role": "L"}),
        Step(t + 5.1, PAUSE.heal, {"role": "F"}),
        Step(t + 11.0, KILL.heal, {"role": "L"}),
    ]


def acks1_pauses(t: float, rng: random.Random) -> list[Step]:
    """With acks=1 the leader L acknowledges before its followers F have the write: F are
    paused for a second (too short to leave the ISR), L dies, F resume and one of them,
    still in the ISR, is elected cleanly without what L acknowledged."""
    return [
        Step(t, PAUSE.start, {"target": "followers", "key": "auto", "as": "F", "leader_as": "L"}),
        Step(t + 1.0, KILL.start, {"role": "L"}),
        Step(t + 1.05, PAUSE.heal, {"role": "F"}),
        Step(t + 7.0, KILL.heal, {"role": "L"}),
    ]


SEQUENCES = {
    "kafka-unclean": Fault("kafka-unclean", (Kill, Pause), cycles(14.0, unclean_pauses)),
    "kafka-acks-1": Fault("kafka-acks-1", (Kill, Pause), cycles(10.0, acks1_pauses)),
}
for _fault in SEQUENCES.values():
    register(_fault)


def _scenario(name: str, description: str, expected: tuple[str, ...],
              broker: Mapping[str, Any], fixed_by: tuple[str, ...] = (),
              producer: Mapping[str, Any] | None = None, **spec: Any) -> Scenario:
    settings: dict[str, Any] = {"name": name, "scenario": name, "system": "kafka", "keys": 8,
                                "concurrency": 10, "time_limit_s": 120.0, **spec,
                                "broker": dict(broker)}
    if producer:
        settings["producer"] = dict(producer)
    return Scenario(name, description, settings, expected, fixed_by)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    _scenario(
        "kafka-safe",
        "Kafka with safe settings (RF 3, acks all, min ISR 2, clean election) under kills, "
        "pauses and partitions mixed: nothing may be found.",
        (),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
         "unclean_leader_election": False},
        nemesis=("kill", "pause", "partition"), node_count=3, nemesis_interval_s=8.0,
        nemesis_targets=("one", "minority", "majority", "leader")),
    _scenario(
        "kafka-unclean-election",
        "Kafka's unclean leader election: the followers stop and leave the ISR, the leader "
        "acknowledges alone and dies, a follower is elected without its writes.",
        ("lost-write",),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 1,
         "unclean_leader_election": True},
        fixed_by=("--no-unclean-leader-election",),
        nemesis=("kafka-unclean",), node_count=4, keys=16, nemesis_interval_s=14.0,
        extra={"controller_voters": 1}),
    _scenario(
        "kafka-acks-1",
        "Kafka with acks=1: the leader acknowledges before its followers have the write, "
        "dies, and an in-sync follower is elected without it.",
        ("lost-write",),
        {"replication_factor": 3, "acks": "1", "min_insync_replicas": 1,
         "unclean_leader_election": False},
        fixed_by=("--acks", "all", "--min-insync-replicas", "2"),
        nemesis=("kafka-acks-1",), node_count=4, keys=16, nemesis_interval_s=10.0,
        extra={"controller_voters": 1}),
    _scenario(
        "kafka-read-uncommitted",
        "Kafka transactions read uncommitted: consumers read every record below the high "
        "watermark, aborted transactions' too, so a poll returns values whose transaction "
        "failed (aborted reads); read_committed skips them.",
        ("G1a",),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
         "unclean_leader_election": False},
        fixed_by=("--isolation", "read-committed"),
        workload="txn", isolation="read-uncommitted", nemesis=("kill", "pause"), node_count=3,
        time_limit_s=60.0, nemesis_interval_s=10.0),
    _scenario(
        "kafka-retries-without-idempotence",
        "Kafka producer retries without idempotence: clients stop hearing a leader's answers "
        "(one way: it still appends what they send) for longer than an attempt's timeout. "
        "librdkafka gives up on a ProduceRequest after socket.timeout.ms (its "
        "request.timeout.ms is only the broker's wait for acks), so that is set to 1 s, well "
        "under the 8 s message.timeout.ms: it disconnects, reconnects once the answers flow "
        "again and resends, and the leader appends the records a second time.",
        ("duplicate",),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
         "unclean_leader_election": False},
        producer={"retries": 5, "request_timeout_ms": 1000, "delivery_timeout_ms": 8000,
                  "enable_idempotence": False},
        fixed_by=("--idempotence",),
        nemesis=("lost-answers",), node_count=3, time_limit_s=60.0, nemesis_interval_s=8.0),
    _scenario(
        "kafka-kip101-loss",
        "KIP-101 on the release that had it (releases: " + kip101.RELEASES + "): a key's "
        "followers cut apart, its leader dies, the follower not elected truncates to its "
        "high watermark and cannot fetch back; the new leader dies and the truncated "
        "follower is elected cleanly without acknowledged writes.",
        ("lost-write",), kip101.BROKER, fixed_by=("--kafka-version", "0.11.0.3"),
        nemesis=("kafka-kip101-loss",), node_count=4, keys=2, nemesis_interval_s=40.0,
        extra={"kafka_version": "0.10.2.2"}),
    _scenario(
        "kafka-kip101-divergence",
        "KIP-101 divergence on the release that had it (releases: " + kip101.RELEASES + "): "
        "as kafka-kip101-loss, then the truncated leader takes writes at the offsets it lost "
        "before the old leader returns, truncates only to its own high watermark and keeps "
        "the old records there: the replicas differ below the high watermark.",
        ("replica-divergence",), kip101.BROKER, fixed_by=("--kafka-version", "0.11.0.3"),
        nemesis=("kafka-kip101-divergence",), node_count=4, keys=2, nemesis_interval_s=44.0,
        extra={"kafka_version": "0.10.2.2"}),
)}
