"""The `undertow` system: our broker, on any host a backend makes.

The spec's durability settings are Kafka's own and the broker honours every one
of them (truncation `hw` brings back the pre-KIP-101 rule). The topic, its
partitions (one per key of the history) and the controller quorum are this
system's business, not the harness's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.image import NodeImage
from harness.protocols import DB, Client, LocalHost, NodeHost, ShellHost
from harness.spec import SpecError, TestSpec
from harness.test import Test
from systems.settings import AcksOption, check_brokers
from systems.undertow import admin
from systems.undertow.group_consumer import GroupQueueClient
from systems.undertow.local_db import LocalBrokerDB
from systems.undertow.options import UndertowOptions
from systems.undertow.queue_client import QueueClient
from systems.undertow.remote_db import BROKER_PORT, RemoteBroker
from systems.undertow.scenarios import SCENARIOS
from systems.undertow.sequences import SEQUENCES
from systems.undertow.txn_client import TxnClient
from workloads import offsets
from workloads.options import QueueOptions, TxnOptions

IMAGE_DIR = Path(__file__).resolve().parents[2] / "broker-image"
WORKLOADS = ("queue", "txn")


class UndertowSystem(AcksOption):
    """harness.protocols.System (and HasNodeImage, HasSequences, SetsAcks) for our broker."""

    name = "undertow"
    port = BROKER_PORT
    scenarios = SCENARIOS
    # its fault sequences, as data: the nemesis reads them through harness.registry
    sequences = SEQUENCES
    options = UndertowOptions

    def check(self, spec: TestSpec) -> None:
        if spec.workload not in WORKLOADS:
            raise SpecError(f"--workload {spec.workload}: the undertow system speaks "
                            f"{', '.join(WORKLOADS)}")
        check_brokers(spec, len(spec.nodes))
        try:
            admin.controller_voters(spec)
        except ValueError as e:
            raise SpecError(str(e)) from e

    def db(self, test: Test, host: NodeHost) -> DB:
        if isinstance(host, LocalHost):
            return LocalBrokerDB(host)
        if isinstance(host, ShellHost):
            return RemoteBroker(host)
        raise TypeError(f"undertow: no DB for a host of type {type(host).__name__}")

    def client(self, test: Test) -> Client:
        spec = test.spec
        txn = spec.workload == "txn"
        opts = QueueOptions.of(spec)
        own = UndertowOptions.of(spec)
        partitions = opts.partitions(spec.time_limit_s)
        queue = QueueClient(keys=opts.keys, acks=own.acks,
                            timeout_s=own.delivery_timeout_s,
                            request_timeout_s=own.request_timeout_s,
                            **_producer(spec),
                            max_poll_records=opts.max_poll_records,
                            isolation=opts.isolation.replace("-", "_") if txn else None)
        if txn:
            shared = own.shared_transactional_ids
            group = None
            if opts.subscribe:  # offsets are committed inside transactions only
                group = GroupQueueClient(queue, partitions=partitions,
                                         settings=replace(opts.consumer, commit="off"))
            return TxnClient(queue, shared_ids=int(shared) if shared else None, group=group,
                             sends=TxnOptions.of(spec).txn_sends)
        if opts.subscribe or opts.crash_client_interval_s is not None:
            return GroupQueueClient(queue, partitions=partitions, settings=opts.consumer,
                                    offset_ops=offsets.enabled(spec, self))
        return queue

    def speaks_offsets(self, spec: TestSpec) -> bool:
        """harness.protocols.SpeaksOffsets: the queue workload's group client commits and
        reads the group's offsets as operations (systems/undertow/group_consumer.py)."""
        return spec.workload == "queue"

    def describe(self, spec: TestSpec) -> Mapping[str, Any]:
        """For test.json: the broker's and client's versions, and the settings that decide
        whether acknowledged writes survive (the report's verdict box shows them)."""
        b = UndertowOptions.of(spec)
        broker = {"acks": b.acks, "replication_factor": b.replication_factor,
                  "min_insync_replicas": b.min_insync_replicas,
                  "unclean_leader_election": b.unclean_leader_election,
                  "truncation": b.truncation, "flush": b.flush,
                  "replica_lag_time_max_ms": b.replica_lag_time_max_ms}
        if spec.workload == "txn":
            broker["txn_epoch_fencing"] = b.txn_epoch_fencing
        if QueueOptions.of(spec).subscribe:
            broker["offsets_commit_acks"] = b.offsets_commit_acks
        return {"name": self.name, "version": _version(),
                "topic": admin.TOPIC, "controller_voters": admin.controller_voters(spec),
                "client": {"library": "undertow's Python client", "version": _version()},
                "safety": {"broker": broker, "producer": _producer(spec)}}

    def node_image(self) -> NodeImage:
        return NodeImage("undertow/broker", IMAGE_DIR / "Dockerfile",
                         {"broker": admin.broker_source()})


def _producer(spec: TestSpec) -> dict[str, Any]:
    """The producer settings our client runs with: the spec's, or the client's defaults."""
    txn = spec.workload == "txn"
    own = UndertowOptions.of(spec)
    return {"retries": own.retries or (3 if txn else 0),
            "enable_idempotence": bool(own.enable_idempotence) or txn,
            "max_in_flight": own.max_in_flight or 1}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("undertow")
    except PackageNotFoundError:
        return "unknown"


system = UndertowSystem()
