"""The report and the index in Debian's headless Chromium: no console errors, content visible.

Chromium prints every console message (errors, uncaught exceptions, failed
loads) to stderr as INFO:CONSOLE lines with --enable-logging=stderr --v=0; the
DOM after scripts ran comes from --dump-dom. Screenshots stay in tmp_path.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.report.render import render_index, render_run

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def browse(chromium: str, url: str, tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """(stdout, console lines) of one headless Chromium run with a new empty profile."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    r = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args, url],
                       capture_output=True, text=True, timeout=180, check=False)
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, console


def screenshot(chromium: str, url: str, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    browse(chromium, url, tmp_path, f"--screenshot={out}", "--window-size=1280,2400",
           "--hide-scrollbars")
    assert out.is_file() and out.stat().st_size > 10_000, "no screenshot"
    return out


def test_console_check_catches_errors(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<p>x</p><script>console.error('boom'); missingFn();</script>")
    _, console = browse(chromium, page.as_uri(), tmp_path, "--dump-dom")
    assert any("boom" in ln for ln in console)
    assert any("Uncaught ReferenceError" in ln for ln in console)


def test_report_renders_cleanly(chromium: str, tmp_path: Path, example_run: Any) -> None:
    run = example_run("truncated")
    (run / "test.json").write_text(json.dumps({"name": "kip101-loss", "seed": 42}))
    url = render_run(run).as_uri()
    dom, console = browse(chromium, url, tmp_path, "--dump-dom")
    assert console == []
    assert re.search(r'<div class="verdict invalid" id="verdict">invalid', dom)
    assert '<code id="seed">42</code>' in dom
    examples = re.findall(r'<p class="sentence">(.*?)</p>', dom)
    assert any("acknowledged at offset 114 of key 1" in e for e in examples), examples
    assert dom.count("<svg") >= 8  # latency, quantiles, throughput, timeline, 4 keys
    shot = screenshot(chromium, url, tmp_path, "report.png")
    print(f"screenshot: {shot}")


def test_index_renders_and_filters(chromium: str, tmp_path: Path, example_run: Any) -> None:
    results = tmp_path / "results"
    for name, test in (("truncated", "kip101-loss"), ("clean", "safe")):
        dest = results / test / "20260101T000000Z"
        dest.parent.mkdir(parents=True)
        example_run(name).rename(dest)
        render_run(dest)
    url = render_index(results).as_uri()
    dom, console = browse(chromium, url, tmp_path, "--dump-dom")
    assert console == []
    assert '<span id="shown">2</span>' in dom  # the script ran
    dom, console = browse(chromium, url + "#verdict=invalid", tmp_path, "--dump-dom")
    assert console == []
    assert '<span id="shown">1</span>' in dom
    assert re.search(r'<tr data-test="safe" data-verdict="valid" hidden="">', dom)
    assert re.search(r'<tr data-test="kip101-loss" data-verdict="invalid">', dom)
    print(f"screenshot: {screenshot(chromium, url, tmp_path, 'index.png')}")


def cells(dom: str) -> list[str]:
    """The text of every table cell of the page."""
    return [re.sub(r"<[^>]+>", "", c).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", dom, flags=re.S)]


def raw_json(text: str) -> bool:
    """A cell holding JSON of more than one value: an array or an object."""
    return bool(re.match(r"^[\[{].*[\]}]$", text, flags=re.S))


def test_report_of_every_fault_kind_shows_its_plan_as_a_table(chromium: str,
                                                             tmp_path: Path) -> None:
    """test.json as `undertow run` writes it with every fault the nemesis knows, the plan
    its real nemesis package made, and the history's nemesis operations following it."""
    from checkers.api import check_local
    from checkers.testing import HistoryBuilder
    from harness.spec import build_spec
    from nemesis.packages import FAULTS, known_faults, nemesis_package

    known_faults()
    spec = build_spec({"nemesis": tuple(sorted(FAULTS)), "time_limit_s": 60,
                       "nemesis_interval_s": 5, "seed": 3,
                       "nemesis_targets": ("one", "minority", "majority", "leader",
                                           "followers", "controller")})
    plan = nemesis_package(spec).plan_json()
    h = HistoryBuilder()
    for i, step in enumerate(plan):
        h.line("invoke", "nemesis", step["f"], step["value"])
        h.line("info", "nemesis", step["f"], step["value"])
        h.send(i % 5, i % 3, i, i // 3)
    run = h.write(tmp_path / "all-faults")
    spec.save(run / "test.json", nodes=list(spec.nodes), nemesis_plan=plan)
    check_local(run, write=True)
    dom, console = browse(chromium, render_run(run).as_uri(), tmp_path, "--dump-dom")
    assert console == []
    table = dom[dom.index('id="fault-table"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S)[1:]
    # each planned step once (those planned after the time limit are marked never run, and
    # the operations this history gives them anyway stand apart, unplanned)
    assert len([r for r in rows if cells(r)[2]]) == len(plan)
    assert {cells(r)[1] for r in rows} == {s["f"] for s in plan}
    assert any("drops traffic from" in r for r in rows)  # a grudge in words
    bad = [c for c in cells(dom) if raw_json(c)]
    assert bad == [], bad[:5]
    print(f"screenshot: {screenshot(chromium, render_run(run).as_uri(), tmp_path, 'plan.png')}")


def test_report_of_an_invalid_known_bug_run_reads_as_sentences(chromium: str,
                                                               tmp_path: Path) -> None:
    """What kip101-loss leaves behind (a lost acknowledged write, a rewritten offset, writes
    missing from the replicas) plus a send acknowledged before another yet at a higher
    offset (a real-time cycle), checked by the real checkers."""
    from checkers.api import check_local
    from checkers.testing import HistoryBuilder
    from harness.scenarios import scenario
    from harness.spec import build_spec
    from nemesis.packages import nemesis_package

    h = HistoryBuilder()
    for p, v, o in ((0, 100, 0), (1, 101, 1), (2, 102, 2), (3, 103, 3)):
        h.send(p, 0, v, o)
    h.poll(4, {0: [(0, 100), (1, 101), (3, 103)]})  # 102 at offset 2 is lost
    h.send(5, 1, 200, 0)
    h.send(6, 1, 201, 0)
    h.poll(7, {1: [(0, 201)]})  # offset 0 of key 1 holds 200 and 201
    h.send(8, 2, 300, 5)
    h.send(9, 2, 301, 3)  # invoked after 300 was acknowledged, yet lower
    h.poll(10, {2: [(3, 301), (5, 300)]})
    replicas = [{"node": "n1", "key": k, "hw": 6, "leo": 6, "leader_epoch": 2} for k in range(3)]
    replicas += [{"node": "n1", "key": 0, "offset": o, "value": v, "epoch": 1}
                 for o, v in ((0, 100), (1, 101), (3, 103))]
    run = h.write(tmp_path / "kip101-loss", replicas)
    spec = build_spec({**scenario("kip101-loss").settings, "scenario": "kip101-loss",
                       "seed": 7})
    spec.save(run / "test.json", nodes=list(spec.nodes),
              nemesis_plan=nemesis_package(spec).plan_json())
    results = check_local(run, write=True)
    assert results["valid"] is False
    assert {"lost-write", "inconsistent-offsets", "replica-lost-write"} <= \
        set(results["anomaly_types"])
    cycles = [t for t in results["anomaly_types"] if t.startswith(("G0", "G1c"))]
    assert cycles, results["anomaly_types"]
    dom, console = browse(chromium, render_run(run).as_uri(), tmp_path, "--dump-dom")
    assert console == []
    section = dom[dom.index('<h2 id="anomalies">'):dom.index('<h2 id="keys">')]
    assert "{" not in section and "}" not in section
    examples = re.findall(r'<div class="example[^"]*"[^>]*>(.*?)</div>', section, flags=re.S)
    assert len(examples) == sum(len(v) for v in results["anomalies"].values())
    for ex in examples:
        assert re.search(r'<p class="sentence">.*<a href="\./ops\.html#op-\d+">op \d+</a>', ex,
                         flags=re.S)
    for t in cycles:
        block = section[section.index(f'id="anomaly-{t}"'):]
        steps = re.findall(r"<li>(.*?)</li>", block[:block.index("</ol>")], flags=re.S)
        assert steps and all(re.search(r"\((write-write|write-read|real time|process order)\)",
                                        s) for s in steps), steps
    assert "value 102 was acknowledged at offset 2 of key 0" in section
    ops = (run / "ops.html").read_text()  # the examples' operations, beside the report
    for link in set(re.findall(r'href="\./ops\.html#(op-\d+)"', dom)):
        assert f'id="{link}"' in ops, link
    bad = [c for c in cells(dom) if raw_json(c)]
    assert bad == [], bad[:5]
    print(f"screenshot: {screenshot(chromium, render_run(run).as_uri(), tmp_path, 'bug.png')}")
