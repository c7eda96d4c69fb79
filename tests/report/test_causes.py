"""Explanations grouped by cause (issue 36): a planted run where key 0's acknowledged writes
vanish and its offsets are reused after n2 is killed and restarted, and key 7 loses one
write later, under a pause of n3. The counts are recounted from the files with json."""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path
from typing import Any

from checkers.api import check_local
from checkers.testing import HistoryBuilder, replica_rows
from harness.report.render import render_run
from tests.report.planted import kip101_like, recount

STEP_NS = 100_000_000  # 0.1 s between history lines, so times read as seconds


def _nemesis(h: HistoryBuilder, f: str, node: str) -> None:
    h.line("invoke", "nemesis", f, {"nodes": [node]})
    h.line("info", "nemesis", f, {"nodes": [node]})


def two_windows(run_dir: Path) -> Path:
    """Key 0: 20 writes acknowledged, n2 killed and restarted, key 0 again from offset 0
    (the first 20 are on no replica). Later n3 is paused; key 7 loses offset 4."""
    h = HistoryBuilder()
    value = 1000
    logs: dict[int, list[int]] = {0: [], 1: [], 7: []}
    for o in range(20):
        h.send(o % 5, 0, value, o)
        value += 1
    _nemesis(h, "kill", "n2")
    _nemesis(h, "start", "n2")
    for o in range(25):
        h.send(o % 5, 0, value, o)
        logs[0].append(value)
        value += 1
    for o in range(10):
        h.send(o % 5, 1, value, o)
        logs[1].append(value)
        value += 1
    _nemesis(h, "pause", "n3")
    lost = 0
    for o in range(10):
        h.send(o % 5, 7, value, o)
        if o == 4:
            lost = value
        else:
            logs[7].append(value)
        value += 1
    _nemesis(h, "resume", "n3")
    h.poll(11, {7: [(o, v) for o, v in zip([0, 1, 2, 3, 5, 6, 7, 8, 9], logs[7], strict=True)]})
    h.poll(12, {0: list(enumerate(logs[0])), 1: list(enumerate(logs[1]))})
    assert lost not in logs[7]
    for i, line in enumerate(h.lines):
        line["time"] = (i + 1) * STEP_NS
    replicas: list[dict[str, Any]] = []
    for node in ("n1", "n2", "n3"):
        replicas += replica_rows(node, 0, 25, logs[0]) + replica_rows(node, 1, 10, logs[1])
        rows = replica_rows(node, 7, 10, [], leo=10)
        rows += [{"node": node, "key": 7, "offset": o, "value": v, "epoch": 1}
                 for o, v in zip([0, 1, 2, 3, 5, 6, 7, 8, 9], logs[7], strict=True)]
        replicas += rows
    run = h.write(run_dir, replicas)
    check_local(run, write=True)
    return run


def _times(run: Path) -> dict[str, float]:
    """Each nemesis completion's time in s, by "f node"."""
    import json

    out = {}
    for line in (run / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["process"] == "nemesis" and op["type"] == "info":
            out[f"{op['f']} {op['value']['nodes'][0]}"] = op["time"] / 1e9
    return out


def _text(part: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part))).strip()


def _explanations(html: str) -> list[str]:
    """Each explanation's text, its episode lines included."""
    if 'id="explanation-list"' not in html:
        return []
    part = html[html.index('id="explanation-list"'):]
    part = part[:part.index("</ol>")]
    return [_text(x) for x in part.split('<li class="explanation">')[1:]]


def _episodes(html: str) -> list[str]:
    part = html[html.index('id="explanation-list"'):]
    part = part[:part.index("</ol>")]
    return [_text(x) for x in re.findall(r'<li class="episode">(.*?)</li>', part, re.S)]


def test_first_explanation_is_the_cause_with_time_and_faults(tmp_path: Path) -> None:
    run = two_windows(tmp_path / "run")
    want = recount(run)
    assert set(want.per_key) == {0, 7} and want.per_key[0] == (20, 0, 19)
    times = _times(run)
    html = render_run(run).read_text()
    ex = _explanations(html)
    assert len(ex) >= 2, ex
    first = ex[0]
    # key 0, its count and offsets as recounted, the kill and restart of n2 with their times
    head = f"key 0: {want.per_key[0][0]} acknowledged writes at offsets 0-19"
    assert first.startswith(head), first
    kill = html.index("Explanations")
    assert html.index('id="anomaly-') > kill  # explanations come before the per-type lists
    assert (f"n2 was killed at {times['kill n2'] - 0.1:.1f} s" in first
            or f"n2 was killed at {times['kill n2']:.1f} s" in first), (first, times)
    assert f"restarted at {times['start n2']:.1f} s" in first, (first, times)
    assert "offsets reused from" in first
    # key 7's single loss is its own event, under the pause of n3, not the kill
    second = next(e for e in ex[1:] if e.startswith("key 7:"))
    assert second.startswith(f"key 7: {want.per_key[7][0]} acknowledged write at offset 4 ")
    assert "n3 was paused at" in second and "n2" not in second, second
    # every explanation links to examples that exist on the page
    for anchor in re.findall(r'<li class="explanation">.*?</li>', html, re.S):
        for ref in re.findall(r'href="#(ex-[^"]+)"', anchor):
            assert f'id="{ref}"' in html, ref


