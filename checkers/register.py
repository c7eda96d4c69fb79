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
completions, each counted read left out of later searches. A valid register costs
one search; an invalid one is counted in one more pass, `_sweep`, Lowe's
just-in-time search breadth first: every state the events so far allow, a read
counted when none lets it return in time, and dropped from them. Every search has
a deadline: past it the answer is None ("unknown"), never a verdict.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

INF = 2**63 - 1  # the return of an operation that may take effect at any later time
_CHECK_EVERY = 4096  # search steps between looks at the clock


class RegOp(NamedTuple):
    """One operation of a register: a write of `value`, or a read that returned it
    (None is the register's initial null). A named tuple: a check builds one per read
    and per write a search needs, and a tuple is built several times faster than a
    dataclass."""

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
    events = _events(ops)
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


def _events(ops: Sequence[RegOp]) -> list[int]:
    """The call (2i) and return (2i + 1) of each operation i in time order, a call before a
    return at equal times (HISTORY.md's "before" is strict), then by operation."""
    return sorted(range(2 * len(ops)), key=lambda e: ((ops[e >> 1].ret if e & 1 else
                                                       ops[e >> 1].call), e & 1, e))


def _trim(ops: Sequence[RegOp]) -> list[RegOp]:
    """The operations that matter: writes called after every read has returned can all
    go last (nothing reads them, and no remaining operation must follow them)."""
    last_read = max((o.ret for o in ops if not o.write), default=-1)
    return [o for o in ops if not (o.write and o.call > last_read)]


def prune(writes: Sequence[RegOp], reads: Sequence[RegOp]) -> list[RegOp]:
    """The writes a search needs (`prune_mask` on RegOps; write values non-negative)."""
    import numpy as np

    def col(ops: Sequence[RegOp], f: int) -> Any:
        return np.array([-1 if o[f] is None else o[f] for o in ops], np.int64)

    keep = prune_mask(col(writes, 0), col(writes, 1), col(writes, 3), col(reads, 0),
                      col(reads, 1), col(reads, 3))
    return [w for w, k in zip(writes, keep.tolist(), strict=True) if k]


def prune_mask(w_call: Any, w_ret: Any, w_value: Any, r_call: Any, r_ret: Any,
               r_value: Any) -> Any:
    """Which writes a search needs (numpy arrays; a read of null has a value no write
    has): dropping the others changes no answer, for these reads or any subset of them
    (HISTORY.md's count searches subsets).

    - a write that may never happen (ret INF) whose value no read returned: in a valid
      order, removing it leaves each read's last write as it was;
    - a write W that an acknowledged write W2 surely follows (W.ret < W2.call) with no
      read overlapping [W.call, W2.ret]: every read ends before W begins or starts
      after W2 took effect, so W is the last write before none of them, wherever it is
      placed in its window. A run of commits between two reads shrinks to the last few.
    """
    import numpy as np

    keep = (w_ret != INF) | np.isin(w_value, r_value)
    done = np.flatnonzero(w_ret != INF)
    if not len(done):
        return keep
    order = done[np.argsort(w_call[done], kind="stable")]
    calls = w_call[order]
    # the earliest end of an acknowledged write begun after a given time: suffix minima
    end_after = np.minimum.accumulate(w_ret[order][::-1])[::-1]
    at = np.searchsorted(calls, w_ret, "right")
    has_next = (w_ret != INF) & (at < len(calls))
    w2_ret = np.where(has_next, end_after[np.minimum(at, len(calls) - 1)], INF)
    if len(r_call):
        # the reads begun by W2's end: does one of them end at or after W's call?
        ro = np.argsort(r_call, kind="stable")
        reach = np.maximum.accumulate(r_ret[ro])
        n_before = np.searchsorted(r_call[ro], w2_ret, "right")
        seen = np.where(n_before > 0, reach[np.maximum(n_before - 1, 0)], -1) >= w_call
    else:
        seen = np.zeros(len(w_call), bool)
    return keep & ~(has_next & ~seen)


def read_classes(w_call: Any, w_ret: Any, r_call: Any, r_ret: Any, r_value: Any) -> Any:
    """For each read, the index of the read that stands for it (numpy arrays; a read of
    null has a value no write has): reads of one value that lie in one gap between the
    writes' windows (no write's [call, ret] meets either read) are alike, so a check
    needs one of them.

    Why: no write can take effect between two such reads (it would have to do so inside
    the gap), so the register holds one value through both: any order that allows one
    read allows the other in its place. Under HISTORY.md's count they are counted
    together: when the one that completes first is kept, the other adds nothing; when it
    is counted, the other, tried later with at least the same reads kept, is too. In a
    group, every member asks for every key's offset between commits: most reads of a
    register are alike."""
    import numpy as np

    n = len(r_call)
    rep = np.arange(n)
    if n < 2:
        return rep
    order = np.argsort(w_call, kind="stable")
    starts, ends = w_call[order], np.maximum.accumulate(w_ret[order])
    # merged windows: a new one where a write begins after every earlier one ended
    new = np.r_[True, starts[1:] > ends[:-1]] if len(starts) else np.zeros(0, bool)
    m_start = np.r_[starts[new], INF]
    m_end = np.r_[np.r_[ends[:-1][new[1:]], ends[-1:]] if len(starts) else ends, INF]
    gap = np.searchsorted(m_end, r_call, "left")  # merged windows ended before the call
    free = m_start[gap] > r_ret  # and the next one begins after the read returned
    idx = np.flatnonzero(free)
    if not len(idx):
        return rep
    ranked = idx[np.lexsort((r_ret[idx], r_value[idx], gap[idx]))]
    first = np.r_[True, (gap[ranked][1:] != gap[ranked][:-1])
                  | (r_value[ranked][1:] != r_value[ranked][:-1])]
    rep[ranked] = ranked[first][np.cumsum(first) - 1]
    return rep


