"""`undertow matrix`: 2 scenarios (and their controls) on 4 Kafka releases, one page.

The plan is the real one (scenarios, releases resolved from the cache, each cell's
spec assembled); each cell's runs are small run folders written the way `undertow
run` leaves them (a history, test.json from the cell's own spec, the real checkers'
results.json and report), in place of 100-second Kafka runs (bench/lrs.py runs
those). One cell is planted to differ from its scenario's expectation."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner

from checkers.api import check_local
from checkers.testing import HistoryBuilder
from harness import matrix as m
from harness.cli import main
from harness.matrix_cli import write
from harness.report.render import render_run
from systems.kafka.options import KafkaOptions
from tests.report.test_browser import browse

RELEASES = ["3.9.1", "4.0.2", "4.1.2", "4.4.0"]
SCENARIOS = ["kafka-last-replica-standing", "kafka-acks-1"]
SEEDS = [1]  # the resume test runs two
PLANTED = ("4.4.0", "kafka-acks-1")  # found valid, where acks=1 must lose writes


def _history(lost: bool) -> HistoryBuilder:
    h = HistoryBuilder()
    h.send(0, 0, 1, 0)
    h.send(1, 0, 2, 1)
    h.poll(2, {0: [(1, 2)] if lost else [(0, 1), (1, 2)]})
    return h


class SmallRuns:
    """Writes a cell's run folder for each `undertow run` the matrix asks for."""

    def __init__(self, *, check: bool = True) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.check = check  # the real checkers and report, or a bare results.json

    def __call__(self, args: Sequence[str]) -> int:
        self.calls.append(tuple(args))
        a = list(args)
        spec = m.spec_of(a[:a.index("--seed")], int(a[a.index("--seed") + 1]))
        kafka = KafkaOptions.of(spec)
        release = kafka.kafka_version
        assert release is not None, "the matrix names each row's release"
        control = kafka.kafka_features is not None or (spec.scenario == SCENARIOS[1]
                                                       and kafka.acks == "all")
        lost = not control and not (spec.scenario == SCENARIOS[0] and release >= "4.1")
        if (release, spec.scenario) == PLANTED:
            lost = False
        folder = Path(a[a.index("--results-dir") + 1])
        run = _history(lost).write(folder / spec.scenario / f"2026112{spec.seed}T000000Z")
        spec.save(run / "test.json", nodes=list(spec.nodes),
                  system_info={"name": "kafka", "version": release})
        if not self.check:
            (run / "results.json").write_text('{"valid": "unknown"}')
            return 3
        check_local(run, write=True)
        render_run(run)
        return 1 if lost else 0


def _plan() -> tuple[list[str], list[m.Cell]]:
    return m.plan(SCENARIOS, RELEASES, control=True, backend="local")


@pytest.fixture(scope="module")
def matrix_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SmallRuns]:
    out = tmp_path_factory.mktemp("matrix")
    releases, cells = _plan()
    runner = SmallRuns()
    m.run_cells(out, cells, SEEDS, say=lambda s: None, stop=lambda: False, runner=runner)
    write(out, releases, list(dict.fromkeys(c.column.label for c in cells)), SEEDS, cells)
    return out, runner


def test_the_plan_checks_every_cell_and_a_control_a_release_lacks_does_not_apply() -> None:
    releases, cells = _plan()
    assert releases == RELEASES and len(cells) == 4 * 4
    lrs_control = {c.release: c for c in cells
                   if c.column.scenario == SCENARIOS[0] and c.column.control}
    assert not lrs_control["3.9.1"].applies
    assert "3.9.1 has no eligible.leader.replicas.version" in lrs_control["3.9.1"].why_not
    assert all(c.applies for r, c in lrs_control.items() if r != "3.9.1")
    lrs = {c.release: c.expected for c in cells
           if c.column.scenario == SCENARIOS[0] and not c.column.control}
    assert lrs == {"3.9.1": ("lost-write",), "4.0.2": ("lost-write",), "4.1.2": (),
                   "4.4.0": ()}


