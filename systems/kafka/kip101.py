"""KIP-101 on the Apache Kafka release that had it (0.10.2.x) and the one that fixed it (0.11.0).

Our broker's `kip101-loss` / `kip101-divergence` restart a follower that truncates to its
high-watermark checkpoint. A ZooKeeper-era broker restarted before its old ZooKeeper
session expires fails to register, and once that session expires the controller takes it
out of the ISR, so a restart cannot make a truncated replica electable. What does: before
KIP-101 a replica that *becomes a follower* (any leader change) truncates to its own
high watermark, which trails the leader's by a fetch. So, on a key
being written now (2 keys; 4 brokers, RF 3, min ISR 2, acks all, unclean election off;
the controller may be among them and then moves too, as it would):

1. its two followers are cut off from each other (both still reach the leader A); the
   key is the live one that entered last (the workload retires a key after
   max_writes_per_key sends, a few seconds here), so it is still written when A dies;
   a follower's high watermark trails A's by the records acknowledged since its last
   fetch answer (up to replica.fetch.wait.max.ms, 500 ms), so the key must be written;
2. A dies, right after the history shows a send on the key acknowledged (waiting at
   most ACK_WAIT_S for one newer than those there when the step began), so something
   acknowledged sits above the followers' high watermarks; once its ZooKeeper session
   expires the controller elects one follower, L2 (when A was the controller, a new
   controller is elected first, which takes longer: the step waits up to
   ELECTION_WAIT_S and, if it sees no new leader, kills nobody and says it did not land);
   the other, F, becomes L2's follower, truncates to its high watermark, and cannot
   fetch back what it dropped (it cannot reach L2; it stays in the ISR for
   replica.lag.time.max.ms, the era's 10 s);
3. L2 dies; its session expires; F, the last live ISR member, is elected cleanly with
   the acknowledged records it truncated missing;
4. loss: A and L2 come back and truncate to F's log (`lost-write`);
   divergence: L2 comes back first, so F takes writes again at the offsets it lost;
   A, back later, truncates only to its own high watermark, keeps the old records
   there and fetches the rest above them (`replica-divergence`).

A restarted broker truncates to its high-watermark checkpoint, written every 500 ms: a
SIGKILLed A's is usually older than F's high watermark, so A drops what F lost and
nothing differs (1 divergence in 10 runs). So the divergence sequence stops A with
SIGTERM instead (`"graceful": true`), with `controlled.shutdown.enable=false`
(`--no-kafka-controlled-shutdown`, or the controller would first make A a follower and
lower its high watermark): the broker's shutdown writes its last high watermark and leaves,
and is otherwise a crash (its ZooKeeper session ends, the controller elects L2). A rolling
restart without controlled shutdown did exactly this. The divergence sequence also
picks a fresh key whose in-sync replicas are all its replicas, when one is live: 5 of
its 8 missed second kills (of 30 cycles) came on keys with no acknowledged send in the
2 s before A stopped, 3 of them keys an earlier cycle had used; the one read closely
had A alone in its ISR, left so by the cycle before, and the controller kept it
leaderless ("Retaining last ISR ... since unclean leader election is disabled").

With KIP-101 (0.11.0) F asks L2 for its leader epoch's end instead of truncating to
its high watermark; cut off from L2 it keeps its log, and the same faults are valid.
"""

from __future__ import annotations

import random

from harness.faultkinds import KILL, PARTITION
from harness.faultplan import FaultSequence, Step

SESSION_MS = 3000  # zookeeper.session.timeout.ms: a dead broker is noticed after this
LAG_MS = 10_000  # replica.lag.time.max.ms, 0.10's default: F stays in the ISR this long
ELECTED_S = 4.0  # after A's kill: its session (3 s) expired, L2 about to be elected
ELECTION_WAIT_S = 12.0  # then L2 is killed as soon as it leads (seen within this, or never)
ACK_WAIT_S = 2.0  # A is killed just after an acknowledged send on the key (or after this)
RELEASES = "0.10.2.x (the bug); control 0.11.0.x (KIP-101)"


def _apart_then_two_leaders(t: float, *, graceful: bool = False) -> list[Step]:
    kill_a: dict[str, object] = {"role": "A", "key_of": "F", "await_ack_s": ACK_WAIT_S}
    apart: dict[str, object] = {"kind": "followers-apart", "key": "fresh", "as": "F",
                                "leader_as": "A"}
    if graceful:
        kill_a["graceful"] = True
        apart["full_isr"] = True
    return [
        Step(t, PARTITION.start, apart),
        Step(t + 0.2, KILL.start, kill_a),
        Step(t + ELECTED_S, KILL.start, {"target": "leader", "key_of": "F", "as": "L2",
                                         "leader_not": "A", "wait_s": ELECTION_WAIT_S}),
        Step(t + ELECTED_S + 0.1, PARTITION.heal, {}),
    ]


# A and L2 come back once F leads even after the longest election wait (a broker
# restarted within its old ZooKeeper session would fail to register)
BACK_S = ELECTED_S + ELECTION_WAIT_S + SESSION_MS / 1000 + 2.0


def kafka_kip101_loss(t: float, rng: random.Random) -> list[Step]:
    """Steps 1-3, then A and L2 back together once F leads."""
    back = t + BACK_S
    return [*_apart_then_two_leaders(t),
            Step(back, KILL.heal, {"role": "A"}),
            Step(back + 0.05, KILL.heal, {"role": "L2"})]


def kafka_kip101_divergence(t: float, rng: random.Random) -> list[Step]:
    """Steps 1-3 with A stopped by its own shutdown (its checkpoint current), then L2 back
    (F takes writes again), A back 8 s later."""
    back = t + BACK_S
    return [*_apart_then_two_leaders(t, graceful=True),
            Step(back, KILL.heal, {"role": "L2"}),
            Step(back + 8.0, KILL.heal, {"role": "A"})]


SEQUENCES = {s.name: s for s in (
    FaultSequence("kafka-kip101-loss", (KILL, PARTITION), 40.0, kafka_kip101_loss),
    FaultSequence("kafka-kip101-divergence", (KILL, PARTITION), 44.0,
                  kafka_kip101_divergence),
)}

BROKER = {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
          "unclean_leader_election": False, "session_timeout_ms": SESSION_MS,
          "replica_lag_time_max_ms": LAG_MS}
