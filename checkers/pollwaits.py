"""How long each key waited for a poll that returned it (checkers.availability's
`poll_by_key`; the definition is in that module's docstring).

An `ok` poll that returned nothing shows the system answered, not that a key was
served: a key counts as waiting only while it had acknowledged records no poll had read
yet, so a key with nothing to read never waits, however empty the polls.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from checkers.tables import KIND_READ, OK, Tables

CHUNK = 1 << 20  # entries per step of polls_read: about 60 MB of its columns
NEVER = np.iinfo(np.int64).max  # a record never read
NS = 1_000_000_000
Waits = tuple[Any, Any, Any]  # key, from, to of each stretch, by key then time


def earliest(first: Any, sent: Any, values: Any, when: Any) -> None:
    """Lower first[i] to the earliest `when` of `values` equal to sent[i] (`sent`: the
    send values, sorted; each is sent once, HISTORY.md, so a value names its send)."""
    if not len(sent) or not len(values):
        return
    at = np.minimum(np.searchsorted(sent, values), len(sent) - 1)
    hit = sent[at] == values
    np.minimum.at(first, at[hit], when[hit])


def polls_read(t: Tables, send_values: Any) -> tuple[Any, Any, Any]:
    """What the per-key polls need of the records read (Tables.reads), from the entry
    columns: each send's first read time (NEVER: unread), by a poll of any completion;
    then (key, time) of the records `ok` polls returned, once per poll and key. CHUNK
    entries at a time: a few columns per record read would add gigabytes at 10M lines."""
    e = t.entries
    order = np.argsort(send_values, kind="stable")
    sent = send_values[order]
    first = np.full(len(order), NEVER, np.int64)
    keys, times = [], []
    for lo in range(0, len(e["kind"]), CHUNK):
        r = np.flatnonzero(e["kind"][lo:lo + CHUNK] == KIND_READ) + lo
        rows = _rows(t.op, e["op"][r])
        when, ok = t.op_cmp_time[rows], t.op_status[rows] == OK
        earliest(first, sent, e["value"][r], when)
        k, w = _distinct(e["key"][r][ok], when[ok])
        keys.append(k)
        times.append(w)
    out = np.empty_like(first)
    out[order] = first
    return out, np.concatenate([*keys, first[:0]]), np.concatenate([*times, first[:0]])


def _rows(op: Any, ops: Any) -> Any:
    """The op row of each record: one search per run of records of one operation."""
    if not len(ops):
        return ops
    at = np.flatnonzero(np.r_[True, ops[1:] != ops[:-1]])
    return np.repeat(np.searchsorted(op, ops[at]), np.diff(np.r_[at, len(ops)]))


def _distinct(key: Any, t: Any) -> tuple[Any, Any]:
    """(key, time) pairs sorted, each once. A poll's records of a key come together
    (the reader keeps file order): dropping repeats of the row before first leaves one
    pair per poll and key to sort, a twentieth of the records of a real run."""
    keep = _new(key, t)
    key, t = key[keep], t[keep]
    order = np.lexsort((t, key))
    key, t = key[order], t[order]
    keep = _new(key, t)
    return key[keep], t[keep]


def _new(key: Any, t: Any) -> Any:
    """Which rows differ from the row before (the first does)."""
    if not len(key):
        return np.zeros(0, bool)
    return np.r_[True, (key[1:] != key[:-1]) | (t[1:] != t[:-1])]


def waiting(acked: tuple[Any, Any, Any], served: tuple[Any, Any], end: int) -> Waits:
    """The stretches in which a key waited. `acked`: key, acknowledgement time and first
    read time (NEVER: unread, waits to `end`) of each acknowledged record; `served`: key
    and completion time of the records `ok` polls returned (repeats allowed)."""
    key, a, b = acked
    b = np.minimum(b, end)
    keep = a < b  # read before its acknowledgement came: never waiting
    key, a, b = key[keep], a[keep], b[keep]
    order = np.lexsort((a, key))
    key, a, b = key[order], a[order], b[order]
    if not len(key):
        return key, a, b
    s_key, s_t = _distinct(*served)
    parts: list[Waits] = []
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    for i, j in zip(starts.tolist(), [*starts[1:].tolist(), len(key)], strict=True):
        k = int(key[i])
        # the union of [ack, first read) of the key's records: disjoint, apart
        hi = np.maximum.accumulate(b[i:j])
        first = np.flatnonzero(np.r_[True, a[i + 1:j] > hi[:-1]])
        c_from, c_to = a[i:j][first], hi[np.r_[first[1:] - 1, j - i - 1]]
        # cut where an ok poll returned the key strictly inside one of them
        p = s_t[np.searchsorted(s_key, k, "left"):np.searchsorted(s_key, k, "right")]
        c = np.searchsorted(c_from, p, "left") - 1
        p = p[(c >= 0) & (p < c_to[np.maximum(c, 0)])]
        lo, up = np.sort(np.r_[c_from, p]), np.sort(np.r_[p, c_to])
        parts.append((np.full(len(lo), k, np.int64), lo, up))
    return (np.concatenate([x[0] for x in parts]), np.concatenate([x[1] for x in parts]),
            np.concatenate([x[2] for x in parts]))


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
    """Per key of `keys` (those with acknowledged records), its longest wait; None when
    it never waited."""
    key, lo, up = w
    out: dict[str, dict[str, float] | None] = {str(int(k)): None for k in np.unique(keys)}
    if not len(key):
        return out
    order = np.lexsort((-(up - lo), key))  # per key, the longest first
    key, lo, up = key[order], lo[order], up[order]
    for i in np.flatnonzero(np.r_[True, key[1:] != key[:-1]]).tolist():
        out[str(int(key[i]))] = {"s": _s(int(up[i] - lo[i])), "from_s": _s(int(lo[i])),
                                 "to_s": _s(int(up[i]))}
    return out
