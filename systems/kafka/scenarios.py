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

from harness.faultkinds import KILL, LOSE_UNFLUSHED, PAUSE
from harness.faultplan import FaultSequence, Step
from harness.scenarios import Scenario
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


def last_replica_pauses(t: float, rng: random.Random) -> list[Step]:
    """KIP-966's last replica standing: of the key's followers F, F2 (`index` 1) stops
    (paused, out of the ISR after 2 s) and the leader L acknowledges with F1 alone
    (ISR {L, F1} = min ISR); F1 stops too, the ISR shrinks to {L} and writes are
    refused; L loses power (SIGKILL, its logs cut to their recovery points) and
    restarts. Without eligible leader replicas L, the last ISR member, is elected
    again with the shorter log and F1, F2 truncate to it when they come back; with
    ELR, F1 (an eligible replica) is elected
    once it is back and L, shut down uncleanly, may not lead. One cycle a run: a
    restarted broker recovering every log takes tens of seconds on a loaded machine, and
    the writes after it are what show the lost ones (`lost-write` needs later offsets
    read)."""
    return [
        Step(t, PAUSE.start, {"target": "followers", "key": "auto", "as": "F", "index": 1,
                              "leader_as": "L"}),
        Step(t + 5.0, PAUSE.start, {"role": "F", "index": 0}),
        Step(t + 10.0, LOSE_UNFLUSHED.start, {"role": "L"}),
        Step(t + 14.0, PAUSE.heal, {"role": "F"}),
    ]


SEQUENCES = {s.name: s for s in (
    FaultSequence("kafka-last-replica", (KILL, PAUSE, LOSE_UNFLUSHED), 200.0,
                  last_replica_pauses),
    FaultSequence("kafka-unclean", (KILL, PAUSE), 14.0, unclean_pauses),
    FaultSequence("kafka-acks-1", (KILL, PAUSE), 10.0, acks1_pauses),
)}


def _scenario(name: str, description: str, expected: tuple[str, ...],
              broker: Mapping[str, Any], fixed_by: tuple[str, ...] = (),
              producer: Mapping[str, Any] | None = None,
              by_release: tuple[tuple[str, tuple[str, ...]], ...] = (),
              **spec: Any) -> Scenario:
    settings: dict[str, Any] = {"name": name, "scenario": name, "system": "kafka", "keys": 8,
                                "concurrency": 10, "time_limit_s": 120.0, **spec,
                                "broker": dict(broker)}
    if producer:
        settings["producer"] = dict(producer)
    return Scenario(name, description, settings, expected, fixed_by, by_release)


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
        "kafka-last-replica-standing",
        "KIP-966's last replica standing: the ISR shrinks to {leader, F1}, then to the "
        "leader alone; the leader loses its page cache (power loss: its logs cut to their "
        "recovery points) and, as the last ISR member, is elected again with the shorter "
        "log. Eligible leader replicas (on by default for new clusters from 4.1) elect F1 "
        "instead.",
        ("lost-write",),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
         "unclean_leader_election": False, "flush": "page-cache"},
        fixed_by=("--extra", "kafka_features=eligible.leader.replicas.version=1"),
        by_release=(("4.1.0", ()),),  # ELR on for new clusters from 4.1
        nemesis=("kafka-last-replica",), node_count=4, keys=16, time_limit_s=100.0,
        nemesis_interval_s=24.0, extra={"controller_voters": 1}),
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
        "the old records there: the replicas differ below the high watermark. The old "
        "leader is stopped by its own shutdown (SIGTERM, controlled shutdown off), which "
        "writes its high-watermark checkpoint.",
        ("replica-divergence",), kip101.BROKER, fixed_by=("--kafka-version", "0.11.0.3"),
        nemesis=("kafka-kip101-divergence",), node_count=4, keys=2, nemesis_interval_s=44.0,
        extra={"kafka_version": "0.10.2.2", "controlled_shutdown": False}),
)}
