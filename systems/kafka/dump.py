"""Every replica of the workload's topic on a node, read from disk with Kafka's own tools.

Records come from DumpLogSegments (`--print-data-log`, every segment of every
partition directory in one JVM); each partition's high watermark from the log
dir's replication-offset-checkpoint, its leader epoch from the partition's
leader-epoch-checkpoint. Rows follow HISTORY.md's replicas.jsonl: one summary
row per replica (hw, leo, leader_epoch), one row per record (offset, value,
epoch: the batch's partition leader epoch).
"""

from __future__ import annotations

import functools
import re
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from systems.kafka.config import TOOL_OPTS, TOPIC

DUMP_TIMEOUT_S = 300.0
_TOOLS = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")
_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?partitionLeaderEpoch: (-?\d+) "
                    r".*?isControl: (true|false)")
_RECORD = re.compile(r"\| offset: (\d+) .*payload: (.*)$")
# before 2.x: one line per record (message), no batch line and no leader epoch
_MESSAGE = re.compile(r"offset: (\d+) position: \d+ .*payload: (.*)$")
FORMATS = ("batch", "record-lines")  # systems/kafka/releases.py says which a release prints
_FLAGS = {"batch": (), "record-lines": ("--deep-iteration",)}  # 0.11 prints batches without
_DUMPING = re.compile(r"Dumping (.+)$")


class DumpError(RuntimeError):
    """A dump that cannot be read: names the node, the file and the line."""


