"""Explanations grouped by cause: the anomalies of a run as a few events, not per type.

Why: a run that lost writes reports them under several names at once (replica-lost-write,
lost-write, inconsistent-offsets, nonmonotonic-send) and, because offsets were reused,
cycles whose strongly connected group spans most of the history. Listed per type, the
first thing a reader sees is a symptom. Here anomalies that share a key go under one
event per key, built from the full sets (report.losses). Keys with anomalies but no lost
write get a generic event per time window with counts by type. A cycle example whose
group is larger than BIG_COMPONENT operations while its keys lost writes is labelled a
consequence of the loss, not a separate finding.

A key can lose writes more than once: kip101-loss kills the leader every cycle, and a
long-lived key loses the writes acknowledged in the second before each kill (in a 60 s
kip101-loss run, seed 2028131815, key 7 lost 34, 9, 23, 35 and 24 writes in five
separate cycles). Such a key stays one event, headed by its total (so the explanations
rank keys as the loss table does), with one line per episode (report.episodes): its
losses, where its offsets were reused and the fault windows in force from its first
lost acknowledgement to that reuse, with the examples of its time. Five separate events
would interleave keys by size and scatter one key's story, while one sentence naming
five fault windows would not say which losses each window took. A key with one episode
keeps one sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from harness.report.episodes import Episode, episodes, preceding
from harness.report.faults import ALL_NODES, FaultWindow
from harness.report.losses import KeyLoss, Losses
from harness.report.sections import AnomalyType
from harness.runfiles.walk import Acked

MAX_FAULTS = 4  # fault windows named in one sentence; more are counted
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
    episodes: list[Line] = field(default_factory=list)  # a key's losses, one per cycle


@dataclass(frozen=True, slots=True)
class Line:
    """One episode of a key's losses, with the examples of its time."""

    sentence: str
    counts: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Causes:
    events: list[Event]
    notes: dict[tuple[str, int], str]  # (type, n) -> a label for that example


def _span(a: float, b: float, fmt: str = "{:.1f}") -> str:
    x, y = fmt.format(a), fmt.format(b)
    return x if x == y else f"{x}-{y}"


def fault_words(w: FaultWindow, during: bool = False, nodes: Sequence[str] = ()) -> str:
    """"n2 was killed at 18.1 s and restarted at 21.3 s", in the fault's own verbs;
    during: "n2 was killed at 18.1 s (restarted at 21.3 s)", for what happened before
    the restart. `nodes`: the nodes the same fault hit at the same times, named at once
    ("n2 and n3 were killed at ...")."""
    s, e = w.start_ns / NS, w.end_ns / NS
    names = list(nodes or [w.node])
    who = "all nodes" if ALL_NODES in names else \
        names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verbs = {"kill": ("killed", "restarted"), "pause": ("paused", "resumed")}.get(w.kind)
    if verbs:
        was = "was" if len(names) == 1 else "were"
        return f"{who} {was} {verbs[0]} at {s:.1f} s" + \
            (f" ({verbs[1]} at {e:.1f} s)" if during else f" and {verbs[1]} at {e:.1f} s")
    if w.start_ns == w.end_ns:
        return f"{w.label or w.kind} on {who} at {s:.1f} s"
    return f"{w.label or w.kind} on {who} from {s:.1f} to {e:.1f} s"


def _faults_words(faults: Sequence[FaultWindow], effect_s: float) -> str:
    """" after n3 was killed at 6.2 s and restarted at 6.5 s, and n2 was killed ..." (one
    fault on several nodes at the same times named once; at most MAX_FAULTS named), or
    ", with no fault before it"."""
    if not faults:
        return ", with no fault before it"
    same: dict[tuple[str, str, str, bool], list[FaultWindow]] = {}
    for w in faults:
        during = w.start_ns <= effect_s * NS <= w.end_ns
        same.setdefault((w.kind, f"{w.start_ns / NS:.1f}", f"{w.end_ns / NS:.1f}", during),
                        []).append(w)
    words = [fault_words(ws[0], key[3], sorted({w.node for w in ws}))
             for key, ws in list(same.items())[:MAX_FAULTS]]
    more = len(same) - MAX_FAULTS
    if more > 0:
        words.append(f"{more} more fault{'s' if more > 1 else ''}")
    return " after " + (words[0] if len(words) == 1 else
                        ", ".join(words[:-1]) + ", and " + words[-1])


