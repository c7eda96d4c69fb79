"""Anomaly examples, cycles, the fault plan and the settings read as words, never JSON."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness.report.faultlog import fault_rows
from harness.report.plan import describe
from harness.report.sections import settings, stats
from harness.report.sentences import OpFacts, Sentence, cycle_steps, op_words, sentence


def said(parts: Sentence) -> str:
    return "".join(text for text, _ in parts)


def linked(parts: Sentence) -> list[int]:
    return [i for _, i in parts if i is not None]


def test_lost_write_reads_as_the_documented_sentence() -> None:
    ex = {"key": 1, "value": 26488, "offset": 1254, "writer": 30, "index": 106027,
          "max_read_offset": 2547}
    parts = sentence("lost-write", ex, {(1, 2547): 106049}, {})
    assert said(parts) == ("value 26488 was acknowledged at offset 1254 of key 1 (op 106027, "
                           "process 30) and never read, although op 106049 read key 1 up to "
                           "offset 2547")
    assert linked(parts) == [106027, 106049]


PAIR = {"key": 3, "process": 4, "indices": [10, 20], "offsets": [7, 9], "values": [70, 90]}
# every anomaly type of HISTORY.md that is not a cycle, in the shape the checkers give
EXAMPLES: dict[str, dict[str, Any]] = {
    "inconsistent-offsets": {"key": 1, "offset": 114, "values": [500, 509]},
    "duplicate": {"key": 1, "value": 5, "offsets": [3, 8]},
    "lost-write": {"key": 1, "value": 500, "offset": 114, "writer": 2, "index": 1999,
                   "max_read_offset": 222},
    "unseen": {"key": 1, "value": 5, "offset": None, "writer": 2, "index": 9},
    "poll-skip": PAIR, "nonmonotonic-poll": PAIR, "int-poll-skip": PAIR,
    "int-nonmonotonic-poll": PAIR, "nonmonotonic-send": PAIR, "int-send-skip": PAIR,
    "int-nonmonotonic-send": PAIR,
    "G1a": {"key": 2, "value": 17, "reader_index": 40, "writer_index": 30},
    "precommitted-read": {"key": 2, "value": 17, "index": 40},
    "replica-lost-write": {"key": 1, "value": 500, "offset": 114, "index": 1999, "writer": 2},
    "stale-committed-offset": {"group": "", "key": 3, "index": 130, "process": 7,
                               "returned": 640, "asked_ns": 13_100_000_000,
                               "answered_ns": 13_200_000_000, "written_ever": True,
                               "writer_index": 120, "writer_process": 4, "committed": 812,
                               "acknowledged_ns": 12_400_000_000},
}


def test_stale_committed_offset_in_words() -> None:
    text = said(sentence("stale-committed-offset", EXAMPLES["stale-committed-offset"], {}, {}))
    assert text == ("process 4 committed offset 812 for key 3 at 12.4 s (op 120), "
                    "acknowledged; process 7 asked (op 130) at 13.1 s and was told 640"), text
    never = said(sentence("stale-committed-offset",
                          {"group": "g", "key": 0, "index": 5, "process": 1, "returned": None,
                           "asked_ns": 2_000_000, "written_ever": False}, {}, {}))
    assert never == ("for key 0 of group 'g', process 1 asked (op 5) at 2.000 ms and was told "
                     "none (null), an offset no commit wrote, which no order of its commits "
                     "allows"), never


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_anomaly_type_has_a_sentence(kind: str) -> None:
    parts = sentence(kind, EXAMPLES[kind], {}, {5: [1, 2], 500: [3], 509: [4]})
    text = said(parts)
    assert not re.search(r"[{}\[\]]", text), text
    assert "key" in text and kind not in text, text  # says what happened, not the type's name
    assert linked(parts), "names its operations"


def test_replica_divergence_both_shapes() -> None:
    a = said(sentence("replica-divergence", {"key": 4, "offset": 9,
                                             "values": {"n1": 90, "n2": 91}}, {}, {}))
    assert a == "the replicas disagree at committed offset 9 of key 4: n1 holds 90 and n2 holds 91"
    b = said(sentence("replica-divergence", {"key": 4, "nodes": ["n1", "n3"],
                                             "only_in_first": [5, 6], "only_in_second": []},
                      {}, {}))
    assert "offsets 5 and 6 only on n1" in b and "none only on n3" in b


def test_a_cycle_reads_as_steps_with_a_run_of_writes_folded() -> None:
    # ops 1..5 wrote key 5 at offsets 363..367 in turn, op 9 read op 5's value, and op 9
    # completed before op 1 was invoked: the cycle closes
    facts = {i: OpFacts(i, process=i, f="send", type="ok", sends=[(5, 1000 + i, 362 + i)])
             for i in range(1, 6)}
    facts[9] = OpFacts(9, process=9, f="poll", type="ok", reads={5: [(367, 1005)]})
    ex = {"ops": [1, 2, 3, 4, 5, 9], "edges": ["ww", "ww", "ww", "ww", "wr", "realtime"],
          "processes": [1, 2, 3, 4, 5, 9], "sends": [1] * 5 + [0], "component_size": 8}
    head, steps = cycle_steps(ex, facts, {})
    assert said(head).startswith("a cycle of 6 operations (in a strongly connected group of 8)")
    lines = [said(s) for s in steps]
    assert lines == [
        "key 5, offsets 363 to 367: 5 writes in offset order, from op 1 to op 5 (write-write)",
        "op 5 sent 1005 to key 5 at offset 367; op 9 read it (write-read)",
        "op 9 completed before op 1 was invoked (real time)",
    ]
    assert linked(steps[0]) == [1, 5]


def test_plan_steps_say_targets_and_grudges_in_words() -> None:
    from harness.faultkinds import KINDS

    test = {"nemesis_plan": [
        {"at_s": 3.9, "f": "partition", "value": {"target": "minority", "kind": "random-halves",
                                                  "grudge": {"n1": ["n2", "n3"], "n2": ["n1"]}}},
        {"at_s": 4.1, "f": "pause", "value": {"target": "one", "nodes": ["n3"]}},
        {"at_s": 5.0, "f": "kill", "value": {"target": "leader", "key": 2}},
        {"at_s": 6.3, "f": "clock-bump", "value": {"target": "controller", "key": 6,
                                                   "delta_ns": 6118795280}},
        {"at_s": 7.7, "f": "heal", "value": {}}]}
    rows = fault_rows(test, [], KINDS, end_ns=10_000_000_000)
    assert [(r.at_s, r.fault) for r in rows][:2] == [("3.9", "partition"), ("4.1", "pause")]
    assert rows[0].planned == ("minority (random-halves): n1 drops traffic from n2 and n3; "
                               "n2 drops traffic from n1")
    assert rows[1].planned == "one: n3"
    assert rows[2].planned == "leader: the leader of key 2, found when injected"
    assert "clock moved +6.12 s" in rows[3].planned
    assert rows[4].planned == "all nodes"
    assert {r.status for r in rows} == {"never ran"}
    assert describe({"role": "A"}) == ("—", "the node called A")


def test_no_settings_or_stats_cell_holds_json_of_several_values() -> None:
    test = {"nemesis": ["kill", "partition"], "nodes": ["n1", "n2", "n3"], "extra": {},
            "broker": {"acks": "all", "flush": None}, "nemesis_plan": [{"at_s": 1, "f": "x"}],
            "nemesis_phases": [["steady", 0, 12]]}
    rows = dict(settings(test))
    assert rows["nemesis"] == "kill, partition" and rows["nodes"] == "n1, n2, n3"
    assert "nemesis_plan" not in rows and rows["extra"] == "none"
    st = dict(stats({"stats": {"ops": 5, "liveness": {"ok": True}, "x": {"a": 1}}}))
    assert st == {"ops": "5", "x.a": "1"}


def test_operation_values_in_words() -> None:
    assert op_words("send", [["send", 0, [2, 102]]]) == "send 102 to key 0 at offset 2"
    assert op_words("poll", [["poll", {"0": [[0, 1], [1, 2], [3, 4]]}]]) == \
        "poll: key 0 offsets 0 to 3 (3 records)"
    assert op_words("kill", {"nodes": ["n1", "n2"]}) == "n1 and n2"
    assert op_words("commit", [["commit", {"3": 812}]]) == "commit key 3 at 812"
    assert op_words("committed", [["committed", [3, 4]]]) == "committed? keys 3 and 4"
    assert op_words("committed", [["committed", {"3": 812, "4": None}]]) == \
        "committed: key 3 at 812, key 4 none"