def test_no_anomalies_no_explanations(tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "ok", lose=False)
    html = render_run(run).read_text()
    assert _explanations(html) == []
    assert "Explanations" not in html


def test_shortest_witness_first_and_big_groups_called_consequences(tmp_path: Path) -> None:
    from harness.report.causes import causes
    from harness.report.losses import KeyLoss, Losses
    from harness.report.sections import AnomalyType, Example

    ops: list[dict[str, Any]] = [
        {"index": i, "time": (i + 1) * STEP_NS, "type": "ok", "process": i % 3, "f": "send",
         "value": [["send", 5 if i < 6 else 9, [i, 100 + i]]]} for i in range(10)]
    raw = {"G0-process": [{"ops": [0, 1, 2, 3], "edges": ["ww"] * 4, "component_size": 4000},
                          {"ops": [6, 7], "edges": ["ww"] * 2, "component_size": 12}]}
    exs = [Example([("c", None)], [[("s", None)]] * 2, [6, 7], "", 1),
           Example([("c", None)], [[("s", None)]] * 4, [0, 1, 2, 3], "", 0)]
    loss = Losses(10, "replicas", 3, 0, 0, [KeyLoss(5, 3, (0, 2), (0.1, 0.3), 0)])
    got = causes([AnomalyType("G0-process", 2, True, exs)], raw, loss, None, [], ops)
    assert got.notes == {("G0-process", 2): "a consequence of offsets reused on key 5 (its "
                         "group has 4,000 operations): not a separate finding"}
    assert got.events[0].key == 5 and got.events[0].examples == [("G0-process", 2)]
    assert [e.key for e in got.events] == [5, 9]  # the small cycle is its own event


def test_the_shortest_witness_comes_first(tmp_path: Path) -> None:
    from harness.report.scan import scan
    from harness.report.sections import anomalies

    h = HistoryBuilder()
    for i in range(8):
        h.send(i % 4, 0, 100 + i, i)
    ops = h.lines
    long_ = {"ops": [1, 3, 5, 7], "processes": [0, 1, 2, 3], "edges": ["ww"] * 4,
             "sends": [1] * 4, "component_size": 8}
    short = {"ops": [9, 11], "processes": [0, 1], "edges": ["ww"] * 2, "sends": [1] * 2,
             "component_size": 8}
    results: dict[str, Any] = {"valid": False, "anomaly_types": ["G0-process"],
                               "bad_anomaly_types": ["G0-process"],
                               "counts": {"G0-process": 2},
                               "anomalies": {"G0-process": [long_, short]}}
    got = anomalies(results, scan(ops, results["anomalies"]), ops)[0].examples
    assert [e.src for e in got] == [1, 0] and len(got[0].steps) < len(got[1].steps)


def two_kills(run_dir: Path) -> Path:
    """Key 0 writes offsets 0-9; n2 is killed and restarted, and key 0 is written again
    from offset 5 to 19 (offsets 5-9 reused: 5 writes lost); n3 is killed and restarted,
    and key 0 is written from offset 15 to 24 (offsets 15-19 reused: 5 more lost)."""
    h = HistoryBuilder()
    final: dict[int, int] = {}
    value = 1000
    for lo, hi, fault in ((0, 10, "n2"), (5, 20, "n3"), (15, 25, None)):
        for o in range(lo, hi):
            h.send(o % 5, 0, value, o)
            final[o] = value
            value += 1
        if fault:
            _nemesis(h, "kill", fault)
            _nemesis(h, "start", fault)
    log = [final[o] for o in range(25)]
    h.poll(11, {0: list(enumerate(log))})
    for i, line in enumerate(h.lines):
        line["time"] = (i + 1) * STEP_NS
    replicas: list[dict[str, Any]] = []
    for node in ("n1", "n2", "n3"):
        replicas += replica_rows(node, 0, 25, log)
    run = h.write(run_dir, replicas)
    check_local(run, write=True)
    return run


