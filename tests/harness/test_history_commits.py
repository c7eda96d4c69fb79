"""Committed offsets in the strict reader: `commit` and `committed` operations, the
`commit` micro-op in a `txn`, the `"group"` beside `value`; every breach named by file,
line and problem; the DuckDB reader and the parallel parse give the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from checkers.fastscan import scan_fast
from harness.runfiles import (
    COMMIT_ANSWERED,
    COMMIT_ASKED,
    COMMIT_WRITE,
    NO_OFFSET,
    HistoryError,
    scan_history,
)
from tests.harness.test_history import write


def op(i: int, type_: str, f: str, value: Any, process: int = 0, **kw: Any) -> dict[str, Any]:
    return {"index": i, "time": 10 * (i + 1), "type": type_, "process": process, "f": f,
            "value": value, **kw}


COMMIT = [op(0, "invoke", "commit", [["commit", {"3": 812}]], group="g"),
          op(1, "ok", "commit", [["commit", {"3": 812}]], group="g")]
ASK = op(2, "invoke", "committed", [["committed", [3, 4]]])
TOLD = op(3, "ok", "committed", [["committed", {"3": 812, "4": None}]])
TXN = [op(4, "invoke", "txn", [["send", 0, 7], ["commit", {"0": 2}]], process=1),
       op(5, "info", "txn", [["send", 0, [None, 7]], ["commit", {"0": 2}]], process=1)]
GOOD = [*COMMIT, ASK, TOLD, *TXN]


def test_good_commits(tmp_path: Path) -> None:
    scan = scan_history(write(tmp_path, GOOD))
    assert scan.groups == ("", "g")
    assert scan.commit.tolist() == [
        [0, 1, 3, 812, COMMIT_WRITE], [1, 1, 3, 812, COMMIT_WRITE],
        [2, 0, 3, NO_OFFSET, COMMIT_ASKED], [2, 0, 4, NO_OFFSET, COMMIT_ASKED],
        [3, 0, 3, 812, COMMIT_ANSWERED], [3, 0, 4, NO_OFFSET, COMMIT_ANSWERED],
        [4, 0, 0, 2, COMMIT_WRITE], [5, 0, 0, 2, COMMIT_WRITE]]
    assert scan.send_value.tolist() == [7, 7]  # the txn's sends are read as ever


def test_a_completion_may_repeat_the_keys_asked(tmp_path: Path) -> None:
    rows = [{**ASK, "index": 0}, {**TOLD, "index": 1, "type": "info",
                                  "value": [["committed", [3, 4]]]}]
    assert scan_history(write(tmp_path, rows)).commit[:, 0].tolist() == [0, 0]


BAD: list[tuple[str, list[Any], int, str]] = [
    ("commit shape", [op(0, "invoke", "commit", [["commit", [3, 812]]])], 1,
     "commit micro-op must be"),
    ("commit key", [op(0, "invoke", "commit", [["commit", {"x": 1}]])], 1,
     "commit key must be a non-negative integer string"),
    ("commit offset", [op(0, "invoke", "commit", [["commit", {"3": None}]])], 1,
     "committed offset of key 3 must be an integer"),
    ("negative offset", [op(0, "invoke", "commit", [["commit", {"3": -1}]])], 1,
     "must be non-negative"),
    ("send in a commit op", [op(0, "invoke", "commit", [["send", 0, 1]])], 1,
     "holds only commit micro-ops"),
    ("commit in a poll", [op(0, "invoke", "poll", [["commit", {"0": 1}]])], 1,
     "belongs in a commit or txn operation"),
    ("committed in a txn", [op(0, "invoke", "txn", [["committed", [0]]])], 1,
     "belongs in a committed operation"),
    ("answer in an invoke", [op(0, "invoke", "committed", [["committed", {"3": 1}]])], 1,
     "in an invoke must be"),
    ("asked key", [op(0, "invoke", "committed", [["committed", ["a"]]])], 1,
     "committed key must be an integer"),
    ("answer shape", [ASK | {"index": 0}, TOLD | {"index": 1, "value": [["committed", 3]]}],
     2, "a completed committed micro-op must be"),
    ("answer offset", [ASK | {"index": 0},
                       TOLD | {"index": 1, "value": [["committed", {"3": "812"}]]}], 2,
     "committed offset of key 3 must be an integer"),
    ("group type", [op(0, "invoke", "commit", [["commit", {"3": 1}]], group=7)], 1,
     "group must be a string"),
    ("value not a list", [op(0, "invoke", "commit", {"3": 1})], 1,
     "list of micro-operations"),
]


@pytest.mark.parametrize(("rows", "lineno", "problem"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_bad_commits(tmp_path: Path, rows: list[Any], lineno: int, problem: str) -> None:
    p = write(tmp_path, rows)
    for read in (scan_history, lambda p: scan_fast(p, min_bytes=0)):
        with pytest.raises(HistoryError) as e:
            read(p)
        assert e.value.line == lineno and problem in e.value.problem, e.value
        assert f"{p}:{lineno}:" in str(e.value)


def many(n: int) -> list[dict[str, Any]]:
    """n commit and committed pairs of four groups among plain sends and polls."""
    rows: list[dict[str, Any]] = []
    for i in range(n):
        g: dict[str, Any] = {"group": f"g{i % 4}"} if i % 4 else {}
        rows += [op(len(rows), "invoke", "send", [["send", i % 3, i]], process=1),
                 op(len(rows) + 1, "ok", "send", [["send", i % 3, [i, i]]], process=1),
                 op(len(rows) + 2, "invoke", "commit", [["commit", {str(i % 3): i}]], **g),
                 op(len(rows) + 3, "ok", "commit", [["commit", {str(i % 3): i}]], **g),
                 op(len(rows) + 4, "invoke", "committed", [["committed", [i % 3]]], **g),
                 op(len(rows) + 5, "ok", "committed", [["committed", {str(i % 3): i}]], **g)]
    return rows


def same(a: Any, b: Any) -> None:
    order_a = np.lexsort(a.commit.T[::-1])
    order_b = np.lexsort(b.commit.T[::-1])
    names_a = np.array(a.groups)[a.commit[order_a, 1]]
    names_b = np.array(b.groups)[b.commit[order_b, 1]]
    assert np.array_equal(np.delete(a.commit[order_a], 1, 1), np.delete(b.commit[order_b], 1, 1))
    assert (names_a == names_b).all()
    for name in ("time", "type", "process", "pair", "send_value", "read_value"):
        if getattr(a, name) is not None and getattr(b, name) is not None:
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_readers_agree_on_commits(tmp_path: Path) -> None:
    p = write(tmp_path, many(8000))  # over 4 MB: the parallel parse splits it
    assert p.stat().st_size > 1 << 22
    strict = scan_history(p)
    assert len(strict.commit) == 4 * 8000 and set(strict.groups) == {"", "g1", "g2", "g3"}
    same(strict, scan_history(p, workers=3))
    same(strict, scan_fast(p, min_bytes=0))


def test_histories_without_commits_have_no_rows(tmp_path: Path) -> None:
    sends = [r for r in many(50) if r["f"] == "send"]
    p = write(tmp_path, [{**r, "index": i} for i, r in enumerate(sends)])
    assert scan_fast(p, min_bytes=0).commit.shape == (0, 5)
