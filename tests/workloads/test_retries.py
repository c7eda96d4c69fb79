"""Producer retries against real brokers: a send whose acknowledgement was lost is sent again,
and without idempotence the record is then written twice; the history says so as the
contract does (`ok` at the acknowledged offset, `duplicate` for the checker)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker.localcluster import LocalCluster

from checkers.api import check_local
from checkers.testing import HistoryBuilder
from harness.runfiles import Op
from systems.undertow.client import BrokerClient, admin_request
from systems.undertow.pipeline import Result, produce_many
from systems.undertow.queue_client import QueueClient

SETTINGS = {"min.insync.replicas": 2, "broker.session.timeout.ms": 1500,
            "test.controls.enable": True, "replica.lag.time.max.ms": 60_000}
KEY = 0  # led by n1; n2 and n3 follow it


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "c", settings=SETTINGS, partitions=1)
    try:
        c.start_all()
        c.wait_ready(15)
        yield c
    finally:
        c.close()


def _fetchers(cluster: LocalCluster, action: str) -> None:
    for n in ("n2", "n3"):
        admin_request(cluster.addrs[n], {"type": "test_fetcher", "action": action})


def _resume_later(cluster: LocalCluster, after_s: float) -> threading.Thread:
    def resume() -> None:
        threading.Event().wait(after_s)
        _fetchers(cluster, "resume")

    t = threading.Thread(target=resume)
    t.start()
    return t


def _record(b: HistoryBuilder, invoke: Op, done: Op) -> None:
    b.invoke(int(invoke.process), invoke.f, invoke.value, **invoke.extra)
    extra = {"error": done.error} if done.error else {}
    b.complete(int(done.process), done.f, done.type, done.value, **extra)


@pytest.mark.slow
def test_retried_send_without_idempotence_is_written_twice(cluster: LocalCluster,
                                                           tmp_path: Path) -> None:
    # The followers stop fetching: the leader appends each attempt but cannot commit it, so
    # every attempt times out unanswered, as if its acknowledgement were lost. The followers
    # come back while the client is still retrying, and every attempt then commits.
    _fetchers(cluster, "pause")
    threading.Event().wait(0.6)  # in-flight long polls end
    conn = BrokerClient(cluster.addrs, timeout_s=10, retries=5, request_timeout_s=0.5)
    client = QueueClient(keys=1, timeout_s=10, retries=5, request_timeout_s=0.5, conn=conn)
    b = HistoryBuilder()
    resumer = _resume_later(cluster, 1.3)
    try:
        send = Op("invoke", 0, "send", [["send", KEY, 42]])
        sent = client.invoke(None, send)  # type: ignore[arg-type]
        resumer.join()
        _record(b, send, sent)
        assert sent.type == "ok", sent
        [[_f, _k, [offset, value]]] = sent.value
        assert value == 42 and offset >= 1  # an earlier attempt holds offset 0
        log = conn.fetch(KEY, 0)
        assert [o for o, v in log if v == 42] == list(range(offset + 1))
        reader = QueueClient(keys=1, conn=conn)
        assign = Op("invoke", 1, "assign", [KEY], extra={"seek_to_beginning": True})
        _record(b, assign, reader.invoke(None, assign))  # type: ignore[arg-type]
        poll = Op("invoke", 1, "poll", [["poll"]])
        _record(b, poll, reader.invoke(None, poll))  # type: ignore[arg-type]
    finally:
        resumer.join()
        conn.close()
    results = check_local(b.write(tmp_path / "run"))
    assert results["valid"] is False
    assert results["bad_anomaly_types"] == ["duplicate"], results
    assert results["counts"]["duplicate"] == 1
    [example] = results["anomalies"]["duplicate"]
    assert example["key"] == KEY and example["value"] == 42


@pytest.mark.slow
def test_a_send_that_runs_out_of_retries_is_unknown(cluster: LocalCluster) -> None:
    _fetchers(cluster, "pause")
    threading.Event().wait(0.6)
    conn = BrokerClient(cluster.addrs, timeout_s=10, retries=2, request_timeout_s=0.4)
    client = QueueClient(keys=1, retries=2, conn=conn)
    try:
        done = client.invoke(None, Op("invoke", 0, "send", [["send", KEY, 7]]))  # type: ignore[arg-type]
        assert done.type == "info" and "REQUEST_TIMED_OUT" in str(done.error), done
        _fetchers(cluster, "resume")
        # three attempts, each appended: all of them commit once the followers fetch again
        cluster.wait(lambda: conn.fetch(KEY, 0) == [(0, 7), (1, 7), (2, 7)], 10, "3 copies")
    finally:
        conn.close()


@pytest.mark.slow
def test_retried_send_with_idempotence_is_written_once(cluster: LocalCluster,
                                                       tmp_path: Path) -> None:
    # the same lost acknowledgements as above; the leader sees the resends' sequence number
    # and answers each with the first attempt's offset
    _fetchers(cluster, "pause")
    threading.Event().wait(0.6)
    conn = BrokerClient(cluster.addrs, timeout_s=10, retries=5, request_timeout_s=0.5,
                        enable_idempotence=True)
    client = QueueClient(keys=1, conn=conn)
    b = HistoryBuilder()
    resumer = _resume_later(cluster, 1.3)
    try:
        send = Op("invoke", 0, "send", [["send", KEY, 42]])
        sent = client.invoke(None, send)  # type: ignore[arg-type]
        resumer.join()
        _record(b, send, sent)
        assert sent.type == "ok" and sent.value == [["send", KEY, [0, 42]]], sent
        send = Op("invoke", 0, "send", [["send", KEY, 43]])
        sent = client.invoke(None, send)  # type: ignore[arg-type]
        _record(b, send, sent)
        assert sent.value == [["send", KEY, [1, 43]]]  # the next sequence number
        assert conn.fetch(KEY, 0) == [(0, 42), (1, 43)]
        poll = Op("invoke", 1, "poll", [["poll"]])
        reader = QueueClient(keys=1, conn=conn)
        reader.invoke(None, Op("invoke", 1, "assign", [KEY]))  # type: ignore[arg-type]
        _record(b, poll, reader.invoke(None, poll))  # type: ignore[arg-type]
    finally:
        resumer.join()
        conn.close()
    results = check_local(b.write(tmp_path / "run"))
    assert results["valid"] is True and not results["anomaly_types"], results


@pytest.mark.slow
@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_requests_in_flight_then_resent_in_order(cluster: LocalCluster, idempotent: bool) -> None:
    # Three sends of one operation go out together (max.in.flight 3) while the followers
    # do not fetch: the leader appends all three, none is answered in time, and each is
    # sent again on its own, in order, once the followers are back.
    _fetchers(cluster, "pause")
    threading.Event().wait(0.6)
    conn = BrokerClient(cluster.addrs, timeout_s=10, retries=4, request_timeout_s=0.6,
                        enable_idempotence=idempotent, max_in_flight=3)
    resumer = _resume_later(cluster, 1.0)
    try:
        results = produce_many(conn, [(KEY, 51), (KEY, 52), (KEY, 53)])
        resumer.join()
        log = conn.fetch(KEY, 0)
    finally:
        resumer.join()
        conn.close()
    offsets = [r for r in results if isinstance(r, int)]
    assert len(offsets) == 3, results
    assert [dict(log)[o] for o in offsets] == [51, 52, 53]
    assert [v for _o, v in log[:3]] == [51, 52, 53]  # the first attempts, in flight together
    if idempotent:
        assert offsets == [0, 1, 2] and len(log) == 3
    else:  # every resend was written once more, after the three first attempts
        assert min(offsets) >= 3 and len(log) >= 6
        assert sorted(offsets) == offsets  # resent in the operation's order


@pytest.mark.slow
def test_in_flight_requests_are_appended_before_any_answer(cluster: LocalCluster) -> None:
    _fetchers(cluster, "pause")
    threading.Event().wait(0.6)
    conn = BrokerClient(cluster.addrs, timeout_s=10, retries=0, request_timeout_s=2.0,
                        max_in_flight=4)
    out: list[list[Result]] = []
    sender = threading.Thread(target=lambda: out.append(
        produce_many(conn, [(KEY, v) for v in range(60, 66)])))
    sender.start()
    try:  # four unanswered at the leader, the other two wait for a slot
        cluster.wait(lambda: cluster.metadata("n1")["local"][str(KEY)]["leo"] == 4, 5,
                     "four appended")
        threading.Event().wait(0.3)
        assert cluster.metadata("n1")["local"][str(KEY)]["leo"] == 4
        _fetchers(cluster, "resume")
        sender.join(30)
    finally:
        _fetchers(cluster, "resume")
        sender.join(30)
        conn.close()
    assert out == [[0, 1, 2, 3, 4, 5]]
