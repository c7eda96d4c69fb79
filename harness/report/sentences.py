"""Anomaly examples as sentences, with the operations they name as links.

results.json keeps each example as data (HISTORY.md); a reader wants to know what
happened: which value, which key and offset, which operations and processes. One
sentence form per anomaly type; a cycle reads as its steps, one edge each with its
reason, and a run of write-write steps along one key is folded into one line.
Facts the example does not carry (what an operation sent or read, who read past a
lost write) come from the history, read once for the operations named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A sentence: text pieces, each with the history index of the operation it links to.
Part = tuple[str, int | None]
Sentence = list[Part]

EDGE_WORDS = {"ww": "write-write", "wr": "write-read", "process": "process order",
              "realtime": "real time"}


@dataclass
class OpFacts:
    """What one operation did, from its invoke and completion lines."""

    index: int
    process: Any = None
    f: str = ""
    type: str = "invoke"
    sends: list[tuple[int, int, int | None]] = field(default_factory=list)  # key, value, offset
    reads: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # key -> (off, val)


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _micro(op: Mapping[str, Any], facts: OpFacts) -> None:
    value = op.get("value")
    if not isinstance(value, list):
        return
    sends: list[tuple[int, int, int | None]] = []
    for m in value:
        if not isinstance(m, list) or not m:
            continue
        if m[0] == "send" and len(m) == 3 and _int(m[1]) is not None:
            v = m[2]
            if isinstance(v, list) and len(v) == 2 and _int(v[1]) is not None:
                sends.append((m[1], v[1], _int(v[0])))
            elif _int(v) is not None:
                sends.append((m[1], v, None))
        elif m[0] == "poll" and len(m) == 2 and isinstance(m[1], dict):
            for k, recs in m[1].items():
                if not str(k).isdigit() or not isinstance(recs, list):
                    continue
                got = [(r[0], r[1]) for r in recs if isinstance(r, list) and len(r) == 2
                       and _int(r[0]) is not None and _int(r[1]) is not None]
                facts.reads.setdefault(int(k), []).extend(got)
    if sends:
        facts.sends = sends


def op_facts(ops: Sequence[Mapping[str, Any]], wanted: Iterable[int],
             read_at: Iterable[tuple[int, int]] = ()) -> tuple[dict[int, OpFacts],
                                                              dict[tuple[int, int], int]]:
    """Facts of the wanted operations (by invoke index), and for each (key, offset) of
    read_at the first ok poll that read that record. One pass over the history."""
    want = set(wanted)
    want_read = set(read_at)
    facts: dict[int, OpFacts] = {}
    pending: dict[Any, OpFacts] = {}
    readers: dict[tuple[int, int], int] = {}
    if not want and not want_read:
        return facts, readers
    by_key: dict[str, set[int]] = {}
    for k, o in want_read:
        by_key.setdefault(str(k), set()).add(o)
    for pos, op in enumerate(ops):
        p = op.get("process")
        kind = op.get("type")
        if kind == "invoke":
            if want:
                i = _int(op.get("index"))
                i = pos if i is None else i
                if i in want:
                    f = OpFacts(i, p, str(op.get("f")))
                    _micro(op, f)
                    facts[i] = pending[p] = f
            continue
        if pending:
            done = pending.pop(p, None)
            if done is not None:
                done.type = str(kind)
                _micro(op, done)
        if by_key and kind == "ok" and op.get("f") in ("poll", "txn"):
            for k, o in _reads_wanted(op.get("value"), by_key):
                if (k, o) not in readers:
                    readers[(k, o)] = _invoke_of(ops, pos, p)
        if not pending and len(facts) == len(want) and len(readers) == len(want_read):
            break  # everything asked for is known
    return facts, readers


def _reads_wanted(value: Any, by_key: Mapping[str, set[int]]) -> list[tuple[int, int]]:
    """(key, offset) pairs of by_key that this poll's records hold (only those keys looked at)."""
    found: list[tuple[int, int]] = []
    if not isinstance(value, list):
        return found
    for m in value:
        if not (isinstance(m, list) and len(m) == 2 and m[0] == "poll" and isinstance(m[1], dict)):
            continue
        for ks, offsets in by_key.items():
            recs = m[1].get(ks)
            if isinstance(recs, list):
                found += [(int(ks), r[0]) for r in recs
                          if isinstance(r, list) and r and r[0] in offsets]
    return found


def _invoke_of(ops: Sequence[Mapping[str, Any]], pos: int, process: Any) -> int:
    """The invoke index of the completion at position pos (its process's last invoke)."""
    for j in range(pos - 1, -1, -1):
        if ops[j].get("process") == process and ops[j].get("type") == "invoke":
            i = _int(ops[j].get("index"))
            return j if i is None else i
    return pos


