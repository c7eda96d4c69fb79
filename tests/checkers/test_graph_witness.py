"""The witness search's pruning: it must return exactly what the unpruned search does.

`_shortest_cycle` stops trying candidates once no later one can beat the best cycle
found (`_least_totals`). The graphs here have the real structure find_cycles builds:
operations with invocation and completion times (some completing "before" they were
invoked, as out-of-order clocks can make them), a barrier per distinct completion
time, the barrier chain, each operation's entry barrier, and random ww/wr/process
edges, self-loops included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import dijkstra

import checkers.graph as graph
from checkers.graph import PR, RT, WR, WW


def realtime_graph(n: int, inv: list[int], dur: list[int],
                   extra: list[tuple[int, int, int]]) -> tuple[Any, Any, Any, Any]:
    """members, local sources, local targets and kinds of one graph over n operations."""
    inv_t = np.array(inv[:n], dtype=np.int64)
    cmp_t = inv_t + np.array(dur[:n], dtype=np.int64)
    times = np.unique(cmp_t)
    nb = len(times)
    src: list[int] = []
    dst: list[int] = []
    kinds: list[int] = []
    for op in range(n):
        src.append(op)
        dst.append(n + int(np.searchsorted(times, cmp_t[op])))
        kinds.append(RT)
        last = int(np.searchsorted(times, inv_t[op], "left")) - 1
        if last >= 0:
            src.append(n + last)
            dst.append(op)
            kinds.append(RT)
    for i in range(nb - 1):
        src.append(n + i)
        dst.append(n + i + 1)
        kinds.append(RT)
    for s, d, k in extra:
        src.append(s % n)
        dst.append(d % n)
        kinds.append((WW, WR, PR)[k % 3])
    members = np.arange(n + nb, dtype=np.int64)
    return (members, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
            np.array(kinds, dtype=np.int8))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(2, 12),
       inv=st.lists(st.integers(0, 20), min_size=12, max_size=12),
       dur=st.lists(st.integers(-3, 8), min_size=12, max_size=12),
       extra=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(0, 2)),
                      max_size=25),
       mask_bits=st.integers(0, 2**12 - 1),
       stage=st.sampled_from([(WW | WR, 0), (WW | WR | PR, PR), (WW | WR | PR | RT, RT)]))
def test_pruned_witness_search_finds_what_the_full_search_finds(
        n: int, inv: list[int], dur: list[int], extra: list[tuple[int, int, int]],
        mask_bits: int, stage: tuple[int, int]) -> None:
    members, les, led, ek = realtime_graph(n, inv, dur, extra)
    kinds, required = stage
    real_mask = np.array([bool(mask_bits >> i & 1) for i in range(n)])
    nodes = np.r_[real_mask, np.ones(len(members) - n, dtype=bool)]
    for mask in (None, nodes):
        pruned = graph._shortest_cycle(members, les, led, ek, kinds, required, mask, n)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(graph, "_least_totals",
                       lambda a, b, real, edges: np.zeros(len(edges), np.int64))
            full = graph._shortest_cycle(members, les, led, ek, kinds, required, mask, n)
        assert pruned == full


def test_a_two_operation_cycle_stops_the_search_early() -> None:
    """Two operations that each completed before the other was invoked, plus a ww pair:
    the first candidate's cycle has two operations, and no later candidate is tried."""
    members, les, led, ek = realtime_graph(
        4, [0, 0, 10, 10], [1, 1, 1, 1], [(0, 1, 0), (1, 0, 0), (2, 3, 0), (3, 2, 0)])
    tried: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        tried.append(kwargs["indices"])
        return dijkstra(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graph, "dijkstra", counting)
        found = graph._shortest_cycle(members, les, led, ek, WW | WR | PR, 0, None, 4)
    assert found is not None and len(found[0]) == 2
    assert len(tried) == 1
