"""report.html from run files alone: verdict, anomalies linked to ops, plots, replicas, escaping."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.report.render import render_run
from harness.runfiles import HistoryError


def test_truncated_example_report(example_run: Any) -> None:
    run = example_run("truncated")
    out = render_run(run)
    html = out.read_text()
    assert out == run / "report.html"
    # the verdict comes first, before any other section
    assert html.index('id="verdict"') < html.index('id="settings"')
    assert re.search(r'class="verdict invalid" id="verdict">invalid', html)
    for t in ("lost-write", "inconsistent-offsets", "replica-lost-write"):
        assert f'id="anomaly-{t}"' in html
    # the lost write names op 1999: the example links to it and ops.html beside it holds it
    ops = (run / "ops.html").read_text()
    assert 'href="./ops.html#op-1999"' in html and 'id="op-1999"' in ops
    for link in set(re.findall(r'href="\./ops\.html#((?:op|ex)-[\w-]+)"', html)):
        assert f'id="{link}"' in ops, link
    assert 'href="./ops.html#ex-lost-write-1"' in html
    # each example's operations on per-process lanes: one bar per operation drawn
    ex = ops[ops.index('id="ex-lost-write-1"'):]
    ex = ex[:ex.index("</li>")]
    bars = re.findall(r"<title>op (\d+)\.\.(\d+) (\w+):", ex)
    assert bars and {int(a) for a, _, _ in bars} <= set(map(int, re.findall(r'#op-(\d+)"', ex)))
    # not the full history: only the ops the examples involve, and none in the report
    assert 5 < ops.count('<tr id="op-') < 60 and '<tr id="op-' not in html
    # key 1's picture marks offset 114 as lost and as holding two values
    assert "1 lost, offset 114<" in html and "1 offset holds two values" in html
    assert 'class="mark-lost" data-count="1"' in html
    # fault windows from the nemesis ops: kill n2 .. start, partition .. heal
    assert "<title>kill n2</title>" in html and "<title>partition n3</title>" in html
    assert "not recorded (no test.json)" in html
    assert "No nodes/ folder" in html
    assert "https://" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    suite = ET.parse(run / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "4"


def test_clean_example_is_valid_and_replicas_agree(example_run: Any) -> None:
    html = render_run(example_run("clean")).read_text()
    assert 'class="verdict valid" id="verdict">valid' in html
    assert "None found." in html
    assert "The replicas agree" in html


def test_not_checked_without_results(make_run: Any) -> None:
    run = make_run("r", [
        {"time": 1, "type": "invoke", "process": 0, "f": "send", "value": [["send", 0, 1]]},
        {"time": 5, "type": "ok", "process": 0, "f": "send", "value": [["send", 0, [0, 1]]]},
    ])
    html = render_run(run).read_text()
    assert "not checked" in html and "Not checked: this folder has no results.json" in html
    assert "No replicas.jsonl" in html
    junit = ET.parse(run / "junit.xml").getroot()
    assert junit.find(".//skipped") is not None


MARKUP = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_every_run_value_is_escaped(make_run: Any) -> None:
    ops = [
        {"time": 1, "type": "invoke", "process": 0, "f": "send", "value": [["send", 0, 7]]},
        {"time": 9, "type": "info", "process": 0, "f": "send", "value": [["send", 0, 7]],
         "error": MARKUP},
        {"time": 10, "type": "invoke", "process": "nemesis", "f": MARKUP,
         "value": {"nodes": [MARKUP]}},
        {"time": 11, "type": "info", "process": "nemesis", "f": MARKUP,
         "value": {"nodes": [MARKUP]}},
        {"time": 12, "type": "invoke", "process": 1, "f": MARKUP, "value": MARKUP},
        {"time": 13, "type": "ok", "process": 1, "f": MARKUP, "value": MARKUP},
    ]
    results = {"valid": False, "anomaly_types": [MARKUP], "bad_anomaly_types": [MARKUP],
               "counts": {MARKUP: 1}, "anomalies": {MARKUP: [{"value": 7, "why": MARKUP}]},
               "stats": {MARKUP: MARKUP}, "error": MARKUP}
    run = make_run("esc", ops, results=results, test={"name": MARKUP, "seed": MARKUP,
                                                      MARKUP: MARKUP},
                   replicas=[{"node": MARKUP, "key": 0, "hw": 1, "leo": 1, "leader_epoch": 1},
                             {"node": MARKUP, "key": 0, "offset": 0, "value": 7, "epoch": 1},
                             {"node": "n2", "key": 0, "hw": 1, "leo": 1, "leader_epoch": 1},
                             {"node": "n2", "key": 0, "offset": 0, "value": 8, "epoch": 1}])
    (run / "nodes" / MARKUP.replace("/", "_")).mkdir(parents=True)
    html = render_run(run).read_text()
    assert "<script" not in html  # the report has no script of its own at all
    assert "<img" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;" in html or "&#34;" in html
    # the error, the op's value and the example render as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_replica_divergence_side_by_side(make_run: Any) -> None:
    reps: list[dict[str, Any]] = []
    for node, vals in (("n1", [10, 11, 12, 13]), ("n2", [10, 11, 99, 13]), ("n3", [10, 11])):
        reps.append({"node": node, "key": 3, "hw": len(vals), "leo": len(vals),
                     "leader_epoch": 2})
        reps += [{"node": node, "key": 3, "offset": o, "value": v, "epoch": 1}
                 for o, v in enumerate(vals)]
    run = make_run("div", [
        {"time": 1, "type": "invoke", "process": 0, "f": "poll", "value": [["poll"]]},
        {"time": 2, "type": "ok", "process": 0, "f": "poll",
         "value": [["poll", {"3": [[0, 10], [1, 11]]}]]},
    ], replicas=reps)
    html = render_run(run).read_text()
    assert 'id="replica-key-3"' in html
    rows = re.findall(r'<tr class="conflict"><th class="num">(\d+)</th>', html)
    assert rows == ["2"]  # n3 lacks 2 and 3, but only below its own hw 2 would that count


def test_bad_history_names_the_line(make_run: Any, tmp_path: Path) -> None:
    run = make_run("bad", [{"time": 1, "type": "invoke", "process": 0, "f": "poll",
                            "value": [["poll"]]}])
    with (run / "history.jsonl").open("a") as fh:
        fh.write("[1, 2]\n")
    with pytest.raises(HistoryError, match=r"history\.jsonl:2: expected a JSON object"):
        render_run(run)
    with pytest.raises(HistoryError, match=r"needs history\.jsonl"):
        render_run(tmp_path / "nowhere")


def test_anomaly_refs() -> None:
    from harness.runfiles.walk import anomaly_refs

    idx, vals = anomaly_refs({
        "G1c-realtime": [{"ops": [3, 9], "processes": [1, 2], "edges": ["ww", "rt"]}],
        "replica-divergence": [{"key": 0, "offset": 4, "values": {"n1": 5, "n3": 6}}],
        "G1a": [{"reader_index": 11, "writer_index": 2, "value": 8}],
    })
    assert idx == {2, 3, 9, 11}
    assert vals == {5, 6, 8}


@pytest.mark.parametrize("ops", [
    [],
    [{"time": 5, "type": "invoke", "process": "nemesis", "f": "kill", "value": {"nodes": ["n1"]}}],
    [{"time": 5, "type": "invoke", "process": 0, "f": "poll", "value": [["poll"]]}],
])
def test_degenerate_histories_still_render(make_run: Any, ops: list[dict[str, Any]]) -> None:
    html = render_run(make_run("d", ops)).read_text()
    assert 'id="verdict">not checked' in html


def _liveness_history() -> list[dict[str, Any]]:
    s = 1_000_000_000
    return [
        {"time": 1 * s, "type": "invoke", "process": "nemesis", "f": "kill",
         "value": {"nodes": ["n1"]}},
        {"time": 1 * s + 10, "type": "info", "process": "nemesis", "f": "kill",
         "value": {"nodes": ["n1"]}},
        {"time": 2 * s, "type": "invoke", "process": "nemesis", "f": "start", "value": {}},
        {"time": 2 * s + 10, "type": "info", "process": "nemesis", "f": "start",
         "value": {"nodes": ["n1"]}},
        {"time": int(2.5 * s), "type": "invoke", "process": 0, "f": "send",
         "value": [["send", 0, 1]]},
        {"time": int(2.75 * s), "type": "ok", "process": 0, "f": "send",
         "value": [["send", 0, [0, 1]]]},
        {"time": 5 * s, "type": "invoke", "process": "nemesis", "f": "heal", "value": {}},
        {"time": 5 * s + 10, "type": "info", "process": "nemesis", "f": "heal", "value": {}},
        {"time": 6 * s, "type": "invoke", "process": 0, "f": "send", "value": [["send", 0, 2]]},
        {"time": 7 * s, "type": "fail", "process": 0, "f": "send", "value": [["send", 0, 2]]},
        {"time": 50 * s, "type": "invoke", "process": 0, "f": "poll", "value": [["poll"]]},
        {"time": 51 * s, "type": "fail", "process": 0, "f": "poll", "value": [["poll"]]},
    ]


def test_recovery_after_each_heal_is_measured_from_the_history_and_a_stall_is_flagged(
        make_run: Any) -> None:
    html = render_run(make_run("live", _liveness_history())).read_text()
    table = html[html.index('id="liveness-table"'):]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr[^>]*><td>(\w+)</td><td>([^<]*)</td><td class=\"num\">([\d.]+)</td>"
                      r"<td class=\"num\">([^<]+)</td><td class=\"num\">([^<]+)</td>", table)
    assert rows == [("start", "n1", "2.000", "0.750", "never"),
                    ("heal", "all", "5.000", "never", "never")]
    assert 'class="conflict"><td>heal' in table  # the stalled heal is marked
    assert 'id="stall-warning"' in html and "1 heal(s) followed by no successful" in html
    assert html.index('id="stall-warning"') < html.index('id="settings"')


def test_recovery_is_measured_from_sends_and_shows_the_phases(make_run: Any) -> None:
    live = {"heals": 1, "recovered": 1, "max_recovery_s": 0.25, "median_recovery_s": 0.25,
            "stall_s": 30.0, "stalled": [], "ok": True,
            "recoveries": [{"index": 3, "f": "start", "time": 2_000_000_010,
                            "recovery_s": 0.25}]}
    phases = [{"name": "steady", "from_s": 0.0, "to_s": 12.0},
              {"name": "faults", "from_s": 12.0, "to_s": 42.0},
              {"name": "recovery", "from_s": 42.0, "to_s": 60.0}]
    run = make_run("live2", _liveness_history()[:6],
                   results={"valid": True, "stats": {"liveness": live}},
                   test={"name": "t", "seed": 1, "nemesis_phases": phases})
    html = render_run(run).read_text()
    assert "1 of 1 fault heals were followed by successful send" in html
    assert "worst send 0.750 s" in html
    assert "No stall" in html and 'id="stall-warning"' not in html
    assert "steady 0\u201312 s, faults 12\u201342 s, recovery 42\u201360 s" in html


def test_an_assign_is_no_recovery_and_the_final_heal_is_apart(make_run: Any) -> None:
    """After the heal an assign succeeds at once; sends only 3 s later: the table says 3 s.
    The harness's final heal is listed as such and not counted."""
    s = 1_000_000_000
    ops = [*_liveness_history()[:4],
           {"time": 2 * s + 20, "type": "invoke", "process": 1, "f": "assign", "value": [0]},
           {"time": 2 * s + 30, "type": "ok", "process": 1, "f": "assign", "value": [0]},
           {"time": 5 * s, "type": "invoke", "process": 0, "f": "send",
            "value": [["send", 0, 1]]},
           {"time": 5 * s + 10, "type": "ok", "process": 0, "f": "send",
            "value": [["send", 0, [0, 1]]]},
           {"time": 6 * s, "type": "invoke", "process": "nemesis", "f": "heal", "value": {},
            "final": True},
           {"time": 6 * s + 10, "type": "info", "process": "nemesis", "f": "heal", "value": {},
            "final": True}]
    html = render_run(make_run("assign", ops)).read_text()
    table = html[html.index('id="liveness-table"'):]
    table = table[: table.index("</table>")]
    assert "<td>start</td><td>n1</td><td class=\"num\">2.000</td><td class=\"num\">3.000</td>" \
        in table
    assert "<td>heal (final)</td>" in table
    assert "1 of 1 fault heals" in html and "worst send 3.000 s" in html
    av = html[html.index('id="availability-table"'):]
    assert "<td>kill</td><td>n1</td><td class=\"num\">1.0\u20132.0</td>" in av
    assert "<td>no fault</td>" in av and "1 of 1 (100 %)" in av


