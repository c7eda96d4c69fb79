"""The strict reader: every breach of the contract names the file, the line and the problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.runfiles import (
    HistoryError,
    HistoryWriter,
    Op,
    read_history,
    read_replicas,
    scan_history,
)

INV = {"index": 0, "time": 10, "type": "invoke", "process": 0, "f": "send",
       "value": [["send", 0, 1]]}
OK = {"index": 1, "time": 20, "type": "ok", "process": 0, "f": "send",
      "value": [["send", 0, [0, 1]]]}


def write(tmp_path: Path, rows: list[Any], name: str = "history.jsonl") -> Path:
    p = tmp_path / name
    p.write_bytes(b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n"
                           for r in rows))
    return p


def line(i: int, **kw: Any) -> dict[str, Any]:
    base = {"index": i, "time": 10 * (i + 1), "process": 0, "f": "send"}
    return {**base, **kw}


BAD: list[tuple[str, list[Any], int, str]] = [
    ("truncated", [INV, b'{"index": 1, "time": 20, "ty'], 2, "invalid JSON"),
    ("not object", [[1, 2]], 1, "not a JSON object"),
    ("missing field", [{k: v for k, v in INV.items() if k != "time"}], 1, "missing field 'time'"),
    ("time type", [{**INV, "time": "10"}], 1, "time must be an integer"),
    ("process type", [{**INV, "process": 1.5}], 1, "process must be"),
    ("bool index", [{**INV, "index": True}], 1, "index must be an integer"),
    ("unknown type", [{**INV, "type": "done"}], 1, "unknown type"),
    ("unknown f", [{**INV, "f": "produce"}], 1, "unknown client f"),
    ("index order", [INV, {**OK, "index": 5}], 2, "does not follow file order"),
    ("time backwards", [INV, {**OK, "time": 5}], 2, "time goes backwards"),
    ("completion without invoke", [OK | {"index": 0}], 1, "without an invoke"),
    ("second invoke", [INV, line(1, type="invoke", value=[["send", 0, 2]])], 2,
     "second invoke"),
    ("invoke after info", [INV, line(1, type="info", value=None),
                           line(2, type="invoke", value=[["send", 0, 2]])], 3,
     "invokes again after its info"),
    ("value twice", [INV, OK, line(2, type="invoke", process=1, value=[["send", 1, 1]])], 3,
     "value 1 sent twice"),
    ("send shape", [{**INV, "value": [["send", 0]]}], 1, "send micro-op"),
    ("offset in invoke", [{**INV, "value": [["send", 0, [0, 1]]]}], 1, "in an invoke"),
    ("negative key", [{**INV, "value": [["send", -1, 1]]}], 1, "non-negative"),
    ("value not a list", [{**INV, "value": {"send": 1}}], 1, "list of micro-operations"),
    ("unknown micro-op", [{**INV, "value": [["produce", 0, 1]]}], 1, "unknown micro-op"),
    ("poll in invoke with records", [{**INV, "f": "poll", "value": [["poll", {}]]}], 1,
     "poll in an invoke"),
    ("poll key", [{**INV, "f": "poll", "value": [["poll"]]},
                  line(1, type="ok", f="poll", value=[["poll", {"x": [[0, 1]]}]])], 2,
     "poll key"),
    ("poll record", [{**INV, "f": "poll", "value": [["poll"]]},
                     line(1, type="ok", f="poll", value=[["poll", {"0": [[0]]}]])], 2,
     "[offset, value]"),
    ("completion value not sent", [INV, {**OK, "value": [["send", 0, [0, 2]]]}], 2,
     "its invoke did not send"),
    ("f mismatch", [INV, {**OK, "f": "poll", "value": [["poll"]]}], 2, "completion f differs"),
    ("assign keys", [{**INV, "f": "assign", "value": ["a"]}], 1, "assign key"),
    ("crash value", [{**INV, "f": "crash", "value": [1]}], 1, "crash value must be null"),
    ("crash completes ok", [{**INV, "f": "crash", "value": None},
                            line(1, type="ok", f="crash", value=None)], 2,
     "a crash completes info, not ok"),
    ("nemesis value", [{**INV, "process": "nemesis", "f": "kill", "value": [1]}], 1,
     "nemesis value"),
    ("empty line", [INV, b"", OK], 2, "empty line"),
]


@pytest.mark.parametrize(("rows", "lineno", "problem"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])
def test_bad_history(tmp_path: Path, rows: list[Any], lineno: int, problem: str) -> None:
    p = write(tmp_path, rows)
    with pytest.raises(HistoryError) as e:
        scan_history(p)
    assert e.value.line == lineno, e.value
    assert problem in e.value.problem
    assert str(p) in str(e.value) and f":{lineno}:" in str(e.value)


def test_good_history_and_pending_invoke(tmp_path: Path) -> None:
    rows = [INV, OK, {**line(2, type="invoke", process="nemesis", f="kill",
                                value={"nodes": ["n1"]}), "extra": 1},
            line(3, type="info", process="nemesis", f="kill", value={"nodes": ["n1"]}),
            line(4, type="invoke", process="nemesis", f="start", value={"nodes": ["n1"]}),
            line(5, type="info", process="nemesis", f="start", value={"nodes": ["n1"]}),
            line(6, type="invoke", process=2, value=[["send", 3, 7]])]  # never completes
    p = write(tmp_path, rows)
    scan = scan_history(p)
    assert scan.lines == 7
    assert scan.pair[1] == 0 and scan.pair[6] == -1
    ops = read_history(p)
    assert ops[2].extra == {"extra": 1} and ops[6].type == "invoke"


def test_empty_history_is_read_as_no_operation(tmp_path: Path) -> None:
    p = write(tmp_path, [])
    assert scan_history(p).lines == 0 and read_history(p) == []


def test_parallel_parse_matches(tmp_path: Path) -> None:
    rows = []
    for i in range(60000):
        rows.append(line(2 * i, type="invoke", process=i % 7, value=[["send", i % 3, i]]))
        rows.append(line(2 * i + 1, type="ok", process=i % 7, value=[["send", i % 3, [i, i]]]))
    p = write(tmp_path, rows)
    a, b = scan_history(p), scan_history(p, workers=3)
    for name in ("time", "type", "process", "pair", "send_value", "send_offset"):
        assert (getattr(a, name) == getattr(b, name)).all()
    rows[100001] = {**rows[100001], "time": 0}
    write(tmp_path, rows)
    with pytest.raises(HistoryError) as e:
        scan_history(p, workers=3)
    assert e.value.line == 100002


def test_writer_roundtrip(tmp_path: Path) -> None:
    p = tmp_path / "history.jsonl"
    with HistoryWriter(p) as w:
        inv = w.append(Op(type="invoke", process=0, f="poll", value=[["poll"]], time=5))
        w.append(inv.complete("ok", [["poll", {"0": [[0, 1]]}]]).with_(time=7))
    ops = read_history(p)
    assert [o.index for o in ops] == [0, 1] and ops[1].value[0][1] == {"0": [[0, 1]]}


REPLICA_BAD: list[tuple[str, list[Any], int | None, str]] = [
    ("not object", [[1]], 1, "not a JSON object"),
    ("truncated", [b'{"node": "n1"'], 1, "invalid JSON"),
    ("neither", [{"node": "n1", "key": 0}], 1, "neither a record"),
    ("hw > leo", [{"node": "n1", "key": 0, "hw": 3, "leo": 2}], 1, "hw 3 > leo 2"),
    ("record without summary", [{"node": "n1", "key": 0, "offset": 0, "value": 1}], 1,
     "no summary line"),
    ("offset type", [{"node": "n1", "key": 0, "hw": 1, "leo": 1},
                     {"node": "n1", "key": 0, "offset": "0", "value": 1}], 2,
     "offset must be an integer"),
    ("node type", [{"node": 1, "key": 0, "hw": 1, "leo": 1}], 1, "node must be a string"),
]


@pytest.mark.parametrize(("rows", "lineno", "problem"), [b[1:] for b in REPLICA_BAD],
                         ids=[b[0] for b in REPLICA_BAD])
def test_bad_replicas(tmp_path: Path, rows: list[Any], lineno: int, problem: str) -> None:
    p = write(tmp_path, rows, "replicas.jsonl")
    with pytest.raises(HistoryError) as e:
        read_replicas(p)
    assert e.value.line == lineno and problem in e.value.problem


def test_replicas_read(tmp_path: Path) -> None:
    p = write(tmp_path, [{"node": "n1", "key": 2, "hw": 1, "leo": 2, "x": 1},
                         {"node": "n1", "key": 2, "offset": 0, "value": 5, "epoch": 1},
                         {"node": "n2", "key": 2, "hw": 0, "leo": 0}], "replicas.jsonl")
    r = read_replicas(p)
    assert r.nodes == ["n1", "n2"] and len(r.summaries) == 2
    assert r.rec_value.tolist() == [5]