def op(i: int | None) -> Part:
    return (f"op {i}", i) if i is not None else ("an operation", None)


def t(text: str) -> Part:
    return (text, None)


def _proc(x: Any) -> str:
    return f"process {x}" if x is not None else "an unknown process"


def _at(offset: Any) -> str:
    return f"at offset {offset}" if _int(offset) is not None else "at an unknown offset"


def _list(xs: Iterable[Any]) -> str:
    xs = [str(x) for x in xs]
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1] if xs else "none"


def sentence(kind: str, ex: Mapping[str, Any], readers: Mapping[tuple[int, int], int],
             senders: Mapping[int, list[int]]) -> Sentence:
    """One example as a sentence; senders: value -> ops that sent or read it."""
    k, v, o = ex.get("key"), ex.get("value"), ex.get("offset")
    i, w = _int(ex.get("index")), ex.get("writer")
    if kind == "lost-write":
        m = ex.get("max_read_offset")
        j = readers.get((k, m)) if isinstance(k, int) and isinstance(m, int) else None
        by = [op(j), t(f" read key {k} up to offset {m}")] if j is not None \
            else [t(f"an ok poll read key {k} up to offset {m}")]
        return [t(f"value {v} was acknowledged {_at(o)} of key {k} ("), op(i),
                t(f", {_proc(w)}) and never read, although "), *by]
    if kind == "unseen":
        return [t(f"value {v} was acknowledged {_at(o)} of key {k} ("), op(i),
                t(f", {_proc(w)}) and never read, and no poll read past it (late or lost)")]
    if kind == "replica-lost-write":
        return [t(f"value {v}, acknowledged {_at(o)} of key {k} ("), op(i),
                t(f", {_proc(w)}), is on no replica after the final heal")]
    if kind == "inconsistent-offsets":
        vals = ex.get("values") or []
        out: Sentence = [t(f"offset {o} of key {k} holds {len(vals)} different values: "
                           f"{_list(vals)}")]
        return out + _seen_in([x for val in vals if isinstance(val, int)
                               for x in senders.get(val, [])])
    if kind == "duplicate":
        return [t(f"value {v} sits at {len(ex.get('offsets') or [])} offsets of key {k}: "
                  f"{_list(ex.get('offsets') or [])}"),
                *_seen_in(senders.get(v, []) if isinstance(v, int) else [])]
    if kind == "G1a":
        return [op(_int(ex.get("reader_index"))), t(f" read value {v} of key {k}, whose send ("),
                op(_int(ex.get("writer_index"))), t(") failed")]
    if kind == "precommitted-read":
        return [op(i), t(f" read value {v} of key {k} that it sent itself, before committing")]
    if kind == "stale-committed-offset":
        return _stale_offset(ex)
    if kind == "replica-divergence":
        if isinstance(ex.get("values"), dict):
            held = _list(f"{n} holds {val}" for n, val in sorted(ex["values"].items()))
            return [t(f"the replicas disagree at committed offset {o} of key {k}: {held}")]
        a, b = ([*list(ex.get("nodes") or []), "?", "?"])[:2]
        return [t(f"the committed logs of key {k} on {a} and {b} are not prefixes of one "
                  f"another: offsets {_list(ex.get('only_in_first') or [])} only on {a}, "
                  f"{_list(ex.get('only_in_second') or [])} only on {b}")]
    pair = _pair(kind, ex)
    if pair is not None:
        return pair
    return [t(f"{kind} on key {k}" if k is not None else kind)]


def _secs(ns: Any) -> str:
    return f"{ns / 1e9:.1f} s" if isinstance(ns, int) and ns >= 10**8 else \
        f"{ns / 1e6:.3f} ms" if isinstance(ns, int) else "an unknown time"


def _stale_offset(ex: Mapping[str, Any]) -> Sentence:
    """"process 4 committed offset 812 for key 3 at 12.4 s, acknowledged; process 7 asked
    at 13.1 s and was told 640"."""
    k, g = ex.get("key"), ex.get("group")
    of = f"key {k}" + (f" of group {g!r}" if g else "")
    got = ex.get("returned")
    told = "none (null)" if got is None else str(got)
    never = "" if ex.get("written_ever", True) else ", an offset no commit wrote"
    asked: Sentence = [t(f"{_proc(ex.get('process'))} asked ("), op(_int(ex.get("index"))),
                       t(f") at {_secs(ex.get('asked_ns'))} and was told {told}{never}")]
    if _int(ex.get("writer_index")) is None:
        return [t(f"for {of}, "), *asked, t(", which no order of its commits allows")]
    return [t(f"{_proc(ex.get('writer_process'))} committed offset {ex.get('committed')} for "
              f"{of} at {_secs(ex.get('acknowledged_ns'))} ("), op(_int(ex.get("writer_index"))),
            t("), acknowledged; "), *asked]


