"""Tables of the report built from run files: verdict, settings, anomalies, ops, replicas, logs.

Plain data for the template; the template escapes every value (autoescape).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.report.faults import in_force
from harness.report.scan import Scan
from harness.report.sentences import Sentence, cycle_steps, op_facts, op_words, sentence
from harness.runfiles.walk import KINDS, Txns, anomaly_refs

VALUE_CHARS = 400  # an op's value is cut to this many characters in the ops table
REPLICA_KEYS = 16
REPLICA_ROWS = 60
CONTEXT_ROWS = 3


@dataclass(frozen=True, slots=True)
class Verdict:
    label: str  # "valid", "invalid", "unknown", "not checked"
    css: str
    detail: str


def verdict(results: Mapping[str, Any] | None) -> Verdict:
    if results is None:
        return Verdict("not checked", "unchecked", "no results.json: run `undertow check` on it")
    v = results.get("valid")
    err = results.get("error")
    if v is True:
        return Verdict("valid", "valid", "no anomaly that the settings forbid")
    if v is False:
        bad = results.get("bad_anomaly_types") or []
        return Verdict("invalid", "invalid", "forbidden anomalies: " + ", ".join(map(str, bad)))
    return Verdict("unknown", "unknown", str(err) if err else "the checkers could not decide")


def dumps(x: Any) -> str:
    return orjson.dumps(x, option=orjson.OPT_NON_STR_KEYS).decode()


def cut(text: str, n: int = VALUE_CHARS) -> str:
    return text if len(text) <= n else text[:n] + f"… ({len(text) - n} more characters)"


# the fault timeline, the recovery section, the fault legend
SHOWN_ELSEWHERE = ("nemesis_plan", "nemesis_phases", "fault_kinds")


def plain(x: Any) -> str:
    """One setting as words: lists joined, nothing as "none"; JSON only for what is left."""
    if x is None or x == {} or x == []:
        return "none"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, str | int | float):
        return str(x)
    if isinstance(x, list | tuple):
        return ", ".join(plain(v) if not isinstance(v, list | tuple)
                         else " ".join(plain(w) for w in v) for v in x)
    if isinstance(x, dict):  # words, never a JSON object on the page
        return "; ".join(f"{k} {plain(v)}" for k, v in x.items())
    return str(x)


def flatten(prefix: str, x: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(x, dict) and x:
        for k, v in x.items():
            flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out.append((prefix, plain(x)))


def settings(test: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if test:
        flatten("", {k: v for k, v in test.items() if k not in SHOWN_ELSEWHERE}, rows)
    return rows


def stats(results: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The checkers' stats, one value a row; liveness has its own section."""
    rows: list[tuple[str, str]] = []
    st = (results or {}).get("stats") or {}
    if isinstance(st, dict):
        flatten("", {k: v for k, v in st.items() if k != "liveness"}, rows)
    return sorted(rows)


@dataclass(frozen=True, slots=True)
class Example:
    parts: Sentence  # the example as a sentence, its operations linked
    steps: list[Sentence]  # a cycle's steps, one edge each (empty for other types)
    ops: list[int]
    when: str = ""  # the time of its first operation and the faults in force then
    src: int = -1  # its position in results.json's list of this type


@dataclass(frozen=True, slots=True)
class AnomalyType:
    name: str
    count: int
    bad: bool
    examples: list[Example]


def _is_cycle(ex: Any) -> bool:
    return isinstance(ex, dict) and isinstance(ex.get("ops"), list) and "edges" in ex


def anomalies(results: Mapping[str, Any] | None, scan: Scan,
              ops: list[dict[str, Any]] | None = None) -> list[AnomalyType]:
    """Each anomaly type with its examples as sentences (see report.sentences)."""
    if not results:
        return []
    counts = results.get("counts") or {}
    found = results.get("anomalies") or {}
    bad = set(results.get("bad_anomaly_types") or [])
    names = list(dict.fromkeys([*map(str, results.get("anomaly_types") or []), *counts, *found]))
    listed = {n: (found.get(n) or []) for n in names}
    listed = {n: (x if isinstance(x, list) else [x]) for n, x in listed.items()}
    cycle_ops = {i for exs in listed.values() for ex in exs if _is_cycle(ex)
                 for i in ex["ops"] if isinstance(i, int)}
    read_at = {(ex["key"], ex["max_read_offset"]) for ex in listed.get("lost-write", [])
               if isinstance(ex, dict) and isinstance(ex.get("key"), int)
               and isinstance(ex.get("max_read_offset"), int)}
    facts, readers = op_facts(ops or [], cycle_ops, read_at)
    placed = _placed(scan, {k for f in facts.values() for k, _, _ in f.sends})
    out = []
    for name in names:
        examples = []
        for src, ex in enumerate(listed[name]):
            indices, values = anomaly_refs({name: [ex]})
            linked = set(indices)
            for v in values:
                linked.update(scan.by_value.get(v, ()))
            if _is_cycle(ex):
                head, steps = cycle_steps(ex, facts, placed)
                examples.append(Example(head, steps, sorted(linked),
                                        _when(ops or [], linked, scan), src))
            elif isinstance(ex, dict):
                examples.append(Example(sentence(name, ex, readers, scan.by_value), [],
                                        sorted(linked), _when(ops or [], linked, scan), src))
            else:
                examples.append(Example([(cut(str(ex), 200), None)], [], sorted(linked),
                                        "", src))
        examples.sort(key=lambda e: len(e.steps))  # the shortest witness first
        count = counts.get(name, len(examples))
        out.append(AnomalyType(name, count if isinstance(count, int) else len(examples),
                               name in bad, examples))
    out.sort(key=lambda a: (not a.bad, _rank(a.name), a.name))
    return out


