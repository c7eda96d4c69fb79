"""Availability, kept apart from safety: how much of the workload the system served, in
each fault window and outside them, and how soon after each heal it served again.

results.json's `availability` (HISTORY.md: free-form, never changes `valid`). It is
computed from the history alone, the checker's operation columns (`Tables`) and the
nemesis and error lines (`harness.runfiles.read_notes`), so `undertow check` gives it
as `undertow run` does. Only sends, polls and transactions count as service: an
`assign` or `subscribe` succeeds while writes cannot, so they are counted apart and
never as a recovery. The harness's own final heal (`"final": true`) is listed, never
counted as a fault's heal. An operation counts at the time it completed (one that
never completed, at its invoke).

An `ok` poll that returned nothing shows the system answered, not that a key was
served, so polls are also measured per key (`poll_by_key`, like `send_by_key`; the
worst key of each window, of the fault-free time and of the run: `poll_by_key_worst`).
A key *waits* while it has a consumer and records that no poll has returned:
- it has a consumer from the completion of an `ok` assign or subscribe whose keys hold
  it until that process invokes its next assign or subscribe, or until the process's
  last operation completed (a crash, an `info`, the end of the history); in a group,
  while any subscribed member does (the group hands its keys out among them). A key
  nobody reads is the workload's choice, not the system's outage;
- it has records to read while its highest acknowledged offset (of the sends of `ok`
  operations, each from that operation's completion) is above the highest offset of the
  key that polls of any completion (`ok`, `info` or `fail`, each at its completion)
  have returned.
A stretch ends at an `ok` poll that returns a record of the key, when polls have read
up to the acknowledged offset, when the key loses its last consumer, or at the
history's end (in a window: clipped to the window's ends). A key with nothing left to
read never waits, however empty the polls; an `assign` returns no record, so it never
ends a wait (checkers.pollwaits). A history without any `ok` assign or subscribe says
nothing of who read which key: then no key is measured.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from checkers.pollwaits import (
    assigned_spans,
    gate,
    key_waits,
    polls_read,
    waiting,
    worst_wait,
)
from harness.runfiles import (
    F_CODES,
    FINAL,
    TEST_JSON,
    Assigned,
    ErrorLine,
    Notes,
    read_notes,
    read_test_json,
    scan_history,
)

CATS = ("send", "poll", "txn", "assign", "subscribe")
SERVICE = ("send", "poll", "txn")  # what a recovery means: one of these succeeded again
PAIRS: dict[str, str | None] = {"kill": "start", "pause": "resume", "partition": "heal"}
OK, FAIL, INFO = 1, 2, 3
NS = 1_000_000_000
TOP_ERRORS = 8
KEYS_SHOWN = 64
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class Window:
    kind: str
    nodes: tuple[str, ...]
    start_ns: int
    end_ns: int
    index: int  # history index of the fault's completion
    open: bool  # never healed: ends at the history's end
    final: bool  # ended by the harness's final heal


@dataclass(frozen=True, slots=True)
class Heal:
    index: int
    f: str
    time_ns: int
    final: bool


def fault_pairs(test: Mapping[str, Any] | None) -> dict[str, str | None]:
    """Start verb -> stop verb (None: an instant): HISTORY.md's pairs, then the kinds the
    run recorded in test.json (`fault_kinds`), so the run folder names its vocabulary."""
    out = dict(PAIRS)
    rows = (test or {}).get("fault_kinds")
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, Mapping) and isinstance(row.get("start"), str):
            stop = row.get("stop")
            out[row["start"]] = stop if isinstance(stop, str) and stop else None
    return out


def _nodes(value: Any) -> set[str]:
    if not isinstance(value, Mapping):
        return set()
    out = {str(n) for n in value.get("nodes") or () if isinstance(value.get("nodes"), list)}
    grudge = value.get("grudge")
    if isinstance(grudge, Mapping):
        for k, v in grudge.items():
            out.add(str(k))
            out.update(str(n) for n in v if isinstance(v, list))
    return out


def fault_windows(nemesis: Sequence[Mapping[str, Any]], pairs: Mapping[str, str | None],
                  end_ns: int) -> tuple[list[Window], list[Heal]]:
    """Windows (a start's invoke to the completion of the stop that ends it on its last
    node; an instant: its own op) and heals (each stop's or instant's completion)."""
    stops: dict[str, set[str]] = {}
    for start, stop in pairs.items():
        if stop is not None:
            stops.setdefault(stop, set()).add(start)
    windows: list[Window] = []
    heals: list[Heal] = []
    live: list[tuple[str, set[str], set[str], int, int]] = []  # kind, nodes, left, t0, idx
    invoked = 0
    for row in nemesis:
        t, f, idx = int(row.get("time", 0)), str(row.get("f")), int(row.get("index", -1))
        if row.get("type") == "invoke":
            invoked = t
            continue
        final = row.get(FINAL) is True
        if f in pairs and pairs[f] is None:
            windows.append(Window(f, tuple(sorted(_nodes(row.get("value")))), invoked, t, idx,
                                  False, final))
            heals.append(Heal(idx, f, t, final))
        elif f in pairs:
            nodes = _nodes(row.get("value"))
            live.append((f, nodes, set(nodes), invoked, idx))
        if f in stops:
            heals.append(Heal(idx, f, t, final))
            named = _nodes(row.get("value"))
            still = []
            for kind, nodes, left, t0, i0 in live:
                if kind in stops[f]:
                    left -= named
                    if not named or not left:
                        windows.append(Window(kind, tuple(sorted(nodes)), t0, t, i0, False,
                                              final))
                        continue
                still.append((kind, nodes, left, t0, i0))
            live = still
    windows += [Window(k, tuple(sorted(n)), t0, end_ns, i0, True, False)
                for k, n, _, t0, i0 in live]
    return sorted(windows, key=lambda w: (w.start_ns, w.index)), heals


def _s(ns: float) -> float:
    return round(ns / NS, 3)


class _Cat:
    """One kind of operation's columns, sorted by the time each counts at."""

    def __init__(self, inv: Any, at: Any, status: Any) -> None:
        order = np.argsort(at, kind="stable")
        self.at, self.status = at[order], status[order]
        ok = status == OK
        by_done = np.argsort(at[ok], kind="stable")
        self.ok_at = at[ok][by_done]
        # the first ok invoked at or after t is the first whose running max reaches t
        self.reach = np.maximum.accumulate(inv[ok][by_done]) if ok.any() else inv[:0]
        self.bounds = (int(inv.min()), int(at.max())) if len(inv) else (0, 0)

    def counts(self, a: int, b: int) -> dict[str, Any]:
        return self.counts_in([(a, b)])

    def counts_in(self, parts: Sequence[tuple[int, int]]) -> dict[str, Any]:
        """ok, fail, info and the ok share of the ops counted in the (disjoint) parts."""
        c = np.zeros(4, np.int64)
        for a, b in parts:
            lo = np.searchsorted(self.at, a, "left")
            hi = np.searchsorted(self.at, b, "right")
            c += np.bincount(self.status[lo:hi], minlength=4)[:4]
        n = int(c[OK] + c[FAIL] + c[INFO])
        return {"ok": int(c[OK]), "fail": int(c[FAIL]), "info": int(c[INFO]),
                "ok_share": round(int(c[OK]) / n, 4) if n else None}

    def longest_gap(self, a: int, b: int) -> dict[str, float] | None:
        """The longest stretch in [a, b] with no ok completion, within the time this kind
        of operation was being done (the final reads send nothing: no gap there)."""
        a, b = max(a, self.bounds[0]), min(b, self.bounds[1])
        if b <= a:
            return None
        lo, hi = np.searchsorted(self.ok_at, a, "left"), np.searchsorted(self.ok_at, b, "right")
        return gap(np.concatenate([[a], self.ok_at[lo:hi], [b]]))

    def recovered_after(self, t: int) -> float | None:
        i = int(np.searchsorted(self.reach, t, "left"))
        return _s(int(self.ok_at[i]) - t) if i < len(self.ok_at) else None


