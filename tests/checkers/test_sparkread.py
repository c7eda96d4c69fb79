"""Spark reading the history gives the driver reader's results and its very errors.

Tiny byte ranges put every history's lines in many tasks, so line numbers, pairs and
keys cross the ranges' edges.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from checkers.api import check_local, verdict
from checkers.spark_cds import archive_path
from checkers.sparkread import load_and_check, wants_spark_read
from checkers.testing import HistoryBuilder
from harness.runfiles import HistoryError, scan_history
from tests.checkers.test_anomalies import CASES
from tests.checkers.test_fastscan import OTHER
from tests.checkers.test_spark_server import EXAMPLES, FIELDS, needs_examples
from tests.harness.test_history import BAD, write

pytestmark = pytest.mark.slow
SPLITS = (97, 1 << 20)  # bytes per task: many ranges (lines cut anywhere), or one
# the suite reads at the splits that cut lines anywhere; one range per file, the same
# code with fewer edges, runs at night (`just test-soak`)
SPLIT_PARAMS = [pytest.param(s, marks=() if s == SPLITS[0] else pytest.mark.nightly)
                for s in SPLITS]


@pytest.fixture(scope="module")
def spark(session_spark: dict[str, Any]) -> Iterator[Any]:
    """A classic session of this process's own (the reader's RDD path); after the session's
    warm Spark has run its first job here, which a classic session open in the same process
    would refuse."""
    from checkers.spark import spark_session

    with spark_session("local[2]") as s:
        yield s


def test_the_classic_session_maps_this_venvs_class_data_archive(spark: Any) -> None:
    """checkers.spark_cds: the archive ./scripts/bootstrap built for this venv, JDK and
    Spark's jars is mapped by a classic session's driver JVM (its build from scratch:
    tests/checkers/test_spark_cds.py, at night)."""
    archive = archive_path()
    assert archive is not None and archive.is_file(), archive  # bootstrap builds it
    pid = spark.sparkContext._gateway.proc.pid
    assert str(archive) in Path(f"/proc/{pid}/maps").read_text()


def by_spark(spark: Any, run_dir: Path, split: int) -> dict[str, Any]:
    t, log, _ = load_and_check(spark, run_dir, split_bytes=split)
    return verdict(t, log)


def same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for field in FIELDS:
        assert a[field] == b[field], field
    for k in ("ops", "ok", "sends_ok", "send_ops", "polls_ok", "lines"):
        assert a["stats"][k] == b["stats"][k], k


@pytest.mark.parametrize("split", SPLIT_PARAMS)
@pytest.mark.parametrize("name,rows,_line,_problem", BAD, ids=[b[0] for b in BAD])
def test_malformed_same_error(spark: Any, tmp_path: Path, name: str, rows: list[Any],
                              _line: int, _problem: str, split: int) -> None:
    p = write(tmp_path, rows)
    with pytest.raises(HistoryError) as strict:
        scan_history(p)
    with pytest.raises(HistoryError) as got:
        by_spark(spark, tmp_path, split)
    assert str(got.value) == str(strict.value)


@pytest.mark.parametrize("name,rows", OTHER, ids=[o[0] for o in OTHER])
def test_other_shapes_same_outcome(spark: Any, tmp_path: Path, name: str,
                                   rows: list[Any]) -> None:
    p = write(tmp_path, rows)
    if name == "no final newline":
        p.write_bytes(p.read_bytes().rstrip(b"\n"))
    try:
        want: Any = check_local(tmp_path)
    except HistoryError as e:
        want = str(e)
    for split in SPLITS:
        try:
            got: Any = by_spark(spark, tmp_path, split)
        except HistoryError as e:
            got = str(e)
        if isinstance(want, str):
            assert got == want
        else:
            same(got, want)


# One positive case per family of checks in the suite (a Spark job of 2 to 4 s each); the
# other cases' positives and every negative twin (the anomaly absent) at night
IN_SUITE = {"lost_write", "inconsistent", "int_poll_skip", "g1c_process", "divergence", "g1a"}
CASE_PARAMS = [pytest.param(*c, id=c[1].__name__,
                            marks=() if c[1].__name__ in IN_SUITE else pytest.mark.nightly)
               for c in CASES]


@pytest.mark.parametrize("positive", [True, pytest.param(False, marks=pytest.mark.nightly)])
@pytest.mark.parametrize(("type_", "case", "bad"), CASE_PARAMS)
def test_every_anomaly_case_alike(spark: Any, tmp_path: Path, type_: str, case: Any,
                                  bad: bool, positive: bool) -> None:
    b = HistoryBuilder()
    run = b.write(tmp_path, case(b, positive))
    want = check_local(run)
    assert (type_ in want["anomaly_types"]) == positive
    same(by_spark(spark, run, SPLITS[0]), want)


def test_an_info_send_counts_once_any_record_reads_it(spark: Any, tmp_path: Path) -> None:
    """Whether an info operation must have happened is asked of the records on the
    executors (of any key): read, its send joins the log; not read, it does not."""
    for reads in ({}, {0: [(1, 2)]}, {5: [(0, 2)]}):
        b = HistoryBuilder()
        b.send(0, 0, 1, 0)
        b.send(1, 0, 2, 1, "info")
        b.send(2, 0, 3, 2)
        b.poll(3, {0: [(0, 1), (2, 3)]})
        if reads:
            b.poll(4, reads)
        run = b.write(tmp_path / str(len(reads) and next(iter(reads))))
        want = check_local(run)
        assert ("int-poll-skip" in want["anomaly_types"]) == bool(reads)
        same(by_spark(spark, run, SPLITS[0]), want)


def test_per_key_polls_from_the_ranges_heads(spark: Any, tmp_path: Path) -> None:
    """Spark keeps the records read on its executors: the per-key poll stretches come from
    the ranges' heads (per poll and key: line, key, highest offset), lines cut anywhere,
    and must be the driver's figures."""
    from checkers.availability import availability
    from checkers.tables import load_tables
    from tests.checkers.test_availability import waiting_history

    run = waiting_history().write(tmp_path / "waiting")
    want = availability(load_tables(run), run)
    t, _, _ = load_and_check(spark, run, split_bytes=SPLITS[0])
    got = availability(t, run)
    assert got == want and got["poll_by_key"]["0"]["s"] == 5.1


