"""Explanations grouped by cause: the anomalies of a run as a few events, not per type.

Why: a run that lost writes reports them under several names at once (replica-lost-write,
lost-write, inconsistent-offsets, nonmonotonic-send) and, because offsets were reused,
cycles whose strongly connected group spans most of the history. Listed per type, the
first thing a reader sees is a symptom. Here anomalies that share a key go under one
event per key, built from the full sets (report.losses), with the point where the key's
offsets were first reused (an offset acknowledged again with another value, from the
history's acknowledged sends) and the fault windows that immediately precede it. Keys
with anomalies but no lost write get a generic event per time window with counts by
type. A cycle example whose group is larger than BIG_COMPONENT operations while its keys
lost writes is labelled a consequence of the loss, not a separate finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.report.faults import ALL_NODES, FaultWindow
from harness.report.losses import KeyLoss, Losses
from harness.report.sections import AnomalyType
from harness.runfiles.walk import Acked

BIG_COMPONENT = 300  # a strongly connected group larger than this is a consequence
WINDOW_S = 5.0  # examples of one key closer than this in time share a generic event
NS = 1e9


@dataclass(frozen=True, slots=True)
class Event:
    """One explanation: a key (or None), its time span, its sentence and its examples."""

    key: int | None
    start_s: float
    sentence: str
    lost: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # anomaly type -> examples here
    examples: list[tuple[str, int]] = field(default_factory=list)  # (type, 1-based n)


@dataclass(frozen=True, slots=True)
class Causes:
    events: list[Event]
    notes: dict[tuple[str, int], str]  # (type, n) -> a label for that example


def _span(a: float, b: float, fmt: str = "{:.1f}") -> str:
    x, y = fmt.format(a), fmt.format(b)
    return x if x == y else f"{x}-{y}"


def reuse_point(acked: Acked | None, key: int) -> tuple[float, int] | None:
    """(time s, offset) of the first acknowledgement of `key` at an offset an earlier
    acknowledgement already held with another value; None when no offset was reused."""
    if acked is None:
        return None
    sel = (acked.key == key) & (acked.offset >= 0)
    off, val, t = acked.offset[sel], acked.value[sel], acked.time_ns[sel]
    order = np.argsort(t, kind="stable")
    first: dict[int, int] = {}
    for o, v, ti in zip(off[order].tolist(), val[order].tolist(), t[order].tolist(),
                        strict=True):
        if first.setdefault(o, v) != v:
            return ti / NS, o
    return None


def fault_words(w: FaultWindow, during: bool = False) -> str:
    """"n2 was killed at 18.1 s and restarted at 21.3 s", in the fault's own verbs;
    during: "n2 was killed at 18.1 s (restarted at 21.3 s)", for what happened before
    the restart."""
    s, e = w.start_ns / NS, w.end_ns / NS
    who = "all nodes" if w.node == ALL_NODES else w.node
    verbs = {"kill": ("killed", "restarted"), "pause": ("paused", "resumed")}.get(w.kind)
    if verbs:
        return f"{who} was {verbs[0]} at {s:.1f} s" + \
            (f" ({verbs[1]} at {e:.1f} s)" if during else f" and {verbs[1]} at {e:.1f} s")
    if w.start_ns == w.end_ns:
        return f"{w.label or w.kind} on {who} at {s:.1f} s"
    return f"{w.label or w.kind} on {who} from {s:.1f} to {e:.1f} s"


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


def loss_sentence(k: KeyLoss, basis: str, reuse: tuple[float, int] | None,
                  windows: Sequence[FaultWindow]) -> str:
    where = "are on no replica" if basis == "replicas" else \
        "were never read although later reads went past them"
    offs = "" if k.offsets is None else f" at offsets {_span(*k.offsets, fmt='{}')}"
    head = (f"key {k.key}: {k.lost:,} acknowledged write{'s' if k.lost != 1 else ''}{offs} "
            f"(acknowledged {_span(*k.acked_s)} s) {where}")
    t = reuse[0] if reuse else k.acked_s[0]
    faults = preceding(windows, t)
    if reuse:
        head += f"; offsets reused from {reuse[0]:.1f} s (offset {reuse[1]} acknowledged " \
                "again with another value)"
    if not faults:
        return head + ", with no fault before it."
    during = all(w.start_ns <= t * NS <= w.end_ns for w in faults)
    return head + " after " + " and ".join(fault_words(w, during) for w in faults) + "."


def _example_key(ex_raw: Any) -> int | None:
    if isinstance(ex_raw, Mapping) and type(ex_raw.get("key")) is int:
        return int(ex_raw["key"])
    return None


def cycle_keys(ex_raw: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> set[int]:
    """The keys a cycle's operations sent to (from history.jsonl)."""
    keys: set[int] = set()
    for i in ex_raw.get("ops") or []:
        if not (isinstance(i, int) and 0 <= i < len(ops)):
            continue
        for mop in ops[i].get("value") or []:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "send" \
                    and type(mop[1]) is int:
                keys.add(mop[1])
    return keys


