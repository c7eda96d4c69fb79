"""The options both systems take: Kafka's replication settings (the ones that decide whether
acknowledged writes survive) and the clients' producer settings.

Declared here once (harness/options.py) and extended by each system's own options class
(systems/undertow/options.py, systems/kafka/options.py), so `--acks`, `--replication-factor`,
`--retries`, ... are listed once under both systems, a TOML file sets them in the run's
system's table (`[undertow]`, `[kafka]`) and test.json records them under
`options.<system>`. They were TestSpec's `broker` and `producer` tables before, so each
names where it was (`formerly`): an old TOML file's `[broker]` / `[producer]` table, a
scenario's `broker` / `producer` dict and an old test.json still set them. Read back typed
through the run's system's class (`KafkaOptions.of(spec).acks`), or through this one
whatever the system (`LogOptions.of(spec)`). This module imports no system.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.options import SystemOptions, option
from harness.spec import SpecError, TestSpec

ACKS = ("0", "1", "all")
FLUSHES = ("page-cache", "every-message")  # page-cache: Kafka's default, no fsync per message


def at_least(lo: int) -> Any:
    """An option's check: an integer of at least lo."""
    def check(value: int) -> str | None:
        return None if value >= lo else f"expected an integer >= {lo}, got {value!r}"
    return check


@dataclass(frozen=True, slots=True)
class LogOptions(SystemOptions):
    """The replicated log's settings and the producer's, as Kafka names them.

    `retries`: how many times a send whose attempt may have been written (no answer in
    time, connection lost) is sent again; each resend may write the record once more.
    None keeps the system's own default (our client: 0; Kafka: librdkafka's, as
    systems/kafka/config.py sets it). `delivery_timeout_ms` bounds a send with its
    retries; `request_timeout_ms` one attempt (None: the whole delivery timeout).
    `enable_idempotence`: the idempotent producer, whose resends are written once (None:
    the system's default; our client: off; Kafka: on for acks=all). `max_in_flight`: an
    operation's produce requests unanswered on one connection
    (max.in.flight.requests.per.connection; None: the system's default, ours 1).
    """

    replication_factor: int = option(
        3, "Replicas of each partition (at most the nodes that are brokers).",
        check=at_least(1), metavar="N", formerly="broker.replication_factor")
    acks: str = option(
        "all", "Producer: the replicas that must have a send before it is acknowledged.",
        choices=ACKS, formerly="broker.acks")
    min_insync_replicas: int = option(
        2, "An acks=all send needs this many in-sync replicas (1 to the replication "
        "factor).", check=at_least(1), metavar="N", formerly="broker.min_insync_replicas")
    unclean_leader_election: bool = option(
        False, "A replica out of the ISR may be elected leader (losing what it lacks).",
        formerly="broker.unclean_leader_election")
    flush: str = option(
        "page-cache", "When a broker fsyncs its log: page-cache (Kafka's default: never per "
        "message) or every-message.", choices=FLUSHES, formerly="broker.flush")
    replica_lag_time_max_ms: int = option(
        2000, "A follower that has not caught up this long leaves the ISR.",
        check=at_least(1), metavar="MS", formerly="broker.replica_lag_time_max_ms")
    session_timeout_ms: int = option(
        2000, "A broker whose heartbeats stop this long is fenced by the controller.",
        check=at_least(1), metavar="MS", formerly="broker.session_timeout_ms")
    retries: int | None = option(
        None, "Producer: resends of a send whose attempt may have been written (default: "
        "the system's own; each resend may duplicate the record).", check=at_least(0),
        metavar="N", formerly="producer.retries")
    delivery_timeout_ms: int = option(
        3000, "Producer: a send's time limit, its retries included.", check=at_least(1),
        metavar="MS", formerly="producer.delivery_timeout_ms")
    request_timeout_ms: int | None = option(
        None, "Producer: one attempt's time limit (default: the delivery timeout).",
        check=at_least(1), metavar="MS", formerly="producer.request_timeout_ms")
    enable_idempotence: bool | None = option(
        None, "Producer: the idempotent producer, whose resends are written once (default: "
        "the system's own; ours off, Kafka's on for acks all).", flag="--idempotence",
        formerly="producer.enable_idempotence")
    max_in_flight: int | None = option(
        None, "Producer: an operation's requests unanswered on one connection "
        "(max.in.flight.requests.per.connection; default: the system's own).",
        check=at_least(1), metavar="N", formerly="producer.max_in_flight")

    def refuse(self) -> str | None:
        """The rules between these settings (each alone was checked already)."""
        if self.min_insync_replicas > self.replication_factor:
            return (f"--min-insync-replicas {self.min_insync_replicas} must be between 1 and "
                    f"the replication factor ({self.replication_factor})")
        if self.request_timeout_ms is not None and \
                self.request_timeout_ms > self.delivery_timeout_ms:
            return (f"--request-timeout-ms {self.request_timeout_ms} exceeds "
                    f"--delivery-timeout-ms {self.delivery_timeout_ms} (one attempt cannot "
                    "outlast the whole send)")
        if self.enable_idempotence and self.retries == 0:
            return "--idempotence needs --retries above 0 (as Kafka's producer)"
        if self.enable_idempotence and (self.max_in_flight or 0) > 5:
            return ("--idempotence needs --max-in-flight 5 or less (as Kafka's producer: the "
                    "leader keeps 5 sequences per producer)")
        if self.enable_idempotence and self.acks != "all":
            return f"--idempotence needs --acks all, not {self.acks} (as Kafka's producer)"
        return None

    @property
    def delivery_timeout_s(self) -> float:
        return self.delivery_timeout_ms / 1000

    @property
    def request_timeout_s(self) -> float | None:
        return None if self.request_timeout_ms is None else self.request_timeout_ms / 1000


def check_brokers(spec: TestSpec, brokers: int, why: str = "") -> None:
    """SpecError when the replication factor exceeds the nodes that are brokers (why: what
    makes them fewer than the nodes)."""
    rf = LogOptions.of(spec).replication_factor
    if rf > brokers:
        said = f"{brokers} brokers ({why})" if why else f"{brokers} nodes"
        raise SpecError(f"--replication-factor {rf} exceeds the {said}")


class AcksOption:
    """harness.protocols.SetsAcks for both systems (mixed into each): the acks their
    producers wait for, which a workload's rule may need (txn: all)."""

    def acks(self, spec: TestSpec) -> str:
        return LogOptions.of(spec).acks
