"""The compiled line parser (harness.runfiles.fastlines) against the strict reader's own
per-line code: on valid lines of every shape and on mutated ones, `parse_chunk` gives
exactly the error and the columns that parsing each line in Python gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.runfiles.fastlines import scan_lines
from harness.runfiles.strict import _parse_declined, parse_chunk

I64 = 2**63
ints = st.one_of(st.integers(0, 50), st.integers(0, 10**18), st.integers(-(I64), I64 - 1),
                 st.integers(I64, I64 + 5))
values = st.one_of(ints, st.integers(-50, 50))


def _send(completion: bool) -> Any:
    plain = st.tuples(st.just("send"), ints, values).map(list)
    if not completion:
        return plain
    done = st.tuples(st.just("send"), ints,
                     st.tuples(st.one_of(st.none(), ints), values).map(list)).map(list)
    return st.one_of(plain, done)


def _poll(completion: bool) -> Any:
    if not completion:
        return st.just(["poll"])
    recs = st.lists(st.tuples(ints, values).map(list), max_size=4)
    keys = st.one_of(st.integers(0, 99).map(str), st.sampled_from(["007", "", "x", "-1"]))
    return st.one_of(st.just(["poll"]),
                     st.dictionaries(keys, recs, max_size=3).map(lambda d: ["poll", d]))


def _commit() -> Any:
    offsets = st.dictionaries(st.one_of(st.integers(0, 99).map(str), st.just("x")),
                              st.one_of(ints, st.none()), max_size=3)
    return offsets.map(lambda d: ["commit", d])


def _committed(completion: bool) -> Any:
    asked = st.lists(ints, max_size=3).map(lambda ks: ["committed", ks])
    if not completion:
        return asked
    told = st.dictionaries(st.integers(0, 99).map(str), st.one_of(ints, st.none()),
                           max_size=3).map(lambda d: ["committed", d])
    return st.one_of(asked, told)


@st.composite
def ops(draw: Any) -> dict[str, Any]:
    typ = draw(st.sampled_from(["invoke", "ok", "fail", "info", "bogus"]))
    completion = typ != "invoke"
    if draw(st.integers(0, 9)) == 0:
        op: dict[str, Any] = {"process": "nemesis", "f": "kill", "value": {"nodes": ["n1"]}}
    else:
        f = draw(st.sampled_from(["send", "poll", "txn", "assign", "subscribe", "crash",
                                  "commit", "committed", "other"]))
        if f in ("send", "poll", "txn"):
            mops = [_send(completion), _poll(completion)] + ([_commit()] if f == "txn" else [])
            value: Any = draw(st.one_of(st.lists(st.one_of(*mops), max_size=3), st.none()))
        elif f in ("commit", "committed"):
            mop = _commit() if f == "commit" else _committed(completion)
            value = draw(st.one_of(st.lists(mop, max_size=2), st.none()))
        elif f in ("assign", "subscribe"):
            value = draw(st.one_of(st.lists(ints, max_size=3), st.none()))
        else:
            value = draw(st.one_of(st.none(), st.just([])))
        op = {"process": draw(st.one_of(ints, st.just("p"))), "f": f, "value": value}
    op = {"index": draw(ints), "time": draw(ints), "type": typ, **op}
    if draw(st.integers(0, 4)) == 0:
        op["group"] = draw(st.sampled_from(["", "g1", 7]))
    if draw(st.booleans()):
        op["error"] = draw(st.sampled_from(["timeout", 'a "quoted" \\ tab\t', "é", 7]))
    if draw(st.integers(0, 4)) == 0:
        op["seek_to_beginning"] = draw(st.sampled_from([True, False, None, 1]))
    if draw(st.integers(0, 9)) == 0:
        op["extra"] = {"any": [1, 2.5]}
    if draw(st.integers(0, 3)) == 0:  # keys the strict reader ignores, with plain values
        op[draw(st.sampled_from(["generation", "final", "note"]))] = draw(st.one_of(
            ints, st.integers(-5, 5), st.booleans(), st.none(), st.just("a \\ b"),
            st.just(2.5)))
    if draw(st.integers(0, 4)) == 0:  # another order of the fields
        op = dict(reversed(list(op.items())))
    return op


def dump(op: dict[str, Any], style: int) -> bytes:
    if style == 0:
        return orjson.dumps(op)  # the harness's own writer
    if style == 1:
        return json.dumps(op).encode()  # spaces after separators
    return json.dumps(op, indent=None, separators=(" ,", " :  ")).encode()


def by_python(data: bytes) -> tuple[Any, ...]:
    """The strict per-line code alone (every line handed to it), as parse_chunk worked
    before the compiled parser."""
    raws = data.split(b"\n")
    if raws and not raws[-1]:
        raws.pop()
    head = np.zeros((len(raws), 6), np.int64)
    err, send, read, commit, groups, assigned = _parse_declined(list(enumerate(raws)), head)
    if err is None:
        return err, head, send, read, commit, groups, assigned
    cut = err[0]  # the columns cover the lines before the error
    return (err, head[:cut], send[send[:, 0] < cut], read[read[:, 0] < cut],
            commit[commit[:, 0] < cut], groups, assigned[assigned[:, 0] < cut])


def same_as_python(tmp: Path, data: bytes) -> None:
    path = tmp / "history.jsonl"
    path.write_bytes(data)
    got = parse_chunk(str(path), 0, len(data), 0)
    err, head, send, read, commit, groups, assigned = by_python(data)
    assert got[0] == err
    assert np.array_equal(np.stack(got[1:7], axis=1).astype(np.int64), head)
    assert np.array_equal(got[7], send) and np.array_equal(got[8], read)
    assert np.array_equal(got[9], commit) and got[10] == groups
    assert np.array_equal(got[11], assigned)


SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]  # one file, rewritten


@settings(max_examples=300, deadline=None, suppress_health_check=SLOW_OK)
@given(st.lists(st.tuples(ops(), st.integers(0, 2)), min_size=1, max_size=8))
def test_lines_parse_as_the_strict_code_parses_them(tmp_path: Path,
                                                    lines: list[tuple[Any, int]]) -> None:
    same_as_python(tmp_path, b"".join(dump(op, s) + b"\n" for op, s in lines))


MUTATIONS = b'{}[],:"0-9.eE \\\tn\x00\xc3'


@settings(max_examples=400, deadline=None, suppress_health_check=SLOW_OK)
@given(ops(), st.integers(0, 2), st.data())
def test_mutated_lines_get_the_strict_codes_verdict(tmp_path: Path, op: dict[str, Any],
                                                    style: int, data: Any) -> None:
    raw = bytearray(dump(op, style))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        how = data.draw(st.integers(0, 2))
        if how == 0 and at < len(raw):
            del raw[at]
        elif how == 1:
            raw[at:at] = bytes([data.draw(st.sampled_from(MUTATIONS))])
        else:
            raw[at:at] = raw[at:at + data.draw(st.integers(1, 12))]  # a repeated piece
    ending = data.draw(st.sampled_from([b"\n", b"", b"\r\n", b"\n\n"]))
    same_as_python(tmp_path, b'{"index":0,"time":0,"type":"invoke","process":0,"f":"crash",'
                             b'"value":null}\n' + bytes(raw) + ending)


def test_the_harness_shapes_take_the_compiled_path() -> None:
    """The lines the harness writes (but nemesis ones) are never left to Python: the
    speed of a big check rests on it."""
    lines = [
        {"index": 0, "time": 5, "type": "invoke", "process": 3, "f": "send",
         "value": [["send", 2, 10**17 + 5]]},
        {"index": 1, "time": 9, "type": "ok", "process": 3, "f": "send",
         "value": [["send", 2, [5, 10**17 + 5]]]},
        {"index": 2, "time": 9, "type": "info", "process": 4, "f": "txn",
         "value": [["send", 2, [None, -3]], ["poll", {"2": [[4, 12], [5, 17]], "9": []}]],
         "error": "CONNECTION: n3: connection closed by the broker"},
        {"index": 3, "time": 10, "type": "ok", "process": 5, "f": "assign", "value": [0, 7],
         "seek_to_beginning": True},
        {"index": 4, "time": 11, "type": "info", "process": 6, "f": "crash", "value": None},
        {"index": 5, "time": 12, "type": "ok", "process": 1, "f": "poll", "value": [["poll"]]},
    ]
    for style in (0, 1):
        data = b"".join(dump(op, style) + b"\n" for op in lines)
        head, send, read, commit, assigned, declined = scan_lines(data)
        assert declined == [] and commit.shape == (0, 5)
        assert head[:, 0].tolist() == list(range(6))
        assert assigned.tolist() == [[3, 0], [3, 7]]  # the ok assign's keys
        assert send.tolist() == [[0, 2, 10**17 + 5, -1, 0], [1, 2, 10**17 + 5, 5, 0],
                                 [2, 2, -3, -1, 0]]
        assert read.tolist() == [[2, 2, 4, 12, 0], [2, 2, 5, 17, 1]]
    nemesis = b'{"index":0,"time":0,"type":"info","process":"nemesis","f":"kill","value":{}}'
    assert scan_lines(nemesis)[5] == [(0, nemesis)]


@st.composite
def offset_ops(draw: Any) -> dict[str, Any]:
    """Lines of committed offsets as a group's members write them (every value in range,
    so most take the compiled path), some in shapes the strict reader refuses."""
    small = st.integers(0, 10**18)
    typ = draw(st.sampled_from(["invoke", "ok", "fail", "info"]))
    f = draw(st.sampled_from(["commit", "committed", "txn"]))
    offsets = st.dictionaries(st.integers(0, 99).map(str), small, max_size=4)
    if f == "commit":
        mop: Any = offsets.map(lambda d: ["commit", d])
    elif f == "txn":
        mop = st.one_of(offsets.map(lambda d: ["commit", d]), st.just(["poll"]),
                        st.tuples(st.just("send"), small, small).map(list))
    else:
        answered = st.dictionaries(st.integers(0, 99).map(str), st.one_of(small, st.none()),
                                   max_size=4)
        mop = st.one_of(st.lists(small, max_size=4).map(lambda ks: ["committed", ks]),
                        answered.map(lambda d: ["committed", d]))
    value = draw(st.one_of(st.lists(mop, max_size=2), st.none()))
    op = {"index": draw(small), "time": draw(small), "type": typ, "process": draw(small),
          "f": f, "value": value}
    if draw(st.booleans()):
        op["generation"] = draw(small)
    return op


@settings(max_examples=300, deadline=None, suppress_health_check=SLOW_OK)
@given(st.lists(st.tuples(offset_ops(), st.integers(0, 2)), min_size=1, max_size=8))
def test_offset_lines_parse_as_the_strict_code_parses_them(
        tmp_path: Path, lines: list[tuple[Any, int]]) -> None:
    same_as_python(tmp_path, b"".join(dump(op, s) + b"\n" for op, s in lines))


def test_the_harness_s_committed_offsets_take_the_compiled_path() -> None:
    """A group member's commits and committed reads (asked for every key, answered with
    null where none was committed), a transaction's offsets, and their failures."""
    lines = [
        {"index": 0, "time": 5, "type": "invoke", "process": 3, "f": "commit",
         "value": [["commit", {"0": 2, "17": 0}]], "generation": 3},
        {"index": 1, "time": 6, "type": "ok", "process": 3, "f": "commit",
         "value": [["commit", {"0": 2, "17": 0}]], "generation": 3},
        {"index": 2, "time": 7, "type": "invoke", "process": 4, "f": "committed",
         "value": [["committed", [0, 1, 17]]]},
        {"index": 3, "time": 8, "type": "ok", "process": 4, "f": "committed",
         "value": [["committed", {"0": 2, "1": None, "17": 0}]]},
        {"index": 4, "time": 9, "type": "fail", "process": 4, "f": "committed",
         "value": [["committed", [0, 1, 17]]], "error": "NOT_COORDINATOR: \"n2\""},
        {"index": 5, "time": 9, "type": "invoke", "process": 5, "f": "txn",
         "value": [["poll"], ["send", 1, 40], ["commit", {"1": 7}]]},
        {"index": 6, "time": 9, "type": "info", "process": 3, "f": "commit", "value": None,
         "error": "timed out", "generation": 3},
    ]
    for style in (0, 1):
        data = b"".join(dump(op, style) + b"\n" for op in lines)
        head, send, read, commit, assigned, declined = scan_lines(data)
        assert declined == [] and read.shape == (0, 5) and assigned.shape == (0, 2)
        assert head[:, 4].tolist() == [6, 6, 7, 7, 7, 2, 6]
        assert commit.tolist() == [[0, 0, 0, 2, 0], [0, 0, 17, 0, 0], [1, 0, 0, 2, 0],
                                   [1, 0, 17, 0, 0], [2, 0, 0, -1, 1], [2, 0, 1, -1, 1],
                                   [2, 0, 17, -1, 1], [3, 0, 0, 2, 2], [3, 0, 1, -1, 2],
                                   [3, 0, 17, 0, 2], [5, 0, 1, 7, 0]]
        assert send.tolist() == [[5, 1, 40, -1, 0]]
    named = dump({**lines[0], "group": "g1"}, 0)  # the strict reader numbers the groups
    assert scan_lines(named)[5] == [(0, named)]