def _seen_in(ops: Iterable[int]) -> Sentence:
    found = sorted(set(ops))[:6]
    if not found:
        return []
    out: Sentence = [t(" (sent or read by ")]
    for n, x in enumerate(found):
        out += [t(", ") if n else t(""), op(x)]
    return [*out, t(")")]


def _pair(kind: str, ex: Mapping[str, Any]) -> Sentence | None:
    """The successive-pair types: two operations (or two records of one) on one key."""
    idx, offs, vals = ex.get("indices"), ex.get("offsets"), ex.get("values")
    if not (isinstance(idx, list) and isinstance(offs, list) and isinstance(vals, list)
            and len(idx) == len(offs) == len(vals) == 2):
        return None
    k, p = ex.get("key"), ex.get("process")
    (a, b), (oa, ob), (va, vb) = idx, offs, vals
    if kind == "poll-skip":
        return [t(f"{_proc(p)} read key {k} up to offset {oa} (value {va}) in "), op(a),
                t(", then its next poll "), op(b), t(f" started at offset {ob}, skipping records "
                                                      "in between")]
    if kind == "nonmonotonic-poll":
        return [t(f"{_proc(p)} read key {k} up to offset {oa} (value {va}) in "), op(a),
                t(", then its next poll "), op(b), t(f" went back to offset {ob} (value {vb})")]
    if kind == "int-poll-skip":
        return [t("inside "), op(b), t(f" ({_proc(p)}) the records of key {k} jump from offset "
                                        f"{oa} to {ob}, skipping records in between")]
    if kind == "int-nonmonotonic-poll":
        return [t("inside "), op(b), t(f" ({_proc(p)}) the records of key {k} go from offset "
                                       f"{oa} back to {ob}")]
    if kind == "nonmonotonic-send":
        return [t(f"{_proc(p)} sent value {va} to key {k} at offset {oa} in "), op(a),
                t(f", then value {vb} in "), op(b), t(f", which landed lower, at offset {ob}")]
    if kind == "int-send-skip":
        return [op(b), t(f" ({_proc(p)}) sent values {va} and {vb} to key {k} one after the "
                         f"other; they landed at offsets {oa} and {ob}, with other records "
                         "between them")]
    if kind == "int-nonmonotonic-send":
        return [op(b), t(f" ({_proc(p)}) sent values {va} then {vb} to key {k}; they landed in "
                         f"reverse order, at offsets {oa} and {ob}")]
    return None


def cycle_steps(ex: Mapping[str, Any], facts: Mapping[int, OpFacts],
                placed: Mapping[int, Mapping[int, int]]) -> tuple[Sentence, list[Sentence]]:
    """A cycle witness as its head sentence and one line per step (ww runs folded).

    placed: key -> value -> the lowest offset the value was seen at.
    """
    ops = [x for x in ex.get("ops") or [] if isinstance(x, int)]
    edges = [str(e) for e in ex.get("edges") or []]
    n = len(ops)
    size = ex.get("component_size")
    head: Sentence = [t(f"a cycle of {n} operations")]
    if isinstance(size, int) and size > n:
        head.append(t(f" (in a strongly connected group of {size})"))
    head.append(t(", each step an edge from one operation to the next, back to the first"))
    if ex.get("allowed"):
        head.append(t("; allowed: it passes through an operation that sends several messages"))
    steps: list[tuple[str, Sentence, tuple[int, int, int] | None]] = []
    for s in range(min(n, len(edges))):
        a, b = ops[s], ops[(s + 1) % n]
        kind = edges[s]
        fa, fb = facts.get(a), facts.get(b)
        if kind == "ww":
            kk = _ww(fa, fb, placed)
            if kk is not None:
                key, (va, oa), (vb, ob) = kk
                steps.append(("ww", [op(a), t(f" sent {va} to key {key} at offset {oa}; "),
                                     op(b), t(f" wrote {vb} at the next offset there, {ob} "
                                              "(write-write)")], (key, oa, ob)))
                continue
        if kind == "wr":
            kv = _wr(fa, fb, placed)
            if kv is not None:
                key, val, off = kv
                steps.append(("wr", [op(a), t(f" sent {val} to key {key} {_at(off)}; "),
                                     op(b), t(" read it (write-read)")], None))
                continue
        if kind == "realtime":
            steps.append((kind, [op(a), t(" completed before "), op(b),
                                 t(" was invoked (real time)")], None))
            continue
        if kind == "process":
            steps.append((kind, [op(b), t(f" is {_proc(fa.process if fa else None)}'s next "
                                          "operation after "), op(a), t(" (process order)")],
                          None))
            continue
        steps.append((kind, [op(a), t(" then "), op(b),
                             t(f" ({EDGE_WORDS.get(kind, kind)})")], None))
    return head, _fold(steps)


