"""The queue and txn workloads' own options: which keys the clients write, how they read
(the final reads' time limit included) and how often a client crashes (queue only).

Declared here once (harness/options.py) and shared by both workloads (txn's final reads
are the queue workload's, its keys rotate the same way): `undertow run --help` lists them
under `Options of --workload queue, txn`, a TOML file sets them in its `[queue]` or `[txn]`
table (the run's workload's), and test.json records them under `options.queue` or
`options.txn`. They were TestSpec fields before, so each names where it was (`formerly`):
a top-level `keys = 4`, `[consumer] commit = "processed"` in an old TOML file, a scenario's
settings or an old test.json still set them. The systems read them back typed to build
their clients (`QueueOptions.of(spec)`), the nemesis through the Workload's
`harness.protocols.WritesKeys` (it imports no workload).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.options import WorkloadOptions, option
from harness.spec import TestSpec

# Sizing the default key pool: sends per second the queue workload is assumed to reach
# (what 10 clients get from 3 local nodes of our broker on 2 cores), and a ceiling: our
# broker's followers fetch every partition in each round, so hundreds of partitions
# slow every write (600 made it 5 times slower here; 256 stayed within the noise).
POOL_SENDS_PER_S = 500
POOL_MAX = 256
MAX_POLL_RECORDS = 100  # a poll's records at most, over all its keys (Kafka's max.poll.records)
# what a consumer reads: committed transactions only (stopping at the last stable offset),
# or every record below the high watermark, open and aborted transactions' included
ISOLATIONS = ("read-committed", "read-uncommitted")
SUB_VIA = ("assign", "subscribe")  # how consumers get their keys (Jepsen's :sub-via)
COMMITS = ("auto", "processed", "off")  # ConsumerSettings.commit
ASSIGNORS = ("range", "roundrobin", "sticky")  # the group assignors both systems run
GROUP_ID = "undertow-queue"  # the one consumer group of a --sub-via subscribe run
# how a transaction's sends are waited for (workloads/txn.py `run_transaction` says)
TXN_SENDS = ("awaited", "at-commit")


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """The consumer group's settings with --sub-via subscribe, as the systems' group clients
    take them (`QueueOptions.consumer`; an old TOML file's `[consumer]` table).

    `commit`: `auto` commits each consumer's position every `auto_commit_interval_ms` from
    a background thread (Kafka's enable.auto.commit), whether or not the records before it
    were handed on yet; `processed` commits a poll's positions only once its records were
    handed on (written to the history); `off` never commits (a new owner starts at offset
    0). `session_timeout_ms`: a member whose heartbeats stop this long is removed.
    """

    commit: str = "auto"
    auto_commit_interval_ms: int = 1000
    session_timeout_ms: int = 6000
    assignor: str = "range"


def _count(lo: int) -> Any:
    def check(value: int) -> str | None:
        return None if value >= lo else f"must be at least {lo}, got {value!r}"
    return check


def _positive_s(value: float) -> str | None:
    return None if math.isfinite(value) and value > 0 else f"must be positive, got {value!r}"


@dataclass(frozen=True, slots=True)
class QueueOptions(WorkloadOptions):
    """What the queue and txn workloads' clients write and read, their consumer group, how
    often a client crashes (the txn workload's systems refuse crashes) and how long the
    final reads may take."""

    keys: int = option(
        8, "Keys (partitions) written at once; each is retired after --max-writes-per-key "
        "sends and a fresh one from the pool takes its place.", check=_count(1),
        metavar="N", formerly="keys")
    max_writes_per_key: int = option(
        1024, "Sends a key takes before it is retired.", check=_count(1), metavar="N",
        formerly="max_writes_per_key")
    key_pool: int | None = option(
        None, "Partitions created at setup for the keys to rotate through (default: enough "
        f"for the time limit, at most {POOL_MAX}).", check=_count(1), metavar="N",
        formerly="key_pool")
    max_poll_records: int = option(
        MAX_POLL_RECORDS, "Records one poll returns at most, over all its keys.",
        check=_count(1), metavar="N", formerly="max_poll_records")
    isolation: str = option(
        "read-committed", "Consumers' isolation level: committed transactions only, or every "
        "record below the high watermark (open and aborted transactions' too).",
        choices=ISOLATIONS, formerly="isolation")
    sub_via: str = option(
        "assign", "Consumers: assign (each process picks its keys) or subscribe (all join "
        "one consumer group, which rebalances the keys among them).", choices=SUB_VIA,
        formerly="sub_via")
    commit: str = option(
        "auto", "Consumer group: auto (every --auto-commit-interval-ms), processed (a poll's "
        "positions once its records were handed on) or off.", choices=COMMITS,
        formerly="consumer.commit")
    auto_commit_interval_ms: int = option(
        1000, "Consumer group: how often auto-commit commits the positions.",
        check=_count(1), metavar="MS", formerly="consumer.auto_commit_interval_ms")
    group_session_timeout_ms: int = option(
        6000, "Consumer group: a member silent this long is removed.", check=_count(1),
        metavar="MS", formerly="consumer.session_timeout_ms")
    assignor: str = option(
        "range", "Consumer group: how the group leader hands out keys.", choices=ASSIGNORS,
        formerly="consumer.assignor")
    crash_client_interval_s: float | None = option(
        None, "Seconds between client crashes, on average: the process is abandoned without "
        "closing (the queue workload; default: none).", flag="--crash-client-interval",
        check=_positive_s, metavar="S", formerly="crash_client_interval_s")
    final_read_timeout_s: float = option(
        30.0, "Seconds the final reads may take at most (a TOML file's or --extra's; no "
        "flag).", flag="", check=_positive_s, metavar="S", formerly="final_read_timeout_s")

    def refuse(self) -> str | None:
        if self.key_pool is not None and self.key_pool < self.keys:
            return (f"--key-pool {self.key_pool}: must be at least --keys ({self.keys}), "
                    "the keys written at once")
        return None

    @property
    def subscribe(self) -> bool:
        """Whether the processes join one consumer group (--sub-via subscribe)."""
        return self.sub_via == "subscribe"

    @property
    def consumer(self) -> ConsumerSettings:
        """The consumer group's settings, as the systems' group clients take them."""
        return ConsumerSettings(self.commit, self.auto_commit_interval_ms,
                                self.group_session_timeout_ms, self.assignor)

    def partitions(self, time_limit_s: float) -> int:
        """The topic's partitions, created at setup: the key pool given, else one that lasts
        time_limit_s at POOL_SENDS_PER_S sends per second (at most POOL_MAX)."""
        if self.key_pool is not None:
            return self.key_pool
        needed = math.ceil(time_limit_s * POOL_SENDS_PER_S / self.max_writes_per_key)
        return max(self.keys, min(POOL_MAX, self.keys + needed))


@dataclass(frozen=True, slots=True)
class TxnOptions(QueueOptions):
    """The txn workload's options: the queue workload's, and how its transactions' sends
    are waited for."""

    txn_sends: str = option(
        "awaited", "Transactions' sends: awaited (each run of sends before the next step) or "
        "at-commit (left to the producer; the commit flushes them, and a send that failed "
        "fails the commit, which is answered by an abort on the same producer).",
        choices=TXN_SENDS)


def partitions(spec: TestSpec) -> int:
    """The run's key pool: the partitions the system creates at setup."""
    return QueueOptions.of(spec).partitions(spec.time_limit_s)


class WritesQueueKeys:
    """harness.protocols.WritesKeys for the queue and txn workloads (mixed into both)."""

    options = QueueOptions

    def keys(self, spec: TestSpec) -> int:
        return QueueOptions.of(spec).keys

    def partitions(self, spec: TestSpec) -> int:
        return partitions(spec)
