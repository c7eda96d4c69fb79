"""Every anomaly type: a small history that has it, and a near-identical one that does not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkers.api import check_local
from checkers.testing import HistoryBuilder, replica_rows

Case = Callable[[HistoryBuilder, bool], list[dict[str, Any]] | None]


def run(tmp_path: Path, case: Case, positive: bool) -> dict[str, Any]:
    b = HistoryBuilder()
    replicas = case(b, positive)
    return check_local(b.write(tmp_path / ("pos" if positive else "neg"), replicas))


def final_read(b: HistoryBuilder, recs: dict[int, list[tuple[int, int]]]) -> None:
    b.poll(99, recs)


def inconsistent(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 0)
    b.send(1, 0, 2, 0 if pos else 1)
    final_read(b, {0: [(0, 1)] if pos else [(0, 1), (1, 2)]})


def duplicate(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 0)
    b.send(0, 0, 2, 1)
    final_read(b, {0: [(0, 1), (1, 2), (2, 1)] if pos else [(0, 1), (1, 2)]})


def lost_write(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 0)
    b.send(0, 0, 2, 1)
    b.poll(1, {0: [(1, 2)] if pos else [(0, 1), (1, 2)]})


def unseen(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 0)
    b.send(0, 0, 2, 1)
    b.poll(1, {0: [(0, 1)] if pos else [(0, 1), (1, 2)]})


def poll_skip(b: HistoryBuilder, pos: bool) -> None:
    for o, v in enumerate((1, 2, 3)):
        b.send(0, 0, v, o)
    b.poll(1, {0: [(0, 1)]})
    b.poll(1, {0: [(2, 3)] if pos else [(1, 2), (2, 3)]})
    final_read(b, {0: [(0, 1), (1, 2), (2, 3)]})


def nonmonotonic_poll(b: HistoryBuilder, pos: bool) -> None:
    for o, v in enumerate((1, 2, 3)):
        b.send(0, 0, v, o)
    b.poll(1, {0: [(0, 1), (1, 2)]})
    b.poll(1, {0: [(1, 2), (2, 3)] if pos else [(2, 3)]})
    final_read(b, {0: [(0, 1), (1, 2), (2, 3)]})


def int_poll_skip(b: HistoryBuilder, pos: bool) -> None:
    for o, v in enumerate((1, 2, 3)):
        b.send(0, 0, v, o)
    b.poll(1, {0: [(0, 1), (2, 3)] if pos else [(0, 1), (1, 2), (2, 3)]})
    final_read(b, {0: [(0, 1), (1, 2), (2, 3)]})


def int_nonmonotonic_poll(b: HistoryBuilder, pos: bool) -> None:
    for o, v in enumerate((1, 2)):
        b.send(0, 0, v, o)
    b.poll(1, {0: [(1, 2), (0, 1)] if pos else [(0, 1), (1, 2)]})


def nonmonotonic_send(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 1 if pos else 0)
    b.send(0, 0, 2, 0 if pos else 1)
    final_read(b, {0: [(0, 2), (1, 1)] if pos else [(0, 1), (1, 2)]})


def int_send_skip(b: HistoryBuilder, pos: bool) -> None:
    """Another producer's send lands between a transaction's two sends: allowed."""
    b.invoke(1, "send", [["send", 0, 9]])
    b.invoke(0, "txn", [["send", 0, 1], ["send", 0, 2]])
    b.complete(1, "send", "ok", [["send", 0, [1 if pos else 2, 9]]])
    b.complete(0, "txn", "ok", [["send", 0, [0, 1]], ["send", 0, [2 if pos else 1, 2]]])
    final_read(b, {0: [(0, 1), (1, 9), (2, 2)] if pos else [(0, 1), (1, 2), (2, 9)]})


def int_nonmonotonic_send(b: HistoryBuilder, pos: bool) -> None:
    b.txn(0, [(0, 1, 1 if pos else 0), (0, 2, 0 if pos else 1)])
    final_read(b, {0: [(0, 2), (1, 1)] if pos else [(0, 1), (1, 2)]})


def g1a(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 0, "fail" if pos else "ok")
    final_read(b, {0: [(0, 1)]})


def g0_realtime(b: HistoryBuilder, pos: bool) -> None:
    b.send(0, 0, 1, 1 if pos else 0)  # completes before the next is invoked
    b.send(1, 0, 2, 0 if pos else 1)
    final_read(b, {0: [(0, 2), (1, 1)] if pos else [(0, 1), (1, 2)]})


def g0_multi(b: HistoryBuilder, pos: bool) -> None:
    """Two transactions ordered differently on two keys: G0, allowed (batches)."""
    b.invoke(0, "txn", [["send", 0, 1], ["send", 1, 2]])
    b.invoke(1, "txn", [["send", 0, 3], ["send", 1, 4]])
    b.complete(0, "txn", "ok", [["send", 0, [0, 1]], ["send", 1, [1 if pos else 0, 2]]])
    b.complete(1, "txn", "ok", [["send", 0, [1, 3]], ["send", 1, [0 if pos else 1, 4]]])
    final_read(b, {0: [(0, 1), (1, 3)], 1: [(0, 4), (1, 2)] if pos else [(0, 2), (1, 4)]})


def g1c(b: HistoryBuilder, pos: bool) -> None:
    """Each reads the other's write: one send each, so bad."""
    b.invoke(0, "txn", [["send", 0, 1], ["poll"]])
    b.invoke(1, "txn", [["send", 1, 2], ["poll"]])
    b.complete(0, "txn", "ok", [["send", 0, [0, 1]], ["poll", {"1": [[0, 2]]} if pos else {}]])
    b.complete(1, "txn", "ok", [["send", 1, [0, 2]], ["poll", {"0": [[0, 1]]}]])
    final_read(b, {1: [(0, 2)]})


