"""`lose-unflushed` on Kafka: a stopped node's logs cut back to what Kafka had flushed.

A power loss keeps what reached the disk and loses the page cache. Kafka writes
its logs through the page cache and fsyncs only when its flush policy says so
(by default: when a segment rolls); after each fsync it advances the log's
*recovery point*, and it writes every log's recovery point to the log dir's
`recovery-point-offset-checkpoint` (every `log.flush.offset.checkpoint.interval.ms`,
500 ms in the harness's server.properties). So for each partition folder of the
log dir (`<topic>-<n>`, internal topics too) the cut is:

- the recovery point R: the checkpoint's entry for the partition, 0 if it has none
  (a log created since the last checkpoint has never been flushed);
- the segment holding R (the last whose base offset is ≤ R) keeps its batches that
  end below R and loses the rest of its `.log`; its `.index`, `.timeindex` and
  `.txnindex` keep their entries below R (a power loss gives back a preallocated
  index's old zeros; Kafka rebuilds the index of every segment past R anyway);
- the segments after it (base offset > R) are deleted, all their files.

Left alone: the KRaft metadata log (`__cluster_metadata-0`: the Raft client fsyncs
it before a write counts), the checkpoint files themselves and producer-state
snapshots (Kafka writes them with an fsync; it truncates the leader-epoch cache and
drops snapshots past the new log end when it loads the log), and everything of a
partition below R. The checkpoint may lag the flushes by up to its interval, so
with a flush policy that fsyncs every message the cut can take up to that much
more than a power loss would; with Kafka's default it takes exactly the writes
that were never fsynced. A real machine's OS also writes dirty pages back on its
own within ~30 s, which this cut (the worst case a power loss allows) ignores.

The cut is planned from the files' bytes alone (`plan`) and applied with two
operations any host has (truncate to a size, delete), so a shell host applies the
same plan with `truncate -s` and `rm -f` (see `shell_commands`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
METADATA_DIR = "__cluster_metadata-0"
# entry size, where its relative offset sits: (offset, position); (timestamp, offset)
INDEX_ENTRIES = {".index": (8, 0), ".timeindex": (12, 8)}
TXN_ENTRY_BYTES = 34  # version, producer id, first, last, last stable offsets
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_SEGMENT = re.compile(r"(\d{20})\.log")


@dataclass(frozen=True, slots=True)
class PartitionCut:
    """One partition's cut: its recovery point, the records and files it loses."""

    partition: str
    recovery_point: int
    log_end: int            # the offset after the last batch on disk before the cut
    truncate: tuple[tuple[str, int], ...] = ()  # (file relative to the log dir, new size)
    delete: tuple[str, ...] = ()
    cut_bytes: tuple[tuple[str, int], ...] = ()  # (file, bytes it loses): the evidence

    @property
    def dropped(self) -> int:
        return max(0, self.log_end - self.recovery_point)


@dataclass(frozen=True, slots=True)
class Plan:
    cuts: tuple[PartitionCut, ...] = field(default=())

    @property
    def dropped(self) -> dict[str, int]:
        return {c.partition: c.dropped for c in self.cuts if c.dropped}

    @property
    def cut_bytes(self) -> dict[str, int]:
        """Each file the cut shortens or deletes, relative to the log dir, and the bytes it
        loses (a fault's evidence: HISTORY.md's `evidence`)."""
        return {f: n for c in self.cuts for f, n in c.cut_bytes}


def recovery_points(data_dir: Path) -> dict[str, int]:
    """'topic-n' -> recovery point, from the log dir's checkpoint ({} if there is none)."""
    try:
        lines = (data_dir / RECOVERY_CHECKPOINT).read_text().splitlines()
    except FileNotFoundError:
        return {}
    out: dict[str, int] = {}
    for line in lines[2:2 + int(lines[1])] if len(lines) >= 2 else ():
        topic, part, offset = line.split()
        out[f"{topic}-{part}"] = int(offset)
    return out


def batches(data: bytes) -> Iterable[tuple[int, int]]:
    """(byte position after the entry, offset after its last record) of each whole entry of
    a segment: v2 record batches (base offset + last offset delta) and v0/v1 message sets
    (whose offset field is the last inner offset). A torn tail ends the walk."""
    pos = 0
    while pos + 17 <= len(data):
        base, size = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + size
        if size <= 0 or end > len(data):
            return
        magic = data[pos + 16]
        last = base + struct.unpack_from(">i", data, pos + 23)[0] if magic >= 2 else base
        yield end, last + 1
        pos = end


