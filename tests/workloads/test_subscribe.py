"""`--sub-via subscribe`: the generators' shapes (fast), and short runs on our broker whose
consumers share the keys through one consumer group (slow)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import core
from harness import generator as g
from harness.runfiles import Op, OpType
from harness.spec import SpecError, build_spec
from workloads import queue
from workloads.keys import KeyRing
from workloads.options import partitions

MS = 1_000_000


def slow_ok(o: Op, rng: object) -> tuple[int, OpType]:
    """Each op takes 20 ms: a simulated half minute stays a few thousand ops."""
    return 20 * MS, "ok"


def test_each_process_subscribes_to_every_key_before_its_first_send_or_poll() -> None:
    spec = build_spec({"keys": 4, "key_pool": 6, "sub_via": "subscribe"})
    h = g.simulate(g.clients(g.time_limit(20, queue.generator(spec))), concurrency=5, seed=3,
                   complete=slow_ok)
    inv = [o for o in h if o.type == "invoke"]
    assert {o.f for o in inv} == {"send", "poll", "subscribe"}
    first: dict[object, Op] = {}
    for o in inv:
        first.setdefault(o.process, o)
    assert all(o.f == "subscribe" for o in first.values()) and len(first) == 5
    subs = [o for o in inv if o.f == "subscribe"]
    assert all(o.value == list(range(6)) for o in subs)
    rejoins = [o for o in subs if o.extra.get("rejoin")]
    assert rejoins  # processes leave and rejoin now and then
    assert any(not o.extra for o in first.values())


def test_crashes_come_at_the_interval_and_assign_mode_is_unchanged() -> None:
    spec = build_spec({"keys": 4, "crash_client_interval_s": 1.0})
    h = g.simulate(g.clients(g.time_limit(20, queue.generator(spec))), concurrency=5, seed=3,
                   complete=slow_ok)
    crashes = [o for o in h if o.type == "invoke" and o.f == "crash"]
    assert 8 <= len(crashes) <= 40 and all(o.value is None for o in crashes)
    plain = build_spec({"keys": 4})
    a = g.simulate(g.clients(g.limit(300, queue.generator(plain))), concurrency=5, seed=3)
    ops = queue.QueueOps(KeyRing.start(4, partitions(plain), 1024))
    b = g.simulate(g.clients(g.limit(300, ops)), concurrency=5, seed=3)
    assert [(o.f, o.value) for o in a] == [(o.f, o.value) for o in b]


def test_final_reads_start_with_every_process_leaving_and_the_committed_offsets() -> None:
    spec = build_spec({"keys": 2, "sub_via": "subscribe"})
    h = g.simulate(g.clients(queue.final_generator(spec, {})), concurrency=3)
    inv = [o for o in h if o.type == "invoke"]
    assert [(o.f, o.value) for o in inv] == [("assign", [])] * 4
    assert sorted(o.process for o in inv[:3]) == [0, 1, 2]
    assert inv[3].extra == {"fetch_committed": True}


@pytest.mark.parametrize(("over", "says"), [
    ({"sub_via": "both"}, "--sub-via"),
    ({"consumer": {"commit": "sometimes"}}, "--commit"),
    ({"consumer": {"assignor": "cooperative-sticky"}}, "--assignor"),
    ({"consumer": {"auto_commit_interval_ms": 0}}, "--auto-commit-interval-ms"),
    ({"crash_client_interval_s": 0}, "--crash-client-interval"),
])
def test_bad_consumer_settings_are_refused(over: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        build_spec(over)


def run_ops(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_short_subscribe_run_with_faults_on_the_coordinator_is_valid(tmp_path: Path) -> None:
    spec = build_spec({"name": "subscribe", "sub_via": "subscribe", "time_limit_s": 20.0,
                       "nemesis": ("kill", "pause", "partition"), "nemesis_interval_s": 5.0,
                       "nemesis_targets": ("coordinator",),
                       "seed": 5, "keys": 6, "key_pool": 6, "concurrency": 6,
                       "results_dir": str(tmp_path)})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    ops = run_ops(outcome.run_dir)
    fs = Counter((o["f"], o["type"]) for o in ops)
    assert fs["subscribe", "ok"] >= 6 and fs["assign", "invoke"] >= 7
    readers = {o["process"] for o in ops if o["f"] == "poll" and o["type"] == "ok"
               and "generation" in o and o["value"][0][1]}
    assert len(readers) >= 3  # the group spread the keys over several members
    final = [o for o in ops if o["type"] == "ok" and o.get("fetch_committed")]
    assert len(final) == 1 and final[0]["committed"]
    # each fault hit the node coordinating the group then, and says who took over
    hits = [o["value"] for o in ops if o["process"] == "nemesis" and o["type"] == "info"
            and o["f"] in ("kill", "pause")]
    assert hits and all(v["target"] == "coordinator" and v["nodes"] == [v["coordinator"]]
                        for v in hits)


@pytest.mark.slow
@pytest.mark.parametrize("commit", ["auto", "processed"])
def test_consumers_killed_mid_batch_skip_offsets_only_when_commits_run_ahead(
        tmp_path: Path, commit: str) -> None:
    """Auto-commit every 100 ms commits a batch a consumer then dies holding: the group never
    returns those offsets. Committing only what was handed on leaves none behind."""
    from harness.report.groups import group_delivery
    from harness.report.render import report_context
    from harness.runfiles import load_run

    spec = build_spec({"name": f"crash-{commit}", "sub_via": "subscribe", "time_limit_s": 20.0,
                       "nemesis": (), "crash_client_interval_s": 2.0, "seed": 3, "keys": 2,
                       "key_pool": 4, "concurrency": 4, "results_dir": str(tmp_path),
                       "consumer": {"commit": commit, "auto_commit_interval_ms": 100,
                                    "session_timeout_ms": 2000}})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    ops = run_ops(outcome.run_dir)
    assert sum(o["f"] == "crash" and o["type"] == "info" for o in ops) >= 3
    got = group_delivery(ops)
    assert got is not None and got.committed_index is not None and got.keys
    # the report's section, gathered in its one scan of the history, is the same
    assert report_context(load_run(outcome.run_dir))["group"] == got
    report = (outcome.run_dir / "report.html").read_text()
    assert 'id="group-delivery"' in report
    if commit == "auto":
        assert got.missing > 0 and not got.complete
        first = next(k for k in got.keys if k.missing)
        assert ", ".join(map(str, first.missing[:3])) in report
    else:
        assert got.complete, [k for k in got.keys if k.missing]