def _placed_offset(placed: Mapping[int, Mapping[int, int]], key: int, value: int,
                   offset: int | None) -> int | None:
    got = placed.get(key, {}).get(value)
    return got if got is not None else offset


def _ww(fa: OpFacts | None, fb: OpFacts | None, placed: Mapping[int, Mapping[int, int]]
        ) -> tuple[int, tuple[int, int], tuple[int, int]] | None:
    """The key where a's write sits just below b's (the closest pair)."""
    if fa is None or fb is None:
        return None
    best: tuple[int, int, tuple[int, int], tuple[int, int]] | None = None
    for ka, va, oa in fa.sends:
        pa = _placed_offset(placed, ka, va, oa)
        for kb, vb, ob in fb.sends:
            pb = _placed_offset(placed, kb, vb, ob)
            if ka == kb and pa is not None and pb is not None and pb > pa and \
                    (best is None or pb - pa < best[0]):
                best = (pb - pa, ka, (va, pa), (vb, pb))
    return None if best is None else (best[1], best[2], best[3])


def _wr(fa: OpFacts | None, fb: OpFacts | None, placed: Mapping[int, Mapping[int, int]]
        ) -> tuple[int, int, int | None] | None:
    if fa is None or fb is None:
        return None
    for k, v, o in fa.sends:
        if any(rv == v for _, rv in fb.reads.get(k, [])):
            return k, v, _placed_offset(placed, k, v, o)
    return None


def _fold(steps: list[tuple[str, Sentence, tuple[int, int, int] | None]]) -> list[Sentence]:
    """Runs of two or more write-write steps along one key, offsets rising, become one line."""
    out: list[Sentence] = []
    i = 0
    while i < len(steps):
        kind, text, where = steps[i]
        j = i
        if kind == "ww" and where is not None:
            while j + 1 < len(steps):
                nk, _, nw = steps[j + 1]
                cur = steps[j][2]
                if nk != "ww" or nw is None or cur is None or nw[0] != where[0] or \
                        nw[1] != cur[2]:
                    break
                j += 1
        if j > i and where is not None:
            last = steps[j][2]
            assert last is not None
            first_op = text[0][1]
            last_op = steps[j][1][2][1]
            out.append([t(f"key {where[0]}, offsets {where[1]} to {last[2]}: {j - i + 2} writes "
                          "in offset order, from "), op(first_op), t(" to "), op(last_op),
                        t(" (write-write)")])
        else:
            out.append(text)
        i = j + 1
    return out


def _offsets_words(kind: str, arg: Any) -> str:
    """A commit or committed micro-op in words: "commit key 3 at 812", "committed? keys
    3 and 4", "committed: key 3 at 812, key 4 none"."""
    if isinstance(arg, list):
        return f"committed? keys {_list(arg)}"
    if not isinstance(arg, Mapping):
        return kind
    said = [f"key {k} " + ("none" if o is None else f"at {o}") for k, o in arg.items()]
    return f"{kind}{'' if kind == 'commit' else ':'} " + ", ".join(said) if said else kind


def op_words(f: str, value: Any, limit: int = 400) -> str:
    """An operation's value in words, for the operations table (the JSON is in history.jsonl)."""
    if isinstance(value, Mapping):  # a nemesis operation
        from harness.report.plan import describe

        target, what = describe(value)
        return what if target == "—" else f"{target}: {what}"
    if value is None:
        return ""
    if not isinstance(value, list):
        return str(value)[:limit]
    if f in ("assign", "subscribe"):
        return f"keys {_list(value)}"
    said: list[str] = []
    for m in value:
        if not isinstance(m, list) or not m:
            continue
        if m[0] == "send" and len(m) == 3:
            v = m[2]
            if isinstance(v, list) and len(v) == 2:
                said.append(f"send {v[1]} to key {m[1]} {_at(v[0])}")
            else:
                said.append(f"send {v} to key {m[1]}")
        elif m[0] == "poll":
            recs = m[1] if len(m) == 2 and isinstance(m[1], Mapping) else {}
            parts = []
            for k, rs in recs.items():
                offs = [r[0] for r in rs if isinstance(r, list) and r]
                if len(offs) == 1:
                    parts.append(f"key {k} offset {offs[0]} ({rs[0][1]})")
                elif offs:
                    parts.append(f"key {k} offsets {offs[0]} to {offs[-1]} ({len(offs)} records)")
            said.append("poll: " + ("; ".join(parts) if parts else "nothing") if len(m) == 2
                        else "poll")
        elif m[0] in ("commit", "committed") and len(m) == 2:
            said.append(_offsets_words(m[0], m[1]))
    text = "; ".join(said)
    return text if len(text) <= limit else text[:limit] + "…"
