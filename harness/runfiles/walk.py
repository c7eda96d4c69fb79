"""The tolerant pass over a history's lines: what the report draws, as compact arrays.

Pairs each client invocation with its completion (latency, throughput, timeline),
collects the log of each key as clients saw it (offset, value, writer, first time
seen), the nemesis operations (start and end of each), and the operations that
touch the values and indices that the checkers' anomaly examples name. Shapes it
does not know are skipped: the strict reader judges a history, this one draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

KIND_CODES: dict[str, int] = {"ok": 0, "fail": 1, "info": 2}
KINDS = ("ok", "fail", "info")
READS_PER_VALUE = 3  # reading operations linked per anomaly value
_INDEX_KEYS = ("index", "indices", "op", "ops", "op_index", "reader", "readers", "cycle",
               "steps", "invoke_index", "completion_index")

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Completions:
    """One row per completed client operation (arrays of equal length)."""

    invoke_ns: I64
    complete_ns: I64
    f_code: I64
    kind: I64  # KIND_CODES
    process: I64
    f_names: tuple[str, ...]

    @property
    def latency_ns(self) -> I64:
        return self.complete_ns - self.invoke_ns


@dataclass(frozen=True, slots=True)
class KeyLog:
    """A key's records as clients saw them: arrays of first-seen time, offset, value, writer."""

    time_ns: I64
    offset: I64
    value: I64
    writer: I64  # -1: no known writer


@dataclass(frozen=True, slots=True)
class Acked:
    """Every send micro-op of an `ok` completion (acknowledged): key, offset (-1: not
    learnt), value and acknowledgement time, arrays of equal length; with what polls read
    (any completion's) and how far `ok` polls read each key, so losses come from the full
    sets, not the checkers' capped examples."""

    key: I64
    offset: I64
    value: I64
    time_ns: I64
    read_values: I64  # sorted distinct values any poll returned
    read_max: dict[int, int]  # key -> the highest offset an ok poll returned


NemesisSpan = tuple[int, str, Any, int, int]  # index, f, value, invoke ns, completion ns


@dataclass(frozen=True, slots=True)
class Txns:
    """Each completed `txn` operation: its invoke and completion indices and its KIND_CODES
    (ok: committed, fail: certainly not committed, info: unknown), and the values its
    failed transactions sent (records that must never be read)."""

    invoke: I64  # sorted
    completion: I64  # in step with invoke
    kind: I64
    aborted_values: frozenset[int]

    @classmethod
    def of(cls, inv: list[int], comp: list[int], kind: list[int],
           aborted: set[int]) -> Txns:
        i = np.asarray(inv, dtype=np.int64)
        order = np.argsort(i, kind="stable")
        return cls(i[order], np.asarray(comp, dtype=np.int64)[order],
                   np.asarray(kind, dtype=np.int64)[order], frozenset(aborted))

    def kind_of(self, index: int) -> int | None:
        """The completion kind of the txn whose invoke or completion is at `index`, or None
        (not a completed txn)."""
        for arr in (self.invoke, self.completion):
            hit = np.flatnonzero(arr == index)
            if hit.size:
                return int(self.kind[hit[0]])
        return None


@dataclass(frozen=True, slots=True)
class Pairs:
    """Each client operation's invoke and completion history indices, in step: one found
    from the other without another pass over the history."""

    invoke: I64
    completion: I64

    def of(self, indices: Iterable[int]) -> dict[int, int]:
        """invoke -> completion and completion -> invoke, for those of `indices` that have a
        partner."""
        want = np.fromiter(set(indices), dtype=np.int64)
        out: dict[int, int] = {}
        for a, b in ((self.invoke, self.completion), (self.completion, self.invoke)):
            hit = np.isin(a, want)
            out.update(zip(a[hit].tolist(), b[hit].tolist(), strict=True))
        return out