def g1c_process(b: HistoryBuilder, pos: bool) -> None:
    """p0 polls then sends x; p1 polls x then sends y; p0's poll read y."""
    b.poll(0, {1: [(0, 2)]} if pos else {})
    b.send(0, 0, 1, 0)
    b.poll(1, {0: [(0, 1)]})
    b.send(1, 1, 2, 0)
    final_read(b, {1: [(0, 2)]})


def divergence(b: HistoryBuilder, pos: bool) -> list[dict[str, Any]]:
    b.send(0, 0, 1, 0)
    final_read(b, {0: [(0, 1)]})
    return replica_rows("n1", 0, 2, [1, 5]) + replica_rows("n2", 0, 2, [1, 6 if pos else 5])


def divergence_prefix(b: HistoryBuilder, pos: bool) -> list[dict[str, Any]]:
    b.send(0, 0, 1, 0)
    final_read(b, {0: [(0, 1)]})
    rows = replica_rows("n1", 0, 2, [1, 5]) + replica_rows("n2", 0, 2 if pos else 1, [1], leo=2)
    return rows


def replica_lost(b: HistoryBuilder, pos: bool) -> list[dict[str, Any]]:
    b.send(0, 0, 1, 0)
    b.send(0, 0, 2, 1)
    final_read(b, {0: [(0, 1), (1, 2)]})
    return replica_rows("n1", 0, 1 if pos else 2, [1] if pos else [1, 2])


CASES: list[tuple[str, Case, bool]] = [  # type, case, bad
    ("inconsistent-offsets", inconsistent, True),
    ("duplicate", duplicate, True),
    ("lost-write", lost_write, True),
    ("unseen", unseen, True),
    ("poll-skip", poll_skip, True),
    ("nonmonotonic-poll", nonmonotonic_poll, True),
    ("int-poll-skip", int_poll_skip, True),
    ("int-nonmonotonic-poll", int_nonmonotonic_poll, True),
    ("nonmonotonic-send", nonmonotonic_send, True),
    ("int-send-skip", int_send_skip, False),
    ("int-nonmonotonic-send", int_nonmonotonic_send, True),
    ("G1a", g1a, True),
    ("G0-realtime", g0_realtime, True),
    ("G0", g0_multi, False),
    ("G1c", g1c, True),
    ("G1c-process", g1c_process, True),
    ("replica-divergence", divergence, True),
    ("replica-divergence", divergence_prefix, True),
    ("replica-lost-write", replica_lost, True),
]


