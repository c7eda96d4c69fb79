"""The txn workload: generator shapes (simulated), and our client's transactions on real brokers."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import core
from harness import generator as g
from harness.protocols import Run
from harness.runfiles import Op, RunPaths
from harness.spec import build_spec
from workloads import txn


def test_transactions_have_unique_values_two_sends_or_none_and_some_abort() -> None:
    spec = build_spec({"keys": 4, "max_writes_per_key": 1000, "workload": "txn"})
    h = g.simulate(g.clients(g.limit(600, txn.generator(spec))), concurrency=5, seed=4)
    inv = [o for o in h if o.type == "invoke"]
    txns = [o for o in inv if o.f == "txn"]
    assert {o.f for o in inv} == {"txn", "assign"} and len(txns) > 400
    sends = [m for o in txns for m in o.value if m[0] == "send"]
    values = [m[2] for m in sends]
    assert len(values) == len(set(values)) and all(0 <= m[1] < 4 for m in sends)
    counts = {sum(m[0] == "send" for m in o.value) for o in txns}
    assert 1 not in counts and 0 in counts and max(counts) >= 3
    assert all(m == ["poll"] for o in txns for m in o.value if m[0] != "send")
    aborts = sum(bool(o.extra.get("abort")) for o in txns)
    assert 0.2 < aborts / len(txns) < 0.4


def _poll_until(c: Any, run: Run, want: int, timeout_s: float = 20) -> dict[int, int]:
    """Poll until `want` values were read; value -> offset."""
    got: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        p = c.invoke(run, Op("invoke", 9, "poll", [["poll"]]))
        assert p.type == "ok", p
        for _k, recs in p.value[0][1].items():
            got.update({v: o for o, v in recs})
        time.sleep(0.05)
    return got


@pytest.mark.slow
def test_committed_and_aborted_transactions_under_both_isolation_levels(tmp_path: Path) -> None:
    from harness.control.local import LocalBackend
    from systems.undertow.queue_client import QueueClient
    from systems.undertow.txn_client import TxnClient

    spec = build_spec({"keys": 2, "key_pool": 2, "node_count": 3, "workload": "txn",
                       "results_dir": str(tmp_path)})
    paths = RunPaths(tmp_path / "run")
    for n in spec.nodes:
        paths.node_dir(n).mkdir(parents=True)
    run = Run(spec=spec, nodes=spec.nodes, paths=paths, log=logging.getLogger("t.txn"))
    backend = LocalBackend()
    try:
        core.cluster_up(backend, run)

        def queue(isolation: str | None = None) -> QueueClient:
            return QueueClient(keys=2, timeout_s=10, retries=3, enable_idempotence=True,
                               isolation=isolation)

        def client(isolation: str) -> TxnClient:
            return TxnClient(queue(isolation)).open(run, "n1")

        w = client("read_committed")
        ok = w.invoke(run, Op("invoke", 0, "txn", [["send", 0, 1], ["send", 1, 2]]))
        assert ok.type == "ok" and [m[2][1] for m in ok.value] == [1, 2], ok
        aborted = w.invoke(run, Op("invoke", 0, "txn", [["send", 0, 3], ["send", 1, 4]],
                                   extra={"abort": True}))
        assert aborted.type == "fail" and aborted.error == "aborted", aborted
        last = w.invoke(run, Op("invoke", 0, "txn", [["send", 0, 5], ["send", 0, 6]]))
        assert last.type == "ok", last
        readers = {iso: client(iso) for iso in ("read_committed", "read_uncommitted")}
        for r in readers.values():
            assert r.invoke(run, Op("invoke", 9, "assign", [0, 1],
                                    extra={"seek_to_beginning": True})).type == "ok"
        assert set(_poll_until(readers["read_uncommitted"], run, 6)) == {1, 2, 3, 4, 5, 6}
        committed = _poll_until(readers["read_committed"], run, 4)
        assert set(committed) == {1, 2, 5, 6}
        # a transaction's polls read at its isolation level, never its own open sends
        mixed = readers["read_committed"].invoke(
            run, Op("invoke", 9, "assign", [0], extra={"seek_to_beginning": True}))
        assert mixed.type == "ok"
        own = readers["read_committed"].invoke(
            run, Op("invoke", 9, "txn", [["send", 0, 7], ["send", 0, 8], ["poll"]]))
        assert own.type == "ok", own
        polled = {v for _o, v in own.value[2][1].get("0", [])}
        assert polled == {1, 5, 6}
        # fenced between its sends and its commit (another client took its transactional.id):
        # the commit is refused, reported aborted, and its next transaction begins anew
        shared = TxnClient(queue(), shared_ids=1)
        a, b = shared.open(run, "n1"), shared.open(run, "n1")
        assert a.begin({0}) is None and a.send_run([(0, 9)])[1] is None
        assert b.invoke(run, Op("invoke", 1, "txn", [["send", 1, 10]])).type == "ok"
        assert a.commit() == ("fail", "aborted")
        assert a.invoke(run, Op("invoke", 0, "txn", [["send", 0, 11]])).type == "ok"
        # --txn-sends at-commit: the sends wait for the commit, which sends them first; when
        # they fail (fenced by another client with its transactional.id), the commit fails
        # and is answered by an abort
        flushing = TxnClient(queue(), shared_ids=1, sends="at-commit")
        later, other = flushing.open(run, "n1"), flushing.open(run, "n1")
        flushed = later.invoke(run, Op("invoke", 2, "txn", [["send", 0, 12], ["poll"],
                                                             ["send", 1, 13]]))
        assert flushed.type == "ok", flushed
        assert [m[2][1] for m in flushed.value if m[0] == "send"] == [12, 13], flushed
        assert later.begin({0}) is None and later.send_async([(0, 14)]) is None
        assert other.invoke(run, Op("invoke", 3, "txn", [["send", 1, 15]])).type == "ok"
        typ, why = later.commit()
        assert typ == "fail" and (why or "").startswith("aborted after "), (typ, why)
        assert later.sent() == [None]
        assert later.invoke(run, Op("invoke", 2, "txn", [["send", 1, 16]])).type == "ok"
        # what key 0 (the reader's, since `mixed`) committed since, and not 14 (5 asked:
        # it waits out 3 s)
        assert set(_poll_until(readers["read_committed"], run, 5, timeout_s=3)) == \
            {7, 8, 11, 12}
        for c in (w, a, b, later, other, *readers.values()):
            c.close(run)
    finally:
        core.cluster_down(backend, run)


def test_settle_gives_the_sends_handed_to_the_producer_their_offsets() -> None:
    done: list[list[Any]] = [["send", 0, 1], ["poll", {"0": [[4, 9]]}], ["send", 1, 2],
                             ["send", 0, 3]]
    assert txn.settle(done, [5, None]) == [
        ["send", 0, [5, 1]], ["poll", {"0": [[4, 9]]}], ["send", 1, 2], ["send", 0, 3]]
    assert txn.settle(done, []) == done


def test_txn_sends_is_the_txn_workloads_option_and_queue_refuses_it() -> None:
    from harness.spec import SpecError
    from workloads.options import QueueOptions, TxnOptions

    spec = build_spec({"workload": "txn", "extra": {"txn_sends": "at-commit"}})
    assert TxnOptions.of(spec).txn_sends == "at-commit"
    assert QueueOptions.of(spec).keys == TxnOptions.of(spec).keys  # the shared ones read alike
    assert TxnOptions.of(build_spec({"workload": "txn"})).txn_sends == "awaited"
    with pytest.raises(SpecError, match="txn_sends"):
        build_spec({"workload": "txn", "extra": {"txn_sends": "later"}})
    with pytest.raises(SpecError, match="txn_sends"):
        build_spec({"workload": "queue", "extra": {"txn_sends": "at-commit"}})


def test_with_subscribe_each_process_subscribes_first_and_no_assign_comes(
        tmp_path: Path) -> None:
    spec = build_spec({"keys": 4, "key_pool": 6, "workload": "txn", "sub_via": "subscribe"})

    def slow_ok(o: Op, rng: object) -> tuple[int, Any]:
        return 20_000_000, "ok"

    h = g.simulate(g.clients(g.time_limit(20, txn.generator(spec))), concurrency=5, seed=3,
                   complete=slow_ok)
    inv = [o for o in h if o.type == "invoke"]
    assert {o.f for o in inv} == {"txn", "subscribe"}
    first: dict[object, Op] = {}
    for o in inv:
        first.setdefault(o.process, o)
    assert len(first) == 5 and all(o.f == "subscribe" and o.value == list(range(6))
                                   for o in first.values())
    assert any(o.extra.get("rejoin") for o in inv if o.f == "subscribe")
    # the final phase leaves the group and asks its committed offsets, as the queue's does
    history = tmp_path / "history.jsonl"
    history.write_text("")
    test: Any = SimpleNamespace(spec=spec)
    final_gen = txn.workload.final_generator(test, history)
    assert final_gen is not None
    final = g.simulate(g.clients(final_gen), concurrency=3)
    assert [o.extra for o in final if o.type == "invoke"][3] == {"fetch_committed": True}


@pytest.mark.slow
def test_a_short_consume_transform_produce_run_with_faults_reads_each_offset_once(
        tmp_path: Path) -> None:
    """--sub-via subscribe on our broker, kills and pauses: valid, and every offset below the
    group's final committed positions was read by exactly one committed transaction."""
    import json

    from harness.report.groups import exactly_once

    spec = build_spec({"name": "txn-subscribe", "workload": "txn", "sub_via": "subscribe",
                       "time_limit_s": 20.0, "nemesis": ("kill", "pause"),
                       "nemesis_interval_s": 5.0, "seed": 3, "keys": 6, "concurrency": 6,
                       "results_dir": str(tmp_path)})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    ops = [json.loads(x) for x in (outcome.run_dir / "history.jsonl").read_text().splitlines()]
    eos = exactly_once(ops)
    assert eos is not None and eos.committed_index is not None
    assert eos.holds, [k for k in eos.keys if k.unread or k.repeated]
    assert eos.transactions >= 2 and sum(k.once for k in eos.keys) >= 5  # loaded machines
    assert "exactly-once" in (outcome.run_dir / "report.html").read_text()
