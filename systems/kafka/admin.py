"""The cluster as Kafka's Admin API sees it: brokers, leaders, ISR; the active controller.

Leaders and ISR come from a Metadata request through confluent-kafka's
AdminClient. librdkafka has no DescribeMetadataQuorum, and in KRaft a broker's
Metadata answer names a random broker as "controller", so the active
controller is read from the nodes' own quorum-state files: the leader id that
the highest leader epoch names.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from systems.kafka.config import TOPIC


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition: its leader, replicas and in-sync replicas, by node name."""

    leader: str | None
    replicas: tuple[str, ...]
    isr: tuple[str, ...]


OFFSETS_TOPIC = "__consumer_offsets"
TXN_STATE_TOPIC = "__transaction_state"


class KafkaAdmin:
    """One AdminClient over the cluster (librdkafka handles are thread-safe)."""

    def __init__(self, bootstrap: str, names: Mapping[int, str], *, timeout_s: float = 2.0,
                 topic: str = TOPIC) -> None:
        self.names = dict(names)  # node.id -> node name
        self.timeout_s = timeout_s
        self.topic = topic
        self.client = AdminClient({"bootstrap.servers": bootstrap,
                                   "socket.timeout.ms": max(1000, int(timeout_s * 1000)),
                                   "reconnect.backoff.max.ms": 500,
                                   # refused connections to a down node are expected here;
                                   # what matters comes back as exceptions
                                   "log_level": 2})

    def _name(self, node_id: int) -> str | None:
        return self.names.get(node_id)

    def brokers(self) -> list[str]:
        """The brokers registered now (fenced or dead ones drop out)."""
        md = self.client.list_topics(timeout=self.timeout_s)
        return sorted(n for b in md.brokers if (n := self._name(b)) is not None)

    def partitions(self) -> dict[int, PartitionView]:
        """The topic's partitions; {} when it does not exist yet."""
        md = self.client.list_topics(self.topic, timeout=self.timeout_s)
        t = md.topics.get(self.topic)
        if t is None or t.error is not None:
            return {}
        out: dict[int, PartitionView] = {}
        for pid, p in t.partitions.items():
            leader = self._name(p.leader) if p.leader >= 0 else None
            out[int(pid)] = PartitionView(
                leader, tuple(n for r in p.replicas if (n := self._name(r)) is not None),
                tuple(n for r in p.isrs if (n := self._name(r)) is not None))
        return out

    def leader_of(self, key: int) -> str | None:
        try:
            view = self.partitions().get(key)
        except KafkaException:
            return None
        return view.leader if view is not None else None

    def coordinator(self, topic: str = OFFSETS_TOPIC) -> str | None:
        """The consumer groups' coordinator: the leader of the one partition of
        __consumer_offsets (config.py makes one); None before any group used it. With
        TXN_STATE_TOPIC: the transaction coordinator of every transactional.id."""
        try:
            md = self.client.list_topics(topic, timeout=self.timeout_s)
        except KafkaException:
            return None
        t = md.topics.get(topic)
        p = t.partitions.get(0) if t is not None and t.error is None else None
        return self._name(p.leader) if p is not None and p.leader >= 0 else None

    def create_topic(self, partitions: int, replication_factor: int,
                     min_insync_replicas: int, *, topic: str | None = None) -> None:
        """Create the workload's topic (or `topic`); an existing one is left as it is."""
        name = topic or self.topic
        fut = self.client.create_topics([NewTopic(
            name, num_partitions=partitions, replication_factor=replication_factor,
            config={"min.insync.replicas": str(min_insync_replicas)})],
            operation_timeout=self.timeout_s, request_timeout=self.timeout_s)[name]
        try:
            fut.result()
        except KafkaException as e:
            if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise

    def wait_ready(self, nodes: int, partitions: int, replication_factor: int,
                   min_insync_replicas: int, *, timeout_s: float = 60.0) -> float:
        """Every broker registered, the topic made, each partition led with a full ISR.

        Returns the seconds it took; raises TimeoutError saying what was missing.
        """
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        last = "no answer yet"
        created = False
        while time.monotonic() < deadline:
            try:
                up = self.brokers()
                if len(up) < nodes:
                    last = f"brokers registered: {up}"
                elif not created:
                    self.create_topic(partitions, replication_factor, min_insync_replicas)
                    created = True
                    continue
                else:
                    parts = self.partitions()
                    bad = [k for k in range(partitions) if k not in parts
                           or parts[k].leader is None
                           or len(parts[k].isr) < replication_factor]
                    if not bad:
                        return time.monotonic() - t0
                    last = f"partitions without a leader or a full ISR: {bad}"
            except KafkaException as e:
                last = str(e)
            time.sleep(0.1)
        raise TimeoutError(f"Kafka not ready in {timeout_s:.0f} s: {last}")


def active_controller(quorum_states: Mapping[str, Mapping[str, Any]],
                      names: Mapping[int, str]) -> str | None:
    """The quorum leader named under the highest leader epoch any node has written."""
    best: tuple[int, int] | None = None
    for state in quorum_states.values():
        try:
            epoch, leader = int(state["leaderEpoch"]), int(state["leaderId"])
        except (KeyError, TypeError, ValueError):
            continue
        if leader >= 0 and (best is None or epoch > best[0]):
            best = (epoch, leader)
    return names.get(best[1]) if best is not None else None
