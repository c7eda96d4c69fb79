"""Transactions in the report: each txn's outcome in the operations table, and records of
aborted transactions haloed on the per-key plots; from a small txn history, checked by the
real checkers (without Spark) and rendered."""

from __future__ import annotations

import re
from pathlib import Path

from checkers.api import check_local
from checkers.testing import HistoryBuilder
from harness.report.render import render_run


def _txn_history() -> HistoryBuilder:
    """p0 commits 1; p1 aborts 2 at the coin (fail); p2's commit of 3 is unknown (info); p3
    reads all three, 3 twice: G1a for 2, duplicate for 3; p4 is still in its txn at the end."""
    b = HistoryBuilder()
    b.txn(0, [(0, 1, 0)])
    b.invoke(1, "txn", [["send", 0, 2]], abort=True)
    b.complete(1, "txn", "fail", [["send", 0, 2]], abort=True, error="aborted")
    b.invoke(2, "txn", [["send", 0, 3]])
    b.complete(2, "txn", "info", [["send", 0, 3]], error="commit outcome unknown")
    b.txn(3, [], reads={0: [(0, 1), (1, 2), (2, 3), (3, 3)]})
    b.invoke(4, "txn", [["send", 0, 4]])
    return b


def _row(html: str, index: int) -> list[str]:
    m = re.search(rf'<tr id="op-{index}">(.*?)</tr>', html, re.S)
    assert m, f"op {index} is not in the ops table"
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>",
                                                                  m.group(1), re.S)]


def test_each_transactions_outcome_is_in_the_ops_table(tmp_path: Path) -> None:
    run = _txn_history().write(tmp_path / "txn")
    results = check_local(run, write=True)
    assert {"G1a", "duplicate"} <= set(results["bad_anomaly_types"]), results
    render_run(run)
    html = (run / "ops.html").read_text()  # the examples' operations, beside the report
    head = re.search(r'<table id="ops-table">\s*<tr>(.*?)</tr>', html, re.S)
    assert head and re.findall(r"<th[^>]*>(.*?)</th>", head.group(1))[5] == "outcome"
    # index, time, process, type, f, outcome, ...
    assert _row(html, 3)[3:6] == ["fail", "txn", "aborted"]  # p1's completion
    assert _row(html, 2)[3:6] == ["invoke", "txn", "aborted"]  # its invoke, by its completion
    assert _row(html, 5)[3:6] == ["info", "txn", "unknown"]  # p2
    assert _row(html, 7)[3:6] == ["ok", "txn", "committed"]  # p3, the reader
    assert 'class="txn-aborted"' in html and 'class="txn-committed"' in html


def test_records_of_aborted_transactions_are_marked_on_the_key_plot(tmp_path: Path) -> None:
    run = _txn_history().write(tmp_path / "txn")
    check_local(run, write=True)
    html = render_run(run).read_text()
    fig = re.search(r'<figure id="key-0">(.*?)</figure>', html, re.S)
    assert fig, "no plot of key 0"
    caption = re.sub(r"<[^>]+>", "", fig.group(1).split("</figcaption>")[0])
    assert "aborted, read at 1" in caption and "aborted, read at 1," not in caption
    assert '<g class="aborted"><title>records of aborted transactions, read: 1</title>' \
        in fig.group(1)


def test_a_history_without_transactions_has_no_outcome_column(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 0, 1, 0)
    b.send(1, 0, 2, 1)
    b.poll(2, {0: [(0, 1), (1, 2), (2, 1)]})  # duplicate: the ops table is not empty
    run = b.write(tmp_path / "queue")
    check_local(run, write=True)
    html = render_run(run).read_text()
    ops = (run / "ops.html").read_text()
    assert 'id="op-0"' in ops
    assert ">outcome</th>" not in ops and 'class="txn-' not in ops and 'class="txn-' not in html
    assert 'class="aborted"' not in html
