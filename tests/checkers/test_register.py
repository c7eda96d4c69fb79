"""The register search (checkers.register) against a brute force that tries every order,
on small random histories; and its time bound, which answers unknown, never a verdict."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.register import (
    INF,
    RegOp,
    _sweep,
    linearizable,
    prune,
    read_classes,
    stale_reads,
)


def brute_linearizable(ops: Sequence[RegOp]) -> bool:
    """Every order of the operations consistent with real time (A before B when A.ret <
    B.call); valid when in one of them each read returns the last write's value. A write
    that may never happen (ret INF) is the same as one placed last."""
    for order in itertools.permutations(ops):
        if any(b.ret < a.call for i, a in enumerate(order) for b in order[i + 1:]):
            continue
        state: int | None = None
        for o in order:
            if o.write:
                state = o.value
            elif o.value != state:
                break
        else:
            return True
    return False


def brute_stale(writes: Sequence[RegOp], reads: Sequence[RegOp]) -> list[RegOp]:
    """HISTORY.md's counting rule, read by read, with the brute force."""
    kept: list[RegOp] = []
    counted = []
    for r in sorted(reads, key=lambda r: (r.ret, r.op)):
        if brute_linearizable([*writes, *kept, r]):
            kept.append(r)
        else:
            counted.append(r)
    return counted


@st.composite
def histories(draw: Any) -> tuple[list[RegOp], list[RegOp]]:
    """Up to 6 operations with windows on a small time line: ok writes, txn writes (an
    instant), info writes (no end), and reads of a written value, a stray one or null."""
    n = draw(st.integers(1, 6))
    writes: list[RegOp] = []
    reads: list[RegOp] = []
    for i in range(n):
        call = draw(st.integers(0, 12))
        ret = call + draw(st.integers(0, 6))
        kind = draw(st.sampled_from(["ok", "ok", "txn", "info", "read", "read", "read"]))
        if kind == "read":
            value = draw(st.one_of(st.none(), st.integers(0, 3)))
            reads.append(RegOp(call, ret, False, value, i))
        else:
            value = draw(st.integers(0, 3))
            if kind == "txn":
                call = ret
            writes.append(RegOp(call, INF if kind == "info" else ret, True, value, i))
    return writes, reads


@settings(max_examples=200, deadline=None)
@given(histories())
def test_the_search_agrees_with_every_order(h: tuple[list[RegOp], list[RegOp]]) -> None:
    writes, reads = h
    assert linearizable([*writes, *reads]) == brute_linearizable([*writes, *reads])
    want = [r.op for r in brute_stale(writes, reads)]
    got, finished = stale_reads(writes, reads)
    assert finished and [r.op for r in got] == want
    # the writes prune drops change no answer, for all reads or any subset of them
    kept = prune(writes, reads)
    got, finished = stale_reads(kept, reads)
    assert finished and [r.op for r in got] == want
    assert linearizable([*kept, *reads[:1]]) == brute_linearizable([*writes, *reads[:1]])


def bisect_stale(writes: Sequence[RegOp], reads: Sequence[RegOp]) -> list[RegOp]:
    """HISTORY.md's counting rule by depth-first searches alone: the first failing prefix
    of the reads found by bisection, counted, left out, again (the count before the
    breadth-first pass; each search is checked against the brute force above)."""
    written = {w.value for w in writes}
    counted = [r for r in reads if r.value is not None and r.value not in written]
    rest = sorted((r for r in reads if r.value is None or r.value in written),
                  key=lambda r: (r.ret, r.op))
    kept: list[RegOp] = []
    while rest and not linearizable([*writes, *kept, *rest]):
        lo, hi = 0, len(rest) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if linearizable([*writes, *kept, *rest[:mid + 1]]):
                lo = mid + 1
            else:
                hi = mid
        kept += rest[:lo]
        counted.append(rest[lo])
        rest = rest[lo + 1:]
    return sorted(counted, key=lambda r: (r.ret, r.op))


@st.composite
def long_histories(draw: Any) -> tuple[list[RegOp], list[RegOp]]:
    """A committed offset's register as a group writes it: 10 to 40 commits and reads of
    a few values, overlapping, some commits `info`, reads often of an older value."""
    writes: list[RegOp] = []
    reads: list[RegOp] = []
    for i in range(draw(st.integers(10, 40))):
        call = draw(st.integers(0, 60))
        ret = call + draw(st.integers(0, 8))
        value = draw(st.integers(0, 4))
        if draw(st.booleans()):
            reads.append(RegOp(call, ret, False, draw(st.sampled_from([None, value])), i))
        else:
            writes.append(RegOp(call, INF if draw(st.integers(0, 9)) == 0 else ret, True,
                                value, i))
    return writes, reads


@settings(max_examples=150, deadline=None)
@given(long_histories())
def test_the_one_pass_count_agrees_with_a_search_per_stale_read(
        h: tuple[list[RegOp], list[RegOp]]) -> None:
    writes, reads = h
    got, finished = stale_reads(writes, reads)
    assert finished and [r.op for r in got] == [r.op for r in bisect_stale(writes, reads)]