def stale_reads(writes: Sequence[RegOp], reads: Sequence[RegOp],
                deadline: float = float("inf")) -> tuple[list[RegOp], bool]:
    """HISTORY.md's count: (the reads counted stale, whether every search finished).

    Reads are taken by completion, then index; a read is counted when no order allows
    it with the writes and the earlier reads not counted. A valid register costs one
    depth-first search; when it fails, one breadth-first pass over the events counts
    every stale read (a search per stale read would explore the whole failing space each
    time: 26 times the check of a valid history on our broker's real runs)."""
    written = {w.value for w in writes}
    # a read of a value no write wrote fails in every order: counted without a search
    counted = [r for r in reads if r.value is not None and r.value not in written]
    rest = sorted((r for r in reads if r.value is None or r.value in written),
                  key=lambda r: (r.ret, r.op))
    if not rest:
        return _by_completion(counted), True
    whole = linearizable([*writes, *rest], deadline)
    if whole is None:
        return _by_completion(counted), False
    if whole:
        return _by_completion(counted), True
    stale = _sweep(_trim([*writes, *rest]), deadline)
    if stale is None:
        return _by_completion(counted), False
    return _by_completion(counted + stale), True


Config = tuple[int | None, int, int]  # (register value, ok ops linearized, info writes done)


def _sweep(ops: Sequence[RegOp], deadline: float) -> list[RegOp] | None:
    """The reads HISTORY.md counts stale, in one pass (None past the deadline).

    Events in time order (a call before a return at equal times; reads in `ops` in
    completion order). After each call, every configuration the operations called so
    far allow: the value, the called operations already linearized whose return is still
    to come, and the `info` writes applied (they never return). At a return, only the
    configurations that linearized that operation go on; when none did, the operation is
    a read that no order allows with the writes and the reads kept before it: counted,
    and left out (a read changes no value, so each configuration, less that read, is one
    of the history without it). Of configurations alike but for info writes applied, only
    those that applied fewest are kept: an info write may also take effect later, or
    never, so they allow everything the others do."""
    events = _events(ops)
    writes = [o.write for o in ops]
    values = [o.value for o in ops]
    info = 0
    for i, o in enumerate(ops):
        if o.ret == INF:
            info |= 1 << i
    configs: set[Config] = {(None, 0, 0)}
    open_ops = 0  # called, not yet returned (info writes stay open)
    stale: list[RegOp] = []
    steps = 0
    for e in events:
        i, bit = e >> 1, 1 << (e >> 1)
        if not e & 1:
            open_ops |= bit
            frontier = list(configs)
            while frontier:
                steps += 1
                if steps % _CHECK_EVERY == 0 and time.monotonic() > deadline:
                    return None
                value, lin, done = frontier.pop()
                avail = open_ops & ~lin & ~done
                while avail:
                    low = avail & -avail
                    avail ^= low
                    j = low.bit_length() - 1
                    if writes[j]:
                        c = ((values[j], lin, done | low) if low & info else
                             (values[j], lin | low, done))
                    elif values[j] == value:
                        c = (value, lin | low, done)
                    else:
                        continue
                    if c not in configs:
                        configs.add(c)
                        frontier.append(c)
            if info:
                configs = _fewest_info(configs)
        elif ops[i].ret != INF:
            open_ops &= ~bit
            went_on = {(v, lin & ~bit, d) for v, lin, d in configs if lin & bit}
            if not went_on:  # only a read can be left with none (a write always can go)
                stale.append(ops[i])
                went_on = {(v, lin & ~bit, d) for v, lin, d in configs}
            configs = went_on
    return stale


def _fewest_info(configs: set[Config]) -> set[Config]:
    """Of the configurations with the same value and ok operations linearized, those whose
    info writes applied include no other's."""
    groups: dict[tuple[int | None, int], list[int]] = {}
    for v, lin, done in configs:
        groups.setdefault((v, lin), []).append(done)
    if len(groups) == len(configs):
        return configs
    out: set[Config] = set()
    for (v, lin), dones in groups.items():
        dones.sort(key=int.bit_count)
        kept: list[int] = []
        for d in dones:
            if not any(k & d == k for k in kept):
                kept.append(d)
        out.update((v, lin, d) for d in kept)
    return out


def _by_completion(reads: list[RegOp]) -> list[RegOp]:
    return sorted(reads, key=lambda r: (r.ret, r.op))
