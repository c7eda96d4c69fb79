"""The hunt for KAFKA-17754: late transaction markers and late writes across transactions.

Jepsen's Bufstream analysis (2024) found that Kafka's transaction protocol (version 1)
lets a commit or abort marker, or a produce request, that was delayed reach a broker
after the producer went on to its next transaction: aborted reads (G1a), lost writes
and torn transactions. KIP-890 part 2 (transaction.version=2: a new producer epoch at
every transaction end, the Java client from 4.0 on a 4.x cluster) closes it; librdkafka
does not speak it. Jepsen's settings: transaction.timeout.ms 1000, request.timeout.ms
3000, delivery.timeout.ms 10000, process pauses, an abort on the same producer after a
failed commit (the txn clients do that).

The faults: pauses of the transaction coordinator (the leader of __transaction_state,
systems/kafka/db.py `coordinator` in a txn run without a group) and of the leader of a
key in flight, each for 1 to 6 s, overlapping, so requests queue up behind a stopped
process and arrive late. Slow links do not reach Kafka on the local backend (the
nodes' links are not proxied), so there are none. The cells (bench/txn_late_marker.py)
choose the client, the release and transaction.version.

`kafka-txn-late-marker-slow` is the same hunt with the coordinator's links slowed instead
of its process paused, on the docker backend (where slow links reach Kafka's nodes). A
slowed node's traffic on the client port leaves it late (a delay drawn per cycle, 0.5 to
2 s): its transaction markers to the leaders and its answers to the producers, in order
on each connection but late against the others, which is how Jepsen describes the
messages that land in the next transaction.
"""

from __future__ import annotations

import random
from typing import Any

from harness.faultkinds import PAUSE, SLOW, FaultKind
from harness.faultplan import FaultSequence, Step
from harness.scenarios import Scenario

PERIOD_S = 9.0


def _coordinator_then_leader(t: float, rng: random.Random, fault: FaultKind,
                             on_coordinator: dict[str, Any]) -> list[Step]:
    """`fault` on the coordinator C, then a pause of a leader L of a key in flight, each
    healed after 1 to 6 s (drawn), so commits, markers and sends pile up and land late."""
    c_for, l_for = rng.uniform(1.0, 6.0), rng.uniform(1.0, 6.0)
    l_at = t + rng.uniform(0.0, 1.5)
    return [
        # role_wait_s 0: the nemesis does not wait to see the coordinator move (up to
        # 5 s), which would hold L's pause back and stretch C's past its drawn length
        Step(t, fault.start, {"target": "coordinator", "role_wait_s": 0, **on_coordinator}),
        Step(l_at, PAUSE.start, {"target": "leader", "key": "auto", "as": "L"}),
        Step(t + c_for, fault.heal, {"role": "C"} if "as" in on_coordinator else {}),
        Step(l_at + l_for, PAUSE.heal, {"role": "L"}),
    ]


def late_marker_pauses(t: float, rng: random.Random) -> list[Step]:
    """The coordinator C stops, then a leader L of a key in flight; each resumes after
    1 to 6 s (drawn)."""
    return _coordinator_then_leader(t, rng, PAUSE, {"as": "C"})


def late_marker_slow(t: float, rng: random.Random) -> list[Step]:
    """The coordinator's links slowed by 0.5 to 2 s (drawn, a tenth of it as jitter), then a
    leader L of a key in flight paused; each ends after 1 to 6 s (drawn). `fast` ends
    every slow link, so it names no role."""
    delay = round(rng.uniform(500.0, 2000.0))
    return _coordinator_then_leader(t, rng, SLOW, {"delay_ms": delay,
                                                   "jitter_ms": delay // 10})


SEQUENCE = FaultSequence("kafka-txn-late-marker", (PAUSE,), PERIOD_S, late_marker_pauses)
SLOW_SEQUENCE = FaultSequence("kafka-txn-late-marker-slow", (PAUSE, SLOW), PERIOD_S,
                              late_marker_slow)
SEQUENCES = {s.name: s for s in (SEQUENCE, SLOW_SEQUENCE)}

SETTINGS = {
    "name": "kafka-txn-late-marker", "scenario": "kafka-txn-late-marker", "system": "kafka",
    "workload": "txn", "keys": 8, "concurrency": 10, "time_limit_s": 120.0,
    "nemesis": ("kafka-txn-late-marker",), "nemesis_interval_s": PERIOD_S, "node_count": 3,
    "broker": {"replication_factor": 3, "acks": "all", "min_insync_replicas": 2,
               "unclean_leader_election": False},
    "producer": {"request_timeout_ms": 3000, "delivery_timeout_ms": 10000},
    "extra": {"transaction_timeout_ms": 1000},
}

SCENARIOS = {"kafka-txn-late-marker": Scenario(
    "kafka-txn-late-marker",
    "KAFKA-17754: Jepsen's transaction settings (transaction.timeout.ms 1000, "
    "request.timeout.ms 3000, delivery.timeout.ms 10000) with pauses of the transaction "
    "coordinator and of leaders of keys in flight, so late markers or writes of one "
    "transaction may land in the next; expected where the protocol is version 1 "
    "(G1a, lost-write), valid with transaction.version=2 and the Java client.",
    SETTINGS, ("G1a",), ("--client", "java")),
    "kafka-txn-late-marker-slow": Scenario(
    "kafka-txn-late-marker-slow",
    "KAFKA-17754 with late messages in the network: kafka-txn-late-marker's settings, the "
    "transaction coordinator's links slowed by 0.5 to 2 s (its markers and answers land "
    "late) and leaders of keys in flight paused; on the docker backend, where slow "
    "links reach Kafka's nodes.",
    {**SETTINGS, "name": "kafka-txn-late-marker-slow",
     "scenario": "kafka-txn-late-marker-slow", "backend": "docker",
     "nemesis": ("kafka-txn-late-marker-slow",)},
    ("G1a",), ("--client", "java"))}
