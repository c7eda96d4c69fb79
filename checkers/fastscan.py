"""A C-speed path to the same checked columns `harness.runfiles.scan_history` builds.

DuckDB (multi-threaded, C++) parses history.jsonl, explodes the micro-ops and
records, and checks every line's shape as column expressions. It is
conservative: any line it is not sure about (bad JSON, a missing field, an
unknown shape, a duplicated key, an empty line) makes it give up, and the strict
Python reader then reads the file, so an error names the file, line and problem
exactly as before. When it succeeds, the cross-line checks run on the very
same columns the Python reader would have built.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from harness.runfiles import (
    CLIENT_FS,
    F_CODES,
    F_NEMESIS,
    NEMESIS_CODE,
    NO_OFFSET,
    HistoryScan,
    check_lines,
    check_sends,
    parse_commit_lines,
    scan_history,
)

_F_COMMIT = F_CODES["commit"]  # commit and committed: the f codes from here to F_NEMESIS
MIN_BYTES = 1 << 20  # below this the Python reader is as fast (no DuckDB start)

# nn: a non-negative int64; sv: any int64; NULL when the (minified) JSON text is
# anything else. At most 18 digits: longer numbers go to the strict reader.
_MACROS = """
CREATE OR REPLACE TEMP MACRO nn(x) AS
  CASE WHEN regexp_full_match(x::VARCHAR, '[0-9]{1,18}') THEN CAST(x::VARCHAR AS BIGINT) END;
CREATE OR REPLACE TEMP MACRO sv(x) AS
  CASE WHEN regexp_full_match(x::VARCHAR, '-?[0-9]{1,18}') THEN CAST(x::VARCHAR AS BIGINT) END;
"""

_FS = ", ".join(f"'\"{f}\"'" for f in CLIENT_FS)
_N, _V = "[0-9]{1,18}", "-?[0-9]{1,18}"
_REC = rf"\[{_N},{_V}\]"
_RECS = rf"\[(?:{_REC}(?:,{_REC})*)?\]"
_KB = rf'"{_N}":{_RECS}'
_OBJ = rf"\{{(?:{_KB}(?:,{_KB})*)?\}}"
# the common shapes of a send/poll/txn value, matched as text (anything else: JSON path)
SEND_PLAIN = rf'\[\["send",({_N}),({_V})\]\]'
SEND_DONE = rf'\[\["send",({_N}),\[({_N}|null),({_V})\]\]\]'
POLL_EMPTY = r'\[\["poll"\]\]'
POLL_DONE = rf'\[\["poll",({_OBJ})\]\]'

_MAP = '"MAP(VARCHAR, BIGINT[][])"'  # a poll object of the common shape, parsed

# One pass over the file: head columns, whether the line is sound (apart from the
# micro-ops of the JSON path, checked below), and the common value shapes parsed.
_HEAD = f"""
CREATE TEMP TABLE h2 AS
SELECT idx, time, typ, proc, fc, seek, shape, v IS NULL AS vnull,
  coalesce(idx IS NOT NULL AND time IS NOT NULL AND typ IS NOT NULL AND proc IS NOT NULL
    AND fc >= 0 AND CASE
    WHEN fc = {F_NEMESIS} THEN json_type(v) = 'OBJECT' OR (typ <> 0 AND v IS NULL)
    WHEN fc >= {_F_COMMIT} THEN true
    WHEN fc <= 2 THEN shape > 0 OR json_type(v) = 'ARRAY' OR (typ <> 0 AND v IS NULL)
    WHEN fc <= 4 THEN (typ <> 0 AND v IS NULL)
                      OR regexp_full_match(v, '\\[(?:{_N}(?:,{_N})*)?\\]')
    ELSE v IS NULL END, false) AS ok,
  CASE WHEN shape = 1 THEN regexp_extract(v, '^{SEND_PLAIN}$', ['k', 'v']) END AS s1,
  CASE WHEN shape = 2 THEN regexp_extract(v, '^{SEND_DONE}$', ['k', 'o', 'v']) END AS s2,
  CASE WHEN shape = 4 THEN json_transform(regexp_extract(v, '^{POLL_DONE}$', 1), '{_MAP}')
       END AS pm,
  CASE WHEN shape = 0 THEN v END AS v
