"""Without results.json's `availability`, the report measures it with
checkers.availability.history_availability, which reads only history.jsonl (the strict
reader's compiled path, no replicas.jsonl): its figures must be those the checker writes
(`availability(load_tables(run_dir), run_dir)`, which also reads the replicas, through
DuckDB for a history of a megabyte or more), and the report's recovery and availability
tables the same with the block as without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.report import generate
from checkers.availability import availability, history_availability
from checkers.tables import load_tables
from harness.report.render import render_run


def _tables(html: str) -> str:
    """The "Recovery after heals" section and its availability table."""
    return html[html.index('<h2 id="liveness">'):html.index('<h2 id="timeline">')]


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench.report's run folder, small: 20,000 lines (2 MB: the checker reads it through
    DuckDB) of sends and polls with fails and infos, kills, pauses and partitions healed,
    and results.json's availability block as the checker writes it."""
    run = tmp_path_factory.mktemp("avail") / "run"
    generate(run, 20_000)
    return run


def test_the_reports_reading_gives_the_checkers_figures(faulty_run: Path,
                                                        example_run: Any) -> None:
    got = history_availability(faulty_run)
    assert got == json.loads((faulty_run / "results.json").read_text())["availability"]
    assert got["heals"] and got["windows"] and got["ops"]["send"]["fail"] > 0
    for name in ("clean", "truncated"):  # real runs' files
        run = example_run(name)
        assert history_availability(run) == availability(load_tables(run), run)


def _bare(faulty_run: Path, dest: Path) -> Path:
    """A copy of the run whose results.json has no availability block."""
    results = json.loads((faulty_run / "results.json").read_text())
    del results["availability"]
    dest.mkdir()
    for f in ("history.jsonl", "replicas.jsonl", "test.json"):
        (dest / f).write_bytes((faulty_run / f).read_bytes())
    (dest / "results.json").write_text(json.dumps(results))
    return dest


def test_the_page_is_the_same_with_the_block_or_measured_without_it(faulty_run: Path,
                                                                     tmp_path: Path) -> None:
    with_block = _tables(render_run(faulty_run).read_text())
    measured = _tables(render_run(_bare(faulty_run, tmp_path / "bare")).read_text())
    assert measured == with_block
    assert 'id="availability-table"' in measured and "partition" in measured


def test_a_replicas_file_the_strict_reader_refuses_does_not_stop_the_measure(
        faulty_run: Path, tmp_path: Path) -> None:
    """Availability comes from the history alone: a replica summary with a string hw (the
    strict replicas reader refuses it; the report's tolerant one draws the rest) leaves
    the tables as they are."""
    bare = _bare(faulty_run, tmp_path / "bare")
    with open(bare / "replicas.jsonl", "a") as fh:
        fh.write(json.dumps({"node": "n1", "key": 0, "hw": "x", "leo": 0}) + "\n")
    measured = _tables(render_run(bare).read_text())
    assert "not measured" not in measured
    assert measured == _tables(render_run(faulty_run).read_text())