def _kept_entries(data: bytes, entry: int, base: int, cut: int, offset_at: int) -> int:
    """How many leading index entries point below `cut` (relative offsets at `offset_at`)."""
    n = 0
    while (n + 1) * entry <= len(data):
        raw = data[n * entry:(n + 1) * entry]
        if not any(raw) or base + struct.unpack_from(">i", raw, offset_at)[0] >= cut:
            break  # a preallocated index's zeros, or past the cut
        n += 1
    return n


def _kept_txn_entries(data: bytes, cut: int) -> int:
    n = 0
    while (n + 1) * TXN_ENTRY_BYTES <= len(data):
        last = struct.unpack_from(">q", data, n * TXN_ENTRY_BYTES + 2 + 8 + 8)[0]
        if last >= cut:
            break
        n += 1
    return n


def plan_partition(data_dir: Path, part: Path, recovery_point: int) -> PartitionCut:
    segments = sorted((int(m[1]), p) for p in part.iterdir() if (m := _SEGMENT.fullmatch(p.name)))
    rel = part.name
    if not segments:
        return PartitionCut(rel, recovery_point, recovery_point)
    keep = max([i for i, (base, _) in enumerate(segments) if base <= recovery_point] or [0])
    truncate: list[tuple[str, int]] = []
    delete: list[str] = []
    lost: list[tuple[str, int]] = []
    log_end = recovery_point

    def shorten(path: Path, old: int, new: int) -> None:
        if new < old:
            truncate.append((f"{rel}/{path.name}", new))
            lost.append((f"{rel}/{path.name}", old - new))

    for i, (base, log) in enumerate(segments):
        data = log.read_bytes()
        ends = list(batches(data))
        if ends:
            log_end = max(log_end, ends[-1][1])
        if i < keep:
            continue
        stem = log.name[:-len(".log")]
        if i > keep:
            for p in sorted(part.glob(f"{stem}.*")):
                if p.suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    delete.append(f"{rel}/{p.name}")
                    if size := p.stat().st_size:
                        lost.append((f"{rel}/{p.name}", size))
            continue
        shorten(log, len(data), max([end for end, nxt in ends if nxt <= recovery_point] or [0]))
        for suffix, (entry, offset_at) in INDEX_ENTRIES.items():
            idx = part / f"{stem}{suffix}"
            if idx.exists():
                raw = idx.read_bytes()
                n = _kept_entries(raw, entry, base, recovery_point, offset_at)
                shorten(idx, len(raw), n * entry)
        txn = part / f"{stem}.txnindex"
        if txn.exists():
            raw = txn.read_bytes()
            shorten(txn, len(raw), _kept_txn_entries(raw, recovery_point) * TXN_ENTRY_BYTES)
    return PartitionCut(rel, recovery_point, log_end, tuple(truncate), tuple(delete),
                        tuple(lost))


def plan(data_dir: Path, *, metadata: bool = False) -> Plan:
    """The cut of every partition folder in a stopped node's log dir (the metadata log's
    too only when `metadata`)."""
    points = recovery_points(data_dir)
    cuts = []
    for part in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        if not _PARTITION_DIR.fullmatch(part.name) or part.name.endswith("-delete"):
            continue
        if part.name == METADATA_DIR and not metadata:
            continue
        cuts.append(plan_partition(data_dir, part, points.get(part.name, 0)))
    return Plan(tuple(cuts))


def apply(data_dir: Path, p: Plan) -> None:
    """Carry the plan out on this machine."""
    for c in p.cuts:
        for rel, size in c.truncate:
            with open(data_dir / rel, "r+b") as f:
                f.truncate(size)
        for rel in c.delete:
            (data_dir / rel).unlink(missing_ok=True)


def shell_commands(data_dir: str, p: Plan) -> list[str]:
    """The plan as shell commands for a host reached by a shell (paths quoted)."""
    import shlex

    out: list[str] = []
    for c in p.cuts:
        out += [f"truncate -s {size} {shlex.quote(f'{data_dir}/{rel}')}"
                for rel, size in c.truncate]
        out += [f"rm -f {shlex.quote(f'{data_dir}/{rel}')}" for rel in c.delete]
    return out


def fetch_patterns(partitions: Sequence[str] = ("*",)) -> list[str]:
    """What a plan reads, as globs under the log dir (for a copy from a shell host)."""
    return [RECOVERY_CHECKPOINT] + [f"{p}-*/*.{ext}" for p in partitions
                                    for ext in ("log", "index", "timeindex", "txnindex")]


def lose_unflushed(data_dir: Path, *, metadata: bool = False) -> Plan:
    """Plan and apply the cut on this machine; the plan says what each partition lost."""
    p = plan(data_dir, metadata=metadata)
    apply(data_dir, p)
    return p