FROM (SELECT *, CASE WHEN fc > 2 OR v IS NULL THEN -1
               WHEN regexp_full_match(v, '{SEND_PLAIN}') THEN 1
               WHEN typ <> 0 AND regexp_full_match(v, '{SEND_DONE}') THEN 2
               WHEN v = '[["poll"]]' THEN 3
               WHEN typ <> 0 AND regexp_full_match(v, '{POLL_DONE}') THEN 4
               ELSE 0 END AS shape
FROM (SELECT nn("index") AS idx, nn(time) AS time,
       CASE type::VARCHAR WHEN '"invoke"' THEN 0 WHEN '"ok"' THEN 1 WHEN '"fail"' THEN 2
                          WHEN '"info"' THEN 3 END AS typ,
       CASE WHEN process::VARCHAR = '"nemesis"' THEN {NEMESIS_CODE} ELSE nn(process) END AS proc,
       CASE WHEN process::VARCHAR = '"nemesis"' THEN
              CASE WHEN json_type(f) = 'VARCHAR' THEN {F_NEMESIS} END
            ELSE list_position([{_FS}], f::VARCHAR) - 1 END AS fc,
       value::VARCHAR AS v, coalesce(seek_to_beginning::VARCHAR = 'true', false) AS seek
      FROM read_json(?, format = 'newline_delimited', columns = {{
        'index': 'JSON', 'time': 'JSON', 'type': 'JSON', 'process': 'JSON', 'f': 'JSON',
        'value': 'JSON', 'seek_to_beginning': 'JSON'}})))
"""

# a duplicated key in a poll object makes the map NULL: the strict reader judges those
_HEAD_OK = "SELECT count(*) FROM h2 WHERE NOT ok OR (shape = 4 AND pm IS NULL)"

# JSON null and a missing "value" both read as NULL: the contract needs the key
_VALUE_PRESENT = """
SELECT count(*) FROM read_json_objects(?, format = 'newline_delimited')
WHERE NOT json_exists(json, '$.value')
"""

_MICRO = """
CREATE TEMP TABLE m AS
SELECT idx AS line, typ, m, i, json_type(m) = 'ARRAY' AS arr,
       json_array_length(m) AS n,
       CASE WHEN json_type(m, '$[0]') = 'VARCHAR' THEN m ->> '$[0]' END AS kind
FROM (SELECT idx, typ, unnest(ms) AS m, generate_subscripts(ms, 1) AS i
      FROM (SELECT idx, typ, json_extract(v, '$[*]') AS ms FROM h2
            WHERE shape = 0 AND json_type(v) = 'ARRAY'));
"""

_MICRO_OK = """
SELECT count(*) FROM m WHERE NOT coalesce(arr AND n >= 1 AND CASE kind
  WHEN 'send' THEN n = 3 AND nn(m -> '$[1]') IS NOT NULL AND CASE
    WHEN json_type(m, '$[2]') = 'ARRAY' THEN typ <> 0 AND json_array_length(m, '$[2]') = 2
      AND (json_type(m, '$[2][0]') = 'NULL' OR nn(m -> '$[2][0]') IS NOT NULL)
      AND sv(m -> '$[2][1]') IS NOT NULL
    ELSE sv(m -> '$[2]') IS NOT NULL END
  WHEN 'poll' THEN n = 1 OR (typ <> 0 AND n = 2 AND json_type(m, '$[1]') = 'OBJECT')
  WHEN 'commit' THEN true
  WHEN 'committed' THEN true
  ELSE false END, false)
"""

# committed offsets: the lines that hold them, judged and parsed by the strict reader's
# own code (few lines: operations, not records)
_COMMIT_LINES = f"""
SELECT idx FROM h2 WHERE fc >= {_F_COMMIT} AND fc < {F_NEMESIS}
UNION SELECT line FROM m WHERE kind IN ('commit', 'committed')
"""
_COMMIT_TEXT = """
SELECT json FROM read_json_objects(?, format = 'newline_delimited')
WHERE contains(json, '"commit')
"""

_SENDS = f"""
SELECT line, key, value, "offset" FROM (
SELECT line, i, nn(m -> '$[1]') AS key,
       CASE WHEN json_type(m, '$[2]') = 'ARRAY' THEN sv(m -> '$[2][1]') ELSE sv(m -> '$[2]') END
         AS value,
       CASE WHEN json_type(m, '$[2]') = 'ARRAY' AND json_type(m, '$[2][0]') <> 'NULL'
            THEN nn(m -> '$[2][0]') ELSE {NO_OFFSET} END AS "offset"
FROM m WHERE kind = 'send'
UNION ALL
SELECT idx, 1, CAST(s1.k AS BIGINT), CAST(s1.v AS BIGINT), {NO_OFFSET} FROM h2 WHERE shape = 1
UNION ALL
SELECT idx, 1, CAST(s2.k AS BIGINT), CAST(s2.v AS BIGINT),
       CASE WHEN s2.o = 'null' THEN {NO_OFFSET} ELSE CAST(s2.o AS BIGINT) END
FROM h2 WHERE shape = 2)
ORDER BY line, i
"""

# the same rows when every send has a common shape: no union, so no sort (a table
# scan keeps insertion order; the order is verified after the fetch all the same)
_SENDS_COMMON = f"""
SELECT idx AS line, CAST(CASE WHEN shape = 1 THEN s1.k ELSE s2.k END AS BIGINT) AS key,
       CAST(CASE WHEN shape = 1 THEN s1.v ELSE s2.v END AS BIGINT) AS value,
       CASE WHEN shape = 1 OR s2.o = 'null' THEN {NO_OFFSET} ELSE CAST(s2.o AS BIGINT) END
         AS "offset"