@dataclass(frozen=True, slots=True)
class HistoryWalk:
    """What one tolerant pass over the history found (see the module docstring)."""

    completions: Completions
    nemesis: list[NemesisSpan]  # one per completed nemesis op, in history order
    nemesis_ops: list[dict[str, Any]]  # their completion lines
    end_ns: int
    keys: dict[int, KeyLog]
    involved: list[int]  # history indices of operations the anomaly examples touch
    by_value: dict[int, list[int]]  # anomaly value -> indices of ops that sent or read it
    processes: list[int]
    op_count: int
    client_ops: int
    txns: Txns
    acked: Acked | None = None
    pairs: Pairs = field(default_factory=lambda: Pairs(np.zeros(0, dtype=np.int64),
                                                       np.zeros(0, dtype=np.int64)))


def anomaly_refs(anomalies: Mapping[str, Any]) -> tuple[set[int], set[int]]:
    """(history indices, values) that the anomaly examples name, for linking to ops."""
    indices: set[int] = set()
    values: set[int] = set()

    def walk(x: Any, key: str | None) -> None:
        if isinstance(x, dict):
            for k, v in x.items():  # {"values": {"n1": 5}}: the values keep their role
                walk(v, key if key in ("values", "indices", "ops") else str(k))
        elif isinstance(x, list):
            for v in x:
                walk(v, key)
        elif isinstance(x, int) and not isinstance(x, bool) and key is not None:
            if key in ("value", "values"):
                values.add(x)
            elif key in _INDEX_KEYS or key.endswith("_index") or key.endswith("_indices"):
                indices.add(x)

    for examples in anomalies.values():
        walk(examples, None)
    return indices, values