def gap(points: Any) -> dict[str, float]:
    d = np.diff(points)
    i = int(np.argmax(d))
    return {"s": _s(int(d[i])), "from_s": _s(int(points[i])), "to_s": _s(int(points[i + 1]))}


def error_class(message: str) -> str:
    """A message with its numbers (offsets, partitions, timeouts) as N, so that one cause
    counts once: "offset 66 not committed (hw 66)" and "offset 70 ..." are one class."""
    return _NUMBER.sub("N", message)[:160]


class _Errors:
    """The client error lines (in file order, so by time), each message's class once."""

    def __init__(self, rows: Sequence[ErrorLine]) -> None:
        rows = [e for e in rows if e.type != "ok"]
        self.times = np.fromiter((e.time for e in rows), np.int64, len(rows))
        classes: dict[str, str] = {}
        self.rows = [(e.f, classes.get(e.error) or classes.setdefault(e.error,
                                                                      error_class(e.error)))
                     for e in rows]

    def by_f(self, a: int = 0, b: int = 2**63 - 1,
             top: int = TOP_ERRORS) -> dict[str, dict[str, int]]:
        """Per operation kind, its commonest error classes in [a, b] (the rest summed)."""
        lo, hi = np.searchsorted(self.times, a, "left"), np.searchsorted(self.times, b, "right")
        out: dict[str, Counter[str]] = {}
        for f, cls in self.rows[lo:hi]:
            c = out.get(f)
            if c is None:
                c = out[f] = Counter()
            c[cls] += 1
        res: dict[str, dict[str, int]] = {}
        for f, c in sorted(out.items()):
            shown = dict(c.most_common(top))
            rest = sum(c.values()) - sum(shown.values())
            res[f] = {**shown, **({"(other messages)": rest} if rest else {})}
        return res


