"""The log checks of one key, vectorised with numpy (no Python loop over rows).

`check_key` gets every read, send and replica row of one key (ENTRY_COLUMNS)
and returns anomaly counts, up to EXAMPLES examples per type, and the key's
write-write and write-read edges. Spark runs it once per key group; the bench
runs it in a plain loop as the single-process floor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from checkers.tables import FAIL, KIND_READ, KIND_REPLICA, KIND_SEND, KIND_SUMMARY, OK

EXAMPLES = 32
OUT_COLUMNS = ("tag", "type", "n", "detail", "src", "dst")
# tag: "c" count of a type in this key, "x" an example, "e" an edge (type "ww"/"wr")


class Out:
    """Rows of check_key's answer."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int, str, int, int]] = []
        self.edges: list[tuple[str, Any, Any]] = []

    def anomaly(self, type_: str, count: int, examples: list[dict[str, Any]]) -> None:
        if count:
            self.rows.append(("c", type_, count, "", 0, 0))
            for ex in examples[:EXAMPLES]:
                self.rows.append(("x", type_, 1, orjson.dumps(ex).decode(), 0, 0))


def unique_pairs(a: Any, b: Any) -> Any:
    """The distinct rows of (a, b) sorted by a then b, as np.unique(..., axis=0) gives
    them; numpy's sort of rows compares them as records, many times slower than a
    lexsort (itself quick here: rows arrive mostly in offset order)."""
    o = np.lexsort((b, a))
    a, b = a[o], b[o]
    keep = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])] if len(a) else np.zeros(0, bool)
    return np.stack([a[keep], b[keep]], axis=1).astype(np.int64, copy=False)


def in_sorted(values: Any, distinct: Any) -> Any:
    """np.isin(values, distinct) for `distinct` sorted without repeats: a binary search
    per value, where np.isin would sort both again."""
    if not len(distinct):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(distinct, values), len(distinct) - 1)
    return distinct[at] == values


def _between(known: Any, lo: Any, hi: Any) -> Any:
    """How many known offsets lie strictly between lo and hi (lo < hi)."""
    return np.searchsorted(known, hi, "left") - np.searchsorted(known, lo, "right")


def _first_last(op: Any, seq: Any) -> tuple[Any, Any, Any]:
    """Rows sorted by (op, seq): indices of each op's first and last row, and the order."""
    order = np.lexsort((seq, op))
    o = op[order]
    starts = np.flatnonzero(np.r_[True, o[1:] != o[:-1]]) if len(o) else np.zeros(0, np.int64)
    ends = np.r_[starts[1:] - 1, len(o) - 1] if len(o) else starts
    return order, order[starts], order[ends]


def _lookup(keys: Any, vals: Any, query: Any, missing: int) -> Any:
    """vals[keys == q] for each q (keys unique), else missing."""
    if len(keys) == 0:
        return np.full(len(query), missing, dtype=np.int64)
    o = np.argsort(keys, kind="stable")
    ks = keys[o]
    pos = np.minimum(np.searchsorted(ks, query), len(ks) - 1)
    return np.where(ks[pos] == query, vals[o][pos], missing)


