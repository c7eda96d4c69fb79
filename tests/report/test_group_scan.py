"""The report's group sections (delivery, exactly-once, membership lanes) come from its one
scan of the history, which drives a harness.report.groups.GroupFeed: they must equal what
harness.report.groups computes on the same history.jsonl alone, read here with plain JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.report.groups import Held, exactly_once, group_delivery, membership
from harness.report.render import render_run, report_context
from harness.runfiles import load_run


def _alone(run_dir: Path) -> tuple[Any, Any, Any]:
    ops = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()
           if x.strip()]
    return group_delivery(ops), exactly_once(ops), membership(ops)


def _line(i: int, typ: str, p: Any, f: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"index": i, "time": i, "type": typ, "process": p, "f": f, "value": value, **extra}


def _group_history() -> list[dict[str, Any]]:
    """A plain sender writes key 0's offsets 0 and 1 before anyone subscribes (known all the
    same), then 2 and 3; processes 0 and 1 join the group; 0 reads offset 1 in a committed
    txn and 1 reads 1 and 2 in one of unknown outcome; the final committed positions pass
    0 and 3, which nobody read; polls report their generation and assignment."""
    return [
        _line(0, "invoke", 9, "send", [["send", 0, 10], ["send", 0, 11]]),
        _line(1, "ok", 9, "send", [["send", 0, [0, 10]], ["send", 0, [1, 11]]]),
        _line(2, "invoke", "nemesis", "kill", {"nodes": ["n1"]}),
        _line(3, "info", "nemesis", "kill", {"nodes": ["n1"]}),
        _line(4, "invoke", 0, "subscribe", [0]),
        _line(5, "ok", 0, "subscribe", [0]),
        _line(6, "invoke", 1, "subscribe", [0]),
        _line(7, "ok", 1, "subscribe", [0]),
        _line(8, "invoke", 9, "send", [["send", 0, 12], ["send", 0, 13]]),
        _line(9, "ok", 9, "send", [["send", 0, [2, 12]], ["send", 0, [3, 13]]]),
        _line(10, "invoke", 0, "txn", [["poll"]]),
        _line(11, "ok", 0, "txn", [["poll", {"0": [[1, 11]]}]], generation=1,
              assignment=[0]),
        _line(12, "invoke", 1, "txn", [["poll"]]),
        _line(13, "info", 1, "txn", [["poll", {"0": [[1, 11], [2, 12]]}]], generation=2,
              assignment=[0]),
        _line(14, "invoke", 0, "poll", [["poll"]]),
        _line(15, "ok", 0, "poll", [["poll", {}]], generation=2, assignment=[]),
        _line(16, "invoke", 3, "assign", [], fetch_committed=True),
        _line(17, "ok", 3, "assign", [], fetch_committed=True, committed={"0": 4}),
    ]


def test_the_reports_group_sections_equal_the_checkers_on_a_group_history(
        make_run: Any) -> None:
    run_dir = make_run("group", _group_history())
    group, eos, held = _alone(run_dir)
    # by hand: offsets 0-3 of key 0 are known (0 only from the send before anyone
    # subscribed), the group read 1 and 2, only 1 in a committed transaction
    assert group is not None and [(k.key, k.committed, k.known_below, k.read_below, k.missing)
                                  for k in group.keys] == [(0, 4, 4, 2, (0, 3))]
    assert eos is not None and eos.transactions == 1 and [
        (k.once, k.unread, k.uncertain, k.repeated) for k in eos.keys] == [(1, (0, 3), (2,), ())]
    assert held == [Held(0, 11, 15, 1, (0,)), Held(1, 13, 13, 2, (0,))]
    ctx = report_context(load_run(run_dir))
    assert ctx["group"] == group and ctx["eos"] == eos
    html = render_run(run_dir).read_text()
    for h in held:  # the lanes drawn from the scan's membership
        assert f"process {h.process}, generation {h.generation}, keys 0" in html


@pytest.mark.parametrize("name", ["clean", "truncated"])
def test_a_run_without_a_group_has_no_group_section(example_run: Any, name: str) -> None:
    """The shared example run folders (real files of the contract) have no `subscribe`."""
    run_dir = example_run(name)
    assert _alone(run_dir)[:2] == (None, None)
    ctx = report_context(load_run(run_dir))
    assert ctx["group"] is None and ctx["eos"] is None
    assert 'id="group-delivery"' not in render_run(run_dir).read_text()