@pytest.mark.parametrize(("type_", "case", "bad"), CASES, ids=[c[1].__name__ for c in CASES])
def test_positive(tmp_path: Path, type_: str, case: Case, bad: bool) -> None:
    r = run(tmp_path, case, True)
    assert type_ in r["anomaly_types"], r
    assert r["counts"][type_] >= 1
    assert r["anomalies"][type_], "an example"
    assert (type_ in r["bad_anomaly_types"]) == bad
    if bad:
        assert r["valid"] is False


@pytest.mark.parametrize(("type_", "case", "bad"), CASES, ids=[c[1].__name__ for c in CASES])
def test_negative(tmp_path: Path, type_: str, case: Case, bad: bool) -> None:
    r = run(tmp_path, case, False)
    assert r["anomaly_types"] == [], r["anomalies"]
    assert r["valid"] is True


def test_poll_skip_allowed_with_subscribe(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.invoke(1, "subscribe", [0])
    b.complete(1, "subscribe", "ok", [0])
    poll_skip(b, True)
    r = check_local(b.write(tmp_path))
    assert "poll-skip" in r["anomaly_types"]
    assert r["valid"] is True


def test_assign_ends_poll_succession(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for o, v in enumerate((1, 2, 3)):
        b.send(0, 0, v, o)
    b.poll(1, {0: [(0, 1)]})
    b.invoke(1, "assign", [0], seek_to_beginning=True)
    b.complete(1, "assign", "ok", [0])
    b.poll(1, {0: [(0, 1), (1, 2), (2, 3)]})
    assert check_local(b.write(tmp_path))["valid"] is True


def test_witness_names_operations(tmp_path: Path) -> None:
    b = HistoryBuilder()
    g0_realtime(b, True)
    r = check_local(b.write(tmp_path))
    (w,) = r["anomalies"]["G0-realtime"]
    assert sorted(w["ops"]) == [0, 2]
    assert sorted(w["edges"]) == ["realtime", "ww"]
    assert r["counts"]["G0-realtime"] == 1


def test_counts_and_examples_capped(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for v in range(40):
        b.send(0, 0, v, v)
    r = check_local(b.write(tmp_path))
    assert r["counts"] == {"unseen": 40}
    assert len(r["anomalies"]["unseen"]) == 32


def test_info_send_counts_once_read(tmp_path: Path) -> None:
    """An info send whose value was read must have happened: its offset joins the log."""
    b = HistoryBuilder()
    b.send(0, 0, 1, 0)
    b.send(1, 0, 2, 1, "info")
    b.send(2, 0, 3, 2)
    b.poll(3, {0: [(0, 1), (2, 3)]})  # skips offset 1, known only from the info send
    r = check_local(b.write(tmp_path))
    assert "int-poll-skip" not in r["anomaly_types"]
    b.poll(4, {0: [(1, 2)]})
    r = check_local(b.write(tmp_path))
    assert "int-poll-skip" in r["anomaly_types"]


def test_no_ok_op_is_unknown(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 0, 1, None, "info")
    b.invoke(1, "send", [["send", 0, 2]])
    assert check_local(b.write(tmp_path))["valid"] == "unknown"


def test_extra_keys_ignored(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 0, 1, 0)
    final_read(b, {0: [(0, 1)]})
    for x in b.lines:
        x["trace_id"] = "abc"
        x["node"] = {"nested": [1, 2]}
    rows = [{**row, "extra": True} for row in replica_rows("n1", 0, 1, [1])]
    assert check_local(b.write(tmp_path, rows))["valid"] is True