def walk_history(ops: list[dict[str, Any]], anomalies: Mapping[str, Any] | None = None,
                 each: Callable[[dict[str, Any]], object] | None = None) -> HistoryWalk:
    """Walk the history once; tolerant of shapes it does not know (they are skipped).
    `each`, if given, is handed every line on the way, in order: what another view needs
    from the history (the group's delivery) is gathered in this same pass.

    The hot loop only appends to flat lists; de-duplication and sorting of the
    records seen happen afterwards in numpy (a million operations in seconds).
    """
    want_indices, want_values = anomaly_refs(anomalies or {})
    linking = bool(want_values)
    pending: dict[int, dict[str, Any]] = {}
    inv_t: list[int] = []
    comp_t: list[int] = []
    f_codes: list[int] = []
    kinds: list[int] = []
    procs: list[int] = []
    f_index: dict[str, int] = {}
    writer_of: dict[int, int] = {}
    r_key: list[int] = []  # every record seen: key, offset, value, time
    r_off: list[int] = []
    r_val: list[int] = []
    r_t: list[int] = []
    r_src: list[int] = []  # 0: a send (ok or info), 1: an ok poll, 2: another completion's poll
    a_key: list[int] = []  # acknowledged sends: key, offset (-1 unknown), value, time
    a_off: list[int] = []
    a_val: list[int] = []
    a_t: list[int] = []
    involved: set[int] = set()
    by_value: dict[int, list[int]] = {}
    reads_linked: dict[int, int] = {}
    pair_inv: list[int] = []  # every client invoke's index with its completion's
    pair_comp: list[int] = []
    txn_inv: list[int] = []
    txn_comp: list[int] = []
    txn_kind: list[int] = []
    aborted: set[int] = set()

    def link(v: int, *indices: Any) -> None:
        for i in indices:
            if type(i) is int:
                involved.add(i)
                by_value.setdefault(v, []).append(i)

    nem_pending: dict[str, Any] | None = None
    nem: list[NemesisSpan] = []
    nem_rows: list[dict[str, Any]] = []
    end_ns = 0
    client_ops = 0
    kind_codes = KIND_CODES
    for op in ops:
        if each is not None:
            each(op)
        t = op.get("time")
        if type(t) is not int:
            t = end_ns
        elif t > end_ns:
            end_ns = t
        p = op.get("process")
        typ = op.get("type")
        if type(p) is not int:
            if p == "nemesis":
                f = op.get("f")
                if typ == "invoke":
                    nem_pending = op
                else:
                    start = nem_pending if nem_pending is not None \
                        and nem_pending.get("f") == f else op
                    t0 = start.get("time", t)
                    nidx = start.get("index")
                    nem.append((nidx if type(nidx) is int else 0, str(f), op.get("value"),
                                t0 if type(t0) is int else t, t))
                    nem_rows.append(op)
                    nem_pending = None
            continue
        idx = op.get("index")
        if idx in want_indices:
            involved.add(idx)
        value = op.get("value")
        if typ == "invoke":
            pending[p] = op
            client_ops += 1
            if type(value) is list:
                for mop in value:
                    if type(mop) is list and len(mop) == 3 and mop[0] == "send":
                        v = mop[2]
                        if type(v) is int:
                            writer_of[v] = p
                            if linking and v in want_values:
                                link(v, idx)
            continue
        inv = pending.pop(p, None)
        if inv is not None:
            i0 = inv.get("index")
            if type(i0) is int and type(idx) is int:
                pair_inv.append(i0)
                pair_comp.append(idx)
        kind = kind_codes.get(typ)  # type: ignore[arg-type]
        if inv is None or kind is None:
            continue
        f = op.get("f")
        code = f_index.get(f)  # type: ignore[arg-type]
        if code is None:
            code = f_index[str(f)] = len(f_index)
        t_inv = inv.get("time")
        inv_t.append(t_inv if type(t_inv) is int else t)
        comp_t.append(t)
        f_codes.append(code)
        kinds.append(kind)
        procs.append(p)
        if f == "txn":
            if type(i0) is int and type(idx) is int:
                txn_inv.append(i0)
                txn_comp.append(idx)
                txn_kind.append(kind)
            if kind == 1:  # its sends did not happen: a read of one is an aborted read
                sent = inv.get("value")
                for mop in sent if type(sent) is list else ():
                    if type(mop) is list and len(mop) == 3 and mop[0] == "send" \
                            and type(mop[2]) is int:
                        aborted.add(mop[2])
        if type(value) is not list:
            continue
        for mop in value:
            if type(mop) is not list or len(mop) < 2:
                continue
            m0 = mop[0]
            if m0 == "poll":
                polled = mop[1]
                if type(polled) is not dict:
                    continue
                for ks, recs in polled.items():
                    try:
                        k = int(ks)
                    except ValueError:
                        continue
                    if type(recs) is not list:
                        continue
                    for rec in recs:
                        if type(rec) is not list or len(rec) != 2:
                            continue
                        o, v = rec
                        if type(o) is not int or type(v) is not int:
                            continue
                        r_key.append(k)
                        r_off.append(o)
                        r_val.append(v)
                        r_t.append(t)
                        r_src.append(1 if kind == 0 else 2)
                        if linking and v in want_values:
                            n = reads_linked.get(v, 0)
                            if n < READS_PER_VALUE:
                                reads_linked[v] = n + 1
                                link(v, inv.get("index"), idx)
            elif m0 == "send" and len(mop) == 3:
                rec = mop[2]
                k = mop[1]
                pair = type(rec) is list and len(rec) == 2
                sent = rec[1] if pair else rec
                if linking and type(sent) is int and sent in want_values:
                    link(sent, inv.get("index"), idx)
                known = pair and type(rec[0]) is int
                if kind == 0 and type(sent) is int and type(k) is int:
                    a_key.append(k)
                    a_off.append(rec[0] if known else -1)
                    a_val.append(sent)
                    a_t.append(t)
                if kind != 1 and known and type(rec[1]) is int and type(k) is int:
                    r_key.append(k)
                    r_off.append(rec[0])
                    r_val.append(rec[1])
                    r_t.append(t)
                    r_src.append(0)
    keys = _key_logs(r_key, r_off, r_val, r_t, writer_of)
    acked = _acked(a_key, a_off, a_val, a_t, r_key, r_off, r_val, r_src)
    completions = Completions(
        invoke_ns=np.asarray(inv_t, dtype=np.int64), complete_ns=np.asarray(comp_t, dtype=np.int64),
        f_code=np.asarray(f_codes, dtype=np.int64), kind=np.asarray(kinds, dtype=np.int64),
        process=np.asarray(procs, dtype=np.int64), f_names=tuple(f_index))
    return HistoryWalk(completions=completions, nemesis=nem, nemesis_ops=nem_rows,
                       end_ns=end_ns, keys=keys, involved=sorted(involved),
                       by_value={v: sorted(set(ix)) for v, ix in by_value.items()},
                       processes=sorted(set(procs)), op_count=len(ops), client_ops=client_ops,
                       txns=Txns.of(txn_inv, txn_comp, txn_kind, aborted), acked=acked,
                       pairs=Pairs(np.asarray(pair_inv, dtype=np.int64),
                                   np.asarray(pair_comp, dtype=np.int64)))


