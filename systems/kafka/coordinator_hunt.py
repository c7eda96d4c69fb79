"""The hunt for KAFKA-20634: offset commits acknowledged, then dropped, after the leader of
__consumer_offsets changed.

Kafka's group coordinator (the one every 4.x release runs) keeps its state in memory and
answers a commit once the partition's high watermark passes the commit's record. When
the partition's leader C becomes a follower, its log is truncated to the new leader N's
and refetched, while C's coordinator stays loaded until it is unloaded asynchronously.
Before the fix, the high watermark C then learns from N (over N's records at the offsets
C's own, truncated, commits held) still reached C's coordinator, which answered those
commits as written when that high watermark was not past C's last record (past it, the
update failed with a spurious error instead). Apache/kafka pull request 22444: the
listener stops passing the high watermark on once the partition follows, fails or is
deleted. The fix is in
`kafka.coordinator.group.ListenerAdapter` (the broker's jar): 4.2.2, 4.3.1 and 4.4.0
have it, 4.0.x, 4.1.x (to 4.1.2), 4.2.0, 4.2.1 and 4.3.0 do not (the classes compared
with javap; docs/known-bugs.md).

The faults: C is cut off from the other brokers and the controllers while its consumers
still reach it, so their commits wait in C's log, unreplicated; the controller fences C
after the broker session (2 s) and elects N. Commits that time out at C (offsets.commit
.timeout.ms, 5 s) send their consumers to find the coordinator again, some to N, which
takes commits and group changes at the offsets C's commits hold. The heal comes 4 to 8 s
into the cut (drawn, so N's log is sometimes shorter and sometimes longer than C's): C
learns it follows N, truncates and fetches. The Java client waits up to 10 s for a
commit (delivery.timeout.ms, which the Java group client takes as its operation timeout),
longer than the coordinator's 5 s, so the answer C gives at the heal reaches it.
"""

from __future__ import annotations

import random

from harness.faultkinds import PARTITION
from harness.faultplan import FaultSequence, Step
from harness.scenarios import Scenario

PERIOD_S = 15.0  # a cut and the group's settling afterwards (a rebalance at N)
HEAL_AFTER_S = (4.0, 8.0)
UNFIXED = "4.3.0"  # the release before the fix on its line (and the scenario's default)
FIXED = "4.3.1"
# one client release on every broker release, so only the broker differs (and a matrix
# of releases can check its cells in one process: one Java client version a process)
CLIENT = "4.4.0"


def coordinator_isolation(t: float, rng: random.Random) -> list[Step]:
    """C cut off from the other nodes (the controllers among them; clients reach it),
    healed 4 to 8 s later."""
    return [
        Step(t, PARTITION.start, {"kind": "coordinator", "as": "C"}),
        Step(t + rng.uniform(*HEAL_AFTER_S), PARTITION.heal, {}),
    ]


SEQUENCE = FaultSequence("kafka-coordinator-isolation", (PARTITION,), PERIOD_S,
                         coordinator_isolation)

SETTINGS = {
    "name": "kafka-coordinator-isolation", "scenario": "kafka-coordinator-isolation",
    "system": "kafka", "workload": "queue", "sub_via": "subscribe",
    "consumer": {"commit": "processed"}, "keys": 8, "concurrency": 10,
    "time_limit_s": 120.0, "nemesis": ("kafka-coordinator-isolation",),
    "nemesis_interval_s": PERIOD_S, "node_count": 3,
    "broker": {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
               "unclean_leader_election": False},
    "producer": {"delivery_timeout_ms": 10000},
    "extra": {"client": "java", "kafka_client_version": CLIENT, "kafka_version": UNFIXED},
}

SCENARIOS = {"kafka-coordinator-isolation": Scenario(
    "kafka-coordinator-isolation",
    "KAFKA-20634: the group coordinator cut off from the other brokers and the controllers "
    "while its consumers still reach it, healed 4 to 8 s later, every 15 s; commits wait "
    "in its log, a new leader of __consumer_offsets takes others, and before the fix the "
    "old coordinator acknowledges its truncated commits with the new leader's high "
    "watermark (committed offsets read back older: stale-committed-offset). Fixed in "
    "4.2.2, 4.3.1, 4.4.0; absent from 4.3.0 and earlier 4.x.",
    SETTINGS, ("stale-committed-offset",), ("--kafka-version", FIXED),
    by_release=(("4.2.2", ()), ("4.3.0", ("stale-committed-offset",)), (FIXED, ())))}