def _first_ack_at(run: Path, offset: int, after_s: float) -> float:
    """The time (s) of the first acknowledged send at `offset` after `after_s`."""
    import json

    for line in (run / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["type"] == "ok" and op["f"] == "send" and op["time"] / 1e9 > after_s \
                and op["value"][0][2][0] == offset:
            return float(op["time"] / 1e9)
    raise AssertionError(offset)


def test_a_key_that_lost_writes_after_two_kills_names_both(tmp_path: Path) -> None:
    run = two_kills(tmp_path / "run")
    want = recount(run)
    assert want.per_key == {0: (10, 5, 19)}
    times = _times(run)
    html = render_run(run).read_text()
    ex = _explanations(html)
    assert ex[0].startswith(f"key 0: {want.per_key[0][0]} acknowledged writes at offsets "
                            "5-19"), ex[0]
    assert "in 2 episodes" in ex[0], ex[0]
    first, second = _episodes(html)
    # the first five losses (offsets 5-9) were taken by n2's kill, reused after its restart
    reuse1 = _first_ack_at(run, 5, times["start n2"])
    assert ": 5 acknowledged writes at offsets 5-9" in first, first
    assert f"offsets reused from {reuse1:.1f} s (offset 5 " in first, first
    assert f"restarted at {times['start n2']:.1f} s" in first and "n3" not in first, first
    # the next five (offsets 15-19) by n3's, reused after its restart
    reuse2 = _first_ack_at(run, 15, times["start n3"])
    assert ": 5 acknowledged writes at offsets 15-19" in second, second
    assert f"offsets reused from {reuse2:.1f} s (offset 15 " in second, second
    assert "n3 was killed at" in second and "n2" not in second, second
    # each episode links the examples of its own time: the lost-write examples split 5 and 5
    assert "lost-write 1 2 3 … (5)" in first and "lost-write 6 7 8 … (5)" in second


def test_one_fault_on_two_nodes_at_once_is_named_once() -> None:
    from harness.report.causes import loss_sentence
    from harness.report.episodes import Episode
    from harness.report.faults import FaultWindow
    from harness.report.losses import KeyLoss

    both = [FaultWindow(n, "kill", 29 * STEP_NS, 88 * STEP_NS, 4) for n in ("n3", "n2")]
    later = FaultWindow("n1", "pause", 30 * STEP_NS, 31 * STEP_NS, 6)
    k = KeyLoss(5, 1, (8, 8), (3.2, 3.2), 0)
    ep = Episode(1, (8, 8), (3.2, 3.2), None, (*both, later), 3.2)
    assert loss_sentence(k, "replicas", [ep], [*both, later]) == (
        "key 5: 1 acknowledged write at offset 8 (acknowledged 3.2 s) is on no replica after "
        "n2 and n3 were killed at 2.9 s (restarted at 8.8 s), and n1 was paused at 3.0 s and "
        "resumed at 3.1 s.")


def test_episodes_past_the_fifth_are_folded(tmp_path: Path) -> None:
    """Seven kills, each followed by key 0 written again from five offsets back: seven
    episodes of five losses, each after its own kill; the last two folded."""
    import json

    h = HistoryBuilder()
    final: dict[int, int] = {}
    value = 1000
    for i in range(8):
        for o in range(5 * i, 5 * i + 10):
            h.send(o % 5, 0, value, o)
            final[o] = value
            value += 1
        if i < 7:
            _nemesis(h, "kill", f"n{i % 3 + 1}")
            _nemesis(h, "start", f"n{i % 3 + 1}")
    log = [final[o] for o in range(len(final))]
    h.poll(11, {0: list(enumerate(log))})
    for i, line in enumerate(h.lines):
        line["time"] = (i + 1) * STEP_NS
    run = h.write(tmp_path / "run", [r for n in ("n1", "n2", "n3")
                                     for r in replica_rows(n, 0, len(log), log)])
    check_local(run, write=True)
    kills = [json.loads(x)["time"] / 1e9 for x in (run / "history.jsonl").read_text().split()
             if '"kill"' in x and '"invoke"' in x]  # a window opens at the invocation
    html = render_run(run).read_text()
    assert "in 7 episodes" in _explanations(html)[0]
    eps = _episodes(html)
    assert len(eps) == 7
    for i, ep in enumerate(eps):
        assert f": 5 acknowledged writes at offsets {5 * i + 5}-{5 * i + 9};" in ep, ep
        node = f"n{i % 3 + 1}"
        assert f"after {node} was killed at {kills[i]:.1f} s and restarted at" in ep, ep
    part = html[html.index('id="explanation-list"'):]
    folded = part[part.index("<details><summary>2 more episodes</summary>"):]
    assert folded[:folded.index("</details>")].count('<li class="episode">') == 2
