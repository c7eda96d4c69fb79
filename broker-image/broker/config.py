"""NODE.json: one node's whole configuration (see broker-image/README.md)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("broker", "controller")
TRUNCATIONS = ("hw", "leader-epoch")

# Kafka's names; the defaults are Kafka-like, except the intervals that make a
# local cluster start and fail over fast.
DEFAULTS: dict[str, Any] = {
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "truncation": "leader-epoch",
    "flush.messages": None,
    "flush.ms": None,
    "os.dirty.expire.ms": None,
    "replica.lag.time.max.ms": 2000,
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 100,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.max.records": 2000,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "request.timeout.ms": 30000,
    "segment.bytes": 1 << 20,
    "socket.request.max.bytes": 1 << 20,
    "leader.election.grace.ms": 1000,
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.fetch.interval.ms": 100,
    "default.replication.factor": None,
    "test.controls.enable": False,
    "test.fetcher.start.paused": False,
    # consumer groups: their state lives in this many partitions of an internal offsets
    # topic (0: no groups); the session timeouts a member may ask for
    "offsets.topic.num.partitions": 0,
    "group.min.session.timeout.ms": 100,
    "group.max.session.timeout.ms": 300000,
    # when the group coordinator answers a commit: -1 once the offsets record is committed
    # (replicated); 1 once it is in the coordinator's own log (Kafka's old
    # offsets.commit.required.acks=1: a coordinator that fails before it replicates loses it)
    "offsets.commit.required.acks": -1,
    # transactions: coordinator state lives in this many partitions of an internal
    # transaction-state topic (0: no transactions); the longest timeout a producer may ask
    # for; whether a producer's older epochs are refused (off only to show zombie producers)
    "transaction.state.log.num.partitions": 0,
    "transaction.max.timeout.ms": 900000,
    "transaction.epoch.fencing.enable": True,
}


class ConfigError(ValueError):
    """NODE.json cannot be used: the message names the key and what is wrong."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Typed view of the `settings` table."""

    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    truncation: str = "leader-epoch"
    flush_messages: int | None = None
    flush_ms: int | None = None
    os_dirty_expire_ms: int | None = None
    replica_lag_time_max_ms: int = 2000
    session_timeout_ms: int = 2000
    heartbeat_interval_ms: int = 100
    fetch_wait_max_ms: int = 500
    fetch_max_records: int = 2000
    hw_checkpoint_interval_ms: int = 5000
    request_timeout_ms: int = 30000
    segment_bytes: int = 1 << 20
    max_request_bytes: int = 1 << 20
    election_grace_ms: int = 1000
    quorum_election_timeout_ms: int = 1000
    quorum_fetch_timeout_ms: int = 2000
    quorum_fetch_interval_ms: int = 100
    offsets_partitions: int = 0
    group_min_session_timeout_ms: int = 100
    group_max_session_timeout_ms: int = 300000
    offsets_commit_acks: int = -1
    txn_partitions: int = 0
    txn_max_timeout_ms: int = 900000
    txn_epoch_fencing: bool = True
    test_controls: bool = False
    fetcher_start_paused: bool = False


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str = "queue"
    partitions: int = 8
    replication_factor: int = 3


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: str
    listen: str
    data_dir: Path
    peers: Mapping[str, str]
    process_roles: tuple[str, ...] = ("broker", "controller")
    controller_quorum_voters: tuple[str, ...] = ()
    topic: TopicConfig = field(default_factory=TopicConfig)
    settings: Settings = field(default_factory=Settings)
    clock_file: str | None = None
    brokers: tuple[str, ...] = ()  # nodes hosting replicas (default: peers but controller-only)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles and self.node_id in self.controller_quorum_voters

    @property
    def offsets_pids(self) -> range:
        """The internal offsets topic's partitions, numbered after the topic's own."""
        first = self.topic.partitions
        return range(first, first + self.settings.offsets_partitions)

    @property
    def txn_pids(self) -> range:
        """The internal transaction-state topic's partitions, numbered after the offsets'."""
        first = self.topic.partitions + self.settings.offsets_partitions
        return range(first, first + self.settings.txn_partitions)

    @property
    def internal_partitions(self) -> int:
        """How many partitions the internal topics add after the topic's own."""
        return self.settings.offsets_partitions + self.settings.txn_partitions

    @property
    def controller(self) -> str:
        """The first voter: where a broker looks for the active controller first."""
        return self.controller_quorum_voters[0]


def split_addr(addr: str, where: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where}: {addr!r} is not HOST:PORT")
    return host, int(port)


def _int(s: Mapping[str, Any], key: str, lo: int = 0, none_ok: bool = False) -> Any:
    v = s[key]
    if v is None and none_ok:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"settings.{key}: expected an integer >= {lo}, got {v!r}")
    return v