def _reuse_words(reuse: tuple[float, int] | None) -> str:
    return "" if reuse is None else f"; offsets reused from {reuse[0]:.1f} s (offset " \
        f"{reuse[1]} acknowledged again with another value)"


def _writes(n: int, offsets: tuple[int, int] | None) -> str:
    offs = "" if offsets is None else f" at offset{'s' if offsets[0] != offsets[1] else ''} " \
        f"{_span(*offsets, fmt='{}')}"
    return f"{n:,} acknowledged write{'s' if n != 1 else ''}{offs}"


def loss_sentence(k: KeyLoss, basis: str, eps: Sequence[Episode],
                  windows: Sequence[FaultWindow]) -> str:
    """The key's event: with one episode (or none known) its reuse and faults; with more,
    the head of the episode lines (episode_sentence)."""
    one = k.lost == 1
    where = ("is" if one else "are") + " on no replica" if basis == "replicas" else \
        ("was" if one else "were") + " never read although later reads went past " + \
        ("it" if one else "them")
    head = f"key {k.key}: {_writes(k.lost, k.offsets)} (acknowledged {_span(*k.acked_s)} s) " \
        f"{where}"
    if len(eps) > 1:
        return head + f", in {len(eps)} episodes, each after its own faults:"
    if eps:
        ep = eps[0]
        return head + _reuse_words(ep.reuse) + _faults_words(ep.faults, ep.effect_s) + "."
    t = k.acked_s[0]
    return head + _faults_words(preceding(windows, t), t) + "."


def episode_sentence(ep: Episode) -> str:
    """One episode's line: "4.7-6.3 s: 34 acknowledged writes at offsets 41-80; offsets
    reused from 8.6 s (...) after n3 was killed at 6.2 s and restarted at 6.5 s and ..."."""
    return f"{_span(*ep.acked_s)} s: {_writes(ep.lost, ep.offsets)}" + \
        _reuse_words(ep.reuse) + _faults_words(ep.faults, ep.effect_s) + "."


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
    by_key: dict[int, list[tuple[str, int, float | None]]] = {k: [] for k in lost_keys}
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
            t = _time_s(ex.ops, ops)
            if key is not None and key in lost_keys:
                by_key[key].append((a.name, n, t))
            elif key is not None:
                loose.append((key, t if t is not None else 0.0, a.name, n))
    events = []
    for k in loss.keys:
        eps = episodes(acked, k.key, k.values, windows)
        exs = by_key[k.key]
        if len(eps) < 2:
            named = [(name, n) for name, n, _ in exs]
            events.append(Event(k.key, k.acked_s[0], loss_sentence(k, loss.basis, eps, windows),
                                k.lost, _count(named), named))
            continue
        at, lines = _by_episode(exs, eps)
        events.append(Event(k.key, k.acked_s[0], loss_sentence(k, loss.basis, eps, windows),
                            k.lost, _count(at), at,
                            [Line(episode_sentence(ep), _count(x), x)
                             for ep, x in zip(eps, lines, strict=True)]))
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


def _by_episode(exs: Sequence[tuple[str, int, float | None]], eps: Sequence[Episode]
                ) -> tuple[list[tuple[str, int]], list[list[tuple[str, int]]]]:
    """The examples with no time, and those of each episode: an example belongs to the
    episode whose losses are nearest in time (the cut is halfway between two episodes)."""
    cuts = [(a.acked_s[1] + b.acked_s[0]) / 2 for a, b in pairwise(eps)]
    untimed: list[tuple[str, int]] = []
    lines: list[list[tuple[str, int]]] = [[] for _ in eps]
    for name, n, t in exs:
        if t is None:
            untimed.append((name, n))
        else:
            lines[sum(1 for c in cuts if t >= c)].append((name, n))
    return untimed, lines


def _count(exs: Sequence[tuple[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, _ in exs:
        out[name] = out.get(name, 0) + 1
    return out
