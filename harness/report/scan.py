"""One pass over a history: what the report's figures and tables need, as compact arrays.

Pairs each client invocation with its completion (latency, throughput, timeline),
collects the log of each key as clients saw it (offset, value, writer, first time
seen), the nemesis operations (fault windows), and the operations that touch
the values and indices that the checkers' anomaly examples name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.report.faults import FaultWindow, fault_windows

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
class Scan:
    completions: Completions
    faults: list[FaultWindow]
    nodes: list[str]
    end_ns: int
    keys: dict[int, KeyLog]
    involved: list[int]  # history indices of operations the anomaly examples touch
    by_value: dict[int, list[int]]  # anomaly value -> indices of ops that sent or read it
    processes: list[int]
    op_count: int
    client_ops: int
    nemesis_ops: list[dict[str, Any]] = field(default_factory=list)


def anomaly_refs(anomalies: Mapping[str, Any]) -> tuple[set[int], set[int]]:
    """(history indices, values) that the anomaly examples name, for linking to ops."""
    indices: set[int] = set()
    values: set[int] = set()

    def walk(x: Any, key: str | None) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, str(k))
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


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def scan(ops: list[dict[str, Any]], anomalies: Mapping[str, Any] | None = None) -> Scan:
    """Walk the history once; tolerant of shapes it does not know (they are skipped)."""
    want_indices, want_values = anomaly_refs(anomalies or {})
    pending: dict[Any, dict[str, Any]] = {}
    inv_t: list[int] = []
    comp_t: list[int] = []
    f_codes: list[int] = []
    kinds: list[int] = []
    procs: list[int] = []
    f_index: dict[str, int] = {}
    writer_of: dict[int, int] = {}
    seen: dict[int, dict[tuple[int, int], int]] = {}  # key -> (offset, value) -> first time
    involved: set[int] = set()
    by_value: dict[int, list[int]] = {}

    def link(v: int, *indices: Any) -> None:
        for i in indices:
            if isinstance(i, int):
                involved.add(i)
                by_value.setdefault(v, []).append(i)
    reads_linked: dict[int, int] = {}
    nem_pending: dict[str, Any] | None = None
    nem: list[tuple[int, str, Any, int, int]] = []
    nem_rows: list[dict[str, Any]] = []
    nodes: set[str] = set()
    end_ns = 0
    client_ops = 0
    for op in ops:
        t = op.get("time")
        t = t if isinstance(t, int) else end_ns
        end_ns = max(end_ns, t)
        p = op.get("process")
        typ = op.get("type")
        f = op.get("f")
        if p == "nemesis":
            if typ == "invoke":
                nem_pending = op
            else:
                start = nem_pending if nem_pending is not None and nem_pending.get("f") == f else op
                t0 = start.get("time", t)
                nidx = _int(start.get("index")) or 0
                nem.append((nidx, str(f), op.get("value"), t0 if isinstance(t0, int) else t, t))
                nem_rows.append(op)
                nem_pending = None
            continue
        if not isinstance(p, int) or isinstance(p, bool):
            continue
        idx = _int(op.get("index"))
        if idx is not None and idx in want_indices:
            involved.add(idx)
        value = op.get("value")
        if typ == "invoke":
            pending[p] = op
            client_ops += 1
            if f in ("send", "txn") and isinstance(value, list):
                for mop in value:
                    if isinstance(mop, list) and len(mop) == 3 and mop[0] == "send":
                        v = mop[2]
                        if isinstance(v, int):
                            writer_of[v] = p
                            if v in want_values:
                                link(v, idx)
            continue
        inv = pending.pop(p, None)
        if inv is None or typ not in KIND_CODES:
            continue
        code = f_index.setdefault(str(f), len(f_index))
        t_inv = inv.get("time")
        inv_t.append(t_inv if isinstance(t_inv, int) else t)
        comp_t.append(t)
        f_codes.append(code)
        kinds.append(KIND_CODES[typ])
        procs.append(p)
        if not isinstance(value, list):
            continue
        for mop in value:
            if not isinstance(mop, list) or len(mop) < 2:
                continue
            if mop[0] == "send" and len(mop) == 3:
                rec = mop[2]
                k = mop[1]
                sent = rec[1] if type(rec) is list and len(rec) == 2 else rec
                if type(sent) is int and sent in want_values:
                    link(sent, inv.get("index"), idx)
                if typ != "fail" and type(rec) is list and len(rec) == 2 \
                        and type(rec[0]) is int and type(rec[1]) is int and type(k) is int:
                    log = seen.setdefault(k, {})
                    pair = (rec[0], rec[1])
                    if pair not in log or log[pair] > t:
                        log[pair] = t
            elif mop[0] == "poll" and isinstance(mop[1], dict):
                for ks, recs in mop[1].items():
                    try:
                        k = int(ks)
                    except ValueError:
                        continue
                    log = seen.setdefault(k, {})
                    if not isinstance(recs, list):
                        continue
                    for rec in recs:
                        if type(rec) is not list or len(rec) != 2 or type(rec[0]) is not int \
                                or type(rec[1]) is not int:
                            continue
                        pair = (rec[0], rec[1])
                        if pair not in log:
                            log[pair] = t
                        if rec[1] in want_values:
                            n = reads_linked.get(rec[1], 0)
                            if n < READS_PER_VALUE:
                                reads_linked[rec[1]] = n + 1
                                link(rec[1], inv.get("index"), idx)
    for row in nem_rows:
        nodes.update(_nodes_of(row.get("value")))
    keys = {k: _key_log(log, writer_of) for k, log in sorted(seen.items())}
    completions = Completions(
        invoke_ns=np.asarray(inv_t, dtype=np.int64), complete_ns=np.asarray(comp_t, dtype=np.int64),
        f_code=np.asarray(f_codes, dtype=np.int64), kind=np.asarray(kinds, dtype=np.int64),
        process=np.asarray(procs, dtype=np.int64), f_names=tuple(f_index))
    windows = fault_windows(nem, end_ns)
    nodes.update(w.node for w in windows)
    return Scan(completions=completions, faults=windows, nodes=sorted(nodes), end_ns=end_ns,
                keys=keys, involved=sorted(involved),
                by_value={v: sorted(set(ix)) for v, ix in by_value.items()},
                processes=sorted(set(procs)),
                op_count=len(ops), client_ops=client_ops, nemesis_ops=nem_rows)


def _nodes_of(value: Any) -> Iterable[str]:
    from harness.report.faults import fault_nodes

    return fault_nodes(value)


def _key_log(log: dict[tuple[int, int], int], writer_of: dict[int, int]) -> KeyLog:
    items = sorted(log.items(), key=lambda kv: (kv[0][0], kv[1]))
    offsets = np.fromiter((o for (o, _), _ in items), dtype=np.int64, count=len(items))
    values = [v for (_, v), _ in items]
    vals = np.fromiter((v if isinstance(v, int) else -1 for v in values), dtype=np.int64,
                       count=len(items))
    times = np.fromiter((t for _, t in items), dtype=np.int64, count=len(items))
    writers = np.fromiter((writer_of.get(v, -1) if isinstance(v, int) else -1 for v in values),
                          dtype=np.int64, count=len(items))
    return KeyLog(time_ns=times, offset=offsets, value=vals, writer=writers)