# losses first: cycles and offset anomalies are often their consequence (offsets reused)
FIRST = ("replica-lost-write", "lost-write", "unseen", "inconsistent-offsets", "duplicate",
         "replica-divergence")


def _rank(name: str) -> int:
    if name in FIRST:
        return FIRST.index(name)
    return len(FIRST) + (1 if name.startswith(("G0", "G1c")) else 0)


def _when(ops: list[dict[str, Any]], indices: set[int], scan: Scan) -> str:
    """"at 18.3 s, during kill on n2": the example's first operation's time and the faults
    in force then ("" when the history does not say)."""
    times = [ops[i]["time"] for i in indices
             if 0 <= i < len(ops) and ops[i].get("index") == i
             and type(ops[i].get("time")) is int]
    if not times:
        return ""
    t = min(times)
    faults = in_force(scan.faults, t)
    return f"at {t / 1e9:.1f} s, " + (f"during {'; '.join(faults)}" if faults
                                      else "with no fault in force")


def _placed(scan: Scan, keys: set[int]) -> dict[int, dict[int, int]]:
    """key -> value -> the lowest offset it was seen at (write-write order), for keys."""
    out: dict[int, dict[int, int]] = {}
    for k in keys:
        log = scan.keys.get(k)
        if log is None:
            continue
        m: dict[int, int] = {}
        for o, v in zip(log.offset.tolist(), log.value.tolist(), strict=True):
            if v not in m or o < m[v]:
                m[v] = o
        out[k] = m
    return out


def anomaly_keys(results: Mapping[str, Any] | None) -> list[int]:
    keys: list[int] = []
    for exs in ((results or {}).get("anomalies") or {}).values():
        for ex in exs if isinstance(exs, list) else []:
            if isinstance(ex, dict) and isinstance(ex.get("key"), int) and ex["key"] not in keys:
                keys.append(ex["key"])
    return keys


@dataclass(frozen=True, slots=True)
class OpRow:
    index: int
    time_s: str
    process: str
    type: str
    f: str
    value: str
    error: str
    outcome: str = ""  # a txn's: committed, aborted or unknown (its invoke's row too)


# a transaction's outcome by its completion (HISTORY.md: fail means certainly not committed)
TXN_OUTCOMES = {"ok": "committed", "fail": "aborted", "info": "unknown"}


def txn_outcome(op: Mapping[str, Any], txns: Txns | None) -> str:
    """committed, aborted or unknown for a `txn` operation's invoke or completion; "" else.
    An invoke with no completion is unknown, as the contract reads it."""
    if op.get("f") != "txn":
        return ""
    kind = txns.kind_of(op["index"]) if txns is not None and isinstance(op.get("index"), int) \
        else None
    typ = KINDS[kind] if kind is not None else op.get("type")
    return TXN_OUTCOMES.get(str(typ), "unknown")


def op_rows(ops: list[dict[str, Any]], indices: list[int],
            txns: Txns | None = None) -> list[OpRow]:
    """The rows of the ops table, for the given history indices (those anomalies touch);
    txns (the walk's) gives each transaction's outcome on its invoke's row as well."""
    by_index: dict[int, dict[str, Any]] = {}
    missing = []
    for i in indices:
        if 0 <= i < len(ops) and ops[i].get("index") == i:
            by_index[i] = ops[i]
        else:
            missing.append(i)
    if missing:
        want = set(missing)
        for op in ops:
            if op.get("index") in want:
                by_index[op["index"]] = op
    rows = []
    for i in sorted(by_index):
        op = by_index[i]
        t = op.get("time")
        rows.append(OpRow(i, f"{t / 1e9:.6f}" if isinstance(t, int) else "?",
                          str(op.get("process")), str(op.get("type")), str(op.get("f")),
                          op_words(str(op.get("f")), op.get("value")),
                          "" if op.get("error") is None else cut(str(op.get("error"))),
                          txn_outcome(op, txns)))
    return rows


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    key: int
    nodes: list[str]
    summary: list[str]  # per node: "hw H leo L epoch E"
    rows: list[tuple[int, list[tuple[str, str]], bool]]  # offset, (text, css) per node, conflict
    conflicts: int


