"""The lose-unflushed cut on a log dir laid out as Kafka lays it out (no JVM): which bytes
of which segment and index go, which segments are deleted, what is never touched."""

from __future__ import annotations

import struct
from pathlib import Path

from systems.kafka import unflushed


def _batch(base: int, records: int, size: int = 100) -> bytes:
    """A v2 record batch header (base offset, length, epoch, magic 2, crc, attributes,
    last offset delta) padded to `size` bytes."""
    head = struct.pack(">qiibIhi", base, size - 12, 0, 2, 0, 0, records - 1)
    return head + bytes(size - len(head))


def _segment(part: Path, base: int, batches: list[tuple[int, int]]) -> None:
    stem = f"{base:020d}"
    (part / f"{stem}.log").write_bytes(b"".join(_batch(b, n) for b, n in batches))
    pos = 0
    idx = b""
    for b, _ in batches:  # (relative offset, position) of each batch but the first (Kafka
        if pos:           # indexes a batch once 4 KiB were written since the last entry)
            idx += struct.pack(">ii", b - base, pos)
        pos += 100
    (part / f"{stem}.index").write_bytes(idx + bytes(80))  # preallocated zeros after
    (part / f"{stem}.timeindex").write_bytes(b"".join(
        struct.pack(">qi", 1000 + b, b + n - 1 - base) for b, n in batches))
    (part / f"{stem}.txnindex").write_bytes(b"")


def test_cut_to_the_recovery_point(tmp_path: Path) -> None:
    part = tmp_path / "undertow-0"
    part.mkdir()
    _segment(part, 0, [(0, 5), (5, 5)])            # offsets 0-9
    _segment(part, 10, [(10, 3), (13, 4), (17, 3)])  # 10-19, R = 13 falls here
    _segment(part, 20, [(20, 5)])                   # 20-24: after R, deleted
    (part / "00000000000000000020.snapshot").write_bytes(b"x")
    other = tmp_path / "undertow-1"
    other.mkdir()
    _segment(other, 0, [(0, 2)])                    # not in the checkpoint: R = 0
    meta = tmp_path / unflushed.METADATA_DIR
    meta.mkdir()
    _segment(meta, 0, [(0, 4)])
    (tmp_path / unflushed.RECOVERY_CHECKPOINT).write_text("0\n1\nundertow 0 13\n")

    p = unflushed.lose_unflushed(tmp_path)

    assert p.dropped == {"undertow-0": 25 - 13, "undertow-1": 2}
    s10, s20, s0 = "undertow-0/00000000000000000010", "undertow-0/00000000000000000020", \
        "undertow-1/00000000000000000000"
    assert p.cut_bytes == {  # the bytes each file lost: the fault's evidence
        f"{s10}.log": 200, f"{s10}.index": 2 * 8 + 80, f"{s10}.timeindex": 2 * 12,
        f"{s20}.log": 100, f"{s20}.index": 80, f"{s20}.timeindex": 12,
        f"{s0}.log": 100, f"{s0}.index": 80, f"{s0}.timeindex": 12}
    assert (part / "00000000000000000000.log").stat().st_size == 200  # below R: kept
    assert (part / "00000000000000000010.log").stat().st_size == 100  # batch 10-12 only
    assert (part / "00000000000000000000.index").read_bytes()[:8] == struct.pack(">ii", 5, 100)
    assert (part / "00000000000000000010.index").read_bytes() == b""  # 13 and 17 go
    assert (part / "00000000000000000010.timeindex").stat().st_size == 12
    assert not list(part.glob("00000000000000000020.*log")) and \
        not (part / "00000000000000000020.index").exists()
    assert (part / "00000000000000000020.snapshot").exists()  # Kafka drops it on load
    assert (other / "00000000000000000000.log").stat().st_size == 0
    assert (meta / "00000000000000000000.log").stat().st_size == 100  # never cut
    assert unflushed.plan(tmp_path).dropped == {}  # idempotent


def test_a_shell_host_gets_the_same_plan_as_commands(tmp_path: Path) -> None:
    part = tmp_path / "undertow-3"
    part.mkdir()
    _segment(part, 0, [(0, 2), (2, 2)])
    (tmp_path / unflushed.RECOVERY_CHECKPOINT).write_text("0\n1\nundertow 3 2\n")
    cmds = unflushed.shell_commands("/data dir", unflushed.plan(tmp_path))
    assert "truncate -s 100 '/data dir/undertow-3/00000000000000000000.log'" in cmds
    assert all(c.startswith(("truncate -s ", "rm -f ")) for c in cmds)
