"""The byte-level pieces of the compiled history-line parser (harness/runfiles/fastlines.py):
whitespace, literals, integers, plain strings, separators, offset pairs, an object's
integer keys and plain scalar values, each reading a line's bytes in machine code
(numba) and answering -1 where it does not recognise what it sees (fastlines then hands
the line to the strict reader). Split from the line grammar so that each module reads on
its own; the compiled code is the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from harness.runfiles.lineerror import NO_OFFSET

_NULL = np.frombuffer(b"null", np.uint8)
_TRUE = np.frombuffer(b"true", np.uint8)
_FALSE = np.frombuffer(b"false", np.uint8)


@njit(cache=True, inline="always")
def _ws(buf: Any, p: int, end: int) -> int:
    """p after any space, tab or carriage return (JSON whitespace inside a line)."""
    while p < end and (buf[p] == 32 or buf[p] == 9 or buf[p] == 13):
        p += 1
    return p


@njit(cache=True)
def _is(buf: Any, a: int, b: int, lit: Any) -> bool:
    """The bytes [a, b) are lit."""
    if b - a != len(lit):
        return False
    for i in range(len(lit)):  # noqa: SIM110  (numba compiles no generator)
        if buf[a + i] != lit[i]:
            return False
    return True


@njit(cache=True)
def _word(buf: Any, p: int, end: int, lit: Any) -> int:
    """p after the bare word lit (null, true, false) at p, or -1."""
    if p + len(lit) > end or not _is(buf, p, p + len(lit), lit):
        return -1
    return p + len(lit)


@njit(cache=True)
def _int(buf: Any, p: int, end: int, signed: bool) -> tuple[int, int]:
    """(value, p after it) for a JSON integer of at most 18 digits at p; p = -1 when
    the text there is anything else (a float, a leading zero, a longer integer)."""
    neg = False
    if p < end and buf[p] == 45:
        if not signed:
            return 0, -1
        neg = True
        p += 1
    if p >= end or not 48 <= buf[p] <= 57:
        return 0, -1
    v = 0
    if buf[p] == 48:
        p += 1
        if p < end and 48 <= buf[p] <= 57:
            return 0, -1
    else:
        n = 0
        while p < end and 48 <= buf[p] <= 57:
            v = v * 10 + (int(buf[p]) - 48)
            p += 1
            n += 1
            if n > 18:
                return 0, -1
    if p < end and (buf[p] == 46 or buf[p] == 101 or buf[p] == 69):
        return 0, -1
    return (-v if neg else v), p


@njit(cache=True)
def _string(buf: Any, p: int, end: int) -> tuple[int, int]:
    """(start of its contents, p after the closing quote) for the string at p, when it
    holds printable ASCII and escapes other than \\u; p = -1 for anything else (the
    strict reader then judges). A name or code with an escape matches no literal below,
    so it is declined too."""
    if p >= end or buf[p] != 34:
        return 0, -1
    p += 1
    a = p
    while p < end:
        c = buf[p]
        if c == 34:
            return a, p + 1
        if c < 32 or c >= 128:
            return 0, -1
        if c == 92:
            p += 1
            if p >= end:
                return 0, -1
            e = buf[p]
            if not (e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110
                    or e == 114 or e == 116):
                return 0, -1
        p += 1
    return 0, -1


@njit(cache=True)
def _grow(a: Any, n: int) -> Any:
    """a, or a copy twice as long when it has no room for n more values (flat rows: 1-D
    arrays and plain loops compile several times faster than 2-D slicing)."""
    if len(a) >= n:
        return a
    b = np.empty(max(n, 2 * len(a)), np.int64)
    for i in range(len(a)):
        b[i] = a[i]
    return b


@njit(cache=True, inline="always")
def _row(rows: Any, n: int, a: int, b: int, c: int, d: int, e: int) -> Any:
    """rows (flat, five values a row) with row n set to (a, b, c, d, e), grown first
    when it has no room."""
    if len(rows) < 5 * n + 5:
        rows = _grow(rows, 5 * n + 5)
    rows[5 * n] = a
    rows[5 * n + 1] = b
    rows[5 * n + 2] = c
    rows[5 * n + 3] = d
    rows[5 * n + 4] = e
    return rows


@njit(cache=True)
def _sep(buf: Any, p: int, end: int, close: int) -> tuple[int, bool]:
    """After an element of a list or object: (p after the comma or closer, closed?);
    p = -1 when neither follows."""
    p = _ws(buf, p, end)
    if p < end and buf[p] == 44:
        return _ws(buf, p + 1, end), False
    if p < end and buf[p] == close:
        return p + 1, True
    return -1, False


@njit(cache=True, inline="always")
def _offset(buf: Any, p: int, end: int, may_be_null: bool) -> tuple[int, int]:
    """(offset, p after it) of a non-negative integer at p, or NO_OFFSET for a null one
    where allowed; p = -1 for anything else."""
    q = _word(buf, p, end, _NULL) if may_be_null else -1
    if q >= 0:
        return NO_OFFSET, q
    return _int(buf, p, end, False)


@njit(cache=True)
def _pair(buf: Any, p: int, end: int, offset_may_be_null: bool) -> tuple[int, int, int]:
    """(offset, value, p after the closing bracket) of `[offset, value]` at p, the
    offset NO_OFFSET for a null one where allowed; p = -1 for anything else."""
    if p >= end or buf[p] != 91:
        return 0, 0, -1
    offset, p = _offset(buf, _ws(buf, p + 1, end), end, offset_may_be_null)
    if p < 0:
        return 0, 0, -1
    p, closed = _sep(buf, p, end, 93)
    if p < 0 or closed:
        return 0, 0, -1
    value, p = _int(buf, p, end, True)
    if p < 0:
        return 0, 0, -1
    p = _ws(buf, p, end)
    if p >= end or buf[p] != 93:
        return 0, 0, -1
    return offset, value, p + 1


@njit(cache=True)
def _key(buf: Any, p: int, end: int, keys: Any, nkeys: int, top: int) -> tuple[int, int, Any]:
    """(key, p after the colon, keys) of an object's key at p: the digits of a
    non-negative integer, one the object has not named before (kept in keys[:nkeys],
    the largest being top: keys written in order need no search); p = -1 for anything
    else."""
    a, p = _string(buf, p, end)
    if p < 0 or p - 1 == a or p - 1 - a > 18:
        return 0, -1, keys
    key = 0
    for i in range(a, p - 1):
        if not 48 <= buf[i] <= 57:
            return 0, -1, keys
        key = key * 10 + (int(buf[i]) - 48)
    if key <= top:
        for i in range(nkeys):
            if keys[i] == key:
                return 0, -1, keys
    keys = _grow(keys, nkeys + 1)
    keys[nkeys] = key
    p = _ws(buf, p, end)
    if p >= end or buf[p] != 58:
        return 0, -1, keys
    return key, _ws(buf, p + 1, end), keys


@njit(cache=True)
def _scalar(buf: Any, p: int, end: int) -> int:
    """p after a plain JSON value at p (an integer of at most 18 digits, a string,
    true, false or null), or -1."""
    if p < end and buf[p] == 34:
        return _string(buf, p, end)[1]
    q = _word(buf, p, end, _NULL)
    if q < 0:
        q = _word(buf, p, end, _TRUE)
    if q < 0:
        q = _word(buf, p, end, _FALSE)
    return q if q >= 0 else _int(buf, p, end, True)[1]
