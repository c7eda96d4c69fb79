"""Our broker's named scenarios: Kafka's known bugs, each as settings + faults + what must be found.

`settings` is a build_spec layer (TestSpec fields and a `broker` table, the system's
settings as they were named when they were TestSpec's: systems/settings.py), so
`undertow run --scenario NAME --seed N` runs it and any option overrides it.
The unsafe ones use 4 nodes where the bug needs a partition whose replicas all
avoid the controller (the single controller voter, n1), so the controller stays
up to elect while the sequence breaks that partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.scenarios import Scenario

# Kafka's safe broker settings, which each scenario below starts from or names apart
SAFE_BROKER: Mapping[str, Any] = {"replication_factor": 3, "acks": "all",
                                  "min_insync_replicas": 2, "unclean_leader_election": False,
                                  "truncation": "leader-epoch"}


def _scenario(name: str, description: str, expected: tuple[str, ...],
              broker: Mapping[str, Any], fixed_by: tuple[str, ...] = (),
              producer: Mapping[str, Any] | None = None, **spec: Any) -> Scenario:
    settings: dict[str, Any] = {"name": name, "scenario": name, "system": "undertow",
                                "keys": 8, "concurrency": 10,
                                **spec, "broker": dict(broker)}
    if producer:
        settings["producer"] = dict(producer)
    if expected:
        # The known-bug sequences kill or cut two replicas of a partition; with a 3-voter
        # quorum on the same nodes that also stops every election. Like KRaft with a dedicated
        # controller, they keep one voter (n1), which the sequences leave alone.
        settings.setdefault("extra", {"controller_voters": 1})
    # keys=16 where a sequence breaks one leader: with 4 nodes, the 4 keys whose replicas
    # avoid the controller share that leader and are broken together, and with more keys
    # fewer consumers read each one, so some acknowledged writes are still unread when
    # they are lost (a lost-write needs a value never read, with reads past it).
    return Scenario(name, description, settings, expected, fixed_by)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    _scenario(
        "kip101-loss",
        "KIP-101: truncating to the HW checkpoint on restart; kill the follower right after "
        "it fetched, then the leader; the follower is elected with a shorter log.",
        ("lost-write", "replica-lost-write"),
        {"replication_factor": 2, "truncation": "hw", "min_insync_replicas": 1, "acks": "all",
         "unclean_leader_election": False},
        nemesis=("kip101-loss",), node_count=3, time_limit_s=60.0, nemesis_interval_s=12.0,
        fixed_by=("--truncation", "leader-epoch")),
    _scenario(
        "kip101-divergence",
        "KIP-101: crash both replicas, restart the shorter log first, write; the other keeps "
        "records the new leader rewrote, and the replicas diverge.",
        ("replica-divergence", "inconsistent-offsets"),
        {"replication_factor": 2, "truncation": "hw", "min_insync_replicas": 1, "acks": "all",
         "flush": "page-cache", "unclean_leader_election": False, "session_timeout_ms": 8000},
        nemesis=("kip101-divergence",), node_count=3, time_limit_s=100.0,
        nemesis_interval_s=22.0, fixed_by=("--truncation", "leader-epoch")),
    _scenario(
        "isr-shrink-2013",
        "Kafka 2013: with min ISR 1 the leader cut off from its followers shrinks the ISR to "
        "itself and acknowledges alone; it dies and a follower is elected uncleanly.",
        ("lost-write",),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 1,
         "unclean_leader_election": True, "truncation": "leader-epoch"},
        nemesis=("isr-shrink",), node_count=4, keys=16, time_limit_s=60.0,
        nemesis_interval_s=15.0,
        fixed_by=("--min-insync-replicas", "2", "--no-unclean-leader-election")),
    _scenario(
        "unclean-election",
        "Unclean leader election: partitions and kills leave only out-of-sync replicas, and "
        "one of them is elected without the writes the old leader acknowledged.",
        ("lost-write",),
        {"replication_factor": 3, "acks": "all", "min_insync_replicas": 1,
         "unclean_leader_election": True, "truncation": "leader-epoch"},
        nemesis=("unclean",), node_count=4, keys=16, time_limit_s=60.0,
        nemesis_interval_s=15.0, fixed_by=("--no-unclean-leader-election",)),
    _scenario(
        "last-replica-standing",
        "min ISR 2 is no help once the ISR has shrunk to the leader: it crashes losing its "
        "unflushed tail and, as the last ISR member, is elected again with the shorter log.",
        ("lost-write",),
        {**SAFE_BROKER, "flush": "page-cache", "replica_lag_time_max_ms": 1000},
        nemesis=("last-replica",), node_count=4, keys=16, time_limit_s=60.0,
        nemesis_interval_s=15.0, fixed_by=("--flush", "every-message")),
    _scenario(
        "retries-without-idempotence",
        "Producer retries without idempotence: clients stop hearing a leader's answers for "
        "longer than an attempt's timeout while it still appends what they send; each "
        "resend is appended again, so acknowledged values sit at two or more offsets.",
        ("duplicate",),
        SAFE_BROKER,
        producer={"retries": 5, "request_timeout_ms": 1000, "delivery_timeout_ms": 8000,
                  "enable_idempotence": False},
        nemesis=("lost-answers",), node_count=3, time_limit_s=60.0, nemesis_interval_s=8.0,
        fixed_by=("--idempotence",)),
    _scenario(
        "read-uncommitted",
        "Transactions read uncommitted: consumers read every record below the high "
        "watermark, aborted transactions' too, so a poll returns values whose transaction "
        "failed (aborted reads); read_committed skips them.",
        ("G1a",),
        SAFE_BROKER,
        workload="txn", isolation="read-uncommitted", extra={},
        nemesis=("kill", "partition"), node_count=3, time_limit_s=60.0,
        nemesis_interval_s=10.0, fixed_by=("--isolation", "read-committed")),
    _scenario(
        "zombie-producer",
        "Zombie producers: pairs of live producer instances share each transactional.id, as a "
        "restarted instance does with the one it replaces while that one still runs. With "
        "epoch fencing off at the coordinator the older instance is not refused: both write "
        "into one transaction, and one instance's commit or abort decides the other's sends.",
        ("G1a",),
        {**SAFE_BROKER, "txn_epoch_fencing": False},
        workload="txn", isolation="read-committed",
        extra={"shared_transactional_ids": 5},
        nemesis=("pause", "partition"), node_count=3, time_limit_s=60.0,
        nemesis_interval_s=10.0, fixed_by=("--txn-fencing",)),
    _scenario(
        "offsets-commit-acks-1",
        "Kafka's old offsets.commit.required.acks=1: the group coordinator answers a commit "
        "once it is in its own log. Cut off from the other brokers while its consumers "
        "still reach it, it acknowledges commits that never replicate, then dies before "
        "the controller moves its offsets partition (broker session 6 s); its successor "
        "serves the older committed offsets.",
        ("stale-committed-offset",),
        {**SAFE_BROKER, "offsets_commit_acks": 1, "session_timeout_ms": 6000},
        sub_via="subscribe", consumer={"commit": "processed"}, extra={},
        nemesis=("coordinator-cut",), node_count=3, time_limit_s=120.0,
        nemesis_interval_s=25.0,
        fixed_by=("--offsets-commit-acks", "-1")),
    _scenario(
        "safe",
        "Safe settings (RF 3, acks all, min ISR 2, leader-epoch truncation, clean election) "
        "under kills, pauses and partitions mixed: nothing may be found.",
        (),
        SAFE_BROKER,
        nemesis=("kill", "pause", "partition"), node_count=3, time_limit_s=120.0,
        nemesis_interval_s=8.0, nemesis_targets=("one", "minority", "majority", "leader")),
)}
