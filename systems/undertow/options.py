"""Our broker's own options: the replication and producer settings both systems take
(systems/settings.py), the ones only our broker has (high-watermark truncation, epoch
fencing off, commits answered before they are replicated), its controller quorum, shared
transactional ids, raw settings.

Declared here once (harness/options.py): `undertow run --help` lists them under the
undertow system, a TOML file sets them in its `[undertow]` table (or, as before, in
`[extra]`; the former broker settings in `[broker]`), and test.json records them under
`options.undertow`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.options import option
from systems.settings import LogOptions

TRUNCATIONS = ("hw", "leader-epoch")


def _voters(text: str) -> int | list[str]:
    """`2` (the first two nodes) or `n1,n3` (those nodes)."""
    text = text.strip()
    return int(text) if text.isdigit() else [v.strip() for v in text.split(",") if v.strip()]


def _voters_shape(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return None  # its range against the nodes: admin.controller_voters
    if isinstance(value, Sequence) and not isinstance(value, str) \
            and all(isinstance(v, str) for v in value):
        return None
    return f"expected a list of nodes or a count, got {value!r}"


def _positive(value: int) -> str | None:
    return None if value >= 1 else f"expected an integer >= 1, got {value!r}"


def _table(value: Any) -> str | None:
    return None if isinstance(value, Mapping) else f"expected a table, got {value!r}"


def _commit_acks(value: int) -> str | None:
    return None if value in (-1, 1) else f"expected -1 or 1, got {value!r}"


@dataclass(frozen=True, slots=True)
class UndertowOptions(LogOptions):
    """What our broker takes: the settings both systems have, and its own."""

    truncation: str = option(
        "leader-epoch", "How a restarted or demoted replica truncates its log: by leader "
        "epoch (KIP-101) or to its high-watermark checkpoint (before KIP-101).",
        choices=TRUNCATIONS, formerly="broker.truncation")
    txn_epoch_fencing: bool = option(
        True, "Transaction coordinators refuse a producer's older epochs (off only to show "
        "zombie producers).", flag="--txn-fencing", formerly="broker.txn_epoch_fencing")
    offsets_commit_acks: int = option(
        -1, "When a group coordinator answers a commit: -1 once replicated, 1 once in its "
        "own log (Kafka's old offsets.commit.required.acks).", check=_commit_acks,
        metavar="-1|1", formerly="broker.offsets_commit_acks")

    controller_voters: int | list[str] | None = option(
        None, "The controller quorum: a count (the first N nodes) or a comma list of nodes, "
        "voters among the brokers (default: 3 of 3 or 4 nodes, 5 from 5).",
        parse=_voters, check=_voters_shape, metavar="N|NODES")
    shared_transactional_ids: int | None = option(
        None, "--workload txn: the producers share this many transactional ids (zombie "
        "producers; default: one each).", check=_positive, metavar="N")
    broker_settings: Mapping[str, Any] | None = option(
        None, "Raw broker settings (JSON object), over the ones the harness derives.",
        check=_table, metavar="JSON")

    def to_kafka(self) -> dict[str, Any]:
        """The broker's config keys, as Kafka names them (our broker reads them so)."""
        return {
            "default.replication.factor": self.replication_factor,
            "min.insync.replicas": self.min_insync_replicas,
            "unclean.leader.election.enable": self.unclean_leader_election,
            "truncation": self.truncation,
            "flush.messages": 1 if self.flush == "every-message" else None,
            "replica.lag.time.max.ms": self.replica_lag_time_max_ms,
            "broker.session.timeout.ms": self.session_timeout_ms,
            "transaction.epoch.fencing.enable": self.txn_epoch_fencing,
            "offsets.commit.required.acks": self.offsets_commit_acks,
        }
