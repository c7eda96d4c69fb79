"""Committed offsets as registers (`stale-committed-offset`), and `precommitted-read`:
hand-written histories for each case HISTORY.md names, checked end to end by the
in-process checker (the same verdict code `undertow check` runs after its Spark job)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import offsets
from checkers.api import check_local
from checkers.testing import HistoryBuilder

STALE = "stale-committed-offset"


class Commits(HistoryBuilder):
    """A HistoryBuilder with commit and committed operations, as invokes and completions
    that may interleave (each line one tick later)."""

    def commit(self, p: int, offsets: dict[int, int], **extra: Any) -> int:
        return self.invoke(p, "commit", [["commit", {str(k): o for k, o in offsets.items()}]],
                           **extra)

    def done(self, p: int, f: str, type_: str = "ok", value: Any = None) -> int:
        return self.complete(p, f, type_, value)

    def ask(self, p: int, keys: list[int], **extra: Any) -> int:
        return self.invoke(p, "committed", [["committed", keys]], **extra)

    def told(self, p: int, answers: dict[int, int | None], type_: str = "ok") -> int:
        return self.complete(p, "committed", type_,
                             [["committed", {str(k): o for k, o in answers.items()}]])

    def committed(self, p: int, key: int, got: int | None, **extra: Any) -> int:
        i = self.ask(p, [key], **extra)
        self.told(p, {key: got})
        return i

    def committed_op(self, p: int, key: int, offset: int, type_: str = "ok",
                     **extra: Any) -> int:
        i = self.commit(p, {key: offset}, **extra)
        self.done(p, "commit", type_, [["commit", {str(key): offset}]])
        return i


def check(b: HistoryBuilder, tmp: Path) -> dict[str, Any]:
    """The history so far, with one ok send and poll of the log (a clean one is valid)."""
    c = HistoryBuilder()
    c.lines = list(b.lines)
    c.send(9, 7, 10**9, 0)
    c.poll(9, {7: [(0, 10**9)]})
    return check_local(c.write(tmp / "run"))


def stale(r: dict[str, Any]) -> int:
    return int(r["counts"].get(STALE, 0))


def test_a_read_of_a_value_never_written(tmp_path: Path) -> None:
    b = Commits()
    w = b.committed_op(1, 0, 5)
    r = b.committed(2, 0, 7)
    got = check(b, tmp_path)
    assert stale(got) == 1 and got["valid"] is False and STALE in got["bad_anomaly_types"]
    ex = got["anomalies"][STALE][0]
    assert ex["index"] == r and ex["returned"] == 7 and ex["written_ever"] is False
    assert ex["writer_index"] == w and ex["committed"] == 5 and ex["process"] == 2


def test_an_overwritten_value_after_a_later_acknowledged_commit(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5)
    later = b.committed_op(1, 0, 8)
    r = b.committed(2, 0, 5)
    got = check(b, tmp_path)
    assert stale(got) == 1
    ex = got["anomalies"][STALE][0]
    assert (ex["index"], ex["returned"], ex["writer_index"], ex["committed"]) == (r, 5, later, 8)
    assert ex["written_ever"] is True and ex["acknowledged_ns"] < ex["asked_ns"]


@pytest.mark.parametrize("seen", [5, 8])
def test_concurrent_commits_either_order(tmp_path: Path, seen: int) -> None:
    b = Commits()
    b.commit(1, {0: 5})
    b.commit(2, {0: 8})
    b.done(1, "commit")
    b.done(2, "commit")
    b.committed(3, 0, seen)
    b.committed(3, 0, seen)
    got = check(b, tmp_path)
    assert stale(got) == 0 and got["valid"] is True, got


def test_concurrent_commits_are_one_order_for_all_readers(tmp_path: Path) -> None:
    b = Commits()
    b.commit(1, {0: 5})
    b.commit(2, {0: 8})
    b.done(1, "commit")
    b.done(2, "commit")
    b.committed(3, 0, 5)
    late = b.committed(4, 0, 8)  # after the read of 5, with no commit after: one is stale
    got = check(b, tmp_path)
    assert stale(got) == 1 and got["anomalies"][STALE][0]["index"] == late


def test_info_commits_may_land_late_or_never(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5)
    b.committed_op(2, 0, 8, "info")  # unknown: may land at any later time
    b.committed(3, 0, 5)  # not yet
    b.committed(3, 0, 8)  # now
    b.committed_op(4, 1, 3, "info")  # never seen: fine too
    b.committed(3, 1, None)
    got = check(b, tmp_path)
    assert stale(got) == 0 and got["valid"] is True, got
    b.committed(3, 0, 5)  # but once 8 was read, 5 cannot come back
    assert stale(check(b, tmp_path / "again")) == 1


def test_an_invoke_never_completed_is_info(tmp_path: Path) -> None:
    b = Commits()
    b.commit(1, {0: 5})
    b.committed(2, 0, 5)
    assert stale(check(b, tmp_path)) == 0


def test_a_failed_commit_must_not_take_effect(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5)
    b.committed_op(1, 0, 8, "fail")
    b.committed(2, 0, 5)
    assert stale(check(b, tmp_path)) == 0
    b.committed(2, 0, 8)
    got = check(b, tmp_path / "again")
    assert stale(got) == 1 and got["anomalies"][STALE][0]["returned"] == 8


def txn_commit(b: Commits, p: int, key: int, offset: int, type_: str, value: int) -> int:
    i = b.invoke(p, "txn", [["send", 5, value], ["commit", {str(key): offset}]])
    b.complete(p, "txn", type_, [["send", 5, [None, value]], ["commit", {str(key): offset}]])
    return i


def test_a_commit_inside_an_aborted_transaction(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5)
    txn_commit(b, 2, 0, 8, "fail", 100)
    b.committed(3, 0, 5)
    assert stale(check(b, tmp_path)) == 0
    b.committed(3, 0, 8)
    assert stale(check(b, tmp_path / "again")) == 1


def test_a_commit_inside_a_committed_transaction(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5)
    w = txn_commit(b, 2, 0, 8, "ok", 100)
    b.committed(3, 0, 8)
    b.committed(3, 0, 8)
    got = check(b, tmp_path)
    assert stale(got) == 0, got
    b.committed(3, 0, 5)  # the transaction committed before this read began
    got = check(b, tmp_path / "again")
    assert stale(got) == 1 and got["anomalies"][STALE][0]["writer_index"] == w


def test_a_transactions_commit_takes_effect_at_its_completion(tmp_path: Path) -> None:
    b = Commits()
    b.invoke(2, "txn", [["commit", {"0": 8}]])
    b.committed(3, 0, 8)  # ended before the transaction did: too early
    b.complete(2, "txn", "ok", [["commit", {"0": 8}]])
    assert stale(check(b, tmp_path)) == 1


def test_groups_are_registers_of_their_own(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5, group="a")
    b.committed_op(1, 0, 9, group="b")
    b.committed(2, 0, 5, group="a")
    b.committed(2, 0, None)  # the default group: nothing committed there
    assert stale(check(b, tmp_path)) == 0
    b.committed(2, 0, 9, group="a")
    got = check(b, tmp_path / "again")
    assert stale(got) == 1 and got["anomalies"][STALE][0]["group"] == "a"


def test_an_answer_takes_its_invokes_group_and_an_operations_last_commit_counts(
        tmp_path: Path) -> None:
    b = Commits()
    b.invoke(1, "commit", [["commit", {"0": 3}], ["commit", {"0": 5}]], group="a")
    b.done(1, "commit")
    b.ask(2, [0], group="a")
    b.told(2, {0: 5})  # its completion names no group: the invoke's
    assert stale(check(b, tmp_path)) == 0
    b.ask(2, [0], group="a")
    b.told(2, {0: 3})
    assert stale(check(b, tmp_path / "again")) == 1


def test_counted_reads_are_left_out_of_later_searches(tmp_path: Path) -> None:
    b = Commits()
    b.committed_op(1, 0, 5)
    first = b.committed(2, 0, 3)  # stale
    b.committed(2, 0, 5)  # fine once the stale read is left out
    again = b.committed(2, 0, 3)  # stale again
    got = check(b, tmp_path)
    assert stale(got) == 2
    assert [e["index"] for e in got["anomalies"][STALE]] == [first, again]


def test_a_search_out_of_time_makes_the_verdict_unknown(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """12 concurrent commits, then reads of two of them, one after the other: saying no
    takes every order of the 12; with no time left the verdict is unknown, not true."""
    b = Commits()
    for p in range(12):
        b.commit(p, {0: p})
    for p in range(12):
        b.done(p, "commit")
    b.committed(21, 0, 0)
    b.committed(21, 0, 1)
    monkeypatch.setattr(offsets, "BUDGET_S", -1.0)
    got = check(b, tmp_path)
    assert got["valid"] == "unknown" and stale(got) == 0, got
    assert got["stats"]["offset_registers_unknown"] == [{"group": "", "key": 0}]
    monkeypatch.setattr(offsets, "BUDGET_S", 60.0)
    assert stale(check(b, tmp_path / "again")) == 1


def test_precommitted_read(tmp_path: Path) -> None:
    b = HistoryBuilder()
    i = b.txn(1, [(0, 1, 0)], {0: [(0, 1)]})
    got = check(b, tmp_path)
    assert got["counts"].get("precommitted-read") == 1 and got["valid"] is False
    assert got["anomalies"]["precommitted-read"] == [{"key": 0, "value": 1, "index": i}]


def test_precommitted_read_counts_operations_not_keys(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.txn(1, [(0, 1, 0), (1, 2, 0)], {0: [(0, 1)], 1: [(0, 2)]})
    assert check(b, tmp_path)["counts"].get("precommitted-read") == 1


def test_reading_another_committed_transaction_is_no_precommitted_read(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.txn(1, [(0, 1, 0)])
    b.txn(2, [(0, 2, 1)], {0: [(0, 1)]})
    got = check(b, tmp_path)
    assert "precommitted-read" not in got["counts"], got


@pytest.mark.slow
def test_undertow_check_exits_1_on_a_stale_committed_offset(tmp_path: Path) -> None:
    """End to end on Spark, its executors reading both histories: the stale one makes the
    exit code 1; the other, with the same commits and a read that is fine, is valid."""
    import subprocess
    import sys

    import orjson

    runs = []
    for name, got in (("stale", 5), ("fine", 8)):
        b = Commits()
        b.committed_op(1, 0, 5)
        b.committed_op(1, 0, 8)
        b.committed(2, 0, got)
        c = HistoryBuilder()
        c.lines = list(b.lines)
        c.send(9, 7, 10**9, 0)
        c.poll(9, {7: [(0, 10**9)]})
        runs.append(c.write(tmp_path / name))
    exe = Path(sys.executable).with_name("undertow")
    # cold: Spark reads only on a classic session, never on the (Connect) warm server
    r = subprocess.run([str(exe), "check", "--spark", "cold", "--spark-master", "local[2]",
                        "--reader", "spark", *map(str, runs)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    stale_run = orjson.loads((runs[0] / "results.json").read_bytes())
    fine_run = orjson.loads((runs[1] / "results.json").read_bytes())
    assert stale_run["valid"] is False and stale_run["counts"] == {STALE: 1}, stale_run
    assert fine_run["valid"] is True and fine_run["counts"] == {}, fine_run
    assert stale_run["anomalies"] == check_local(runs[0])["anomalies"]