FROM h2 WHERE shape IN (1, 2)
"""

_READS_COMMON = """
SELECT line, key, r[1] AS "offset", r[2] AS value, true AS rok, j, q
FROM (SELECT line, j, key, unnest(rs) AS r, generate_subscripts(rs, 1) AS q
      FROM (SELECT idx AS line, CAST(unnest(map_keys(pm)) AS BIGINT) AS key,
                   unnest(map_values(pm)) AS rs, generate_subscripts(map_keys(pm), 1) AS j
            FROM h2 WHERE shape = 4))
"""

_POLL_KEYS = """
CREATE TEMP TABLE pk AS
SELECT line, i, k, j, o -> k AS recs, json_type(o -> k) = 'ARRAY' AS arr,
       regexp_full_match(k, '[0-9]{1,18}') AS kok, dup
FROM (SELECT line, i, o, unnest(ks) AS k, generate_subscripts(ks, 1) AS j,
             len(ks) <> len(list_distinct(ks)) AS dup
      FROM (SELECT line, i, m -> '$[1]' AS o, json_keys(m -> '$[1]') AS ks FROM m
            WHERE kind = 'poll' AND n = 2));
"""

_READS = """
SELECT line, key, "offset", value, rok FROM (
SELECT line, i, j, q, CAST(k AS BIGINT) AS key, nn(r -> '$[0]') AS "offset",
       sv(r -> '$[1]') AS value, json_type(r) = 'ARRAY' AND json_array_length(r) = 2 AS rok
FROM (SELECT line, i, k, j, unnest(rs) AS r, generate_subscripts(rs, 1) AS q
      FROM (SELECT line, i, k, j, json_extract(recs, '$[*]') AS rs FROM pk))
UNION ALL
SELECT line, 1, j, q, key, r[1], r[2], true
FROM (SELECT line, j, key, unnest(rs) AS r, generate_subscripts(rs, 1) AS q
      FROM (SELECT idx AS line, CAST(unnest(map_keys(pm)) AS BIGINT) AS key,
                   unnest(map_values(pm)) AS rs, generate_subscripts(map_keys(pm), 1) AS j
            FROM h2 WHERE shape = 4)))
ORDER BY line, i, j, q
"""


def line_count(path: str) -> int:
    """Lines as the Python reader splits them (a last line may lack its newline).

    DuckDB skips blank lines; a count that differs from its rows sends the file
    to the strict reader, which names the blank line."""
    n = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def _run(con: Any, script: str, param: str | None = None) -> None:
    """Run a script statement by statement (a parameter only binds to one statement)."""
    for i, stmt in enumerate(x for x in script.split(";") if x.strip()):
        con.execute(stmt, [param] if param is not None and i == 0 else None)


def _ascending(*keys: Any) -> bool:
    """Rows strictly ascending by the keys taken together (first key most significant)."""
    cols = [np.asarray(k, np.int64) for k in keys]
    if len(cols[0]) < 2:
        return True
    greater = np.zeros(len(cols[0]) - 1, bool)
    equal = np.ones(len(cols[0]) - 1, bool)
    for c in cols:
        greater |= equal & (c[1:] > c[:-1])
        equal &= c[1:] == c[:-1]
    return bool(greater.all())


def _seq(line: Any) -> Any:
    """Position of each row inside its line (rows sorted by line)."""
    n = len(line)
    if n == 0:
        return np.zeros(0, np.int64)
    start = np.r_[True, line[1:] != line[:-1]]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    return np.arange(n, dtype=np.int64) - first


def _scan_duckdb(path: str, threads: int) -> HistoryScan | None:
    """The columns, or None when some line needs the strict reader's judgement."""
    from concurrent.futures import ThreadPoolExecutor

    import duckdb

    pool = ThreadPoolExecutor(1)  # counts lines while DuckDB (GIL released) parses
    counted = pool.submit(line_count, path)
    try:
        scan = _scan_columns(duckdb, path, threads)
        expected = counted.result()
    finally:
        pool.shutdown()
    if scan is None or scan.lines != expected:
        return None
    # the checks across lines, on the very columns the strict reader would have built
    scan.pair = check_lines(scan.path, np.arange(scan.lines), scan.time, scan.type,
                             scan.process, scan.f)
    check_sends(scan.path, np.stack([scan.send_line, scan.send_key, scan.send_value,
                                      scan.send_offset, scan.send_seq], axis=1),
                 scan.type, scan.pair)
    return scan