@pytest.mark.slow  # 15 small runs checked and reported: about a minute on a quiet machine
def test_json_cells_verdicts_and_the_planted_difference(
        matrix_dir: tuple[Path, SmallRuns]) -> None:
    out, runner = matrix_dir
    assert len(runner.calls) == (4 * 4 - 1) * len(SEEDS)
    data = json.loads((out / "matrix.json").read_text())
    assert data["differs"] is True and data["complete"] is True
    cells = {(c["release"], c["column"]): c for c in data["cells"]}
    assert len(cells) == 16
    assert cells[("4.0.2", SCENARIOS[0])]["verdicts"] == "lost-write 1/1"
    assert cells[("4.1.2", SCENARIOS[0])]["verdicts"] == "valid 1/1"
    assert cells[("4.0.2", SCENARIOS[0])]["anomaly_counts"] == {"lost-write": 1}
    assert [c["column"] for c in data["cells"] if c["differs"]] == ["kafka-acks-1"]
    planted = cells[PLANTED]
    assert planted["differs"] and planted["verdicts"] == "lost-write 0/1, valid 1/1"


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_in_chromium(matrix_dir: tuple[Path, SmallRuns], tmp_path: Path,
                              chromium: str) -> None:
    out, _ = matrix_dir
    dom, console = browse(chromium, (out / "matrix.html").as_uri(), tmp_path, "--dump-dom")
    assert console == []
    rows = re.findall(r'<tr data-release="([\d.]+)">(.*?)</tr>', dom, flags=re.S)
    assert [r for r, _ in rows] == RELEASES
    for release, row in rows:
        cells = re.findall(r'<td class="cell[^"]*" data-column="([^"]+)"', row)
        assert len(cells) == 4, (release, cells)
        differs = re.findall(r'data-column="([^"]+)" data-differs="true"', row)
        assert differs == (["kafka-acks-1"] if release == PLANTED[0] else [])
    assert dom.count('class="cell na"') == 1 and 'id="summary"' in dom
    links = re.findall(r'<a class="run" href="([^"]+)"', dom)
    assert len(links) == 15 * len(SEEDS)
    for href in links:
        target = out / unquote(urlparse(href).path)
        assert target.is_file() and target.name == "report.html", href


def test_a_stopped_matrix_resumes_without_re_running_finished_cells(tmp_path: Path) -> None:
    _, cells = _plan()
    seeds = [1, 2]
    some = [c for c in cells if c.release in ("4.0.2", "4.1.2") and not c.column.control]
    first = SmallRuns(check=False)
    stops = iter([False, False, True])  # stopped after two runs (as Ctrl-C does)
    m.run_cells(tmp_path, some, seeds, say=lambda s: None, stop=lambda: next(stops, True),
                runner=first)
    assert len(first.calls) == 2
    again = SmallRuns(check=False)
    m.run_cells(tmp_path, some, seeds, say=lambda s: None, stop=lambda: False, runner=again)
    done = {(c[c.index("--extra") + 1], c[1], c[c.index("--seed") + 1]) for c in first.calls}
    rerun = {(c[c.index("--extra") + 1], c[1], c[c.index("--seed") + 1]) for c in again.calls}
    assert len(again.calls) == len(some) * len(seeds) - 2 and not done & rerun
    assert all(len(m.finished(c.folder(tmp_path))) == len(seeds) for c in some)


@pytest.mark.parametrize(("args", "says"), [
    (["--scenario", "no-such", "--kafka-versions", "4.0.2"], "'no-such' is not known"),
    (["--scenario", "kafka-acks-1", "--kafka-versions", "3.7.0"],
     "kafka-acks-1 does not run on 3.7.0: controller_voters"),
    (["--scenario", "last-replica-standing", "--kafka-versions", "4.0.2"],
     "no releases to choose from"),
    (["--scenario", "kafka-acks-1", "--kafka-versions", "4.0.2,4.0.2"], "named twice"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["matrix", *args, "--out", str(tmp_path / "m")])
    assert r.exit_code == 2 and says in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_help_shows_the_command() -> None:
    r = CliRunner().invoke(main, ["matrix", "--help"])
    assert r.exit_code == 0 and "--kafka-versions" in r.output and "--control" in r.output