def test_a_search_out_of_time_answers_unknown() -> None:
    """Many concurrent writes, then a read of the first one's value after a later write
    of another: the search must try every order of them before it can say no; with its
    deadline passed it says None."""
    writes = [RegOp(0, 100, True, v, v) for v in range(18)] + [RegOp(101, 102, True, 50, 50)]
    reads = [RegOp(103, 104, False, 0, 99)]
    assert linearizable([*writes, *reads], time.monotonic() - 1) is None
    got, finished = stale_reads(writes, reads, time.monotonic() - 1)
    assert got == [] and not finished
    # the counting pass too: 2^18 orders of the writes' values to walk first
    assert _sweep([*writes, *reads], time.monotonic() - 1) is None


def test_prune_keeps_only_the_writes_a_read_can_see() -> None:
    seq = [RegOp(10 * i, 10 * i + 5, True, i, i) for i in range(6)]  # one after another
    read = RegOp(33, 34, False, 3, 9)
    assert [w.value for w in prune(seq, [read])] == [2, 3, 5]  # 4: overwritten unread
    assert [w.value for w in prune([*seq, RegOp(1, INF, True, 7, 7)], [])] == [5]


def test_null_is_the_initial_value() -> None:
    w = RegOp(10, 20, True, 5, 0)
    assert linearizable([RegOp(0, 5, False, None, 1), w])
    assert not linearizable([w, RegOp(30, 40, False, None, 1)])
    assert linearizable([w, RegOp(15, 40, False, None, 1)])  # concurrent: either


def _classes(writes: Sequence[RegOp], reads: Sequence[RegOp]) -> list[int]:
    def col(ops: Sequence[RegOp], f: int) -> Any:
        return np.array([-1 if o[f] is None else o[f] for o in ops], np.int64)

    return [int(i) for i in read_classes(col(writes, 0), col(writes, 1), col(reads, 0),
                                         col(reads, 1), col(reads, 3))]


def collapsed_stale(writes: Sequence[RegOp], reads: Sequence[RegOp]) -> list[int]:
    """The count as checkers.offsets makes it: one read of each class searched, and each
    read counted with the one that stands for it."""
    rep = _classes(writes, reads)
    stale, finished = stale_reads(writes, [r for i, r in enumerate(reads) if rep[i] == i])
    assert finished
    counted = {r.op for r in stale}
    return [r.op for r in sorted((r for i, r in enumerate(reads) if reads[rep[i]].op in counted),
                                 key=lambda r: (r.ret, r.op))]


@st.composite
def asked_histories(draw: Any) -> tuple[list[RegOp], list[RegOp]]:
    """A group's register as its members ask for it: a few commits, and many short reads
    of a few values between and across them (many alike)."""
    writes = [RegOp(c, INF if draw(st.integers(0, 7)) == 0 else c + draw(st.integers(0, 4)),
                    True, draw(st.integers(0, 3)), i)
              for i, c in enumerate(draw(st.lists(st.integers(0, 60), min_size=1, max_size=8)))]
    reads = []
    for i in range(draw(st.integers(1, 30))):
        call = draw(st.integers(0, 70))
        reads.append(RegOp(call, call + draw(st.integers(0, 3)), False,
                           draw(st.sampled_from([None, 0, 1, 2, 3])), 100 + i))
    return writes, reads


@settings(max_examples=300, deadline=None)
@given(st.one_of(asked_histories(), long_histories()))
def test_reads_alike_are_counted_together(h: tuple[list[RegOp], list[RegOp]]) -> None:
    writes, reads = h
    got, finished = stale_reads(writes, reads)
    assert finished and collapsed_stale(writes, reads) == [r.op for r in got]
    kept = prune(writes, reads)  # as checkers.offsets does: pruned first
    assert collapsed_stale(kept, reads) == [r.op for r in got]


def test_alike_reads_are_those_of_one_value_in_one_gap() -> None:
    writes = [RegOp(10, 20, True, 1, 0), RegOp(40, 45, True, 2, 1)]
    reads = [RegOp(0, 5, False, None, 10), RegOp(2, 9, False, None, 11),  # before any write
             RegOp(21, 22, False, 1, 12), RegOp(25, 39, False, 1, 13),  # in the gap
             RegOp(30, 31, False, 2, 14),  # another value there
             RegOp(20, 21, False, 1, 15),  # meets the first write's return: not in the gap
             RegOp(46, 50, False, 2, 16), RegOp(39, 41, False, 2, 17)]  # the last meets it
    assert _classes(writes, reads) == [0, 0, 2, 2, 4, 5, 6, 7]
    info = [RegOp(10, INF, True, 1, 0)]  # never returns: no gap after its call
    assert _classes(info, reads) == [0, 0, 2, 3, 4, 5, 6, 7]
