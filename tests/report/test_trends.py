"""`undertow trends` over 21 real run folders of 3 scenarios (checked by the real checker,
reports rendered): the JSON, the page in headless Chromium, and bad input.

- `safe`: 7 nights, all valid;
- `kip101-loss`: 6 nights invalid (a lost write), the 7th valid with acks changed (its
  settings changed, so it is no instability);
- `flaky`: 7 nights with the same settings, seeds 301 (valid) and 302 (invalid) taking
  turns: unstable, and those two seeds replay its two outcomes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner

from checkers.api import check_local
from checkers.testing import HistoryBuilder
from harness.cli import main
from harness.report.render import render_run, render_trends
from harness.spec import build_spec
from tests.report.test_browser import browse

NIGHTS = [f"2026110{d}T021700Z" for d in range(1, 8)]
S_PER_LINE = 1_000_000  # the builder's 1 µs a line, made 1 s a line


def _history(lost: bool) -> HistoryBuilder:
    h = HistoryBuilder()
    h.send(0, 1, 10, 0)
    h.poll(1, {1: [(0, 10)]})
    h.send(2, 0, 1, 0)  # line 4: lost when a poll reads past it
    h.send(3, 0, 2, 1)
    h.poll(4, {0: [(1, 2)] if lost else [(0, 1), (1, 2)]})
    for x in h.lines:
        x["time"] *= S_PER_LINE
    return h


def _run(results: Path, scenario: str, night: str, seed: int, lost: bool,
         **settings: Any) -> None:
    run = _history(lost).write(results / scenario / night)
    spec = build_spec({"name": scenario, "scenario": scenario, "seed": seed,
                       "time_limit_s": 10, **settings})
    spec.save(run / "test.json", nodes=list(spec.nodes),
              nemesis_plan=[{"at_s": seed % 7, "f": "kill", "value": {}}],
              system_info={"name": "undertow", "version": "0.1.0"})
    check_local(run, write=True)
    render_run(run)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("nights") / "results"
    for i, night in enumerate(NIGHTS):
        _run(out, "safe", night, 100 + i, lost=False)
        last = i == len(NIGHTS) - 1
        _run(out, "kip101-loss", night, 200 + i, lost=not last,
             **({"broker": {"acks": "1"}} if last else {}))
        _run(out, "flaky", night, 301 + i % 2, lost=i % 2 == 1)
    (out / "latest").symlink_to(out / "flaky" / NIGHTS[-1])  # links are skipped
    return out


@pytest.fixture(scope="module")
def written(results: Path) -> dict[str, Any]:
    page, data = render_trends(results)
    assert page == results / "trends.html"
    return dict(json.loads(data.read_text()))


def _row(data: dict[str, Any], scenario: str) -> dict[str, Any]:
    (row,) = [r for r in data["rows"] if r["scenario"] == scenario]
    return dict(row)


def test_a_row_per_scenario_and_a_column_per_night(written: dict[str, Any]) -> None:
    assert written["columns"] == [f"2026-11-0{d} 02:17:00" for d in range(1, 8)]
    assert [r["scenario"] for r in written["rows"]] == ["flaky", "kip101-loss", "safe"]
    for r in written["rows"]:
        assert (r["system"], r["release"], r["backend"]) == ("undertow", "0.1.0", "local")
        assert [c["column"] for c in r["cells"]] == list(range(7))
    safe = _row(written, "safe")
    assert {c["verdict"] for c in safe["cells"]} == {"valid"}
    assert not safe["unstable"] and not safe["settings_changed"]
    assert safe["cells"][0]["ops_per_s"] == pytest.approx(5 / 10.0)  # 5 ops over 10 s
    assert safe["cells"][0]["link"] == "./safe/20261101T021700Z/report.html"


def test_an_anomalous_cell_has_its_counts_and_first_anomaly_time(
        written: dict[str, Any]) -> None:
    cell = _row(written, "kip101-loss")["cells"][0]
    assert cell["verdict"] == "invalid" and cell["counts"] == {"lost-write": 1}
    assert cell["first_anomaly_s"] == pytest.approx(5.0)  # the lost send's invoke, line 5


def test_a_verdict_that_changed_with_the_settings_is_not_unstable(
        written: dict[str, Any]) -> None:
    row = _row(written, "kip101-loss")
    assert [c["verdict"] for c in row["cells"]] == ["invalid"] * 6 + ["valid"]
    assert row["settings_changed"] and not row["unstable"] and row["outcomes"] == {}


def test_the_planted_unstable_scenario_lists_the_seed_of_each_outcome(
        written: dict[str, Any]) -> None:
    row = _row(written, "flaky")
    assert row["unstable"] and not row["settings_changed"]
    assert row["outcomes"] == {"valid": ["301"], "invalid": ["302"]}


def test_a_missing_results_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["trends", str(tmp_path / "nowhere")])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "nowhere: no such folder" in r.output


def test_the_command_writes_both_files_and_the_index_links_them(results: Path) -> None:
    r = CliRunner().invoke(main, ["trends", str(results)])
    assert r.exit_code == 0, r.output
    assert (results / "trends.json").is_file()
    assert '<a href="trends.html">' in (results / "index.html").read_text()


@pytest.mark.browser
def test_the_page_in_chromium(results: Path, written: dict[str, Any], tmp_path: Path,
                              chromium: str) -> None:
    dom, console = browse(chromium, (results / "trends.html").as_uri(), tmp_path, "--dump-dom")
    assert console == []
    runs = re.findall(r'<div class="run" data-path="([^"]+)"><a class="(\w+)" href="([^"]+)">'
                      r"(\w+)</a>", dom)
    assert len(runs) == 21
    for path, _css, href, verdict in runs:
        target = results / unquote(urlparse(href).path)
        assert target.is_file() and target.name == "report.html", href
        assert target.parent == results / path
        assert verdict in ("valid", "invalid")
    rows = re.findall(r'<tr data-scenario="([\w-]+)"( class="unstable" data-unstable="true")?>'
                      r"(.*?)</tr>", dom, flags=re.S)
    assert [(name, bool(mark)) for name, mark, _ in rows] == [
        ("flaky", True), ("kip101-loss", False), ("safe", False)]
    flaky = rows[0][2]
    assert re.search(r'data-verdict="valid">301</span>', flaky)
    assert re.search(r'data-verdict="invalid">302</span>', flaky)
    assert flaky.count('<td class="cell">') == 7