def check_key(key: int, e: Mapping[str, Any], has_replicas: bool, nodes: list[str]) -> Out:
    out = Out()
    kind = e["kind"]
    is_read, is_send = kind == KIND_READ, kind == KIND_SEND
    r = {c: e[c][is_read] for c in ("op", "process", "offset", "value", "seq", "status", "seg")}
    s = {c: e[c][is_send] for c in ("op", "process", "offset", "value", "seq", "status", "must")}
    s_ok = s["status"] == OK
    s_must = s["must"].astype(bool)

    # the log: every record read, and every send that must have happened with an offset
    log_sent = s_must & (s["offset"] >= 0)
    lo = np.concatenate([r["offset"], s["offset"][log_sent]])
    lv = np.concatenate([r["value"], s["value"][log_sent]])
    pairs = unique_pairs(lo, lv)
    known = np.unique(pairs[:, 0])

    # inconsistent-offsets: per offset, two or more values (pairs sorted by offset, value)
    multi = np.flatnonzero(np.r_[False, pairs[1:, 0] == pairs[:-1, 0]])
    bad_offsets = np.unique(pairs[multi, 0])
    out.anomaly("inconsistent-offsets", len(bad_offsets), [
        {"key": key, "offset": int(o), "values": pairs[pairs[:, 0] == o, 1].tolist()}
        for o in bad_offsets[:EXAMPLES]])
    # duplicate: one value at two or more offsets
    byv = pairs[np.lexsort((pairs[:, 0], pairs[:, 1]))]
    dmulti = np.flatnonzero(np.r_[False, byv[1:, 1] == byv[:-1, 1]])
    dup_values = np.unique(byv[dmulti, 1])
    out.anomaly("duplicate", len(dup_values), [
        {"key": key, "value": int(v), "offsets": byv[byv[:, 1] == v, 0].tolist()}
        for v in dup_values[:EXAMPLES]])

    # where each value was first seen; each send's effective offset
    first = np.r_[True, byv[1:, 1] != byv[:-1, 1]] if len(byv) else np.zeros(0, bool)
    placed_v, placed_o = byv[first, 1], byv[first, 0]
    rmin_v, rmin_o = _read_min(r)
    eff = np.where(s["offset"] >= 0, s["offset"], _lookup(rmin_v, rmin_o, s["value"], -1))
    eff[s["status"] == FAIL] = -1
    was_read = in_sorted(s["value"], rmin_v)
    r_ok = r["status"] == OK
    max_ok_read = int(r["offset"][r_ok].max()) if r_ok.any() else -1

    unread_ok = np.flatnonzero(s_ok & ~was_read)
    lost = unread_ok[(eff[unread_ok] >= 0) & (eff[unread_ok] < max_ok_read)]
    unseen = np.setdiff1d(unread_ok, lost)
    out.anomaly("lost-write", len(lost), [
        {"key": key, "value": int(s["value"][i]), "offset": int(eff[i]),
         "writer": int(s["process"][i]), "index": int(s["op"][i]),
         "max_read_offset": max_ok_read} for i in lost[:EXAMPLES]])
    out.anomaly("unseen", len(unseen), [
        {"key": key, "value": int(s["value"][i]),
         "offset": int(eff[i]) if eff[i] >= 0 else None,
         "writer": int(s["process"][i]), "index": int(s["op"][i])} for i in unseen[:EXAMPLES]])

    # G1a: an ok poll read a value whose send failed (per reading op and value)
    failed = s["status"] == FAIL
    g = np.flatnonzero(r_ok & np.isin(r["value"], s["value"][failed]))
    g_pairs = unique_pairs(r["op"][g], r["value"][g])
    writer_of_failed = s["op"][failed]
    out.anomaly("G1a", len(g_pairs), [
        {"key": key, "value": int(v), "reader_index": int(o),
         "writer_index": int(_lookup(s["value"][failed], writer_of_failed,
                                     np.array([v]), -1)[0])}
        for o, v in g_pairs[:EXAMPLES]])

    # each read's writer among the sends that must have happened (the write-read edges),
    # else among the others: for precommitted-read, a poll that returned a value its own
    # operation sent (the operations also go out as "pr" rows, so that the verdict counts
    # each once across keys); one lookup of every read, as the edges alone needed
    writer = _lookup(s["value"][s_must], s["op"][s_must], r["value"], -1)
    rest = np.flatnonzero(writer < 0)
    writer[rest] = _lookup(s["value"][~s_must], s["op"][~s_must], r["value"][rest], -1)
    own = np.flatnonzero(writer == r["op"])
    p_pairs = unique_pairs(r["op"][own], r["value"][own])
    p_ops = np.unique(p_pairs[:, 0])
    out.anomaly("precommitted-read", len(p_ops), [
        {"key": key, "value": int(p_pairs[p_pairs[:, 0] == o, 1][0]), "index": int(o)}
        for o in p_ops[:EXAMPLES]])
    if len(p_ops):
        out.edges.append(("pr", p_ops, p_ops))
    writer[rest] = -1  # the edges' writers are the sends that must have happened

    _poll_checks(key, r, known, out)
    _send_checks(key, s, eff, s_must, known, out)
    _edges(s, r, placed_v, placed_o, s_must, writer, out)
    if has_replicas:
        _replica_checks(key, e, s, eff, s_ok, nodes, out)
    return out


