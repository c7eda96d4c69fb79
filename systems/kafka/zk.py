"""ZooKeeper mode: one ZooKeeper member beside each broker, and the brokers' settings for it.

The ensemble runs from the release's own jars (Kafka depends on the ZooKeeper it
was built with, so `org.apache.zookeeper:zookeeper` comes with it from Maven
Central). A member is healthy once its `srvr` four-letter word answers with a mode
(leader, follower or standalone); `ruok` alone answers before the quorum forms.
A partition of a node cuts its member too (both live in the node's namespace).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from systems.kafka.config import KafkaNode
from systems.kafka.releases import Release
from systems.settings import LogOptions

TICK_MS = 500  # ZooKeeper's sessions last 2 to 20 ticks: 1 to 10 s
ZK_HEAP = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d{ISO8601}] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=INFO
"""


@dataclass(frozen=True, slots=True)
class ZkMember:
    """A node's ZooKeeper member: its id (the node's) and three ports."""

    name: str
    myid: int
    host: str
    client_port: int
    peer_port: int
    election_port: int

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.client_port}"


def make_members(nodes: Mapping[str, KafkaNode], port: Callable[[], int]) -> dict[str, ZkMember]:
    return {n: ZkMember(n, k.node_id, k.host, port(), port(), port()) for n, k in nodes.items()}


def connect_string(members: Mapping[str, ZkMember]) -> str:
    return ",".join(m.connect for m in members.values())


def zoo_cfg(member: ZkMember, members: Mapping[str, ZkMember], data_dir: PurePath) -> str:
    """The member's zoo.cfg (the AdminServer of 3.5+ off: it would take port 8080)."""
    lines = [f"tickTime={TICK_MS}", "initLimit=20", "syncLimit=4", f"dataDir={data_dir}",
             f"clientPort={member.client_port}", f"clientPortAddress={member.host}",
             "maxClientCnxns=0", "admin.enableServer=false", "4lw.commands.whitelist=*",
             "autopurge.purgeInterval=0"]
    lines += [f"server.{m.myid}={m.host}:{m.peer_port}:{m.election_port}"
              for m in members.values()]
    return "\n".join(lines) + "\n"


def zk_command(java: str, classpath: str, cfg: str, log4j: str) -> list[str]:
    return [java, *ZK_HEAP, f"-Dlog4j.configuration=file:{log4j}",
            "-Dzookeeper.4lw.commands.whitelist=*", "-cp", classpath, MAIN, cfg]


def four_letter(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """A four-letter word's answer ('' when the member does not answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(word.encode())
            chunks = []
            while data := s.recv(4096):
                chunks.append(data)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def mode(member: ZkMember) -> str | None:
    """'leader', 'follower', 'standalone', or None while it does not serve."""
    for line in four_letter(member.host, member.client_port, "srvr").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def wait_serving(member: ZkMember, timeout_s: float) -> float:
    """Until the member serves (in a quorum); the seconds it took, TimeoutError otherwise."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if mode(member) is not None:
            return time.monotonic() - t0
        time.sleep(0.2)
    raise TimeoutError(f"{member.name}: ZooKeeper at {member.connect} not serving in "
                       f"{timeout_s:.0f} s")


def broker_properties(node: KafkaNode, zk_connect: str, data_dir: PurePath, b: LogOptions,
                      rel: Release, *, partitions: int,
                      controlled_shutdown: bool) -> dict[str, str]:
    """A ZooKeeper-mode broker's server.properties: every safety setting explicit (the
    release's own defaults differ: unclean election was on by default before 0.11)."""
    rf = str(b.replication_factor)
    props: dict[str, Any] = {
        "broker.id": node.node_id,
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": b.session_timeout_ms,
        # a broker waits for its ZooKeeper (a member still joining the ensemble) rather than
        # giving up at start after the release's 6 s
        "zookeeper.connection.timeout.ms": 60_000,
        "listeners": f"PLAINTEXT://{node.host}:{node.broker_port}",
        "advertised.listeners": f"PLAINTEXT://{node.bootstrap}",
        "log.dirs": str(data_dir),
        "num.partitions": partitions,
        "default.replication.factor": rf,
        "min.insync.replicas": b.min_insync_replicas,
        "unclean.leader.election.enable": str(b.unclean_leader_election).lower(),
        "replica.lag.time.max.ms": b.replica_lag_time_max_ms,
        "auto.create.topics.enable": "false",
        "auto.leader.rebalance.enable": "false",  # leaders move by faults only
        "controlled.shutdown.enable": str(controlled_shutdown).lower(),
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 1,
        "replica.high.watermark.checkpoint.interval.ms": 500,  # the dumps read HW from it
        "num.network.threads": 2,
        "num.io.threads": 4,
        "log.segment.bytes": 16 * 1024 * 1024,
    }
    if rel.era.idempotence:  # 0.11.0 and later: transactions and the rebalance delay exist
        props |= {"transaction.state.log.replication.factor": rf,
                  "transaction.state.log.min.isr": min(b.min_insync_replicas,
                                                       b.replication_factor),
                  "transaction.state.log.num.partitions": 1,
                  "group.initial.rebalance.delay.ms": 0}
    if b.flush == "every-message":
        props["log.flush.interval.messages"] = 1
    return {k: str(v) for k, v in props.items()}

