"""The verdict box and the per-key losses: figures from the full sets, recomputed here from
history.jsonl and replicas.jsonl; a system's own settings only; availability in words."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

from harness.report.availability import availability_line
from harness.report.render import render_run
from tests.report.planted import BIG_KEY, BIG_LOSS, SMALL_KEY, kip101_like, recount, save_test


def _text(html: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def _box(html: str) -> str:
    return html[html.index('id="verdict-box"'):html.index("</section>")]


def test_losses_come_from_the_full_sets_not_the_examples(tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "kip")
    save_test(run, "undertow", scenario="kip101-loss")
    results = json.loads((run / "results.json").read_text())
    examples = results["anomalies"]["lost-write"]
    assert len(examples) == 32 < results["counts"]["lost-write"]
    assert SMALL_KEY not in {e["key"] for e in examples}  # its loss is past the examples
    want = recount(run)
    assert want.per_key[BIG_KEY][0] == BIG_LOSS and want.per_key[SMALL_KEY][0] == 1
    html = render_run(run).read_text()
    box = _text(_box(html))
    pct = f"{100 * want.lost / want.acked:.1f} %"
    assert f"{want.lost:,} of {want.acked:,} acknowledged writes ({pct}) are on no replica, " \
           f"on {len(want.per_key)} keys" in box, box
    # the ranking: most lost first, every key that lost anything, with its offsets
    table = html[html.index('id="loss-table"'):]
    rows = re.findall(r'<tr><td class="num"><a href="#key-(\d+)">\d+</a></td>'
                      r'<td class="num">([\d,]+)</td><td class="num">(\d+)\u2013(\d+)</td>',
                      table[:table.index("</table>")])
    ranked = sorted(want.per_key.items(), key=lambda kv: (-kv[1][0], kv[0]))
    assert [(int(k), int(n.replace(",", "")), int(lo), int(hi)) for k, n, lo, hi in rows] == \
        [(k, n, lo, hi) for k, (n, lo, hi) in ranked]
    # the plots: in the same order, and each marks every lost write of its key
    figs = re.findall(r'<figure id="key-(\d+)">(.*?)</figure>', html, flags=re.S)
    order = [int(k) for k, _ in figs]
    assert order[:len(ranked)] == [k for k, _ in ranked]
    for k, body in figs:
        m = re.search(r'class="mark-lost" data-count="(\d+)"', body)
        assert (int(m.group(1)) if m else 0) == want.per_key.get(int(k), (0,))[0], k
    assert f"key {SMALL_KEY}: 1 lost, offset 4," in box
    assert "kip101-loss expects lost-write, replica-lost-write: found" in box
    # the replicas section names every key that lost acknowledged writes
    reps = html[html.index('id="replica-loss-table"'):]
    assert {int(k) for k in re.findall(r'<td class="num" rowspan="3">(\d+)</td>', reps)} == \
        set(want.per_key)


def test_a_valid_run_says_nothing_was_lost_and_names_our_broker(tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "ok", lose=False)
    test = save_test(run, "undertow")
    html = render_run(run).read_text()
    box = _text(_box(html))
    assert f"None of {recount(run).acked:,} acknowledged writes was lost" in box
    assert "undertow" in box and test["system_info"]["version"] in box
    assert "truncation = leader-epoch" in box and "undertow's Python client" in box
    assert "faults that landed: kill 1 time on n2 (1 landed)" in box


def test_a_kafka_report_shows_kafkas_settings_from_server_properties(tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "kafka")
    save_test(run, "kafka", broker={"min_insync_replicas": 1})
    html = render_run(run).read_text()
    box = _box(html)
    text = _text(box)
    assert "kafka 4.4.0" in text and "confluent-kafka (librdkafka)" in text
    assert "min.insync.replicas = 1" in text  # as written in every node's file
    assert "log.flush.interval.messages = not set (default)" in text
    assert "acks = all" in text and "enable.idempotence = yes" in text  # the client's
    assert 'href="./nodes/n1/server.properties"' in box
    for knob in ("truncation", "txn_epoch_fencing", "flush ="):  # our broker's knobs
        assert knob not in text, knob
    # the plan's step at 99 s never ran; the role A resolved to n2
    faults = html[html.index('id="fault-table"'):]
    faults = _text(faults[:faults.index("</table>")])
    assert "never ran (planned after the 30 s time limit)" in faults and "A = n2" in faults


def test_availability_reads_whatever_numbers_it_holds() -> None:
    av = {"sends": {"during_faults": {"ok_share": 0.412}, "longest_without_ok_s": 3.25},
          "windows": [{"polls_ok_share": 0.9}, {"polls_ok_share": 0.5}],
          "note": "free-form"}
    line = availability_line(av, None)
    assert "sends during faults ok share: 41.2 %" in line
    assert "sends longest without ok: 3.2 s" in line or "sends longest without ok: 3.3 s" in line
    assert "windows polls ok share: worst of 2: 50.0 %" in line
    assert "{" not in line
    assert availability_line(None, None).startswith("No fault was healed")


def test_the_index_shows_each_runs_first_line(tmp_path: Path) -> None:
    from harness.report.render import render_index

    results = tmp_path / "results"
    kafka = kip101_like(results / "kafka-run" / "20260101T000000Z")
    save_test(kafka, "kafka")
    ours = kip101_like(results / "ours" / "20260102T000000Z", lose=False)
    save_test(ours, "undertow")
    counts = json.loads((kafka / "results.json").read_text())
    lost = counts["counts"]["replica-lost-write"]
    sends = counts["stats"]["sends_ok"]
    html = _text(render_index(results).read_text())
    assert f"kafka 4.4.0 (kraft) · invalid · {lost:,} of {sends:,} acknowledged writes on no " \
           "replica" in html
    assert "undertow 0.1.0 · valid · no acknowledged write lost" in html
    assert lost == recount(kafka).lost  # the checker's count is the one recounted here


def test_each_example_says_when_and_under_which_faults(tmp_path: Path) -> None:
    from harness.report.faults import FaultWindow, in_force

    windows = [FaultWindow("n2", "kill", 10, 20, 0, label="kill"),
               FaultWindow("n3", "kill", 15, 30, 1, label="kill"),
               FaultWindow("all", "heal", 40, 40, 2)]
    assert in_force(windows, 16) == ["kill on n2, n3"]
    assert in_force(windows, 25) == ["kill on n3"] and in_force(windows, 35) == []
    run = kip101_like(tmp_path / "kip")
    html = render_run(run).read_text()
    whens = re.findall(r'<span class="when">(.*?):</span>', html)
    assert whens and all(re.fullmatch(r"at \d+\.\d s, (during .+|with no fault in force)", w)
                         for w in whens), whens[:3]