def replica_divergence(replicas: list[dict[str, Any]] | None,
                       focus_keys: list[int]) -> tuple[list[ReplicaKey], int]:
    """Keys whose replicas differ (a value conflict, or a committed offset one node lacks)."""
    if not replicas:
        return [], 0
    logs: dict[int, dict[str, dict[int, Any]]] = {}
    summ: dict[int, dict[str, dict[str, Any]]] = {}
    for r in replicas:
        k, node = r.get("key"), str(r.get("node"))
        if not isinstance(k, int):
            continue
        if "offset" in r:
            logs.setdefault(k, {}).setdefault(node, {})[r["offset"]] = r.get("value")
        else:
            summ.setdefault(k, {})[node] = r
    out: list[ReplicaKey] = []
    n_keys = 0
    for k in sorted(set(logs) | set(summ), key=lambda k: (k not in focus_keys, k)):
        nodes = sorted(set(logs.get(k, {})) | set(summ.get(k, {})))
        per = logs.get(k, {})
        hw = {n: summ.get(k, {}).get(n, {}).get("hw", 0) for n in nodes}
        offsets = sorted({o for n in nodes for o in per.get(n, {}) if isinstance(o, int)})
        bad = _differing(nodes, per, hw)
        if not bad:
            continue
        n_keys += 1
        if len(out) >= REPLICA_KEYS:
            continue
        show: set[int] = set()
        for o in bad:
            i = bisect.bisect_left(offsets, o)
            show.update(offsets[max(0, i - CONTEXT_ROWS): i + CONTEXT_ROWS + 1])
        rows = []
        bad_set = set(bad)
        for o in sorted(show)[:REPLICA_ROWS]:
            cells = []
            for n in nodes:
                if o in per.get(n, {}):
                    committed = isinstance(hw[n], int) and o < hw[n]
                    cells.append((dumps(per[n][o]), "c" if committed else "u"))
                else:
                    cells.append(("—", "m"))
            rows.append((o, cells, o in bad_set))
        summary = []
        for n in nodes:
            s = summ.get(k, {}).get(n, {})
            summary.append(f"hw {s.get('hw', '?')} leo {s.get('leo', '?')} "
                           f"epoch {s.get('leader_epoch', '?')}")
        out.append(ReplicaKey(k, nodes, summary, rows, len(bad)))
    return out, n_keys


def _differing(nodes: list[str], per: dict[str, dict[int, Any]],
               hw: dict[str, Any]) -> list[int]:
    """Offsets where values conflict, or that a replica lacks below its own hw.

    Whole logs are compared first (a C-speed dict equality), so agreeing keys cost
    almost nothing; only offsets that differ between some pair are examined.
    """
    logs = [per.get(n, {}) for n in nodes]
    ref = logs[0]
    cand: set[int] = set()
    for d in logs[1:]:
        if d == ref:
            continue
        cand |= d.keys() ^ ref.keys()
        cand.update(o for o in d.keys() & ref.keys() if d[o] != ref[o])
    bad = []
    for o in sorted(c for c in cand if isinstance(c, int)):
        vals = {repr(d[o]) for d in logs if o in d}
        gap = any(o not in d and isinstance(hw[n], int) and o < hw[n]
                  for n, d in zip(nodes, logs, strict=True))
        if len(vals) > 1 or gap:
            bad.append(o)
    return bad


@dataclass(frozen=True, slots=True)
class NodeFiles:
    node: str
    main: list[str]  # the broker's own log and config, relative paths
    data: list[str]  # everything in sub-folders (segment files, checkpoints): folded


def node_logs(run_dir: Path) -> list[NodeFiles]:
    """Each node's collected files from nodes/<node>/: its own files (log, config) first,
    the data files under its sub-folders apart."""
    nodes_dir = run_dir / "nodes"
    if not nodes_dir.is_dir():
        return []
    out = []
    for d in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
        files = sorted(f for f in d.rglob("*") if f.is_file())
        main = [f for f in files if f.parent == d]
        main.sort(key=lambda f: (f.suffix not in (".log", ".txt"), f.name))
        out.append(NodeFiles(d.name, [str(f.relative_to(run_dir)) for f in main],
                             [str(f.relative_to(run_dir)) for f in files if f.parent != d]))
    return out
