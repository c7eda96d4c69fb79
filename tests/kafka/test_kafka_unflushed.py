"""lose-unflushed on real Kafka: a node's logs cut back to their recovery points.

A topic with one replica, on the node alone, so that nothing can fetch the lost records
back after the restart: the first records are written with `flush.messages=1`
(each fsynced, the recovery point follows them), the rest without (page cache
only). After SIGKILL, the cut and a restart, the node serves exactly the flushed ones.
The same scenario runs on the docker and ssh backends (`cut_on_any_backend`, called from
tests/kafka/test_kafka_docker.py and test_kafka_ssh.py), whose cut is planned on a copy
of the node's log dir and applied there with truncate and rm."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from harness import core
from harness import spec as specs
from harness.protocols import Backend, Run
from harness.runfiles import RunPaths
from systems.kafka import unflushed
from systems.kafka.admin import KafkaAdmin
from systems.kafka.remote import KafkaRemoteDB
from tests.kafka.cluster import Cluster

pytestmark = pytest.mark.kafka

FLUSHED, UNFLUSHED = 30, 20


def _send(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for v in values:  # one batch each, so the recovery point moves record by record
        p.produce(topic, value=str(v).encode(), partition=0)
        assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if (err := m.error()) is not None:
                if err.code() == -191:  # _PARTITION_EOF: everything read
                    return out
                continue
            out.append(int(m.value() or b"-1"))
        raise AssertionError(f"no end of partition in 60 s; read {out}")
    finally:
        c.close()


def _wait_recovery_point(log_dir: Callable[[], Path], part: str, wanted: int) -> None:
    deadline = time.monotonic() + 30
    while (got := unflushed.recovery_points(log_dir()).get(part, -1)) < wanted:
        assert time.monotonic() < deadline, f"{part}: recovery point {got} < {wanted}"
        time.sleep(0.2)


@dataclass(frozen=True)
class Node:
    """What the scenario does to the node that holds the topic, on any backend."""

    kill: Callable[[], None]
    start: Callable[[], None]  # and wait until the cluster serves again
    lose_unflushed: Callable[[], Mapping[str, int]]  # the bytes each file lost
    log_dir: Callable[[], Path]  # its log dir here, or a fresh copy of what a plan reads


def _topic_on_one_node(admin: KafkaAdmin, config: dict[str, str]) -> tuple[str, str]:
    """A new topic of one partition and one replica: (its name, the node that holds it)."""
    topic = f"cut-{uuid.uuid4().hex[:8]}"
    client = admin.client
    client.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                   config=config)])[topic].result()
    deadline = time.monotonic() + 30
    while (leader := client.list_topics(topic, timeout=5).topics[topic].partitions) == {} \
            or leader[0].leader < 0:
        assert time.monotonic() < deadline, "the topic has no leader"
        time.sleep(0.2)
    return topic, admin.names[leader[0].leader]


def _flushed_then_not(bootstrap: str, admin: KafkaAdmin, topic: str, log_dir: Callable[[], Path]
                      ) -> None:
    """FLUSHED records each fsynced (the recovery point follows them), then UNFLUSHED in the
    page cache only."""
    _send(bootstrap, topic, range(FLUSHED))
    _wait_recovery_point(log_dir, f"{topic}-0", FLUSHED)
    res = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("flush.messages", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.client.incremental_alter_configs([res])[res].result()
    time.sleep(1.0)  # every broker has the new config before the next sends
    _send(bootstrap, topic, range(FLUSHED, FLUSHED + UNFLUSHED))
    time.sleep(1.5)  # the checkpoint is rewritten: it must still say FLUSHED


def cut_on_any_backend(bootstrap: str, admin: KafkaAdmin, node_of: Callable[[str], Node]
                       ) -> None:
    """The scenario through the DB's own calls: after the kill and the cut, the node's plan
    has nothing left past any recovery point, and after its restart it serves exactly the
    flushed records."""
    topic, name = _topic_on_one_node(admin, {"flush.messages": "1", "min.insync.replicas": "1"})
    node = node_of(name)
    try:
        _flushed_then_not(bootstrap, admin, topic, node.log_dir)
        node.kill()
        cut = {c.partition: c for c in unflushed.plan(node.log_dir()).cuts}[f"{topic}-0"]
        assert (cut.recovery_point, cut.log_end) == (FLUSHED, FLUSHED + UNFLUSHED)
        lost = node.lose_unflushed()  # the evidence: the partition's segment lost bytes
        assert any(f.startswith(f"{topic}-0/") and f.endswith(".log") and b > 0
                   for f, b in lost.items()), lost
        assert unflushed.plan(node.log_dir()).dropped == {}
        node.start()
        assert _read_all(bootstrap, topic) == list(range(FLUSHED))
    finally:
        admin.client.delete_topics([topic])[topic].result()


def test_lose_unflushed_cuts_a_node_back_to_its_recovery_point(kafka_cluster: Cluster) -> None:
    """On the local backend, with what only a local log dir shows: a running node is refused,
    and the metadata log is left as it was."""
    kafka, admin = kafka_cluster.kafka, kafka_cluster.admin
    topic, node = _topic_on_one_node(admin, {"flush.messages": "1", "min.insync.replicas": "1"})
    try:
        data = kafka.data_dir(node)
        _flushed_then_not(kafka.bootstrap, admin, topic, lambda: data)
        kafka.kill(None, node)
        with pytest.raises(RuntimeError, match="running"):
            kafka.start(None, node)
            kafka.lose_unflushed(None, node)
        kafka.kill(None, node)
        plan = unflushed.plan(data)
        cut = {c.partition: c for c in plan.cuts}[f"{topic}-0"]
        assert (cut.recovery_point, cut.log_end) == (FLUSHED, FLUSHED + UNFLUSHED)
        assert unflushed.METADATA_DIR not in {c.partition for c in plan.cuts}
        meta = sorted((data / unflushed.METADATA_DIR).iterdir())
        meta_sizes = [p.stat().st_size for p in meta]
        lost = kafka.lose_unflushed(None, node)
        assert lost == plan.cut_bytes and any(f.startswith(f"{topic}-0/") for f in lost), lost
        assert unflushed.plan(data).dropped == {}  # nothing left past any recovery point
        assert [p.stat().st_size for p in meta] == meta_sizes  # the metadata log untouched
        kafka.start(None, node)

        assert _read_all(kafka.bootstrap, topic) == list(range(FLUSHED))
    finally:
        admin.client.delete_topics([topic])[topic].result()
        kafka_cluster.ready(timeout_s=120)


def _remote_node(db: KafkaRemoteDB, run: Run, scratch: Path) -> Callable[[str], Node]:
    """The scenario's Node on a docker or ssh host: its log dir read through a copy of what
    a plan reads (the DB's own fetch), each look a fresh one."""
    def node_of(name: str) -> Node:
        def log_dir() -> Path:
            copy = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{name}-"))
            db.proc.fetch(name, db.data_dir(name), unflushed.fetch_patterns(), copy)
            return copy

        def start() -> None:
            db.start(run, name)
            db.wait_ready(run, 120)

        return Node(kill=lambda: db.kill(run, name), start=start,
                    lose_unflushed=lambda: db.lose_unflushed(run, name), log_dir=log_dir)
    return node_of


def cut_on_a_remote_cluster(backend: Backend, spec: specs.TestSpec, scratch: Path) -> None:
    """The scenario on a cluster the docker or ssh backend brings up for it, taken down
    after, whatever happened."""
    root = scratch / "run"
    root.mkdir()
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root), log=logging.getLogger("test"))
    try:
        core.cluster_up(backend, run)
        db = run.db
        assert isinstance(db, KafkaRemoteDB) and db.admin is not None
        cut_on_any_backend(db.bootstrap, db.admin, _remote_node(db, run, scratch))
    finally:
        core.cluster_down(backend, run)