@needs_examples
@pytest.mark.parametrize("split", (1 << 16, *(pytest.param(s, marks=pytest.mark.nightly)
                                             for s in (4096, 1 << 26))))
def test_shared_examples_as_expected(spark: Any, tmp_path: Path, split: int) -> None:
    for name in ("clean", "truncated"):
        got = by_spark(spark, EXAMPLES / name, split)
        want = orjson.loads((EXAMPLES / name / "results.json").read_bytes())
        for field in FIELDS:
            assert got[field] == want[field], (name, field)


def test_who_reads(tmp_path: Path) -> None:
    p = write(tmp_path, [b"{}"])
    assert wants_spark_read(tmp_path, "spark") and not wants_spark_read(tmp_path, "driver")
    assert not wants_spark_read(tmp_path, "auto")  # small: the driver reads faster
    assert not wants_spark_read(tmp_path / "missing", "spark")
    assert p.exists()


@needs_examples
def test_cli_spark_reader_verdict_and_input_error(tmp_path: Path) -> None:
    """`undertow check --reader spark`: the example's verdict, and a bad line named as the
    driver names it (exit 2 for the worst)."""
    from tests.checkers.test_cli_spark import undertow

    shutil.copytree(EXAMPLES / "truncated", tmp_path / "truncated")
    (tmp_path / "truncated" / "results.json").unlink()
    bad = tmp_path / "bad"
    bad.mkdir()
    write(bad, BAD[0][1])
    # cold: Spark reads only on a classic session, never on the (Connect) warm server
    r = undertow("--spark", "cold", "--reader", "spark", str(tmp_path / "truncated"), str(bad))
    assert r.returncode == 2, r.stdout + r.stderr
    with pytest.raises(HistoryError) as strict:
        scan_history(bad / "history.jsonl")
    assert r.stderr.strip() == f"{bad}: error: {strict.value}"
    got = orjson.loads((tmp_path / "truncated" / "results.json").read_bytes())
    want = orjson.loads((EXAMPLES / "truncated" / "results.json").read_bytes())
    for field in FIELDS:
        assert got[field] == want[field], field
    assert got["stats"]["reader"] == "spark"
    # availability from Spark's reading is the one the driver's reading gives
    from checkers.availability import availability
    from checkers.tables import load_tables

    run = tmp_path / "truncated"
    assert got["availability"] == orjson.loads(orjson.dumps(availability(load_tables(run), run)))
    assert got["availability"]["send_by_key"]