def _scan_columns(duckdb: Any, path: str, threads: int) -> HistoryScan | None:
    """Every line's columns when all lines have shapes DuckDB can vouch for, else None.
    Rows come in file order (insertion order is kept; index == row is checked)."""
    con = duckdb.connect(config={"threads": max(1, threads),
                                 "preserve_insertion_order": True})
    try:
        _run(con, _MACROS)
        _run(con, _HEAD, path)
        if con.execute(_HEAD_OK).fetchone() != (0,):
            return None
        if con.execute("SELECT count(*) FROM h2 WHERE vnull").fetchone() != (0,) and \
                con.execute(_VALUE_PRESENT, [path]).fetchone() != (0,):
            return None
        head = con.execute("SELECT idx, time, typ, proc, fc, seek, shape FROM h2").fetchnumpy()
        con.execute(_MICRO)
        if con.execute(_MICRO_OK).fetchone() != (0,):
            return None
        common = con.execute("SELECT count(*) FROM m").fetchone() == (0,)
        sends = con.execute(_SENDS_COMMON if common else _SENDS).fetchnumpy()
        if common and not _ascending(sends["line"]):
            sends = con.execute(_SENDS).fetchnumpy()
        con.execute(_POLL_KEYS)
        if con.execute("SELECT count(*) FROM pk WHERE NOT coalesce(arr AND kok AND NOT dup, "
                       "false)").fetchone() != (0,):
            return None
        reads = con.execute(_READS_COMMON if common else _READS).fetchnumpy()
        if common and not _ascending(reads["line"], reads.pop("j"), reads.pop("q")):
            reads = con.execute(_READS).fetchnumpy()
        polls = con.execute("SELECT DISTINCT line FROM m WHERE kind = 'poll'").fetchnumpy()
        commits = _commit_rows(con, path)
        if commits is None:
            return None
    except duckdb.Error:
        return None
    finally:
        con.close()
    if not bool(np.all(np.asarray(reads["rok"]))) or any(
            np.ma.is_masked(c) for c in (*head.values(), *sends.values(), *reads.values())):
        return None
    i64 = np.int64
    index = np.asarray(head["idx"], i64)
    if not np.array_equal(index, np.arange(len(index))):
        return None  # rows may not be in file order: let the strict reader judge
    flags = np.asarray(head["seek"], bool).astype(np.int8)
    flags[np.asarray(polls["line"], i64)] |= 2
    shape = np.asarray(head["shape"])
    flags[(shape == 3) | (shape == 4)] |= 2
    typ = np.asarray(head["typ"]).astype(np.int8)
    time = np.asarray(head["time"], i64)
    proc = np.asarray(head["proc"], i64)
    f = np.asarray(head["fc"]).astype(np.int8)
    s_line = np.asarray(sends["line"], i64)
    send = np.stack([s_line, np.asarray(sends["key"], i64), np.asarray(sends["value"], i64),
                     np.asarray(sends["offset"], i64), _seq(s_line)], axis=1).reshape(-1, 5)
    r_line = np.asarray(reads["line"], i64)
    read = np.stack([r_line, np.asarray(reads["key"], i64), np.asarray(reads["offset"], i64),
                     np.asarray(reads["value"], i64), _seq(r_line)], axis=1).reshape(-1, 5)
    return HistoryScan(path, time, typ, proc, f, flags, None,
                       send[:, 0], send[:, 1], send[:, 2], send[:, 3], send[:, 4],
                       read[:, 0], read[:, 1], read[:, 2], read[:, 3], read[:, 4], *commits)


def _commit_rows(con: Any, path: str) -> tuple[Any, tuple[str, ...]] | tuple[()] | None:
    """(commit rows, group names) of the lines holding committed offsets, parsed by the
    strict reader's code; () when there is none (a history without them pays one count);
    None when one of them needs the strict reader's judgement."""
    want = con.execute(_COMMIT_LINES).fetchnumpy()["idx"]
    if not len(want):
        return ()
    raws = [r[0].encode() for r in con.execute(_COMMIT_TEXT, [path]).fetchall()]
    got = parse_commit_lines(raws)
    if got is None or not np.isin(np.asarray(want, np.int64), got[0]).all():
        return None  # a line judged wrong, or one the text search missed (escapes)
    return got[1], got[2]


def scan_fast(path: Path | str, *, workers: int = 1, min_bytes: int = MIN_BYTES) -> HistoryScan:
    """scan_history's answer, through DuckDB when it can vouch for every line."""
    p = str(path)
    try:
        big = os.path.getsize(p) >= min_bytes
    except OSError:
        big = False
    if big and os.environ.get("UNDERTOW_NO_FAST_SCAN") != "1":
        scan = _scan_duckdb(p, workers)
        if scan is not None:
            return scan
    return scan_history(p, workers=workers)
