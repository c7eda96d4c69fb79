"""Durable quorum state (epoch, vote, leader), log and snapshot: a file store with fsync and an
in-memory one for the simulator. The node never writes itself: it returns PersistOps, and the host
applies them (in order, before sending that step's messages)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .log import RaftLog
from .messages import (
    Entry,
    Snapshot,
    entry_from_dict,
    entry_to_dict,
    snapshot_from_dict,
    snapshot_to_dict,
)


@dataclass(frozen=True)
class SaveQuorumState:
    epoch: int
    voted_for: str | None
    leader: str | None


@dataclass(frozen=True)
class AppendEntries:
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class TruncateLog:
    end_offset: int


@dataclass(frozen=True)
class SaveSnapshot:
    """Store the snapshot and drop log entries before its end offset."""

    snapshot: Snapshot


PersistOp = SaveQuorumState | AppendEntries | TruncateLog | SaveSnapshot


@dataclass(frozen=True)
class Persisted:
    """What a node finds on restart."""

    epoch: int = 0
    voted_for: str | None = None
    leader: str | None = None
    snapshot: Snapshot | None = None
    entries: tuple[Entry, ...] = ()


class Storage(Protocol):
    def load(self) -> Persisted: ...
    def apply(self, ops: tuple[PersistOp, ...]) -> None: ...


class StorageError(Exception):
    """Stored Raft state that cannot be read; the text names the file."""


@dataclass
class MemoryStorage:
    """Durable across simulated crashes: whatever `apply` stored survives; nothing else does."""

    state: Persisted = field(default_factory=Persisted)

    def load(self) -> Persisted:
        return self.state

    def apply(self, ops: tuple[PersistOp, ...]) -> None:
        s = self.state
        entries = list(s.entries)
        epoch, voted, leader, snap = s.epoch, s.voted_for, s.leader, s.snapshot
        for op in ops:
            if isinstance(op, SaveQuorumState):
                epoch, voted, leader = op.epoch, op.voted_for, op.leader
            elif isinstance(op, AppendEntries):
                entries.extend(op.entries)
            elif isinstance(op, TruncateLog):
                entries = [e for e in entries if e.offset < op.end_offset]
            else:
                snap = op.snapshot
                entries = [e for e in entries if e.offset >= snap.end_offset]
        self.state = Persisted(epoch, voted, leader, snap, tuple(entries))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class FileStorage:
    """quorum-state.json and snapshot.json (atomic replace + fsync), log.jsonl (append + fsync).

    A torn last log line (a crash mid-append) is dropped on load, as Kafka drops a torn batch.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.quorum_path = self.dir / "quorum-state.json"
        self.snapshot_path = self.dir / "snapshot.json"
        self.log_path = self.dir / "log.jsonl"
        self._loaded: Persisted | None = None

    def load(self) -> Persisted:
        epoch, voted, leader = 0, None, None
        if self.quorum_path.exists():
            try:
                q = json.loads(self.quorum_path.read_text())
                epoch, voted, leader = int(q["epoch"]), q.get("voted_for"), q.get("leader")
            except (ValueError, KeyError, TypeError) as exc:
                raise StorageError(f"{self.quorum_path}: unreadable quorum state: {exc}") from exc
        snap = None
        if self.snapshot_path.exists():
            try:
                snap = snapshot_from_dict(json.loads(self.snapshot_path.read_text()))
            except ValueError as exc:
                raise StorageError(f"{self.snapshot_path}: unreadable snapshot: {exc}") from exc
        entries = self._read_log(snap)
        self._loaded = Persisted(epoch, voted, leader, snap, tuple(entries))
        return self._loaded

    def _read_log(self, snap: Snapshot | None) -> list[Entry]:
        if not self.log_path.exists():
            return []
        entries: list[Entry] = []
        raw = self.log_path.read_bytes()
        lines = raw.split(b"\n")
        for n, line in enumerate(lines, 1):
            if not line:
                continue
            try:
                e = entry_from_dict(json.loads(line), f"{self.log_path}:{n}")
            except ValueError as exc:
                if n >= len(lines) - 1:  # torn tail: the crash interrupted this append
                    break
                raise StorageError(f"{self.log_path}:{n}: corrupt log line: {exc}") from exc
            entries.append(e)
        start = 0 if snap is None else snap.end_offset
        entries = [e for e in entries if e.offset >= start]
        try:
            RaftLog(snap, entries)
        except ValueError as exc:
            raise StorageError(f"{self.log_path}: {exc}") from exc
        # rewrite without the torn tail / compacted prefix so appends continue cleanly
        self._rewrite_log(entries)
        return entries

    def _rewrite_log(self, entries: list[Entry]) -> None:
        data = b"".join(json.dumps(entry_to_dict(e)).encode() + b"\n" for e in entries)
        _write_atomic(self.log_path, data)

    def apply(self, ops: tuple[PersistOp, ...]) -> None:
        if self._loaded is None:
            self.load()
        for op in ops:
            if isinstance(op, SaveQuorumState):
                doc = {"epoch": op.epoch, "voted_for": op.voted_for, "leader": op.leader}
                _write_atomic(self.quorum_path, json.dumps(doc).encode())
            elif isinstance(op, AppendEntries):
                with open(self.log_path, "ab") as f:
                    for e in op.entries:
                        f.write(json.dumps(entry_to_dict(e)).encode() + b"\n")
                    f.flush()
                    os.fsync(f.fileno())
            elif isinstance(op, TruncateLog):
                keep = [e for e in self._read_log_fast() if e.offset < op.end_offset]
                self._rewrite_log(keep)
            else:
                doc_s = json.dumps(snapshot_to_dict(op.snapshot)).encode()
                _write_atomic(self.snapshot_path, doc_s)
                keep = [e for e in self._read_log_fast() if e.offset >= op.snapshot.end_offset]
                self._rewrite_log(keep)

    def _read_log_fast(self) -> list[Entry]:
        if not self.log_path.exists():
            return []
        return [
            entry_from_dict(json.loads(line), str(self.log_path))
            for line in self.log_path.read_bytes().split(b"\n")
            if line
        ]