def _free(windows: Sequence[Window], end_ns: int) -> list[tuple[int, int]]:
    """The stretches of [0, end] that no window covers."""
    out, at = [], 0
    for w in sorted(windows, key=lambda w: w.start_ns):
        if w.start_ns > at:
            out.append((at, w.start_ns))
        at = max(at, w.end_ns)
    if end_ns > at:
        out.append((at, end_ns))
    return out


def _longest(parts: list[dict[str, float] | None]) -> dict[str, float] | None:
    real = [p for p in parts if p is not None]
    return max(real, key=lambda p: p["s"]) if real else None


def compute(process: Any, op_f: Any, status: Any, inv: Any, done: Any,
            sends: tuple[Any, Any], notes: Notes, pairs: Mapping[str, str | None],
            reads: tuple[Any, Any, Any, Any, Any], assigned: Assigned) -> dict[str, Any]:
    """The `availability` object from operation columns (process, f code, status, invoke
    time, completion time or int64 max), the send micro-ops (op row, key) and Tables.reads:
    each send's offset (below 0: none), then per poll and key it returned records of,
    the key, completion time, highest offset returned and whether the poll ended ok;
    `assigned`: the keys ok assigns and subscribes gave."""
    at = np.where(done == np.iinfo(np.int64).max, inv, done)
    nem_end = max((int(r.get("time", 0)) for r in notes.nemesis), default=0)
    end_ns = max(int(at.max()) if len(at) else 0, nem_end)
    windows, heals = fault_windows(notes.nemesis, pairs, end_ns)
    cats = {c: _Cat(inv[m], at[m], status[m]) for c in CATS
            if (m := op_f == F_CODES[c]).any()}
    service = [c for c in SERVICE if c in cats]
    free = _free(windows, end_ns)
    errors = _Errors(notes.errors)
    acked = status[sends[0]] == OK
    waits = gate(waiting((sends[1][acked], at[sends[0][acked]], reads[0][acked]), reads[1:],
                         end_ns),
                 assigned_spans(assigned, process, op_f, inv, at, end_ns))

    def part(a: int, b: int) -> dict[str, Any]:
        return {"from_s": _s(a), "to_s": _s(b),
                "ops": {c: k.counts(a, b) for c, k in cats.items()},
                "longest_without_ok": {c: cats[c].longest_gap(a, b) for c in service},
                "poll_by_key_worst": worst_wait(waits, a, b),
                "errors": errors.by_f(a, b, top=3)}

    heal_rows = [{"index": h.index, "f": h.f, "time_s": _s(h.time_ns), "final": h.final,
                  **{f"{c}_s": cats[c].recovered_after(h.time_ns) for c in service}}
                 for h in heals]
    fault_heals = [r for r in heal_rows if not r["final"]]
    return {
        "basis": "sends, polls and transactions count as service (assign and subscribe "
                 "apart); an op counts when it completed; the harness's final heal is "
                 "not a fault's heal",
        "end_s": _s(end_ns),
        "ops": {c: k.counts(0, end_ns) for c, k in cats.items()},
        "longest_without_ok": {c: cats[c].longest_gap(*cats[c].bounds) for c in service},
        "send_by_key": _by_key(sends, status, inv, at),
        "poll_by_key": _shown(key_waits(waits, sends[1][acked])) if len(assigned) else {},
        "poll_by_key_worst": worst_wait(waits, 0, end_ns),
        "windows": [{"kind": w.kind, "nodes": list(w.nodes), "index": w.index, "open": w.open,
                     "final_heal": w.final, **part(w.start_ns, w.end_ns)} for w in windows],
        "fault_free": {"s": _s(sum(b - a for a, b in free)),
                       "ops": {c: k.counts_in(free) for c, k in cats.items()},
                       "longest_without_ok": {c: _longest([cats[c].longest_gap(a, b)
                                                           for a, b in free])
                                              for c in service},
                       "poll_by_key_worst": _longest([worst_wait(waits, a, b)
                                                      for a, b in free])},
        "heals": heal_rows,
        "recovery": {"heals": len(fault_heals),
                     **{f"worst_{c}_s": _worst(fault_heals, f"{c}_s") for c in service},
                     "never": [r["index"] for r in fault_heals
                               if any(r[f"{c}_s"] is None for c in service)]},
        "errors": errors.by_f(),
    }