@functools.cache
def dump_class(libs: Path) -> str:
    """DumpLogSegments' class in these jars (it moved to kafka-tools in 4.x)."""
    wanted = {c.replace(".", "/") + ".class": c for c in _TOOLS}
    for jar in sorted(libs.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as z:
            names = set(z.namelist())
        for path, cls in wanted.items():
            if path in names:
                return cls
    raise DumpError(f"no DumpLogSegments in {libs}")


def read_checkpoint(path: Path) -> list[list[str]]:
    """A Kafka checkpoint file (version, count, then entries) as split lines; [] if absent
    or empty (Kafka 4.x leaves a new replica's leader-epoch-checkpoint empty)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    if not lines:
        return []
    if len(lines) < 2:
        raise DumpError(f"{path}: not a checkpoint file (fewer than 2 lines)")
    count = int(lines[1])
    entries = [ln.split() for ln in lines[2:2 + count]]
    if len(entries) != count:
        raise DumpError(f"{path}: says {count} entries, holds {len(entries)}")
    return entries


def high_watermarks(data_dir: Path, topic: str = TOPIC) -> dict[int, int]:
    """partition -> HW from replication-offset-checkpoint."""
    return {int(e[1]): int(e[2])
            for e in read_checkpoint(data_dir / "replication-offset-checkpoint")
            if len(e) == 3 and e[0] == topic}


def leader_epoch(partition_dir: Path) -> int:
    """The latest epoch in leader-epoch-checkpoint (0 when none)."""
    entries = read_checkpoint(partition_dir / "leader-epoch-checkpoint")
    return max((int(e[0]) for e in entries), default=0)


def partition_dirs(data_dir: Path, topic: str = TOPIC) -> dict[int, Path]:
    out: dict[int, Path] = {}
    for d in data_dir.glob(f"{topic}-*"):
        suffix = d.name[len(topic) + 1:]
        if d.is_dir() and suffix.isdigit():
            out[int(suffix)] = d
    return out


@dataclass(slots=True)
class _Replica:
    records: list[tuple[int, int, int]] = field(default_factory=list)  # offset, value, epoch
    leo: int = 0


def parse_dump(text: str, node: str, fmt: str = "batch") -> dict[int, _Replica]:
    """DumpLogSegments output -> partition -> records and LEO. `fmt` "batch" (0.11 and
    later: a batch line with the partition leader epoch, then `| offset:` record lines) or
    "record-lines" (before 2.x: `offset: N position: P ... payload: V`, epoch 0; a
    transaction marker, `isTransactional: true` with no integer payload, is skipped)."""
    if fmt not in FORMATS:
        raise DumpError(f"{node}: no DumpLogSegments parser for format {fmt!r}")
    record = _RECORD if fmt == "batch" else _MESSAGE
    out: dict[int, _Replica] = {}
    rep: _Replica | None = None
    epoch = 0
    control = False
    for i, line in enumerate(text.splitlines(), 1):
        if m := _DUMPING.match(line):
            seg = Path(m[1].strip())
            key = int(seg.parent.name.rsplit("-", 1)[1])
            rep = out.setdefault(key, _Replica())
            rep.leo = max(rep.leo, int(seg.stem))
        elif fmt == "batch" and (m := _BATCH.search(line)):
            if rep is None:
                raise DumpError(f"{node}: dump line {i}: a batch before any 'Dumping' line")
            epoch, control = int(m[3]), m[4] == "true"
            rep.leo = max(rep.leo, int(m[2]) + 1)
        elif m := record.match(line):
            if rep is None:
                raise DumpError(f"{node}: dump line {i}: a record before any 'Dumping' line")
            if control:
                continue
            try:
                value = int(m[2].strip())
            except ValueError:
                if fmt == "record-lines" and "isTransactional: true" in line:
                    continue  # a commit or abort marker
                raise DumpError(f"{node}: dump line {i}: payload {m[2][:40]!r} is not an "
                                "integer (something other than the workload wrote here)") from None
            rep.records.append((int(m[1]), value, epoch))
            rep.leo = max(rep.leo, int(m[1]) + 1)
    return out


def replica_rows(node: str, data_dir: Path, dump_text: str,
                 topic: str = TOPIC, fmt: str = "batch") -> list[dict[str, Any]]:
    """replicas.jsonl rows for one node: a summary per replica, then its records."""
    parsed = parse_dump(dump_text, node, fmt)
    hws = high_watermarks(data_dir, topic)
    rows: list[dict[str, Any]] = []
    for key, pdir in sorted(partition_dirs(data_dir, topic).items()):
        rep = parsed.get(key, _Replica())
        leo = max([rep.leo, *(o + 1 for o, _v, _e in rep.records)])
        hw = min(hws.get(key, 0), leo)  # a checkpoint can outlive a truncation
        rows.append({"node": node, "key": key, "hw": hw, "leo": leo,
                     "leader_epoch": leader_epoch(pdir)})
        rows.extend({"node": node, "key": key, "offset": o, "value": v, "epoch": e}
                    for o, v, e in rep.records)
    return rows


def dump_command(java_cmd: Sequence[str], libs: Path, segments: Sequence[Path],
                 flags: Sequence[str] = ()) -> list[str]:
    """`java_cmd` is java and its options up to the classpath: the main class follows."""
    return [*java_cmd, "-cp", f"{libs}/*", dump_class(libs),
            "--files", ",".join(str(s) for s in segments), "--print-data-log", *flags]


def dump_node(node: str, data_dir: Path, libs: Path, *, java: str = "java",
              topic: str = TOPIC, fmt: str = "batch") -> list[dict[str, Any]]:
    """Every replica of `topic` under `data_dir`, as replicas.jsonl rows."""
    return dump_nodes({node: data_dir}, libs, java=java, topic=topic, fmt=fmt)


def dump_nodes(data_dirs: Mapping[str, Path], libs: Path, *, java: str = "java",
               topic: str = TOPIC, fmt: str = "batch",
               jvm: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Every replica of `topic` on each node (node -> its data dir on this machine), as
    replicas.jsonl rows in the nodes' order: one DumpLogSegments JVM reads every node's
    segments (a JVM's start is most of a dump's time), its output split by the `Dumping`
    line of each file, which names the file and so the node."""
    segments = {node: sorted(p for d in partition_dirs(data_dir, topic).values()
                             for p in d.glob("*.log"))
                for node, data_dir in data_dirs.items()}
    texts = dict.fromkeys(data_dirs, "")
    every = [seg for segs in segments.values() for seg in segs]
    if every:
        cmd = dump_command([java, *TOOL_OPTS, *jvm], libs, every, _FLAGS.get(fmt, ()))
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S,
                              check=False)
        if done.returncode != 0:
            raise DumpError(f"{', '.join(data_dirs)}: DumpLogSegments exited "
                            f"{done.returncode}: {(done.stderr or done.stdout).strip()[-1000:]}")
        texts = split_by_node(done.stdout, segments)
    rows: list[dict[str, Any]] = []
    for node, data_dir in data_dirs.items():
        text = texts[node]
        if "payload: " in text and not any(r.records for r in parse_dump(text, node,
                                                                           fmt).values()):
            raise DumpError(f"{node}: DumpLogSegments printed records that the {fmt!r} parser "
                            "does not read: the release table's dump format is wrong")
        rows.extend(replica_rows(node, data_dir, text, topic, fmt))
    return rows


def split_by_node(text: str, segments: Mapping[str, Sequence[Path]]) -> dict[str, str]:
    """One dump of several nodes' files -> node -> its part (each file's part starts at the
    `Dumping <file>` line that names it); DumpError for a file no node owns."""
    owner = {str(seg): node for node, segs in segments.items() for seg in segs}
    parts: dict[str, list[str]] = {node: [] for node in segments}
    current: list[str] | None = None
    for line in text.splitlines():
        if m := _DUMPING.match(line):
            node = owner.get(m[1].strip())
            if node is None:
                raise DumpError(f"DumpLogSegments dumped {m[1].strip()!r}, a file of no node")
            current = parts[node]
        if current is not None:
            current.append(line)
    return {node: "\n".join(lines) for node, lines in parts.items()}