def _read_min(r: Mapping[str, Any]) -> tuple[Any, Any]:
    """Each value read, once, ascending (in_sorted relies on that), with the lowest
    offset it was read at."""
    if not len(r["value"]):
        return r["value"], r["offset"]
    o = np.lexsort((r["offset"], r["value"]))
    v = r["value"][o]
    f = np.r_[True, v[1:] != v[:-1]]
    return v[f], r["offset"][o][f]


def _pair_examples(key: int, idx: Any, a: Any, b: Any, op: Any, proc: Any, off: Any,
                   val: Any) -> list[dict[str, Any]]:
    return [{"key": key, "process": int(proc[b[i]]), "indices": [int(op[a[i]]), int(op[b[i]])],
             "offsets": [int(off[a[i]]), int(off[b[i]])],
             "values": [int(val[a[i]]), int(val[b[i]])]} for i in idx[:EXAMPLES]]


def _poll_checks(key: int, r: Mapping[str, Any], known: Any, out: Out) -> None:
    op, off, val, proc = r["op"], r["offset"], r["value"], r["process"]
    # inside one operation: consecutive records of the key, in the order read
    order, firsts, lasts = _first_last(op, r["seq"])
    a, b = order[:-1], order[1:]
    same = op[a] == op[b]
    a, b = a[same], b[same]
    nonmono = off[b] <= off[a]
    skip = ~nonmono & (_between(known, off[a], np.maximum(off[b], off[a])) > 0)
    out.anomaly("int-nonmonotonic-poll", int(nonmono.sum()),
                _pair_examples(key, np.flatnonzero(nonmono), a, b, op, proc, off, val))
    out.anomaly("int-poll-skip", int(skip.sum()),
                _pair_examples(key, np.flatnonzero(skip), a, b, op, proc, off, val))
    # successive ok polls of a process in one segment
    okf = r["status"][firsts] == OK
    fi, la = firsts[okf], lasts[okf]
    o2 = np.lexsort((op[fi], r["seg"][fi], proc[fi]))
    fi, la = fi[o2], la[o2]
    cont = (proc[fi[1:]] == proc[fi[:-1]]) & (r["seg"][fi[1:]] == r["seg"][fi[:-1]])
    a, b = la[:-1][cont], fi[1:][cont]
    nonmono = off[b] <= off[a]
    skip = ~nonmono & (_between(known, off[a], np.maximum(off[b], off[a])) > 0)
    out.anomaly("nonmonotonic-poll", int(nonmono.sum()),
                _pair_examples(key, np.flatnonzero(nonmono), a, b, op, proc, off, val))
    out.anomaly("poll-skip", int(skip.sum()),
                _pair_examples(key, np.flatnonzero(skip), a, b, op, proc, off, val))


def _send_checks(key: int, s: Mapping[str, Any], eff: Any, must: Any, known: Any,
                 out: Out) -> None:
    op, val, proc = s["op"], s["value"], s["process"]
    order, firsts, lasts = _first_last(op, s["seq"])
    a, b = order[:-1], order[1:]
    keep = (op[a] == op[b]) & (eff[a] >= 0) & (eff[b] >= 0)
    a, b = a[keep], b[keep]
    rev = eff[b] < eff[a]
    skip = (eff[b] > eff[a]) & (_between(known, eff[a], np.maximum(eff[b], eff[a])) > 0)
    out.anomaly("int-nonmonotonic-send", int(rev.sum()),
                _pair_examples(key, np.flatnonzero(rev), a, b, op, proc, eff, val))
    out.anomaly("int-send-skip", int(skip.sum()),
                _pair_examples(key, np.flatnonzero(skip), a, b, op, proc, eff, val))
    # successive sends of a process across operations that must have happened
    m = must[firsts]
    fi, la = firsts[m], lasts[m]
    o2 = np.lexsort((op[fi], proc[fi]))
    fi, la = fi[o2], la[o2]
    cont = proc[fi[1:]] == proc[fi[:-1]]
    a, b = la[:-1][cont], fi[1:][cont]
    known_both = (eff[a] >= 0) & (eff[b] >= 0)
    rev = np.flatnonzero(known_both & (eff[b] < eff[a]))
    out.anomaly("nonmonotonic-send", len(rev),
                _pair_examples(key, rev, a, b, op, proc, eff, val))


