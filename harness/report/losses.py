"""How much was lost, per key, from the full sets: every acknowledged send of the history
against what polls read and what the replicas hold after the final heal.

results.json keeps at most 32 examples of each anomaly, which cannot say how many writes
a key lost or where; the counts here use the definitions of shared/HISTORY.md
(`replica-lost-write`: on no replica; `lost-write`: never read although an ok poll read
past its offset) over every acknowledged send.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.runfiles.walk import Acked

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class KeyLoss:
    """One key's lost acknowledged writes: how many, which offsets, when acknowledged."""

    key: int
    lost: int
    offsets: tuple[int, int] | None  # lowest and highest known offset lost
    acked_s: tuple[float, float]  # first and last acknowledgement time lost
    read_past: int  # of them, never read although reads went past them
    values: frozenset[int] = field(default_factory=frozenset)

    @property
    def where(self) -> str:
        """"offset 8" or "offsets 0-2047" ("" when no offset is known)."""
        if self.offsets is None:
            return ""
        lo, hi = self.offsets
        return f"offset {lo}" if lo == hi else f"offsets {_span(lo, hi)}"

    def words(self) -> str:
        where = f", {self.where}" if self.where else ""
        a, b = self.acked_s
        return (f"key {self.key}: {self.lost:,} lost{where}, acknowledged "
                f"{_span(round(a, 1), round(b, 1))} s")


@dataclass(frozen=True, slots=True)
class Losses:
    """What the report says of lost writes. `basis` is how a write counts as lost:
    "replicas" (on no replica) when replicas.jsonl exists, else "reads" (lost-write)."""

    acked: int  # acknowledged writes (distinct values of ok sends)
    basis: str
    lost: int
    read_past: int  # lost-write: never read although reads went past
    read_past_of_lost: int  # of `lost`, never read although reads went past
    keys: list[KeyLoss]  # ranked: most lost first

    @property
    def share(self) -> float:
        return self.lost / self.acked if self.acked else 0.0

    def values_of(self, key: int) -> frozenset[int]:
        for k in self.keys:
            if k.key == key:
                return k.values
        return frozenset()


def _span(a: float, b: float) -> str:
    return f"{a:g}" if a == b else f"{a:g}-{b:g}"


def replica_values(replicas: Sequence[dict[str, Any]] | None) -> I64 | None:
    """The distinct values any replica holds (record lines of replicas.jsonl), or None."""
    if replicas is None:
        return None
    vals = [r["value"] for r in replicas
            if "offset" in r and type(r.get("value")) is int]
    return np.unique(np.asarray(vals, dtype=np.int64))


def losses(acked: Acked | None, replicas: Sequence[dict[str, Any]] | None) -> Losses:
    """Lost acknowledged writes from the full sets (see the module docstring)."""
    if acked is None or len(acked.value) == 0:
        return Losses(0, "replicas" if replicas is not None else "reads", 0, 0, 0, [])
    val, key, off, t = acked.value, acked.key, acked.offset, acked.time_ns
    _, first = np.unique(val, return_index=True)  # a value counts once
    val, key, off, t = val[first], key[first], off[first], t[first]
    unread = ~np.isin(val, acked.read_values)
    ukeys = np.unique(key)
    rmax = np.asarray([acked.read_max.get(int(k), -1) for k in ukeys.tolist()], dtype=np.int64)
    past = rmax[np.searchsorted(ukeys, key)]
    read_past = unread & (off >= 0) & (off < past)
    held = replica_values(replicas)
    lost = ~np.isin(val, held) if held is not None else read_past
    rows = []
    for k in np.unique(key[lost]).tolist():
        sel = lost & (key == k)
        offs = off[sel]
        offs = offs[offs >= 0]
        ts = t[sel] / 1e9
        rows.append(KeyLoss(key=int(k), lost=int(sel.sum()),
                            offsets=(int(offs.min()), int(offs.max())) if len(offs) else None,
                            acked_s=(float(ts.min()), float(ts.max())),
                            read_past=int((sel & read_past).sum()),
                            values=frozenset(val[sel].tolist())))
    rows.sort(key=lambda r: (-r.lost, r.key))
    return Losses(acked=len(val), basis="replicas" if held is not None else "reads",
                  lost=int(lost.sum()), read_past=int(read_past.sum()),
                  read_past_of_lost=int((lost & read_past).sum()), keys=rows)


def safety_line(x: Losses) -> str:
    """The verdict box's sentence of how much was lost, with the amount."""
    if x.acked == 0:
        return "No send was acknowledged: nothing could be lost."
    if x.lost == 0 and x.read_past == 0:
        where = "every one is on some replica and none was skipped by later reads" \
            if x.basis == "replicas" else "none was skipped by later reads"
        return f"None of {x.acked:,} acknowledged writes was lost: {where}."
    on = f"on {len(x.keys)} key{'s' if len(x.keys) != 1 else ''}"
    pct = f"{100 * x.share:.1f} %"
    if x.basis == "replicas":
        head = (f"{x.lost:,} of {x.acked:,} acknowledged writes ({pct}) are on no "
                f"replica, {on}")
        if x.lost == 0:
            return (f"Every acknowledged write is on some replica, yet {x.read_past:,} were "
                    "never read although later reads went past them.")
        n = x.read_past_of_lost
        tail = f"; {n:,} of them {'was' if n == 1 else 'were'} never read although later " \
               "reads went past them"
        other = x.read_past - x.read_past_of_lost
        if other:
            tail += f" (and {other:,} that a replica holds)"
        return head + tail + "."
    return (f"{x.lost:,} of {x.acked:,} acknowledged writes ({pct}) were never read although "
            f"later reads went past them, {on} (no replicas.jsonl: losses seen by reads only).")


@dataclass(frozen=True, slots=True)
class ReplicaLoss:
    """What each replica of a key that lost acknowledged writes holds."""

    loss: KeyLoss
    nodes: list[tuple[str, str]]  # node, what it holds in words


def replica_losses(replicas: Sequence[dict[str, Any]] | None, x: Losses) -> list[ReplicaLoss]:
    """For every key that lost acknowledged writes: each replica's hw, leo and epoch, and
    how many records it holds inside the lost offsets (other values than those lost)."""
    if not replicas or not x.keys:
        return []
    want = {k.key: k for k in x.keys}
    summary: dict[int, dict[str, dict[str, Any]]] = {}
    held: dict[int, dict[str, list[int]]] = {}
    for r in replicas:
        k = r.get("key")
        if k not in want:
            continue
        node = str(r.get("node"))
        if "offset" in r:
            if type(r["offset"]) is int:
                held.setdefault(k, {}).setdefault(node, []).append(r["offset"])
        else:
            summary.setdefault(k, {})[node] = r
    out = []
    for k, loss in want.items():
        rows = []
        for node in sorted(set(summary.get(k, {})) | set(held.get(k, {}))):
            s = summary.get(k, {}).get(node, {})
            offs = held.get(k, {}).get(node, [])
            words = (f"hw {s.get('hw', '?')}, leo {s.get('leo', '?')}, epoch "
                     f"{s.get('leader_epoch', '?')}; {len(offs):,} records")
            if loss.offsets is not None:
                lo, hi = loss.offsets
                inside = sum(1 for o in offs if lo <= o <= hi)
                words += f", {inside:,} of them at offsets {_span(lo, hi)} (other values)"
            rows.append((node, words))
        out.append(ReplicaLoss(loss, rows))
    return out
