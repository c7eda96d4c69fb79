"""How long each key waited for a poll that returned it (checkers.availability's
`poll_by_key`; the definition is in that module's docstring).

An `ok` poll that returned nothing shows the system answered, not that a key was
served: a key counts as waiting only while its highest acknowledged offset is above the
highest offset polls have returned of it, so a key with nothing to read never waits,
however empty the polls.

Computed from offsets, never from the records one by one: what polls read comes down
to one (key, completion time, highest offset returned, ok) per poll and key, found
with a run-boundary mask (a poll's records of one key come together in file order)
and `np.maximum.reduceat`; only those, about a twentieth of the records of a real
run, and the acknowledged sends are sorted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from checkers.tables import KIND_READ, OK, Tables
from harness.runfiles import F_CODES, Assigned

CHUNK = 1 << 22  # entries per step of polls_read: a few bytes of masks each
NS = 1_000_000_000
Waits = tuple[Any, Any, Any]  # key, from, to of each stretch, by key then time
Polls = tuple[Any, Any, Any, Any]  # per poll and key: key, completion time, top offset, ok


def runs(line: Any, key: Any, offset: Any, read: Any = None) -> tuple[Any, Any, Any]:
    """(line or op, key, highest offset) of each run of records of one poll and key,
    the columns in file order; `read`: which rows are records read (all when None).
    A poll whose records of a key were not together gives several runs: the same
    figures (repeats change no maximum and cut no stretch)."""
    if not len(key):
        return line[:0], key[:0], offset[:0]
    cut = np.empty(len(key), bool)
    cut[0] = True
    np.not_equal(line[1:], line[:-1], out=cut[1:])
    cut[1:] |= key[1:] != key[:-1]
    if read is not None:
        cut[1:] |= read[1:] != read[:-1]
    at = np.flatnonzero(cut)
    top = np.maximum.reduceat(offset, at)
    if read is not None:
        keep = read[at]
        at, top = at[keep], top[keep]
    return line[at], key[at], top


def polls_read(t: Tables) -> Polls:
    """What the per-key polls need of the records read (Tables.reads' poll part), from
    the entry columns, CHUNK entries at a time (slices: no column is copied)."""
    e = t.entries
    parts = []
    for lo in range(0, len(e["kind"]), CHUNK):
        s = slice(lo, lo + CHUNK)
        read = e["kind"][s] == KIND_READ
        if read.any():
            parts.append(runs(e["op"][s], e["key"][s], e["offset"][s], read))
    op, key, top = (np.concatenate([p[i] for p in parts]) if parts
                    else np.zeros(0, np.int64) for i in range(3))
    d = np.int32 if len(t.op) < 1 << 31 else np.int64
    row = np.empty(t.lines, d)  # op row by invoke line: no search per triple
    row[t.op] = np.arange(len(t.op), dtype=d)
    rows = row[op]
    return key, t.op_cmp_time[rows], top, t.op_status[rows] == OK


def waiting(acked: tuple[Any, Any, Any], polls: Polls, end: int) -> Waits:
    """The stretches in which a key waited. `acked`: key, acknowledgement time and
    offset (below 0: none, never waits) of each acknowledged send; `polls`: per poll
    and key it returned records of, the key, completion time, highest offset and
    whether it ended ok. One sort of these events, then segmented running maxima."""
    a_key, a_t, a_off = acked
    has = a_off >= 0
    p_key, p_t, p_top, p_ok = polls
    n = int(has.sum())
    key = np.concatenate([a_key[has], p_key]).astype(np.int64, copy=False)
    t = np.minimum(np.concatenate([a_t[has], p_t]), end).astype(np.int64, copy=False)
    off = np.concatenate([a_off[has], p_top]).astype(np.int64, copy=False) + 1  # 0: none
    poll = np.r_[np.zeros(n, bool), np.ones(len(p_key), bool)]
    if not len(key):
        return key, t, t
    order = _by_key_time(key, t, poll)
    key, t, off, poll = key[order], t[order], off[order], poll[order]
    ok = np.r_[np.zeros(n, bool), p_ok.astype(bool, copy=False)][order]
    new = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(new) - 1
    span = int(off.max()) + 1
    if int(group[-1]) + 1 > (1 << 62) // span:  # keep group * span in int64: ranks
        off = np.unique(off, return_inverse=True)[1].reshape(-1).astype(np.int64) + 1
        span = int(off.max()) + 1
    base = group * span
    acked_top = np.maximum.accumulate(np.where(poll, 0, off) + base) - base
    read_top = np.maximum.accumulate(np.where(poll, off, 0) + base) - base
    pending = acked_top > read_top
    after = np.r_[t[1:], end]  # until the key's next event
    after[np.r_[new[1:], True]] = end
    start = pending & (new | ~np.r_[False, pending[:-1]] | (poll & ok))
    p = np.flatnonzero(pending)
    if not len(p):
        return key[:0], t[:0], t[:0]
    first = np.flatnonzero(start[p])
    last = np.r_[first[1:] - 1, len(p) - 1]
    key, lo, up = key[p][first], t[p][first], after[p][last]
    keep = lo < up
    return key[keep], lo[keep], up[keep]


def _by_key_time(key: Any, t: Any, poll: Any) -> Any:
    """The order of the events by key, time, then acks before polls (a record read at
    its acknowledgement never waits): one argsort of a packed int64 when it fits,
    a third of a three-column lexsort's time."""
    k0, t0 = int(key.min()), int(t.min())
    keys, span = int(key.max()) - k0 + 1, 2 * (int(t.max()) - t0 + 1)
    if keys > (1 << 62) // span:
        return np.lexsort((poll, t, key))
    return np.argsort(((key - k0) * span + (t - t0) * 2) + poll)


def _s(ns: float) -> float:
    return round(ns / NS, 3)


def worst_wait(w: Waits, a: int, b: int) -> dict[str, Any] | None:
    """The longest wait within [a, b] (stretches clipped to it) and its key."""
    key, lo, up = w
    lo, up = np.maximum(lo, a), np.minimum(up, b)
    span = up - lo
    if not len(span) or span.max() <= 0:
        return None
    i = int(np.argmax(span))
    return {"key": int(key[i]), "s": _s(int(span[i])), "from_s": _s(int(lo[i])),
            "to_s": _s(int(up[i]))}


def key_waits(w: Waits, keys: Any) -> dict[str, dict[str, float] | None]:
    """Per key of `keys` (those with acknowledged records), its longest wait (the
    earliest of equals); None when it never waited. `w` is by key: no sort."""
    key, lo, up = w
    out: dict[str, dict[str, float] | None] = {str(int(k)): None for k in np.unique(keys)}
    if not len(key):
        return out
    span = up - lo
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    best = np.maximum.reduceat(span, starts)
    top = np.flatnonzero(span == np.repeat(best, np.diff(np.r_[starts, len(key)])))
    group = np.searchsorted(starts, top, "right") - 1
    for i in top[np.r_[True, group[1:] != group[:-1]]].tolist():
        out[str(int(key[i]))] = {"s": _s(int(span[i])), "from_s": _s(int(lo[i])),
                                 "to_s": _s(int(up[i]))}
    return out


Spans = tuple[Any, Any, Any]  # key, from, to: disjoint, by key then time


def assigned_spans(assigned: Assigned, process: Any, f: Any, inv: Any, at: Any,
                   end: int) -> Spans:
    """When each key had a consumer: per ok assign or subscribe, its keys from
    its completion until the same process's next assign or subscribe is invoked, or
    until the process's last operation completed (it crashed, ended `info` or stopped);
    merged over the processes. `process`, `f`, `inv`, `at`: the operation columns."""
    z = np.zeros(0, np.int64)
    if not len(assigned) or not len(process):
        return z, z, z
    group = (f == F_CODES["assign"]) | (f == F_CODES["subscribe"])
    a_proc, a_t, keys = assigned.process, assigned.time, assigned.key
    top = int(process.max())
    if top < 4 * len(process) + 1024:  # process numbers index an array (no sort)
        rank, n = process.astype(np.int64, copy=False), top + 1
        known = a_proc <= top
        a_rank = np.where(known, a_proc, 0)
    else:  # sparse numbers: their ranks
        procs, rank = np.unique(process, return_inverse=True)
        rank, n = rank.reshape(-1).astype(np.int64, copy=False), len(procs)
        a_rank = np.minimum(np.searchsorted(procs, a_proc), n - 1)
        known = procs[a_rank] == a_proc
    span = int(max(end, int(at.max()))) + 1
    if n > (1 << 62) // span:
        raise ValueError("too many processes over too long a run to pack (process, time)")
    # the next assign or subscribe of the process: one sorted array of (process, invoke)
    nxt = np.sort(rank[group] * span + inv[group])
    last = np.full(n, -1, np.int64)  # when each process's last operation completed
    np.maximum.at(last, rank, at)
    i = np.searchsorted(nxt, a_rank * span + a_t, "right")
    same = i < len(nxt)
    same[same] = nxt[i[same]] // span == a_rank[same]
    until = np.where(same, nxt[np.minimum(i, len(nxt) - 1)] % span, last[a_rank])
    until = np.where(known, np.minimum(until, end), -1)
    keep = a_t < until
    return merge(keys[keep], a_t[keep], until[keep])


def merge(key: Any, lo: Any, up: Any) -> Spans:
    """The union of [lo, up) spans per key: disjoint spans, by key then time."""
    if not len(key):
        return key, lo, up
    order = np.lexsort((lo, key))
    key, lo, up = key[order], lo[order], up[order]
    new = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(new) - 1
    base = group.astype(np.int64) * (int(up.max()) + 1)
    reach = np.maximum.accumulate(up + base) - base  # the furthest end so far in the key
    begins = new | (lo > np.r_[0, reach[:-1]])
    first = np.flatnonzero(begins)
    ends = np.r_[first[1:] - 1, len(key) - 1]
    return key[first], lo[first], reach[ends]


def gate(w: Waits, cover: Spans) -> Waits:
    """The parts of the wait stretches during which their key had a consumer (the
    stretches and the spans each by key then time; a stretch cut by a gap in its
    key's cover gives a piece on each side)."""
    key, lo, up = w
    c_key, c_lo, c_up = cover
    if not len(key) or not len(c_key):
        return key[:0], lo[:0], up[:0]
    span = int(max(int(up.max()), int(c_up.max()))) + 1
    keys = np.unique(np.r_[key, c_key])
    kk, ck = np.searchsorted(keys, key), np.searchsorted(keys, c_key)
    if len(keys) > (1 << 62) // span:
        raise ValueError("too many keys over too long a run to pack (key, time)")
    c_a, c_b = ck * span + c_lo, ck * span + c_up
    w_a, w_b = kk * span + lo, kk * span + up
    i0 = np.searchsorted(c_b, w_a, "right")  # the first span ending after the stretch starts
    i1 = np.searchsorted(c_a, w_b, "left")  # past the last span starting before it ends
    n = np.maximum(i1 - i0, 0)
    which = np.repeat(np.arange(len(key)), n)
    j = i0[which] + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    a, b = np.maximum(lo[which], c_lo[j]), np.minimum(up[which], c_up[j])
    keep = a < b
    return key[which][keep], a[keep], b[keep]
