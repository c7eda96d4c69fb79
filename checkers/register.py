"""Linearizability of one read/write register: Wing and Gong's search with Lowe's memo.

As Knossos and Porcupine check registers. The history is a list of operations,
each a window [call, ret] of times in which it takes effect at one instant;
HISTORY.md's "before" is strict, so A must precede B only when A.ret < B.call.
The search walks the events in time order and linearizes a pending operation
whenever the register allows it, backing up when a return comes whose operation
is not linearized yet; Lowe's cache of (linearized set, register value) pairs
cuts every branch that reached a state already explored. An operation that may
take effect any time after its call, or never (`info`), has ret = INF: for a
write, never is the same as last, since no read follows it there.

`stale_reads` applies HISTORY.md's counting rule: reads in the order of their
completions, each counted read left out of later searches. Every search has a
deadline: past it the answer is None ("unknown"), never a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

INF = 2**63 - 1  # the return of an operation that may take effect at any later time
_CHECK_EVERY = 4096  # search steps between looks at the clock


class RegOp(NamedTuple):
    """One operation of a register: a write of `value`, or a read that returned it
    (None is the register's initial null). A named tuple: a history makes one per
    commit and key, and a tuple is built several times faster than a dataclass."""

    call: int
    ret: int
    write: bool
    value: int | None
    op: int = -1  # the history index of its invoke (for examples)


def linearizable(ops: Sequence[RegOp], deadline: float = float("inf")) -> bool | None:
    """Whether some order of the operations, consistent with real time, lets each read
    return the value of the last write before it; None when the deadline passed first."""
    ops = _trim(ops)
    n = len(ops)
    if n == 0 or all(o.write for o in ops):
        return True
    # events: call of op i is 2i, its return 2i+1; a call before a return at equal times
    events = sorted(range(2 * n), key=lambda e: ((ops[e >> 1].ret if e & 1 else
                                                  ops[e >> 1].call), e & 1, e))
    head, nil = 2 * n, -1
    nxt = [nil] * (2 * n + 1)
    prv = [nil] * (2 * n + 1)
    last = head
    for e in events:
        nxt[last], prv[e] = e, last
        last = e
    writes = [o.write for o in ops]
    values = [o.value for o in ops]
    state: int | None = None
    lin = 0
    cache: set[tuple[int, int | None]] = set()
    stack: list[tuple[int, int | None]] = []
    entry = nxt[head]
    steps = 0
    while nxt[head] != nil:
        steps += 1
        if steps % _CHECK_EVERY == 0 and time.monotonic() > deadline:
            return None
        if not entry & 1:  # a call: try to linearize its operation here
            i = entry >> 1
            new = values[i] if writes[i] else state
            if writes[i] or state == values[i]:
                key = (lin | (1 << i), new)
                if key not in cache:
                    cache.add(key)
                    stack.append((i, state))
                    state, lin = new, key[0]
                    for e in (entry, entry | 1):  # lift the call and the return
                        nxt[prv[e]] = nxt[e]
                        if nxt[e] != nil:
                            prv[nxt[e]] = prv[e]
                    entry = nxt[head]
                    continue
            entry = nxt[entry]
        else:  # a return whose operation is not linearized: back up
            if not stack:
                return False
            i, state = stack.pop()
            lin &= ~(1 << i)
            for e in (2 * i + 1, 2 * i):  # unlift, in reverse order
                if nxt[e] != nil:
                    prv[nxt[e]] = e
                nxt[prv[e]] = e
            entry = nxt[2 * i]
    return True


def _trim(ops: Sequence[RegOp]) -> list[RegOp]:
    """The operations that matter: writes called after every read has returned can all
    go last (nothing reads them, and no remaining operation must follow them)."""
    last_read = max((o.ret for o in ops if not o.write), default=-1)
    return [o for o in ops if not (o.write and o.call > last_read)]


def prune(writes: Sequence[RegOp], reads: Sequence[RegOp]) -> list[RegOp]:
    """The writes a search needs: dropping the others changes no answer, for these reads
    or any subset of them (HISTORY.md's count searches subsets).

    - a write that may never happen (ret INF) whose value no read returned: in a valid
      order, removing it leaves each read's last write as it was;
    - a write W that an acknowledged write W2 surely follows (W.ret < W2.call) with no
      read overlapping [W.call, W2.ret]: every read ends before W begins or starts
      after W2 took effect, so W is the last write before none of them, wherever it is
      placed in its window. A run of commits between two reads shrinks to the last few.
    """
    import numpy as np

    read_values = {r.value for r in reads}
    ws = [w for w in writes if w.ret != INF or w.value in read_values]
    done = [w for w in ws if w.ret != INF]
    if not done or not ws:
        return ws
    by_call = sorted(done, key=lambda w: w.call)
    calls = np.array([w.call for w in by_call], np.int64)
    # the earliest end of an acknowledged write begun after a given time: suffix minima
    end_after = np.minimum.accumulate(np.array([w.ret for w in by_call], np.int64)[::-1])[::-1]
    rs = sorted(reads, key=lambda r: r.call)
    r_calls = np.array([r.call for r in rs], np.int64)
    r_reach = np.maximum.accumulate(np.array([r.ret for r in rs], np.int64)) if rs else r_calls
    w_call = np.array([w.call for w in ws], np.int64)
    w_ret = np.array([w.ret for w in ws], np.int64)
    at = np.searchsorted(calls, w_ret, "right")
    has_next = (w_ret != INF) & (at < len(calls))
    w2_ret = np.where(has_next, end_after[np.minimum(at, len(calls) - 1)], INF)
    # the reads begun by W2's end: does one of them end at or after W's call?
    n_before = np.searchsorted(r_calls, w2_ret, "right")
    reach = np.where(n_before > 0, r_reach[np.maximum(n_before - 1, 0)] if len(rs) else 0, -1)
    drop = has_next & (reach < w_call)
    return [w for w, d in zip(ws, drop.tolist(), strict=True) if not d]


def stale_reads(writes: Sequence[RegOp], reads: Sequence[RegOp],
                deadline: float = float("inf")) -> tuple[list[RegOp], bool]:
    """HISTORY.md's count: (the reads counted stale, whether every search finished).

    Reads are taken by completion, then index; a read is counted when no order allows
    it with the writes and the earlier reads not counted. Dropping reads keeps a history
    linearizable, so the first read that fails is found by bisection over prefixes: a
    valid register costs one search, each stale read a logarithmic number more."""
    written = {w.value for w in writes}
    # a read of a value no write wrote fails in every order: counted without a search
    counted = [r for r in reads if r.value is not None and r.value not in written]
    rest = sorted((r for r in reads if r.value is None or r.value in written),
                  key=lambda r: (r.ret, r.op))
    kept: list[RegOp] = []
    ws = list(writes)
    while rest:
        whole = linearizable(ws + kept + rest, deadline)
        if whole is None:
            return _by_completion(counted), False
        if whole:
            return _by_completion(counted), True
        lo, hi = 0, len(rest) - 1  # rest[:lo] passes (with kept); rest[:hi + 1] fails
        while lo < hi:
            mid = (lo + hi) // 2
            ok = linearizable(ws + kept + rest[:mid + 1], deadline)
            if ok is None:
                return _by_completion(counted), False
            if ok:
                lo = mid + 1
            else:
                hi = mid
        kept += rest[:lo]
        counted.append(rest[lo])
        rest = rest[lo + 1:]
    return _by_completion(counted), True


def _by_completion(reads: list[RegOp]) -> list[RegOp]:
    return sorted(reads, key=lambda r: (r.ret, r.op))