def test_no_heal_no_recovery_table(make_run: Any) -> None:
    html = render_run(make_run("quiet", _liveness_history()[4:6])).read_text()
    assert "nothing to recover from" in html and 'id="liveness-table"' not in html


def test_group_delivery_and_membership_lanes(make_run: Any) -> None:
    ops = [
        {"time": 1, "type": "invoke", "process": 0, "f": "subscribe", "value": [0, 1]},
        {"time": 2, "type": "ok", "process": 0, "f": "subscribe", "value": [0, 1]},
        {"time": 3, "type": "invoke", "process": 1, "f": "send", "value": [["send", 0, 7],
                                                                            ["send", 0, 8]]},
        {"time": 4, "type": "ok", "process": 1, "f": "send", "value": [["send", 0, [0, 7]],
                                                                        ["send", 0, [1, 8]]]},
        {"time": 5, "type": "invoke", "process": 0, "f": "poll", "value": [["poll"]]},
        {"time": 9, "type": "ok", "process": 0, "f": "poll", "value": [["poll", {"0": [[0, 7]]}]],
         "generation": 3, "assignment": [0, 1]},
        {"time": 10, "type": "invoke", "process": 0, "f": "assign", "value": [],
         "fetch_committed": True},
        {"time": 11, "type": "ok", "process": 0, "f": "assign", "value": [],
         "fetch_committed": True, "committed": {"0": 2}},
    ]
    html = render_run(make_run("g", ops)).read_text()
    assert 'id="group-delivery"' in html and 'href="#group-delivery"' in html
    at = html.index('id="group-table"')
    table = html[at:html.index("</table>", at)]
    assert re.sub(r"<[^>]+>", " ", table).split()[-5:] == ["0", "2", "2", "1", "1"]
    assert "committed past 1 offset(s) that no member ever returned" in html
    assert "process 0, generation 3, keys 0,1" in html  # the lane's stretch
    plain = [o for o in ops if o["f"] == "send"]
    assert 'id="group-delivery"' not in render_run(make_run("a", plain)).read_text()


def test_the_key_that_waited_longest_for_a_poll_is_shown(tmp_path: Path) -> None:
    """checkers.availability's per-key poll stretch (an empty ok poll serves no key): in
    the verdict box's words and in the availability table, per window and overall."""
    from checkers.api import check_local
    from tests.checkers.test_availability import waiting_history

    run = waiting_history().write(tmp_path / "waiting")
    check_local(run, write=True)
    html = render_run(run).read_text()
    box = html[html.index('id="box-availability"'):]
    assert ("longest a key waited for a poll to return its records: key 0, 5.1 s "
            "(1.1-6.2 s)") in box[:box.index("</p>")]
    av = html[html.index('id="availability-table"'):]
    av = av[:av.index("</table>")]
    assert "<th>longest a key waited for a poll</th>" in av
    assert "<td class=\"num\">key 0: 2.0 s (2.5\u20134.5)</td>" in av  # the kill window
    assert "<td class=\"num\">key 0: 1.7 s (4.5\u20136.2)</td>" in av  # no fault
    assert "<td class=\"num\">key 0: 5.1 s (1.1\u20136.2)</td>" in av  # whole run