def _worst(rows: list[dict[str, Any]], k: str) -> float | None:
    vals = [r[k] for r in rows if r[k] is not None]
    return max(vals) if vals else None


def _by_key(sends: tuple[Any, Any], status: Any, inv: Any, at: Any) -> dict[str, Any]:
    """Per key, the longest stretch with no ok send of it (first send to last)."""
    rows, keys = sends
    if not len(rows):
        return {}
    t = at[rows]
    order = np.lexsort((t, keys))
    k, t, first = keys[order], t[order], inv[rows][order]
    okk = status[rows][order] == OK
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    lows = np.minimum.reduceat(first, starts)
    highs = np.maximum.reduceat(t, starts)
    out: dict[str, Any] = {}
    for a, b, lo, hi in zip(starts.tolist(), ends.tolist(), lows.tolist(), highs.tolist(),
                            strict=True):
        okt = t[a:b][okk[a:b]]
        out[str(int(k[a]))] = gap(np.concatenate([[lo], okt, [hi]])) if hi > lo else None
    return _shown(out)


def _shown(out: dict[str, Any]) -> dict[str, Any]:
    """Per key stretches as written: past KEYS_SHOWN keys (they rotate through a pool),
    the worst ones and how many keys there were."""
    if len(out) > KEYS_SHOWN:
        worst = sorted(out, key=lambda x: -(out[x] or {"s": 0.0})["s"])[:KEYS_SHOWN]
        out = {x: out[x] for x in worst} | {"keys": len(out)}
    return out


def availability(t: Any, run_dir: Path, notes: Notes | None = None) -> dict[str, Any]:
    """The `availability` object of a checked run (t: checkers.tables.Tables; notes: the
    history's nemesis and error lines, read here when not given; when the tables lack
    the keys of the assigns, as DuckDB's reader leaves them, the notes must hold them:
    `read_notes(..., assigned=True)`)."""
    from checkers.tables import KIND_SEND

    e = t.entries
    if t.sends is not None:  # Spark read the history: the entries are gone
        (lines, keys), reads = t.sends, t.reads
    else:
        m = e["kind"] == KIND_SEND
        lines, keys = e["op"][m], e["key"][m]
        reads = (e["offset"][m], *polls_read(t))
    rows = np.searchsorted(t.op, lines)
    from checkers.api import parse_workers

    if notes is None:
        notes = read_notes(Path(run_dir) / "history.jsonl", workers=parse_workers(),
                           assigned=t.assigned is None)
    try:
        test = read_test_json(Path(run_dir) / TEST_JSON)
    except ValueError:
        test = None
    return compute(t.op_process, t.op_f, t.op_status, t.op_inv_time, t.op_cmp_time,
                   (rows, keys), notes, fault_pairs(test), reads,
                   notes.assigned if t.assigned is None else t.assigned)


def history_availability(run_dir: Path) -> dict[str, Any]:
    """The `availability` object of a run folder whose results.json lacks one (the report
    measures it). Only what it needs is read: history.jsonl by the strict reader with its
    compiled line parser (in one process, half the CPU of the DuckDB path `undertow check`
    takes with its workers; the same columns), and not replicas.jsonl, which plays no
    part in it and whose strict reading costs about as much again."""
    from checkers.tables import build_tables

    scan = scan_history(Path(run_dir) / "history.jsonl")
    return availability(build_tables(scan, None), run_dir)
