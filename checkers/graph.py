"""G0 / G1c cycles: strongly connected components over millions of operations.

scipy finds the components of each search stage on the whole graph
(write-write + write-read, then + process, then + real-time); networkx sees
only the components a stage finds new, to pick a shortest witness cycle.
Real-time edges are never materialised pairwise: every `ok` operation points
to a barrier node at its completion time, barriers form a chain in time, and
each barrier points to the operations invoked right after it (a path A -> B
through barriers exists exactly when A completed before B was invoked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

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


def find_cycles(t: Tables, ww: tuple[Any, Any], wr: tuple[Any, Any]) -> list[Cycle]:
    """One Cycle per strongly connected component that a stage finds new."""
    g = np.flatnonzero(t.op_must)
    n = len(g)
    gop = t.op[g]

    # op id -> graph node: a gather from a table (searchsorted of unsorted queries
    # into millions of ids costs seconds in cache misses)
    where = np.zeros(int(gop[-1]) + 1 if n else 0, dtype=np.int64)
    where[gop] = np.arange(n)

    def node(ops: Any) -> Any:
        return where[ops]

    src = [node(ww[0]), node(wr[0])]
    dst = [node(ww[1]), node(wr[1])]
    kinds = [np.full(len(ww[0]), WW, np.int8), np.full(len(wr[0]), WR, np.int8)]
    # process: each graph op to the next graph op of its process
    po = np.lexsort((gop, t.op_process[g]))
    same = t.op_process[g][po[1:]] == t.op_process[g][po[:-1]]
    src.append(po[:-1][same])
    dst.append(po[1:][same])
    kinds.append(np.full(int(same.sum()), PR, np.int8))
    # real time through barriers
    ok = np.flatnonzero(t.op_status[g] == OK)
    times = np.sort(t.op_cmp_time[g][ok])
    times = times[np.r_[True, times[1:] != times[:-1]]] if len(times) else times
    nb = len(times)
    src.append(ok)
    dst.append(n + np.searchsorted(times, t.op_cmp_time[g][ok]))
    src.append(n + np.arange(nb - 1))
    dst.append(n + np.arange(1, nb))
    last = np.searchsorted(times, t.op_inv_time[g], "left") - 1  # last barrier strictly before
    has = np.flatnonzero(last >= 0)
    src.append(n + last[has])
    dst.append(has)
    kinds.append(np.full(len(ok) + max(nb - 1, 0) + len(has), RT, np.int8))
    idx = np.int32 if n + nb < 2**31 else np.int64  # what scipy would convert to anyway
    s_all = np.concatenate(src).astype(idx)
    d_all = np.concatenate(dst).astype(idx)
    k_all = np.concatenate(kinds)
    total = n + nb

    n_sends = t.op_n_sends[g]
    cycles: list[Cycle] = []
    prev = np.arange(n)  # stage 0: every op its own component
    for allowed, required, suffix in STAGES:
        m = (k_all & allowed) != 0
        mat = coo_matrix((np.ones(int(m.sum()), np.int8), (s_all[m], d_all[m])),
                         shape=(total, total)).tocsr()
        _, labels = connected_components(mat, directed=True, connection="strong")
        real = labels[:n]
        # a component is new when its ops came from two or more components before
        # (some member's prev stands for its component; any other member differing
        # from it means two or more components joined)
        rep = np.empty(total, dtype=np.int64)
        rep[real] = prev
        new = np.unique(real[prev != rep[real]])
        if len(new):
            ls = labels[s_all]
            em = m & (ls == labels[d_all]) & np.isin(ls, new)
            eo = np.flatnonzero(em)
            eo = eo[np.argsort(ls[eo], kind="stable")]
            bounds = np.searchsorted(ls[eo], new), np.searchsorted(ls[eo], new, "right")
            node_order = np.argsort(labels, kind="stable")
            nb_lo = np.searchsorted(labels[node_order], new)
            nb_hi = np.searchsorted(labels[node_order], new, "right")
            for j in range(len(new)):
                members = node_order[nb_lo[j]:nb_hi[j]]
                sel = eo[bounds[0][j]:bounds[1][j]]
                cycles.append(_classify(members, n, s_all[sel], d_all[sel], k_all[sel],
                                        allowed, required, suffix, n_sends, gop,
                                        t.op_process[g]))
        prev = real
    return cycles


def _classify(members: Any, n: int, s_all: Any, d_all: Any, k_all: Any, allowed: int,
              required: int, suffix: str, n_sends: Any, gop: Any, proc: Any) -> Cycle:
    es, ed, ek = s_all, d_all, k_all  # the component's own edges of this stage
    small = set(members[(members >= n) | (n_sends[np.minimum(members, n - 1)] <= 1)].tolist())
    for nodes in (small, None):
        for data in (WW, WW | WR):
            kinds = data | (allowed & (PR | RT))
            cyc = _shortest_cycle(es, ed, ek, kinds, required, nodes, n)
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


def _shortest_cycle(es: Any, ed: Any, ek: Any, kinds: int, required: int,
                    nodes: set[int] | None, n: int) -> tuple[list[int], list[int]] | None:
    """Shortest cycle (counting operations, not barriers) using an edge of `required`."""
    m = (ek & kinds) != 0
    if nodes is not None:
        m &= np.isin(es, list(nodes)) & np.isin(ed, list(nodes))
    gr = nx.DiGraph()
    for a, b, k in zip(es[m].tolist(), ed[m].tolist(), ek[m].tolist(), strict=True):
        if gr.has_edge(a, b):
            gr[a][b]["k"] |= k
        else:
            gr.add_edge(a, b, k=k, w=0 if b >= n else 1)
    if required == RT:  # entering the barrier chain is where a real-time edge starts
        cands = [(a, b) for a, b, d in gr.edges(data=True) if a < n <= b]
    elif required:
        cands = [(a, b) for a, b, d in gr.edges(data=True) if d["k"] & required]
    else:
        cands = list(gr.edges())
    best: list[int] | None = None
    best_len = 0
    for a, b in sorted(cands)[:MAX_CANDIDATES]:
        try:
            length, route = nx.single_source_dijkstra(gr, b, a, weight="w")
        except nx.NetworkXNoPath:
            continue
        total = int(length) + int(gr[a][b]["w"])
        if best is None or total < best_len:
            best, best_len = [a, *route], total
    if best is None:
        return None
    cyc = best[:-1]  # best starts and ends at a
    real = [i for i, v in enumerate(cyc) if v < n]
    path: list[int] = []
    used: list[int] = []
    for j, i in enumerate(real):
        nxt = real[(j + 1) % len(real)]
        step = cyc[i:nxt + 1] if nxt > i else cyc[i:] + cyc[:nxt + 1]
        path.append(cyc[i])
        if len(step) > 2:  # through barriers
            used.append(RT)
        else:
            k = gr[step[0]][step[1]]["k"] & kinds
            used.append(next(x for x in (WW, WR, PR, RT) if k & x))
    return path, used


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
