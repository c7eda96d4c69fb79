"""The strict reader's checks across lines, vectorised over whole columns: index order,
time, invoke/completion pairing, and values sent once.

They run after the per-line parse (harness.runfiles.strict) on its columns, and the
checkers' DuckDB reader (checkers.fastscan) runs them on its own columns, so both readers
refuse a history for the same reason on the same line.
"""

from __future__ import annotations

from typing import Any

from harness.runfiles.ops import NEMESIS, HistoryError
from harness.runfiles.vocab import F_CODES, NEMESIS_CODE, TYPE_CODES, TYPE_NAMES


def check_lines(path: str, index: Any, time: Any, typ: Any, proc: Any, f: Any) -> Any:
    """Index order, time, and invoke/completion pairing over the columns; returns `pair`
    (see HistoryScan). HistoryError names the first line that breaks a rule."""
    import numpy as np

    n = len(index)
    lines = np.arange(n, dtype=np.int64)
    errors: list[tuple[int, str]] = []
    bad = np.flatnonzero(index != lines)
    if len(bad):
        i = int(bad[0])
        errors.append((i, f"index {int(index[i])} does not follow file order (expected {i})"))
    back = np.flatnonzero(time[1:] < time[:-1])
    if len(back):
        i = int(back[0]) + 1
        errors.append((i, f"time goes backwards ({int(time[i])} < {int(time[i - 1])})"))
    order = np.lexsort((lines, proc))
    ps = proc[order]
    start = np.ones(n, dtype=bool)
    start[1:] = ps[1:] != ps[:-1]
    group_start = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    rank = np.arange(n) - group_start
    ts = typ[order]
    is_inv = ts == 0
    want_inv = rank % 2 == 0
    prev_info = np.zeros(n, dtype=bool)
    prev_info[1:] = (ts[:-1] == 3) & ~start[1:] & (ps[1:] != NEMESIS_CODE)
    prev_info &= is_inv
    pair = np.full(n, -1, dtype=np.int64)
    comp = ~want_inv & ~is_inv
    pair[order[comp]] = order[np.flatnonzero(comp) - 1]
    for pos in np.flatnonzero(prev_info)[:1]:
        i = int(order[pos])
        errors.append((i, f"process {int(ps[pos])} invokes again after its info completion "
                          f"on line {int(order[pos - 1]) + 1}"))
    for pos in np.flatnonzero((is_inv != want_inv) & ~prev_info)[:1]:
        i = int(order[pos])
        if want_inv[pos]:
            errors.append((i, f"a {TYPE_NAMES[int(ts[pos])]} completion without an invoke "
                              f"(process {_pname(int(ps[pos]))})"))
        else:
            errors.append((i, f"a second invoke while process {_pname(int(ps[pos]))}'s "
                              f"invoke on line {int(order[pos - 1]) + 1} is pending"))
    if not errors:
        c = np.flatnonzero(pair >= 0)
        mism = c[f[c] != f[pair[c]]]
        if len(mism):
            i = int(mism[0])
            errors.append((i, f"completion f differs from its invoke's on line {int(pair[i]) + 1}"))
        crash_done = c[(f[c] == F_CODES["crash"]) & (typ[c] != TYPE_CODES["info"])]
        if len(crash_done):
            i = int(crash_done[0])
            errors.append((i, f"a crash completes info, not {TYPE_NAMES[int(typ[i])]}"))
    if errors:
        i, problem = min(errors)
        raise HistoryError(path, i + 1, problem)
    return pair


def _pname(p: int) -> str:
    return NEMESIS if p == NEMESIS_CODE else str(p)


def check_sends(path: str, send: Any, typ: Any, pair: Any) -> None:
    """Values are sent once; a completion's sends are its invoke's (`send` rows are
    line, key, value, offset, seq; `pair` as check_lines returns it)."""
    import numpy as np

    inv = send[typ[send[:, 0]] == 0]
    comp = send[typ[send[:, 0]] != 0]
    order = np.lexsort((inv[:, 0], inv[:, 2]))
    vs = inv[order]
    dup = np.flatnonzero(vs[1:, 2] == vs[:-1, 2])
    if len(dup):
        i = int(vs[dup + 1, 0].min())
        v = int(vs[dup + 1, 2][vs[dup + 1, 0] == i][0])
        first = int(vs[dup, 0][vs[dup + 1, 0] == i][0])
        raise HistoryError(path, i + 1, f"value {v} sent twice (first on line {first + 1})")
    if len(comp):
        pos = np.searchsorted(vs[:, 2], comp[:, 2])
        pos = np.minimum(pos, max(len(vs) - 1, 0))
        ok = (len(vs) > 0) & (vs[pos, 2] == comp[:, 2]) if len(vs) else np.zeros(len(comp), bool)
        if len(vs):
            ok &= (vs[pos, 0] == pair[comp[:, 0]]) & (vs[pos, 1] == comp[:, 1])
        bad = np.flatnonzero(~ok)
        if len(bad):
            j = int(bad[0])
            raise HistoryError(path, int(comp[j, 0]) + 1,
                               f"completion sends key {int(comp[j, 1])} value {int(comp[j, 2])}, "
                               "which its invoke did not send")
