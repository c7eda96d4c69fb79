"""Compiled parsing of the history lines that take the common shapes, for speed.

`harness.runfiles.strict` judges every line. Building Python objects for each record
read costs about 5 µs a line, most of a big check's time, so this module parses the
shapes the harness and most writers emit (client operations with `send`, `poll`,
`assign`, `subscribe` or `crash`, an optional `seek_to_beginning` and a plain `error`
string) straight from the bytes into the reader's columns, in machine code (numba).
Committed offsets too (`commit` and `committed` operations, a `commit` micro-op in a
`txn`): they are operations, not records, but a group's members ask for every key's
offset, so their lines hold more keys than a run's polls do. Lines that name a `group`
are left to the strict reader (it alone numbers the groups).

It never decides that a line is wrong. A line it does not fully recognise (nemesis
operations, extra keys but those with a plain number, string, true, false or null, which
the strict reader ignores, escapes, floats, integers of 19 digits or more, duplicate
keys, anything malformed) is handed back, and the strict reader's own per-line code
parses it, with its own errors. A line it accepts is one that code accepts, giving
the same columns: `tests/harness/test_fastlines.py` checks both on generated and
mutated lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from harness.runfiles.commits import COMMIT_ANSWERED, COMMIT_ASKED, COMMIT_WRITE
from harness.runfiles.fasttokens import (
    _FALSE,
    _NULL,
    _TRUE,
    _grow,
    _int,
    _is,
    _key,
    _offset,
    _pair,
    _row,
    _scalar,
    _sep,
    _string,
    _word,
    _ws,
)
from harness.runfiles.lineerror import NO_OFFSET
from harness.runfiles.vocab import CLIENT_FS, F_CODES, TYPE_NAMES

# Field names and string values, as bytes (numba freezes global arrays as constants);
# the type and f codes are their positions in the strict reader's own lists.
_K_INDEX = np.frombuffer(b"index", np.uint8)
_K_TIME = np.frombuffer(b"time", np.uint8)
_K_TYPE = np.frombuffer(b"type", np.uint8)
_K_PROCESS = np.frombuffer(b"process", np.uint8)
_K_F = np.frombuffer(b"f", np.uint8)
_K_VALUE = np.frombuffer(b"value", np.uint8)
_K_SEEK = np.frombuffer(b"seek_to_beginning", np.uint8)
_K_ERROR = np.frombuffer(b"error", np.uint8)
_K_GROUP = np.frombuffer(b"group", np.uint8)
_TYPE_OK = TYPE_NAMES.index("ok")  # the type code of an ok completion
_T_INVOKE, _T_OK, _T_FAIL, _T_INFO = (np.frombuffer(n.encode(), np.uint8) for n in TYPE_NAMES)
_F_SEND, _F_POLL, _F_TXN, _F_ASSIGN, _F_SUBSCRIBE, _F_CRASH, _F_COMMIT, _F_COMMITTED = (
    np.frombuffer(n.encode(), np.uint8) for n in CLIENT_FS)
_TXN, _COMMIT, _COMMITTED = F_CODES["txn"], F_CODES["commit"], F_CODES["committed"]


@njit(cache=True)
def _offsets(buf: Any, p: int, end: int, line: int, kind: int, nullable: bool, commit: Any,
             nc: int, keys: Any) -> tuple[int, Any, int, Any]:
    """`{"<key>": offset, ...}` at p (an offset may be null where nullable) as commit
    rows (line, group 0, key, offset, kind): (p after it, commit, nc, keys); p = -1 for
    anything else."""
    if p >= end or buf[p] != 123:
        return -1, commit, nc, keys
    p = _ws(buf, p + 1, end)
    if p < end and buf[p] == 125:
        return p + 1, commit, nc, keys
    nkeys = 0
    top = -1
    while True:
        key, p, keys = _key(buf, p, end, keys, nkeys, top)
        if p < 0:
            return -1, commit, nc, keys
        nkeys += 1
        top = max(top, key)
        offset, p = _offset(buf, p, end, nullable)
        if p < 0:
            return -1, commit, nc, keys
        commit = _row(commit, nc, line, 0, key, offset, kind)
        nc += 1
        p, closed = _sep(buf, p, end, 125)
        if p < 0:
            return -1, commit, nc, keys
        if closed:
            return p, commit, nc, keys


@njit(cache=True)
def _asked(buf: Any, p: int, end: int, line: int, rows: bool, commit: Any,
           nc: int) -> tuple[int, Any, int]:
    """`[key, ...]` at p, a `committed` micro-op's keys, as rows (line, group 0, key,
    NO_OFFSET, asked) where `rows` (an invoke's; a completion's repeat adds none)."""
    if p >= end or buf[p] != 91:
        return -1, commit, nc
    p = _ws(buf, p + 1, end)
    if p < end and buf[p] == 93:
        return p + 1, commit, nc
    while True:
        key, p = _int(buf, p, end, False)
        if p < 0:
            return -1, commit, nc
        if rows:
            commit = _row(commit, nc, line, 0, key, NO_OFFSET, COMMIT_ASKED)
            nc += 1
        p, closed = _sep(buf, p, end, 93)
        if p < 0:
            return -1, commit, nc
        if closed:
            return p, commit, nc


@njit(cache=True)
def _micro_ops(buf: Any, p: int, end: int, line: int, completion: bool, fc: int,
               send: Any, ns: int, read: Any, nr: int, commit: Any, nc: int,
               keys: Any) -> tuple[int, Any, int, Any, int, Any, int, bool]:
    """The list of micro-operations at p of an operation of f code fc: (p after, send,
    ns, read, nr, commit, nc, has_poll); p = -1 when a micro-op is outside the common
    shapes, or is one the operation may not hold (the strict reader names it)."""
    has_poll = False
    if p >= end or buf[p] != 91:
        return -1, send, ns, read, nr, commit, nc, has_poll
    p = _ws(buf, p + 1, end)
    if p < end and buf[p] == 93:
        return p + 1, send, ns, read, nr, commit, nc, has_poll
    seq = 0
    rseq = 0
    while True:
        if p >= end or buf[p] != 91:
            return -1, send, ns, read, nr, commit, nc, has_poll
        a, p = _string(buf, _ws(buf, p + 1, end), end)
        if p < 0:
            return -1, send, ns, read, nr, commit, nc, has_poll
        if (fc in (_COMMIT, _TXN) and _is(buf, a, p - 1, _F_COMMIT)) or (
                fc == _COMMITTED and _is(buf, a, p - 1, _F_COMMITTED)):
            # a commit (in a txn: send_offsets_to_transaction) or a committed read
            p, closed = _sep(buf, p, end, 93)
            if p < 0 or closed:
                return -1, send, ns, read, nr, commit, nc, has_poll
            if fc == _COMMITTED and p < end and buf[p] == 91:
                p, commit, nc = _asked(buf, p, end, line, not completion, commit, nc)
            elif fc == _COMMITTED:
                if not completion:
                    return -1, send, ns, read, nr, commit, nc, has_poll
                p, commit, nc, keys = _offsets(buf, p, end, line, COMMIT_ANSWERED, True,
                                               commit, nc, keys)
            else:
                p, commit, nc, keys = _offsets(buf, p, end, line, COMMIT_WRITE, False,
                                               commit, nc, keys)
            if p < 0:
                return -1, send, ns, read, nr, commit, nc, has_poll
            p = _ws(buf, p, end)
            if p >= end or buf[p] != 93:
                return -1, send, ns, read, nr, commit, nc, has_poll
            p += 1
        elif fc >= _COMMIT:  # a commit or committed operation holds only its own
            return -1, send, ns, read, nr, commit, nc, has_poll
        elif _is(buf, a, p - 1, _F_SEND):
            p, closed = _sep(buf, p, end, 93)
            if p < 0 or closed:
                return -1, send, ns, read, nr, commit, nc, has_poll
            key, p = _int(buf, p, end, False)
            if p < 0:
                return -1, send, ns, read, nr, commit, nc, has_poll
            p, closed = _sep(buf, p, end, 93)
            if p < 0 or closed or p >= end:
                return -1, send, ns, read, nr, commit, nc, has_poll
            offset = NO_OFFSET
            if buf[p] == 91:
                if not completion:
                    return -1, send, ns, read, nr, commit, nc, has_poll
                offset, value, p = _pair(buf, p, end, True)
                if p < 0:
                    return -1, send, ns, read, nr, commit, nc, has_poll
            else:
                value, p = _int(buf, p, end, True)
                if p < 0:
                    return -1, send, ns, read, nr, commit, nc, has_poll
            p = _ws(buf, p, end)
            if p >= end or buf[p] != 93:
                return -1, send, ns, read, nr, commit, nc, has_poll
            p += 1
            send = _row(send, ns, line, key, value, offset, seq)
            ns += 1
            seq += 1
        elif _is(buf, a, p - 1, _F_POLL):
            has_poll = True
            p, closed = _sep(buf, p, end, 93)
            if p < 0:
                return -1, send, ns, read, nr, commit, nc, has_poll
            if not closed:
                if not completion or p >= end or buf[p] != 123:
                    return -1, send, ns, read, nr, commit, nc, has_poll
                p = _ws(buf, p + 1, end)
                nkeys = 0
                top = -1
                if p < end and buf[p] == 125:
                    p += 1
                else:
                    while True:
                        key, p, keys = _key(buf, p, end, keys, nkeys, top)
                        if p < 0:
                            return -1, send, ns, read, nr, commit, nc, has_poll
                        nkeys += 1
                        top = max(top, key)
                        if p >= end or buf[p] != 91:
                            return -1, send, ns, read, nr, commit, nc, has_poll
                        p = _ws(buf, p + 1, end)
                        if p < end and buf[p] == 93:
                            p += 1
                        else:
                            while True:
                                offset, value, p = _pair(buf, p, end, False)
                                if p < 0:
                                    return -1, send, ns, read, nr, commit, nc, has_poll
                                read = _row(read, nr, line, key, offset, value, rseq)
                                nr += 1
                                rseq += 1
                                p, closed = _sep(buf, p, end, 93)
                                if p < 0:
                                    return -1, send, ns, read, nr, commit, nc, has_poll
                                if closed:
                                    break
                        p, closed = _sep(buf, p, end, 125)
                        if p < 0:
                            return -1, send, ns, read, nr, commit, nc, has_poll
                        if closed:
                            break
                p = _ws(buf, p, end)
                if p >= end or buf[p] != 93:
                    return -1, send, ns, read, nr, commit, nc, has_poll
                p += 1
        else:
            return -1, send, ns, read, nr, commit, nc, has_poll
        p, closed = _sep(buf, p, end, 93)
        if p < 0:
            return -1, send, ns, read, nr, commit, nc, has_poll
        if closed:
            return p, send, ns, read, nr, commit, nc, has_poll


@njit(cache=True)
def _keys_list(buf: Any, p: int, end: int, line: int, keep: bool, assigned: Any,
               na: int) -> tuple[int, Any, int]:
    """(p after a list of non-negative integers (an assign's or subscribe's keys), or
    -1; assigned; na): with `keep` (an ok completion), a row (line, key) per key."""
    if p >= end or buf[p] != 91:
        return -1, assigned, na
    p = _ws(buf, p + 1, end)
    if p < end and buf[p] == 93:
        return p + 1, assigned, na
    while True:
        key, p = _int(buf, p, end, False)
        if p < 0:
            return -1, assigned, na
        if keep:
            assigned = _grow(assigned, 2 * na + 2)
            assigned[2 * na] = line
            assigned[2 * na + 1] = key
            na += 1
        p, closed = _sep(buf, p, end, 93)
        if p < 0:
            return -1, assigned, na
        if closed:
            return p, assigned, na


@njit(cache=True)
def _code(buf: Any, a: int, b: int, l0: Any, l1: Any, l2: Any, l3: Any, l4: Any,
          l5: Any) -> int:
    """The position of the string [a, b) among l0..l5 (unused ones may repeat), or -1."""
    if _is(buf, a, b, l0):
        return 0
    if _is(buf, a, b, l1):
        return 1
    if _is(buf, a, b, l2):
        return 2
    if _is(buf, a, b, l3):
        return 3
    if _is(buf, a, b, l4):
        return 4
    if _is(buf, a, b, l5):
        return 5
    return -1


@njit(cache=True)
def _line(buf: Any, p: int, end: int, line: int, head: Any, send: Any, ns: int, read: Any,
          nr: int, commit: Any, nc: int, assigned: Any, na: int,
          keys: Any) -> tuple[int, Any, int, Any, int, Any, int, Any, int]:
    """The line at p (the buffer ends at end) into head[line] and the rows: (where its
    newline is, or end, send, ns, read, nr, commit, nc, assigned, na), or -1 first when
    not accepted: then the rows it added are to be dropped (the caller keeps ns, nr, nc
    and na). No accepted line crosses a newline: neither whitespace nor strings here may
    hold one."""
    p = _ws(buf, p, end)
    if p >= end or buf[p] != 123:
        return -1, send, ns, read, nr, commit, nc, assigned, na
    p = _ws(buf, p + 1, end)
    index = -1
    time = -1
    typ = -1
    proc = -1
    fc = -1
    flags = 0
    seen_value = False
    seen_seek = False
    seen_error = False
    while True:
        a, p = _string(buf, p, end)
        if p < 0:
            return -1, send, ns, read, nr, commit, nc, assigned, na
        b = p - 1
        p = _ws(buf, p, end)
        if p >= end or buf[p] != 58:
            return -1, send, ns, read, nr, commit, nc, assigned, na
        p = _ws(buf, p + 1, end)
        if _is(buf, a, b, _K_INDEX):
            if index >= 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            index, p = _int(buf, p, end, False)
        elif _is(buf, a, b, _K_TIME):
            if time >= 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            time, p = _int(buf, p, end, False)
        elif _is(buf, a, b, _K_TYPE):
            s, p = _string(buf, p, end)
            if typ >= 0 or p < 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            typ = _code(buf, s, p - 1, _T_INVOKE, _T_OK, _T_FAIL, _T_INFO, _T_INFO, _T_INFO)
            if typ < 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
        elif _is(buf, a, b, _K_PROCESS):
            if proc >= 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            proc, p = _int(buf, p, end, False)
        elif _is(buf, a, b, _K_F):
            s, p = _string(buf, p, end)
            if fc >= 0 or p < 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            fc = _code(buf, s, p - 1, _F_SEND, _F_POLL, _F_TXN, _F_ASSIGN, _F_SUBSCRIBE,
                       _F_CRASH)
            if fc < 0:
                fc = _code(buf, s, p - 1, _F_COMMIT, _F_COMMITTED, _F_COMMITTED, _F_COMMITTED,
                           _F_COMMITTED, _F_COMMITTED)
                fc = fc + _COMMIT if fc >= 0 else fc
            if fc < 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
        elif _is(buf, a, b, _K_VALUE):
            if seen_value or typ < 0 or proc < 0 or fc < 0:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            seen_value = True
            q = _word(buf, p, end, _NULL)
            if q >= 0:
                if typ == 0:
                    return -1, send, ns, read, nr, commit, nc, assigned, na
                p = q
            elif fc <= _TXN or fc >= _COMMIT:
                p, send, ns, read, nr, commit, nc, has_poll = _micro_ops(
                    buf, p, end, line, typ != 0, fc, send, ns, read, nr, commit, nc, keys)
                if has_poll:
                    flags |= 2
            elif fc <= 4:
                p, assigned, na = _keys_list(buf, p, end, line, typ == _TYPE_OK, assigned, na)
            else:
                return -1, send, ns, read, nr, commit, nc, assigned, na
        elif _is(buf, a, b, _K_SEEK):
            if seen_seek:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            seen_seek = True
            q = _word(buf, p, end, _TRUE)
            if q >= 0:
                flags |= 1
                p = q
            else:
                p = _word(buf, p, end, _FALSE)
        elif _is(buf, a, b, _K_ERROR):
            if seen_error:
                return -1, send, ns, read, nr, commit, nc, assigned, na
            seen_error = True
            _, p = _string(buf, p, end)
        elif _is(buf, a, b, _K_GROUP):  # the strict reader numbers the groups
            return -1, send, ns, read, nr, commit, nc, assigned, na
        else:  # a key the strict reader ignores, with a plain value (a duplicate too)
            p = _scalar(buf, p, end)
        if p < 0:
            return -1, send, ns, read, nr, commit, nc, assigned, na
        p, closed = _sep(buf, p, end, 125)
        if p < 0:
            return -1, send, ns, read, nr, commit, nc, assigned, na
        if closed:
            break
    p = _ws(buf, p, end)
    if (p < end and buf[p] != 10) or index < 0 or time < 0 or proc < 0 or not seen_value:
        return -1, send, ns, read, nr, commit, nc, assigned, na
    head[6 * line] = index
    head[6 * line + 1] = time
    head[6 * line + 2] = typ
    head[6 * line + 3] = proc
    head[6 * line + 4] = fc
    head[6 * line + 5] = flags
    return p, send, ns, read, nr, commit, nc, assigned, na


@njit(cache=True, nogil=True)
def _scan(buf: Any, lines: int) -> tuple[Any, Any, int, Any, int, Any, int, Any, int, Any,
                                         int]:
    """Every line of buf: (head, send, ns, read, nr, commit, nc, assigned, na, declined,
    nd), as flat rows; `declined` holds (line, start, end) of each line left to the
    strict reader."""
    head = np.zeros(6 * lines, np.int64)
    send = np.empty(5 * max(16, lines // 2), np.int64)
    read = np.empty(5 * max(16, lines), np.int64)
    commit = np.empty(5 * 16, np.int64)
    assigned = np.empty(2 * max(16, lines // 8), np.int64)
    declined = np.empty(48, np.int64)
    keys = np.empty(16, np.int64)
    ns = 0
    nr = 0
    nc = 0
    na = 0
    nd = 0
    p = 0
    n = len(buf)
    for line in range(lines):
        e, send, ns2, read, nr2, commit, nc2, assigned, na2 = _line(
            buf, p, n, line, head, send, ns, read, nr, commit, nc, assigned, na, keys)
        if e >= 0:
            ns, nr, nc, na = ns2, nr2, nc2, na2
        else:
            e = p
            while e < n and buf[e] != 10:
                e += 1
            declined = _grow(declined, 3 * nd + 3)
            declined[3 * nd] = line
            declined[3 * nd + 1] = p
            declined[3 * nd + 2] = e
            nd += 1
        p = e + 1
    return head, send, ns, read, nr, commit, nc, assigned, na, declined, nd


def scan_lines(data: bytes) -> tuple[Any, Any, Any, Any, Any, list[tuple[int, bytes]]]:
    """The lines of data (split at b"\\n", a last empty piece dropped) as the rows of
    those accepted, and (line, raw bytes) of each line declined, in order; lines are
    numbered from 0. Rows as the strict reader's: head is index, time, type code,
    process, f code, flags (a row a line: zeros for a declined line); send is line, key,
    value, offset, seq; read is line, key, offset, value, seq; commit is COMMIT_COLUMNS
    (line, group, key, offset, kind), every group the run's default (code 0); assigned
    is line, key of each key of an `ok` assign or subscribe."""
    lines = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    buf = np.frombuffer(data, np.uint8)
    head, send, ns, read, nr, commit, nc, assigned, na, declined, nd = _scan(buf, lines)
    rest = [(int(i), data[int(a):int(b)]) for i, a, b in declined[:3 * nd].reshape(-1, 3).tolist()]
    return (head.reshape(-1, 6), send[:5 * ns].reshape(-1, 5), read[:5 * nr].reshape(-1, 5),
            commit[:5 * nc].reshape(-1, 5), assigned[:2 * na].reshape(-1, 2), rest)


def warm() -> None:
    """Load the compiled code now (compiling it, about 10 s, when no cache exists yet):
    setup does this, so that no check pays for the compile."""
    scan_lines(b'{"index": 0, "time": 0, "type": "ok", "process": 0, "f": "poll", '
               b'"value": [["poll", {"0": [[0, 1]]}]]}\n')
