"""The kafka system's options: the replication and producer settings both systems take
(systems/settings.py), and its own: which release, metadata mode, client and cluster
features.

Declared here once (harness/options.py): `undertow run --help` lists them under the kafka
system, a TOML file sets them in its `[kafka]` table (or, as before, in `[extra]`; the
former broker and producer settings in `[broker]`, `[producer]`), and test.json records
them under `options.kafka`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.options import option
from systems.settings import LogOptions, at_least

CLIENTS = ("librdkafka", "java")
METADATA_MODES = ("zookeeper", "kraft")


@dataclass(frozen=True, slots=True)
class KafkaOptions(LogOptions):
    """What the kafka system takes: the settings both systems have, and its own."""

    # our broker's own settings (systems/undertow/options.py) at the value Kafka always
    # has: an old file's full [broker] table (an old `undertow plan` of a Kafka run) still
    # runs; another value is refused, naming --system undertow
    formerly_fixed: ClassVar[Mapping[str, Any]] = {
        "broker.truncation": "leader-epoch", "broker.txn_epoch_fencing": True,
        "broker.offsets_commit_acks": -1}

    kafka_version: str | None = option(
        None, "The Apache Kafka release, 0.10.2.0 to 4.x (default: the newest 4.x cached); "
        "resolved from Maven Central once.", metavar="V")
    kafka_metadata: str | None = option(
        None, "ZooKeeper or KRaft (default: the release's own; ZooKeeper before 3.9, KRaft "
        "from 3.9).", choices=METADATA_MODES)
    client: str = option(
        "librdkafka", "The client that drives Kafka, librdkafka (confluent-kafka) or Kafka's "
        "own Java client (kafka-clients, through JPype).", choices=CLIENTS)
    kafka_client_version: str | None = option(
        None, "--client java: the kafka-clients release (default: the broker's when it is "
        "4.x, else the newest 4.x); resolved from Maven Central once.", metavar="V")
    kafka_features: str | Mapping[str, int] | None = option(
        None, "Cluster features set when the storage is formatted: name=level[,...] (a table "
        "in TOML), e.g. eligible.leader.replicas.version=1.", metavar="NAME=LEVEL,...",
        parse=str)
    controlled_shutdown: bool = option(
        True, "ZooKeeper mode: controlled.shutdown.enable. A broker asked to shut down (a "
        "graceful kill) first has the controller move its leaders away; off, its shutdown "
        "writes its checkpoints and leaves, as a crash would after them.",
        flag="--kafka-controlled-shutdown")
    controller_voters: int = option(
        0, "Dedicated KRaft controllers: the first N nodes are controllers only, the rest "
        "brokers only (0: every node both).", flag="--kafka-controllers",
        check=at_least(0), metavar="N")
    transaction_timeout_ms: int | None = option(
        None, "--workload txn: the producers' transaction.timeout.ms (default: the "
        "client's rule, 10 s or the delivery timeout).", check=at_least(1), metavar="MS")
