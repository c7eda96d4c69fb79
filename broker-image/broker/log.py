"""One replica's log on disk: segment files plus three small checkpoint files.

Layout of a partition directory (`<data_dir>/<topic>-<partition>/`):
- `<base offset, 20 digits>.log`: segments, one record a line: `offset epoch value`,
  followed by `producer_id producer_epoch sequence` for an idempotent producer's record
  and then `t` when it belongs to a transaction; a transaction's control marker is JSON;
  an internal topic's value is one line of JSON (`{...}`, to the end of the line);
- `hw`: the high-watermark checkpoint (written every
  replica.high.watermark.checkpoint.interval.ms and on clean shutdown);
- `leader-epoch`: lines `epoch start_offset`, written whenever it changes;
- `flushed`: the offset up to which the log was last fsync'ed; `lose-unflushed`
  cuts the log back to it, as an OS crash would.
Appends go to the OS page cache at once (a killed process loses nothing); they
reach the disk only on a flush (flush.messages / flush.ms / segment roll).
Checkpoint files are written atomically and fsync'ed, as Kafka's are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .producers import ProducerStates, Tag
from .txnindex import TxnIndex, parse_marker

# A record's value: an integer (the topic's records), or one line of JSON (an internal
# topic's records, e.g. a consumer group's state).
Value = int | str


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    epoch: int
    value: Value
    producer: Tag | None = None  # (producer id, producer epoch, sequence)
    txn: bool = False  # a transactional producer's record


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_int(path: Path, default: int = 0) -> int:
    try:
        return int(path.read_text().strip() or default)
    except (FileNotFoundError, ValueError):
        return default


def read_epochs(path: Path) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and all(p.lstrip("-").isdigit() for p in parts):
            out.append((int(parts[0]), int(parts[1])))
    return out


def segment_name(base: int) -> str:
    return f"{base:020d}.log"


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    segs = []
    for p in directory.glob("*.log"):
        if p.stem.isdigit():
            segs.append((int(p.stem), p))
    return sorted(segs)


class PartitionLog:
    """The records of one replica in memory, mirrored append-only to segment files."""

    def __init__(self, directory: Path, *, segment_bytes: int = 1 << 20) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        directory.mkdir(parents=True, exist_ok=True)
        self.epochs: list[int] = []
        self.values: list[Value] = []
        self.tags: list[Tag | None] = []
        self.txns: list[bool] = []
        self.producers = ProducerStates()  # follows every append; rebuilt on load, truncate
        self.txn_index = TxnIndex()  # likewise
        self.segments: list[int] = []  # base offsets
        self._fh: IO[bytes] | None = None
        self._seg_size = 0
        self._load()
        self.hw = min(read_int(self.dir / "hw"), self.leo)
        self.flushed = min(read_int(self.dir / "flushed"), self.leo)
        self.epoch_cache = [(e, s) for e, s in read_epochs(self.dir / "leader-epoch")
                            if s <= self.leo]
        self.unflushed = self.leo - self.flushed
        self._rebuild_states()

    def _rebuild_states(self) -> None:
        """Producer states and the transaction index, from the records in offset order."""
        self.producers.rebuild(())
        for o, (v, t) in enumerate(zip(self.values, self.tags, strict=True)):
            if t is not None:
                self.producers.observe(t, o)
            elif isinstance(v, str):
                m = parse_marker(v)
                if m is not None:
                    self.producers.fence(m[0], m[1])
        self.txn_index.rebuild((o, self.values[o], t[0] if t else None, self.txns[o])
                               for o, t in enumerate(self.tags))

    # -- loading --------------------------------------------------------------
    def _load(self) -> None:
        for base, path in list_segments(self.dir):
            if base != self.leo:  # a gap or overlap: nothing after it can be trusted
                path.unlink()
                continue
            self.segments.append(base)
            data = path.read_bytes()
            good = 0
            for line in data.split(b"\n")[:-1]:
                try:
                    off, ep, val, tag, txn = _parse_line(line)
                except (ValueError, IndexError, UnicodeDecodeError):
                    break
                if off != self.leo:
                    break
                self.epochs.append(ep)
                self.values.append(val)
                self.tags.append(tag)
                self.txns.append(txn)
                good += len(line) + 1
            if good != len(data):  # a torn tail from a crash mid-write
                with open(path, "r+b") as f:
                    f.truncate(good)
            self._seg_size = good
        if not self.segments:
            self.segments.append(0)
            (self.dir / segment_name(0)).touch()
            self._seg_size = 0

    # -- reading --------------------------------------------------------------
    @property
    def leo(self) -> int:
        return len(self.values)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache[-1][0] if self.epoch_cache else -1

    def read(self, offset: int, limit: int, upto: int | None = None) -> list[Record]:
        end = min(self.leo if upto is None else upto, offset + limit)
        return [Record(o, self.epochs[o], self.values[o], self.tags[o], self.txns[o])
                for o in range(max(offset, 0), end)]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-101/279): (largest epoch <= `epoch`, its end offset)."""
        found = -1
        for i, (e, _start) in enumerate(self.epoch_cache):
            if e > epoch:
                if found < 0:
                    return (-1, -1)
                return (found, self.epoch_cache[i][1])
            found = e
        return (found, self.leo) if found >= 0 else (-1, -1)

    # -- writing --------------------------------------------------------------
    def _open(self) -> IO[bytes]:
        if self._fh is None:
            self._fh = open(self.dir / segment_name(self.segments[-1]), "ab")  # noqa: SIM115
        return self._fh

    def append(self, entries: list[tuple[int, Value]],
               tags: list[Tag | None] | None = None, txns: list[bool] | None = None) -> int:
        """Append (epoch, value) pairs, each with its producer tag (or None) when `tags` is
        given and whether it is transactional when `txns` is; returns the first offset.
        Data reaches the OS at once."""
        first = self.leo
        if not entries:
            return first
        if self._seg_size >= self.segment_bytes:
            self._roll()
        lines = []
        off = first
        for i, (ep, val) in enumerate(entries):
            tag = tags[i] if tags is not None else None
            txn = bool(txns[i]) if txns is not None and tag is not None else False
            lines.append(_line(off, ep, val, tag, txn))
            self.epochs.append(ep)
            self.values.append(val)
            self.tags.append(tag)
            self.txns.append(txn)
            if tag is not None:
                self.producers.observe(tag, off)
            elif isinstance(val, str):
                m = parse_marker(val)
                if m is not None:
                    self.producers.fence(m[0], m[1])
            self.txn_index.observe(off, val, tag[0] if tag else None, txn)
            off += 1
        data = "".join(lines).encode()
        fh = self._open()
        fh.write(data)
        fh.flush()  # to the page cache: survives a process kill, not an OS crash
        self._seg_size += len(data)
        self.unflushed += len(entries)
        return first

    def _roll(self) -> None:
        """Start a new segment; the old one is fsync'ed, as Kafka flushes on roll."""
        self.flush()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self.segments.append(self.leo)
        (self.dir / segment_name(self.leo)).touch()
        self._seg_size = 0

    def assign_epoch(self, epoch: int, start: int) -> None:
        """Record that `epoch` starts at `start` (a new leader, or a follower's first record)."""
        if self.epoch_cache and self.epoch_cache[-1][0] >= epoch:
            return
        self.epoch_cache.append((epoch, start))
        self._write_epochs()

    def _write_epochs(self) -> None:
        write_atomic(self.dir / "leader-epoch",
                     "".join(f"{e} {s}\n" for e, s in self.epoch_cache))

    def truncate(self, offset: int) -> int:
        """Drop every record at or above `offset`; returns how many were dropped."""
        offset = max(0, offset)
        if offset >= self.leo:
            return 0
        dropped = self.leo - offset
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        del self.epochs[offset:]
        del self.values[offset:]
        del self.tags[offset:]
        del self.txns[offset:]
        self._rebuild_states()
        keep = [b for b in self.segments if b < offset] or [0]
        for base in self.segments:
            if base not in keep:
                (self.dir / segment_name(base)).unlink(missing_ok=True)
        self.segments = keep
        base = keep[-1]
        text = "".join(_line(o, self.epochs[o], self.values[o], self.tags[o], self.txns[o])
                       for o in range(base, offset))
        seg = self.dir / segment_name(base)
        tmp = seg.with_name(seg.name + ".tmp")
        tmp.write_bytes(text.encode())
        os.replace(tmp, seg)
        self._seg_size = len(text)
        self.hw = min(self.hw, offset)
        if self.flushed > offset:
            self.flushed = offset
            write_atomic(self.dir / "flushed", f"{offset}\n")
        self.unflushed = self.leo - self.flushed
        before = len(self.epoch_cache)
        self.epoch_cache = [(e, s) for e, s in self.epoch_cache if s < offset]
        if len(self.epoch_cache) != before:
            self._write_epochs()
        return dropped

    def flush(self) -> None:
        """fsync the log and record how far it is durable."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self.flushed != self.leo:
            self.flushed = self.leo
            write_atomic(self.dir / "flushed", f"{self.leo}\n")
        self.unflushed = 0

    def mark_written_back(self, offset: int) -> None:
        """The OS wrote the log back up to `offset` (emulated page-cache writeback)."""
        offset = min(offset, self.leo)
        if offset > self.flushed:
            self.flushed = offset
            write_atomic(self.dir / "flushed", f"{offset}\n")
            self.unflushed = self.leo - self.flushed

    def checkpoint_hw(self, hw: int | None = None) -> None:
        """Persist the HW (or `hw`, a value it had: the caller may run in another thread)."""
        write_atomic(self.dir / "hw", f"{self.hw if hw is None else hw}\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def dump_rows(self, node: str, key: int, leader_epoch: int) -> list[dict[str, Any]]:
        """This replica in replicas.jsonl shape: the summary line, then one line per record
        (a transaction's markers are not records: their offsets are gaps)."""
        rows: list[dict[str, Any]] = [{"node": node, "key": key, "hw": min(self.hw, self.leo),
                                       "leo": self.leo, "leader_epoch": leader_epoch}]
        rows.extend({"node": node, "key": key, "offset": o, "value": self.values[o],
                     "epoch": self.epochs[o]} for o in range(self.leo)
                    if isinstance(self.values[o], int))
        return rows


def _parse_line(line: bytes) -> tuple[int, int, Value, Tag | None, bool]:
    """`offset epoch value [producer_id producer_epoch sequence [t]]`; raises ValueError."""
    head = line.split(b" ", 2)
    if head[2][:1] == b"{":  # JSON runs to the end of the line
        return int(head[0]), int(head[1]), head[2].decode(), None, False
    parts = line.split()
    if len(parts) not in (3, 6, 7) or (len(parts) == 7 and parts[6] != b"t"):
        raise ValueError(f"{len(parts)} fields")
    tag = (int(parts[3]), int(parts[4]), int(parts[5])) if len(parts) >= 6 else None
    return int(parts[0]), int(parts[1]), int(parts[2]), tag, len(parts) == 7


def _line(offset: int, epoch: int, value: Value, tag: Tag | None, txn: bool = False) -> str:
    if tag is None:
        return f"{offset} {epoch} {value}\n"
    flag = " t" if txn else ""
    return f"{offset} {epoch} {value} {tag[0]} {tag[1]} {tag[2]}{flag}\n"


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return data_dir / f"{topic}-{partition}"


def list_partition_dirs(data_dir: Path) -> list[tuple[str, int, Path]]:
    """(topic, partition, dir) of every replica directory under data_dir."""
    out = []
    for p in sorted(data_dir.iterdir()) if data_dir.is_dir() else []:
        topic, sep, num = p.name.rpartition("-")
        if p.is_dir() and sep and num.isdigit() and not p.name.startswith("__"):
            out.append((topic, int(num), p))
    return sorted(out, key=lambda t: (t[0], t[1]))


def lose_unflushed(directory: Path) -> int:
    """Cut one replica back to its last flushed offset (and its checkpoints with it)."""
    log = PartitionLog(directory)
    flushed = log.flushed
    dropped = log.truncate(flushed)
    if read_int(directory / "hw") > flushed:
        write_atomic(directory / "hw", f"{flushed}\n")
    log.close()
    return dropped
