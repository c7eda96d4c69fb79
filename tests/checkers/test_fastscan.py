"""The DuckDB reader gives the strict reader's columns, or its very error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from checkers.fastscan import _scan_duckdb, scan_fast
from harness.runfiles import HistoryError, HistoryScan, scan_history
from tests.harness.test_history import BAD, INV, OK, line, write

EXAMPLES = Path("/work/shared/examples")
# the DuckDB path keeps no keys of assigns (`assigned` None): availability then reads
# them from the history itself (tests/checkers/test_availability.py compares the two)
FIELDS = [f for f in HistoryScan.__dataclass_fields__ if f not in ("path", "assigned")]


def outcome(fn: Any, p: Path) -> Any:
    try:
        return fn(p)
    except HistoryError as e:
        return str(e)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return bool(a == b)
    return all(bool(np.array_equal(getattr(a, f), getattr(b, f))) for f in FIELDS)


@pytest.mark.parametrize("name,rows,_line,_problem", BAD, ids=[b[0] for b in BAD])
def test_malformed_same_error(tmp_path: Path, name: str, rows: list[Any], _line: int,
                              _problem: str) -> None:
    p = write(tmp_path, rows)
    strict = outcome(scan_history, p)
    assert isinstance(strict, str)
    assert outcome(lambda q: scan_fast(q, min_bytes=0), p) == strict


OTHER: list[tuple[str, list[Any]]] = [
    ("txn and shapes", [
        {**INV, "f": "txn", "value": [["send", 0, 1], ["poll"], ["send", 2, 3]]},
        {**OK, "f": "txn", "value": [["send", 0, [4, 1]], ["poll", {"0": [[3, 9], [4, 1]],
                                                                    "5": []}],
                                     ["send", 2, [None, 3]]], "seek_to_beginning": True},
        line(2, type="invoke", process=1, f="poll", value=[["poll"]]),
        line(3, type="info", process=1, f="poll", value=None),
        line(4, type="invoke", process=2, f="assign", value=[0, 2]),
        line(5, type="ok", process=2, f="assign", value=None),
        line(6, type="invoke", process="nemesis", f="kill", value={"nodes": ["n1"]}),
        line(7, type="info", process="nemesis", f="kill", value=None),
        line(8, type="invoke", process=3, f="crash", value=None),
        line(9, type="info", process=3, f="crash", value=None),
        line(10, type="invoke", process=4, f="send", value=[["send", 7, -12345678901234567]]),
        line(11, type="fail", process=4, f="send", value=[["send", 7, -12345678901234567]]),
    ]),
    ("spaces and big ints", [
        b'{"index": 0, "time": 10, "type": "invoke", "process": 0, "f": "send", '
        b'"value": [["send", 0, 123456789012345678]]}',
        b'{"index": 1, "time": 20, "type": "ok", "process": 0, "f": "send", '
        b'"value": [["send", 0, [0, 123456789012345678]]], "extra": {"a": [1]}}',
    ]),
    ("19 digits", [{**INV, "value": [["send", 0, 2**63 - 1]]},
                   {**OK, "value": [["send", 0, [0, 2**63 - 1]]]}]),
    ("value missing", [{k: v for k, v in INV.items() if k != "value"}]),
    ("value null in invoke", [{**INV, "value": None}]),
    ("top-level duplicate key", [b'{"index":0,"index":1,"time":10,"type":"invoke",'
                                 b'"process":0,"f":"send","value":[["send",0,1]]}']),
    ("poll key duplicate", [
        {**INV, "f": "poll", "value": [["poll"]]},
        b'{"index":1,"time":20,"type":"ok","process":0,"f":"poll",'
        b'"value":[["poll",{"0":[[0,1]],"0":[[1,2]]}]]}']),
    ("poll key zero-padded", [
        {**INV, "f": "poll", "value": [["poll"]]},
        line(1, type="ok", f="poll", value=[["poll", {"00": [[0, 1]], "1": [[2, 3]]}]])]),
    ("float offset", [INV, {**OK, "value": [["send", 0, [1.0, 1]]]}]),
    ("string seek", [{**INV, "seek_to_beginning": "true"}, OK]),
    ("blank line at end", [INV, OK, b"  "]),
    ("no final newline", [INV, OK]),
]


@pytest.mark.parametrize("name,rows", OTHER, ids=[o[0] for o in OTHER])
def test_same_as_strict(tmp_path: Path, name: str, rows: list[Any]) -> None:
    p = write(tmp_path, rows)
    if name == "no final newline":
        p.write_bytes(p.read_bytes().rstrip(b"\n"))
    strict = outcome(scan_history, p)
    assert same(outcome(lambda q: scan_fast(q, min_bytes=0), p), strict)


def test_examples_use_the_fast_path(tmp_path: Path) -> None:
    for run in ("clean", "truncated"):
        p = EXAMPLES / run / "history.jsonl"
        fast = _scan_duckdb(str(p), 2)
        assert fast is not None, run  # the common shapes never need the fallback
        assert same(fast, scan_history(p))


@pytest.mark.parametrize("name", ["txn and shapes", "spaces and big ints",
                                  "poll key zero-padded", "no final newline"])
def test_json_path_vouches_for_other_shapes(tmp_path: Path, name: str) -> None:
    """Shapes beyond the common text patterns go through DuckDB's JSON path, no fallback."""
    p = write(tmp_path, dict(OTHER)[name])
    if name == "no final newline":
        p.write_bytes(p.read_bytes().rstrip(b"\n"))
    fast = _scan_duckdb(str(p), 1)
    assert fast is not None
    assert same(fast, scan_history(p))