def _edges(s: Mapping[str, Any], r: Mapping[str, Any], placed_v: Any, placed_o: Any,
           must: Any, writer: Any, out: Out) -> None:
    """write-write: writers at one placed offset to writers at the next; write-read
    (`writer`: each read's writer among the sends that must have happened, or -1)."""
    writer_v, writer_op = s["value"][must], s["op"][must]
    o = np.lexsort((placed_v, placed_o))
    pv, po = placed_v[o], placed_o[o]
    w = _lookup(writer_v, writer_op, pv, -1)
    if len(po):
        start = np.flatnonzero(np.r_[True, po[1:] != po[:-1]])
        cnt = np.diff(np.r_[start, len(po)])
        grp = np.repeat(np.arange(len(start)), cnt)  # offset group of each placed value
        src_i = np.flatnonzero(grp < len(start) - 1)
        reps = cnt[grp[src_i] + 1]
        src = np.repeat(src_i, reps)
        nxt = start[grp[src] + 1]
        within = np.arange(len(src)) - np.repeat(np.cumsum(reps) - reps, reps)
        dst = nxt + within
        ws, wd = w[src], w[dst]
        keep = (ws >= 0) & (wd >= 0) & (ws != wd)
        out.edges.append(("ww", ws[keep], wd[keep]))
    r_ok = r["status"] == OK
    wr = writer[r_ok]
    rd = r["op"][r_ok]
    keep = (wr >= 0) & (wr != rd)
    out.edges.append(("wr", wr[keep], rd[keep]))


def _replica_checks(key: int, e: Mapping[str, Any], s: Mapping[str, Any], eff: Any, s_ok: Any,
                    nodes: list[str], out: Out) -> None:
    kind = e["kind"]
    rec = kind == KIND_REPLICA
    node, off, val = e["node"][rec], e["offset"][rec], e["value"][rec]
    missing = np.flatnonzero(s_ok & ~np.isin(s["value"], val))
    out.anomaly("replica-lost-write", len(missing), [
        {"key": key, "value": int(s["value"][i]),
         "offset": int(eff[i]) if eff[i] >= 0 else None,
         "writer": int(s["process"][i]), "index": int(s["op"][i])} for i in missing[:EXAMPLES]])
    sm = kind == KIND_SUMMARY
    hw = dict(zip(e["node"][sm].tolist(), e["hw"][sm].tolist(), strict=True))
    node_hw = np.array([hw[n] for n in node.tolist()], dtype=np.int64) if len(node) else node
    c = off < node_hw
    cn, co, cv = node[c], off[c], val[c]
    trip = unique_pairs(co, cv)
    conflict = np.unique(trip[np.flatnonzero(np.r_[False, trip[1:, 0] == trip[:-1, 0]]), 0])
    examples: list[dict[str, Any]] = []
    for o in conflict[:EXAMPLES]:
        at = co == o
        examples.append({"key": key, "offset": int(o), "values": {
            nodes[n]: int(v) for n, v in zip(cn[at].tolist(), cv[at].tolist(), strict=True)}})
    count = len(conflict)
    ids = sorted(hw)
    for i, na in enumerate(ids):
        for nb in ids[i + 1:]:
            m = min(hw[na], hw[nb])
            ma = (cn == na) & (co < m)
            mb = (cn == nb) & (co < m)
            _, ia, ib = np.intersect1d(co[ma], co[mb], return_indices=True)
            if (cv[ma][ia] != cv[mb][ib]).any():
                continue  # counted above, per offset
            only_a = np.setdiff1d(co[ma], co[mb])
            only_b = np.setdiff1d(co[mb], co[ma])
            if len(only_a) or len(only_b):
                count += 1
                if len(examples) < EXAMPLES:
                    examples.append({"key": key, "nodes": [nodes[na], nodes[nb]],
                                     "only_in_first": only_a[:8].tolist(),
                                     "only_in_second": only_b[:8].tolist()})
    out.anomaly("replica-divergence", count, examples)