def parse_settings(raw: Mapping[str, Any]) -> Settings:
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        print(f"broker: ignoring unknown settings {unknown}", file=sys.stderr)
    s = {**DEFAULTS, **raw}
    if s["truncation"] not in TRUNCATIONS:
        raise ConfigError(f"settings.truncation: {s['truncation']!r} is not one of {TRUNCATIONS}")
    if s["offsets.commit.required.acks"] not in (-1, 1) or \
            isinstance(s["offsets.commit.required.acks"], bool):
        raise ConfigError("settings.offsets.commit.required.acks: expected -1 or 1, got "
                          f"{s['offsets.commit.required.acks']!r}")
    for key in ("unclean.leader.election.enable", "test.controls.enable",
                "test.fetcher.start.paused", "transaction.epoch.fencing.enable"):
        if not isinstance(s[key], bool):
            raise ConfigError(f"settings.{key}: expected true or false, got {s[key]!r}")
    return Settings(
        min_insync_replicas=_int(s, "min.insync.replicas", 1),
        unclean_leader_election=s["unclean.leader.election.enable"],
        truncation=s["truncation"],
        flush_messages=_int(s, "flush.messages", 1, none_ok=True),
        flush_ms=_int(s, "flush.ms", 0, none_ok=True),
        os_dirty_expire_ms=_int(s, "os.dirty.expire.ms", 1, none_ok=True),
        replica_lag_time_max_ms=_int(s, "replica.lag.time.max.ms", 1),
        session_timeout_ms=_int(s, "broker.session.timeout.ms", 1),
        heartbeat_interval_ms=_int(s, "broker.heartbeat.interval.ms", 1),
        fetch_wait_max_ms=_int(s, "replica.fetch.wait.max.ms", 0),
        fetch_max_records=_int(s, "replica.fetch.max.records", 1),
        hw_checkpoint_interval_ms=_int(s, "replica.high.watermark.checkpoint.interval.ms", 1),
        request_timeout_ms=_int(s, "request.timeout.ms", 1),
        segment_bytes=_int(s, "segment.bytes", 64),
        max_request_bytes=_int(s, "socket.request.max.bytes", 1024),
        election_grace_ms=_int(s, "leader.election.grace.ms", 0),
        quorum_election_timeout_ms=_int(s, "controller.quorum.election.timeout.ms", 1),
        quorum_fetch_timeout_ms=_int(s, "controller.quorum.fetch.timeout.ms", 1),
        quorum_fetch_interval_ms=_int(s, "controller.quorum.fetch.interval.ms", 1),
        test_controls=s["test.controls.enable"],
        fetcher_start_paused=s["test.fetcher.start.paused"],
        offsets_partitions=_int(s, "offsets.topic.num.partitions", 0),
        group_min_session_timeout_ms=_int(s, "group.min.session.timeout.ms", 1),
        group_max_session_timeout_ms=_int(s, "group.max.session.timeout.ms", 1),
        offsets_commit_acks=s["offsets.commit.required.acks"],
        txn_partitions=_int(s, "transaction.state.log.num.partitions", 0),
        txn_max_timeout_ms=_int(s, "transaction.max.timeout.ms", 1),
        txn_epoch_fencing=s["transaction.epoch.fencing.enable"],
    )


def _strs(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ConfigError(f"{where}: expected a list of strings, got {raw!r}")
    return tuple(raw)


def parse_config(raw: Mapping[str, Any], where: str = "NODE.json") -> NodeConfig:
    """Validate a NODE.json mapping; every error names the key."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a JSON object")
    for key in ("node_id", "listen", "data_dir", "peers"):
        if key not in raw:
            raise ConfigError(f"{where}: missing key {key!r}")
    node = raw["node_id"]
    if not isinstance(node, str) or not node:
        raise ConfigError(f"{where}: node_id must be a non-empty string")
    split_addr(str(raw["listen"]), f"{where}: listen")
    peers = raw["peers"]
    if not isinstance(peers, Mapping) or node not in peers:
        raise ConfigError(f"{where}: peers must be an object that includes this node {node!r}")
    for name, addr in peers.items():
        split_addr(str(addr), f"{where}: peers.{name}")
    roles = _strs(raw.get("process_roles", list(ROLES)), f"{where}: process_roles")
    for r in roles:
        if r not in ROLES:
            raise ConfigError(f"{where}: process_roles: {r!r} is not one of {ROLES}")
    voters = _strs(raw.get("controller_quorum_voters", [sorted(peers)[0]]),
                   f"{where}: controller_quorum_voters")
    if not voters or any(v not in peers for v in voters):
        raise ConfigError(f"{where}: controller_quorum_voters must name nodes of peers")
    if len(set(voters)) != len(voters):
        raise ConfigError(f"{where}: controller_quorum_voters {list(voters)} has a duplicate")
    if node in voters and "controller" not in roles:
        raise ConfigError(f"{where}: {node!r} is in controller_quorum_voters but its "
                          f"process_roles {list(roles)} lack 'controller'")
    t = raw.get("topic", {})
    if not isinstance(t, Mapping):
        raise ConfigError(f"{where}: topic must be an object")
    topic = TopicConfig(name=str(t.get("name", "queue")), partitions=t.get("partitions", 8),
                        replication_factor=t.get("replication_factor", 3))
    if not isinstance(topic.partitions, int) or topic.partitions < 1:
        raise ConfigError(f"{where}: topic.partitions must be a positive integer")
    settings_raw = raw.get("settings", {}) or {}
    if not isinstance(settings_raw, Mapping):
        raise ConfigError(f"{where}: settings must be an object")
    settings = parse_settings(settings_raw)
    if "brokers" in raw:
        brokers = _strs(raw["brokers"], f"{where}: brokers")
    else:
        controller_only = node in voters and "broker" not in roles
        brokers = tuple(n for n in sorted(peers) if not (controller_only and n == node))
    if not isinstance(topic.replication_factor, int) or not (
            1 <= topic.replication_factor <= len(brokers)):
        raise ConfigError(f"{where}: topic.replication_factor must be between 1 and "
                          f"the {len(brokers)} brokers")
    clock_file = raw.get("clock_file")
    return NodeConfig(node_id=node, listen=str(raw["listen"]), data_dir=Path(raw["data_dir"]),
                      peers={str(k): str(v) for k, v in peers.items()}, process_roles=roles,
                      controller_quorum_voters=voters, topic=topic, settings=settings,
                      clock_file=str(clock_file) if clock_file else None, brokers=brokers)


def load_config(path: Path) -> NodeConfig:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"--config: no such file {path}") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"--config {path}: not JSON: {e}") from e
    return parse_config(raw, str(path))
