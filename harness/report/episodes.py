"""A key's lost acknowledged writes split into episodes, one per fault cycle that took them.

Why: a key can lose writes more than once (kip101-loss kills the leader every cycle and a
long-lived key loses the writes acknowledged in the second before each kill), and naming
only the first fault window blames one kill for the losses of all. Episodes split where
a fault window ends (a restart, a resume, a heal) between two lost acknowledgements of
the key, since a cycle closes there. Each episode has where its offsets were first
reused after its first loss (before the next episode's) and the fault windows in force
from its first lost acknowledgement to that reuse (or to its last loss when no offset
was reused); with none in force, the latest window before it. Neighbouring episodes
that name the same windows and the same reuse are one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.report.faults import FaultWindow
from harness.runfiles.walk import Acked

NS = 1e9


@dataclass(frozen=True, slots=True)
class Episode:
    """Some of a key's lost writes: how many, where, when, and the faults that took them."""

    lost: int
    offsets: tuple[int, int] | None  # lowest and highest known offset lost
    acked_s: tuple[float, float]  # first and last acknowledgement lost
    reuse: tuple[float, int] | None  # (time s, offset) where offsets were first reused
    faults: tuple[FaultWindow, ...]
    effect_s: float  # the reuse, else the last loss: a fault in force then is "during"


def reuse_points(acked: Acked | None, key: int) -> list[tuple[float, int]]:
    """(time s, offset) of each acknowledgement of `key` at an offset whose latest earlier
    acknowledgement held another value, by time; empty when no offset was reused."""
    if acked is None:
        return []
    sel = (acked.key == key) & (acked.offset >= 0)
    off, val, t = acked.offset[sel], acked.value[sel], acked.time_ns[sel]
    order = np.argsort(t, kind="stable")
    last: dict[int, int] = {}
    out = []
    for o, v, ti in zip(off[order].tolist(), val[order].tolist(), t[order].tolist(),
                        strict=True):
        if last.get(o, v) != v:
            out.append((ti / NS, o))
        last[o] = v
    return out


def preceding(windows: Sequence[FaultWindow], t_s: float) -> list[FaultWindow]:
    """The fault windows in force at t_s; if none, the latest one to start before it
    (with any other window in force at that one's start)."""
    t = t_s * NS
    now = [w for w in windows if w.start_ns <= t <= w.end_ns]
    if now:
        return now
    before = [w for w in windows if w.start_ns <= t]
    if not before:
        return []
    last = max(before, key=lambda w: w.start_ns)
    return [w for w in before if w.start_ns <= last.start_ns <= w.end_ns]


def _faults(windows: Sequence[FaultWindow], t0: float, t1: float) -> tuple[FaultWindow, ...]:
    """The windows in force at some moment of [t0, t1] s, else preceding(t1)."""
    inside = [w for w in windows if w.start_ns <= t1 * NS and w.end_ns >= t0 * NS]
    return tuple(inside or preceding(windows, t1))


def episodes(acked: Acked | None, key: int, values: frozenset[int],
             windows: Sequence[FaultWindow]) -> list[Episode]:
    """`key`'s lost writes (`values`, from report.losses) in episodes, by time."""
    if acked is None or not values:
        return []
    sel = (acked.key == key) & np.isin(acked.value, np.fromiter(values, np.int64))
    val, t, off = acked.value[sel], acked.time_ns[sel], acked.offset[sel]
    _, first = np.unique(val, return_index=True)  # a value counts once, as in losses
    t, off = t[first], off[first]
    order = np.argsort(t, kind="stable")
    t, off = t[order], off[order]
    if len(t) == 0:
        return []
    ends = np.sort(np.asarray([w.end_ns for w in windows], dtype=np.int64))
    cycle = np.searchsorted(ends, t, side="left")  # windows ended before each loss
    groups = np.split(np.arange(len(t)), np.flatnonzero(np.diff(cycle)) + 1)
    reuses = reuse_points(acked, key)
    raw: list[tuple[list[int], tuple[float, int] | None, tuple[FaultWindow, ...], float]] = []
    for i, g in enumerate(groups):
        t0, t1 = t[g[0]] / NS, t[g[-1]] / NS
        stop = t[groups[i + 1][0]] / NS if i + 1 < len(groups) else float("inf")
        reuse = next((r for r in reuses if t0 <= r[0] < stop), None)
        effect = reuse[0] if reuse else t1
        faults = _faults(windows, t0, effect)
        if raw and raw[-1][1] == reuse and raw[-1][2] == faults:
            raw[-1][0].extend(g.tolist())
            continue
        raw.append((g.tolist(), reuse, faults, effect))
    out = []
    for idx, reuse, faults, effect in raw:
        offs = off[idx]
        offs = offs[offs >= 0]
        out.append(Episode(len(idx), (int(offs.min()), int(offs.max())) if len(offs) else None,
                           (float(t[idx[0]] / NS), float(t[idx[-1]] / NS)), reuse, faults,
                           effect))
    return out
