"""G0 / G1c cycles: strongly connected components over millions of operations.

scipy finds the components of each search stage on the whole graph
(write-write + write-read, then + process, then + real-time); only the
components a stage finds new are searched for a shortest witness cycle, with
Dijkstra in C on that component's edges alone (`_shortest_cycle`), so many
components, or a giant one, cost little. Real-time edges are never materialised
pairwise: every `ok` operation points to a barrier node at its completion time,
barriers form a chain in time, and each barrier points to the operations invoked
right after it (a path A -> B through barriers exists exactly when A completed
before B was invoked).

Memory is proportional to the graph, never to the history's bytes or poll sizes:
with n the operations that are graph nodes (those that must have happened), there
are at most 2n nodes (one barrier per distinct completion time) and
E = ww + wr + n (process) + 3n (real time) edges, where ww and wr are the log
job's edges: wr at most one per record read, ww one per placed value while each
offset holds one value (more only where an offset holds several). Node and edge
ids are int32 (int64 only past 2**31). The graph is built once as one CSR, each
row's targets sorted and distinct (5 bytes an edge: target, kinds). One search of
it tells whether it has any cycle at all; most graphs have none, and then no stage,
a part of it, can find one. Otherwise each stage's CSR is that one masked by kind.
The ww and wr edges come in chunks, copied into place as the log job's answer is
dropped, so at the peak about 15 bytes an edge are held (the unsorted copy and the
CSR while it is built; the CSR, a stage's mask and its copy later), plus about 40
per node; a witness search adds O(edges of its component) for that component only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

# linear coo -> csr keeping copies, and sorting each row in place: the public
# tocsr() would sum the copies' kinds
from scipy.sparse._sparsetools import coo_tocsr, csr_sort_indices
from scipy.sparse.csgraph import connected_components, dijkstra

from checkers.logcheck import EXAMPLES
from checkers.tables import OK, Tables

WW, WR, PR, RT = 1, 2, 4, 8
KIND_NAMES = {WW: "ww", WR: "wr", PR: "process", RT: "realtime"}
STAGES = ((WW | WR, 0, ""), (WW | WR | PR, PR, "-process"), (WW | WR | PR | RT, RT, "-realtime"))
MAX_CANDIDATES = 64  # edges tried as the start of a shortest cycle, per search


@dataclass(frozen=True)
class Cycle:
    type: str
    bad: bool
    witness: dict[str, Any]


# how many edges, then their (src, dst) op ids chunk by chunk (checkers.spark.take_edges)
Edges = tuple[int, Iterable[tuple[Any, Any]]]


def find_cycles(t: Tables, ww: Edges, wr: Edges) -> list[Cycle]:
    """One Cycle per strongly connected component that a stage finds new."""
    g = np.flatnonzero(t.op_must)
    n = len(g)
    if not n:
        return []
    gop = t.op[g]
    proc = t.op_process[g]
    ok = np.flatnonzero(t.op_status[g] == OK)
    cmp_ok = t.op_cmp_time[g][ok]
    times = np.sort(cmp_ok)
    times = times[np.r_[True, times[1:] != times[:-1]]] if len(times) else times
    nb = len(times)
    total = n + nb
    # one graph's worth of edges in int32 when the nodes allow (scipy's own index type)
    idx = np.int32 if max(total, ww[0] + wr[0] + 5 * n) < 2**31 else np.int64
    indptr, indices, kinds = _sorted_distinct(
        *_graph(t, g, gop, proc, ok, cmp_ok, times, ww, wr, idx))
    n_comp, whole = _strong_components(indptr, indices, total)
    if n_comp == total:
        return []  # no cycle: then no stage's graph, a part of this one, has one either

    n_sends = t.op_n_sends[g]
    cycles: list[Cycle] = []
    prev = np.arange(n)  # stage 0: every op its own component
    for allowed, required, suffix in STAGES:
        m = None if allowed == WW | WR | PR | RT else (kinds & allowed) != 0
        if m is None:
            labels = whole  # the whole graph's, found above
        else:
            _, labels = _strong_components(*_stage(indptr, indices, m, idx), total)
        real = labels[:n]
        # a component is new when its ops came from two or more components before
        # (some member's prev stands for its component; any other member differing
        # from it means two or more components joined)
        rep = np.empty(total, dtype=np.int64)
        rep[real] = prev
        new = np.unique(real[prev != rep[real]])
        if len(new):
            src, dst, ek = _component_edges(indptr, indices, kinds, m, labels, new)
            ls = labels[src]
            eo = np.argsort(ls, kind="stable")
            ls = ls[eo]
            bounds = np.searchsorted(ls, new), np.searchsorted(ls, new, "right")
            node_order = np.argsort(labels, kind="stable")
            nb_lo = np.searchsorted(labels[node_order], new)
            nb_hi = np.searchsorted(labels[node_order], new, "right")
            for j in range(len(new)):
                members = node_order[nb_lo[j]:nb_hi[j]]
                sel = eo[bounds[0][j]:bounds[1][j]]
                cycles.append(_classify(members, n, src[sel], dst[sel], ek[sel],
                                        allowed, required, suffix, n_sends, gop, proc))
        prev = real
    return cycles


def _graph(t: Tables, g: Any, gop: Any, proc: Any, ok: Any, cmp_ok: Any, times: Any,
           ww: Edges, wr: Edges, idx: Any) -> tuple[Any, Any, Any]:
    """The whole graph as CSR (indptr, indices, kinds), each edge as often as it was
    given, in the order given within its row (`_sorted_distinct` comes next)."""
    n, nb = len(g), len(times)
    total = n + nb
    # op id -> graph node: a gather from a table (searchsorted of unsorted queries
    # into millions of ids costs seconds in cache misses)
    where = np.zeros(int(gop[-1]) + 1, dtype=idx)
    where[gop] = np.arange(n, dtype=idx)
    po = np.lexsort((gop, proc))
    same = np.flatnonzero(proc[po[1:]] == proc[po[:-1]])
    last = np.searchsorted(times, t.op_inv_time[g], "left") - 1  # last barrier strictly before
    has = np.flatnonzero(last >= 0)
    parts = [  # (count, (sources, targets) chunks, kind, whether op ids), else node ids
        (*ww, WW, True), (*wr, WR, True),
        (len(same), [(po[:-1][same], po[1:][same])], PR, False),  # to the process's next op
        # real time through barriers: ok op -> barrier at its completion -> next
        # barriers -> each op invoked after that barrier
        (len(ok), [(ok, n + np.searchsorted(times, cmp_ok))], RT, False),
        (max(nb - 1, 0), [(n + np.arange(nb - 1), n + np.arange(1, nb))], RT, False),
        (len(has), [(n + last[has], has)], RT, False)]
    e = sum(c for c, _, _, _ in parts)
    s = np.empty(e, idx)
    d = np.empty(e, idx)
    k = np.empty(e, np.int8)
    at = 0
    for count, chunks, kind, ops in parts:
        k[at:at + count] = kind
        for a, b in chunks:
            sl = slice(at, at + len(a))
            if ops:  # op ids into node ids, straight into place
                np.take(where, a, out=s[sl])
                np.take(where, b, out=d[sl])
            else:
                s[sl], d[sl] = a, b
            at += len(a)
    if at != e:
        raise ValueError(f"{at} edges given where {e} were announced")
    del parts, where, po, same, last, has
    indptr = np.empty(total + 1, idx)
    indices = np.empty(e, idx)
    kinds = np.empty(e, np.int8)
    coo_tocsr(total, total, e, s, d, k, indptr, indices, kinds)  # linear, copies kept
    return indptr, indices, kinds


def _strong_components(indptr: Any, indices: Any, total: int) -> tuple[int, Any]:
    """(how many, each node's label) of the CSR's strongly connected components. Rows
    must hold no target twice in a row: scipy 1.17's search never returns on such a
    graph."""
    # only the structure is read: a constant weight takes no memory
    mat = csr_matrix((np.broadcast_to(np.float64(1.0), (len(indices),)), indices, indptr),
                     shape=(total, total), copy=False)
    n_comp, labels = connected_components(mat, directed=True, connection="strong")
    return int(n_comp), labels


def _sorted_distinct(indptr: Any, indices: Any, kinds: Any) -> tuple[Any, Any, Any]:
    """The CSR with each row's targets ascending and distinct, an edge's kinds OR'd over
    its copies (rows sorted in place first). Every stage's graph is this one masked by
    kind, so it has exactly the rows that coo -> csr of that stage's edges gives
    (scipy's component labels depend on that order)."""
    csr_sort_indices(len(indptr) - 1, indptr, indices, kinds)
    e = len(indices)
    idx = indptr.dtype
    # distinct targets per row: a copy is an edge equal to the one before in its row
    first = np.ones(e, bool)
    first[1:] = indices[1:] != indices[:-1]
    first[indptr[:-1][indptr[:-1] < e]] = True
    if first.all():
        return indptr, indices, kinds
    cum = np.zeros(e + 1, idx)
    np.cumsum(first, out=cum[1:])
    copies = np.flatnonzero(~first)
    merged = kinds[first]
    np.bitwise_or.at(merged, cum[copies + 1] - 1, kinds[copies])
    return cum[indptr], indices[first], merged


def _stage(indptr: Any, indices: Any, m: Any, idx: Any) -> tuple[Any, Any]:
    """The CSR of the edges in mask m."""
    cum = np.zeros(len(m) + 1, idx)
    np.cumsum(m, out=cum[1:])
    return cum[indptr], indices[m]


def _component_edges(indptr: Any, indices: Any, kinds: Any, m: Any, labels: Any,
                     new: Any) -> tuple[Any, Any, Any]:
    """(sources, targets, kinds) of the stage's edges inside the components `new`
    (memory in proportion to those components' edges, not the graph's)."""
    is_new = np.zeros(int(labels.max()) + 1, bool)
    is_new[new] = True
    nodes = np.flatnonzero(is_new[labels])
    lo, hi = indptr[nodes], indptr[nodes + 1]
    deg = (hi - lo).astype(np.int64)
    src = np.repeat(nodes, deg)
    # each edge position: its row's start plus its rank in the row
    pos = np.repeat(lo.astype(np.int64) - np.cumsum(deg) + deg, deg) + np.arange(len(src))
    dst = indices[pos]
    keep = labels[dst] == labels[src]
    if m is not None:
        keep &= m[pos]
    return src[keep], dst[keep], kinds[pos[keep]]


def _classify(members: Any, n: int, s_all: Any, d_all: Any, k_all: Any, allowed: int,
              required: int, suffix: str, n_sends: Any, gop: Any, proc: Any) -> Cycle:
    members = np.sort(members)  # graph nodes: local id = position here
    les, led = np.searchsorted(members, s_all), np.searchsorted(members, d_all)
    small = (members >= n) | (n_sends[np.minimum(members, n - 1)] <= 1)
    for nodes in (small, None):
        for data in (WW, WW | WR):
            kinds = data | (allowed & (PR | RT))
            cyc = _shortest_cycle(members, les, led, k_all, kinds, required, nodes, n)
            if cyc is not None:
                steps, used = cyc
                name = ("G0" if all(u in (WW, PR, RT) for u in used) else "G1c") + suffix
                return Cycle(name, nodes is not None, {
                    "ops": [int(gop[v]) for v in steps],
                    "processes": [int(proc[v]) for v in steps],
                    "edges": [KIND_NAMES[u] for u in used],
                    "sends": [int(n_sends[v]) for v in steps],
                    "component_size": int((members < n).sum())})
    raise AssertionError("a strongly connected component without a cycle")


def _shortest_cycle(members: Any, les: Any, led: Any, ek: Any, kinds: int, required: int,
                    nodes: Any, n: int) -> tuple[list[int], list[int]] | None:
    """Shortest cycle (counting operations, not barriers) using an edge of `required`,
    over the component's edges (local ids) of `kinds` between `nodes` (a mask, or all).

    Dijkstra in C (scipy) from the head of each of the first MAX_CANDIDATES candidate
    edges back to its tail; each search is cut off at the best length found so far, and
    none starts once no later candidate can be shorter (`_least_totals`). An
    edge into an operation weighs 1, into a barrier 1/(size + 2), so that barriers
    never add up to a whole operation."""
    size = len(members)
    m = (ek & kinds) != 0
    if nodes is not None:
        m &= nodes[les] & nodes[led]
    key = les[m].astype(np.int64) * size + led[m]
    order = np.argsort(key, kind="stable")
    key, k = key[order], ek[m][order]
    if not len(key):
        return None
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    # one edge per pair, its kinds OR'd (within `kinds`: a pair may carry others)
    key, k = key[first], np.bitwise_or.reduceat(k, first) & kinds
    a, b = key // size, key % size
    real = members < n
    if required == RT:  # entering the barrier chain is where a real-time edge starts
        cand = np.flatnonzero(real[a] & ~real[b])
    elif required:
        cand = np.flatnonzero((k & required) != 0)
    else:
        cand = np.arange(len(key))
    if not len(cand):
        return None
    eps = 1.0 / (size + 2)
    w = np.where(real[b], 1.0, eps)
    graph = csr_matrix((w, (a, b)), shape=(size, size))
    todo = cand[:MAX_CANDIDATES]
    # the least of this and every later candidate's lower bound: once the best cycle
    # found is that short, no later candidate can replace it (only a shorter one does)
    floor = np.minimum.accumulate(_least_totals(a, b, real, todo)[::-1])[::-1]
    best: list[int] | None = None
    best_len = 0
    for i, c in enumerate(todo.tolist()):  # keys ascending: by (tail, head), as before
        if best is not None and best_len <= floor[i]:
            break
        ca, cb = int(a[c]), int(b[c])
        limit = np.inf if best is None else float(best_len)
        dist, pred = dijkstra(graph, indices=cb, return_predecessors=True, limit=limit)
        if not np.isfinite(dist[ca]):
            continue
        total = int(dist[ca] + w[c])  # the barriers' part is below 1
        if best is None or total < best_len:
            route = [ca]
            while route[-1] != cb:
                route.append(int(pred[route[-1]]))
            best, best_len = [ca, *route[::-1]], total
    if best is None:
        return None
    cyc = best[:-1]  # best starts and ends at its candidate's tail
    is_real = [bool(real[v]) for v in cyc]
    at = [i for i, r in enumerate(is_real) if r]
    path: list[int] = []
    used: list[int] = []
    for j, i in enumerate(at):
        nxt = at[(j + 1) % len(at)]
        step = cyc[i:nxt + 1] if nxt > i else cyc[i:] + cyc[:nxt + 1]
        path.append(int(members[cyc[i]]))
        if len(step) > 2:  # through barriers
            used.append(RT)
        else:
            e = np.searchsorted(key, step[0] * size + step[1])
            used.append(next(x for x in (WW, WR, PR, RT) if int(k[e]) & kinds & x))
    return path, used


def _least_totals(a: Any, b: Any, real: Any, edges: Any) -> Any:
    """A lower bound of the total each of `edges` (indices into a -> b) can give as a
    candidate.

    2 (two operations) unless the cycle can hold a single one: a self-loop, or a
    real-time edge into a barrier from which the chain (which only runs forward in
    time) reaches the one barrier that enters a, i.e. a completed before it was
    invoked. Pruning on it keeps the witness exactly what the full search finds."""
    entry = np.full(len(real), -1, dtype=np.int64)  # each operation's entry barrier
    into = ~real[a] & real[b]
    entry[b[into]] = a[into]
    ea, eb = a[edges], b[edges]
    return np.where((ea == eb) | (~real[eb] & (entry[ea] >= eb)), 1, 2)


def cycle_results(cycles: list[Cycle]) -> tuple[dict[str, int], dict[str, list[Any]], set[str]]:
    """Counts, up to EXAMPLES witnesses per type, and the types that are bad."""
    counts: dict[str, int] = {}
    examples: dict[str, list[Any]] = {}
    bad: set[str] = set()
    for c in cycles:
        counts[c.type] = counts.get(c.type, 0) + 1
        ex = examples.setdefault(c.type, [])
        if len(ex) < EXAMPLES:
            ex.append({**c.witness, "allowed": not c.bad})
        if c.bad:
            bad.add(c.type)
    return counts, examples, bad
