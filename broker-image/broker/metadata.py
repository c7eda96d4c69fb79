"""The cluster's metadata as a log of records, and the state machine that applies them.

The controller never changes state directly: it appends records to a
MetadataLog and applies the committed ones, and brokers pull the same records
and apply them with the same MetadataState. Today the log has a single voter
(FileMetadataLog: committed on fsync); a Raft-replicated log can replace it
behind the MetadataLog protocol without touching the controller.

Records are JSON objects with a `type`:
- `topic`: {name, assignment: {partition: [replicas...]}}
- `register`: {node, incarnation}: the broker is alive (a new incarnation is a restart)
- `fence`: {node}: the broker's session expired
- `partition`: {partition, leader (or null), leader_epoch, partition_epoch, isr}
- `producer_id`: {id}: an idempotent producer's id, handed out once
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

MetadataRecord = dict[str, Any]


class MetadataLog(Protocol):
    """An append-only, replicated (or not) log of metadata records."""

    async def append(self, records: list[MetadataRecord]) -> int:
        """Append records; returns the offset after the last one once they are committed
        (raises if that cannot be known, e.g. a Raft log that lost its leadership)."""
        ...

    def read(self, from_offset: int, limit: int = 1000) -> list[tuple[int, MetadataRecord]]:
        """Committed records from `from_offset` on, with their offsets."""
        ...

    @property
    def committed_offset(self) -> int:
        """The offset after the last committed record."""
        ...


class FileMetadataLog:
    """The single-voter log: one JSON record a line, committed once fsync'ed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._records: list[MetadataRecord] = []
        if path.exists():
            good = 0
            data = path.read_bytes()
            for line in data.split(b"\n")[:-1]:
                try:
                    rec = json.loads(line)
                except ValueError:
                    break
                if not isinstance(rec, dict):
                    break
                self._records.append(rec)
                good += len(line) + 1
            if good != len(data):
                with open(path, "r+b") as f:
                    f.truncate(good)
        self._fh = open(path, "ab")  # noqa: SIM115 - held open for appends

    async def append(self, records: list[MetadataRecord]) -> int:
        if records:
            self._fh.write(b"".join(json.dumps(r).encode() + b"\n" for r in records))
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._records.extend(records)
        return len(self._records)

    def read(self, from_offset: int, limit: int = 1000) -> list[tuple[int, MetadataRecord]]:
        start = max(0, from_offset)
        return [(start + i, r) for i, r in enumerate(self._records[start:start + limit])]

    @property
    def committed_offset(self) -> int:
        return len(self._records)

    def close(self) -> None:
        self._fh.close()


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    partition: int
    replicas: tuple[str, ...]
    leader: str | None = None
    leader_epoch: int = 0
    partition_epoch: int = 0
    isr: tuple[str, ...] = ()

    def record(self) -> MetadataRecord:
        return {"type": "partition", "partition": self.partition, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "isr": list(self.isr)}

    def view(self) -> dict[str, Any]:
        return {"leader": self.leader, "leader_epoch": self.leader_epoch,
                "partition_epoch": self.partition_epoch, "isr": list(self.isr),
                "replicas": list(self.replicas)}


@dataclass(frozen=True, slots=True)
class BrokerMeta:
    node: str
    alive: bool = False
    incarnation: str = ""


class MetadataState:
    """Applies committed records in order; the same code on the controller and on brokers."""

    def __init__(self) -> None:
        self.offset = 0
        self.topic: str | None = None
        self.partitions: dict[int, PartitionMeta] = {}
        self.brokers: dict[str, BrokerMeta] = {}
        self.next_producer_id = 0

    def apply(self, offset: int, rec: MetadataRecord) -> int | None:
        """Apply one record; returns the partition it changed, if any."""
        if offset != self.offset:
            raise ValueError(f"metadata record at offset {offset}, expected {self.offset}")
        self.offset = offset + 1
        kind = rec.get("type")
        if kind == "topic":
            self.topic = str(rec["name"])
            for p, reps in rec["assignment"].items():
                pid = int(p)
                self.partitions[pid] = PartitionMeta(pid, tuple(reps), isr=tuple(reps))
            return None
        if kind == "register":
            node = str(rec["node"])
            self.brokers[node] = BrokerMeta(node, True, str(rec["incarnation"]))
            return None
        if kind == "fence":
            node = str(rec["node"])
            old = self.brokers.get(node, BrokerMeta(node))
            self.brokers[node] = replace(old, alive=False)
            return None
        if kind == "partition":
            pid = int(rec["partition"])
            old_p = self.partitions[pid]
            self.partitions[pid] = replace(old_p, leader=rec["leader"],
                                           leader_epoch=int(rec["leader_epoch"]),
                                           partition_epoch=int(rec["partition_epoch"]),
                                           isr=tuple(rec["isr"]))
            return pid
        if kind == "producer_id":
            self.next_producer_id = max(self.next_producer_id, int(rec["id"]) + 1)
            return None
        raise ValueError(f"unknown metadata record type {kind!r}")

    def alive(self, node: str) -> bool:
        b = self.brokers.get(node)
        return b is not None and b.alive

    def view(self) -> dict[str, Any]:
        return {"brokers": {n: {"alive": b.alive} for n, b in sorted(self.brokers.items())},
                "partitions": {str(p): m.view() for p, m in sorted(self.partitions.items())},
                "metadata_offset": self.offset}