def _acked(a_key: list[int], a_off: list[int], a_val: list[int], a_t: list[int],
           r_key: list[int], r_off: list[int], r_val: list[int], r_src: list[int]) -> Acked:
    src = np.asarray(r_src, dtype=np.int64)
    val = np.asarray(r_val, dtype=np.int64)
    key = np.asarray(r_key, dtype=np.int64)
    off = np.asarray(r_off, dtype=np.int64)
    read_max: dict[int, int] = {}
    ok = src == 1
    if ok.any():
        k, o = key[ok], off[ok]
        order = np.lexsort((o, k))
        k, o = k[order], o[order]
        last = np.flatnonzero(np.append(k[1:] != k[:-1], True))
        read_max = dict(zip(k[last].tolist(), o[last].tolist(), strict=True))
    return Acked(key=np.asarray(a_key, dtype=np.int64), offset=np.asarray(a_off, dtype=np.int64),
                 value=np.asarray(a_val, dtype=np.int64), time_ns=np.asarray(a_t, dtype=np.int64),
                 read_values=np.unique(val[src > 0]), read_max=read_max)


def _key_logs(r_key: list[int], r_off: list[int], r_val: list[int], r_t: list[int],
              writer_of: dict[int, int]) -> dict[int, KeyLog]:
    """Each key's distinct (offset, value) records with the first time seen and the writer."""
    if not r_key:
        return {}
    key = np.asarray(r_key, dtype=np.int64)
    off = np.asarray(r_off, dtype=np.int64)
    val = np.asarray(r_val, dtype=np.int64)
    t = np.asarray(r_t, dtype=np.int64)
    order = np.lexsort((t, val, off, key))
    key, off, val, t = key[order], off[order], val[order], t[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = (key[1:] != key[:-1]) | (off[1:] != off[:-1]) | (val[1:] != val[:-1])
    key, off, val, t = key[first], off[first], val[first], t[first]
    if writer_of:
        wv = np.fromiter(writer_of.keys(), dtype=np.int64, count=len(writer_of))
        wp = np.fromiter(writer_of.values(), dtype=np.int64, count=len(writer_of))
        srt = np.argsort(wv)
        wv, wp = wv[srt], wp[srt]
        pos = np.clip(np.searchsorted(wv, val), 0, len(wv) - 1)
        writer = np.where(wv[pos] == val, wp[pos], -1)
    else:
        writer = np.full(len(val), -1, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(key)) + 1
    out: dict[int, KeyLog] = {}
    for lo, hi in zip(np.concatenate(([0], bounds)).tolist(),
                      np.concatenate((bounds, [len(key)])).tolist(), strict=True):
        out[int(key[lo])] = KeyLog(time_ns=t[lo:hi], offset=off[lo:hi], value=val[lo:hi],
                                   writer=writer[lo:hi])
    return out
