"""When did a run first show an anomaly? From results.json examples and the history.

An example names operations (`index`, `indices`, `ops`) or values (`value`,
`values`); it is evidence from the latest of those moments (a value counts from
its send's completion). The first anomaly is the earliest such moment over all
examples of the bad types, but never before the first fault was injected: a
lost write's evidence is its acknowledgement, which may precede the crash that
loses it (the write was fine when acknowledged; the fault is what broke it).
Only the examples results.json keeps (up to 32 per type) are seen, so this is
an upper bound.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.faultkinds import KINDS, stops

NS = 1_000_000_000
HEALS = frozenset(stops(KINDS))  # a nemesis invoke of any other verb injects a fault


def _ints(x: Any) -> Iterable[int]:
    if isinstance(x, bool):
        return
    if isinstance(x, int):
        yield x
    elif isinstance(x, list | tuple):
        for y in x:
            yield from _ints(y)
    elif isinstance(x, Mapping):
        for y in x.values():
            yield from _ints(y)


def first_anomaly_s(run_dir: Path, results: Mapping[str, Any]) -> float | None:
    bad = set(results.get("bad_anomaly_types") or [])
    examples = [(t, e) for t, es in (results.get("anomalies") or {}).items() if t in bad
                for e in es if isinstance(e, Mapping)]
    if not examples:
        return None
    times: dict[int, int] = {}
    sent_at: dict[int, int] = {}  # value -> when its send completed
    pending: dict[Any, list[int]] = {}
    first_fault: int | None = None
    with open(run_dir / "history.jsonl", "rb") as fh:
        for line in fh:
            op = json.loads(line)
            times[op["index"]] = op["time"]
            if op["process"] == "nemesis":
                if first_fault is None and op["type"] == "invoke" and op["f"] not in HEALS:
                    first_fault = op["time"]
                continue
            if op["f"] not in ("send", "txn"):
                continue
            if op["type"] == "invoke":
                pending[op["process"]] = [int(m[2]) for m in op.get("value") or []
                                          if isinstance(m, list) and len(m) == 3
                                          and m[0] == "send" and isinstance(m[2], int)]
            else:
                for v in pending.pop(op["process"], []):
                    sent_at.setdefault(v, op["time"])
    best: int | None = None
    for _, e in examples:
        moments = [times[i] for k in ("index", "indices", "ops") for i in _ints(e.get(k))
                   if i in times]
        moments += [sent_at[v] for k in ("value", "values") for v in _ints(e.get(k))
                    if v in sent_at]
        if moments:
            t = max(moments)
            best = t if best is None else min(best, t)
    if best is None:
        return None
    return max(best, first_fault or 0) / NS