def _time_s(indices: Sequence[int], ops: Sequence[Mapping[str, Any]]) -> float | None:
    ts = [ops[i]["time"] for i in indices
          if 0 <= i < len(ops) and type(ops[i].get("time")) is int]
    return min(ts) / NS if ts else None


def causes(anomalies: Sequence[AnomalyType], raw: Mapping[str, Any] | None, loss: Losses,
           acked: Acked | None, windows: Sequence[FaultWindow],
           ops: Sequence[Mapping[str, Any]]) -> Causes:
    """Events (biggest loss first, then generic ones by size) and example labels.

    `anomalies` are the report's (examples in their shown order, each with its position
    `src` in `raw`, results.json's `anomalies`)."""
    lost_keys = {k.key for k in loss.keys}
    by_key: dict[int, list[tuple[str, int]]] = {k: [] for k in lost_keys}
    notes: dict[tuple[str, int], str] = {}
    loose: list[tuple[int, float, str, int]] = []  # key, time, type, n (no loss event)
    raw = raw or {}
    for a in anomalies:
        exs = raw.get(a.name) or []
        exs = exs if isinstance(exs, list) else [exs]
        for n, ex in enumerate(a.examples, 1):
            src = exs[ex.src] if 0 <= ex.src < len(exs) else None
            key = _example_key(src)
            if ex.steps and isinstance(src, Mapping):
                sent = cycle_keys(src, ops)
                ks = sent & lost_keys
                key = min(ks or sent) if sent else None
                size = src.get("component_size")
                if ks and isinstance(size, int) and size > BIG_COMPONENT:
                    names = ", ".join(map(str, sorted(ks)))
                    notes[(a.name, n)] = (f"a consequence of offsets reused on key"
                                          f"{'s' if len(ks) > 1 else ''} {names} (its group "
                                          f"has {size:,} operations): not a separate finding")
            if key is not None and key in lost_keys:
                by_key[key].append((a.name, n))
            elif key is not None:
                t = _time_s(ex.ops, ops)
                loose.append((key, t if t is not None else 0.0, a.name, n))
    events = []
    for k in loss.keys:
        exs = by_key[k.key]
        events.append(Event(k.key, k.acked_s[0],
                            loss_sentence(k, loss.basis, reuse_point(acked, k.key), windows),
                            k.lost, _count(exs), exs))
    generic: list[Event] = []
    loose.sort()
    i = 0
    while i < len(loose):
        j = i + 1
        while j < len(loose) and loose[j][0] == loose[i][0] \
                and loose[j][1] - loose[j - 1][1] <= WINDOW_S:
            j += 1
        group = loose[i:j]
        key, t0, t1 = group[0][0], group[0][1], group[-1][1]
        exs = [(name, n) for _, _, name, n in group]
        counts = _count(exs)
        what = ", ".join(f"{c} {name}" for name, c in counts.items())
        faults = preceding(windows, t0)
        ctx = "; ".join(fault_words(w) for w in faults) if faults else "no fault before"
        generic.append(Event(key, t0, f"key {key}, {_span(t0, t1)} s: {what} ({ctx}).",
                             0, counts, exs))
        i = j
    generic.sort(key=lambda e: (-len(e.examples), e.start_s))
    return Causes(events + generic, notes)


def _count(exs: Sequence[tuple[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, _ in exs:
        out[name] = out.get(name, 0) + 1
    return out
