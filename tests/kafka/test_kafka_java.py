"""--client java on the shared cluster: Kafka's Java client (in the harness's JVM) sends, reads,
commits and aborts transactions, joins the group, and twenty threads drive their own; a
consume-transform-produce transaction on both clients."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.runfiles import Op
from systems.kafka.client import KafkaQueueClient
from systems.kafka.jars import KafkaJars
from systems.kafka.java import jars, jvm
from systems.kafka.java.client import JavaQueueClient, warm_up
from systems.kafka.java.group import JavaGroupClient
from systems.kafka.java.txn import JavaTxnClient
from systems.kafka.txn_client import KafkaTxnClient
from tests.kafka.cluster import PARTITIONS, Cluster, txn_member
from workloads.options import ConsumerSettings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(3_000_000)


@pytest.fixture(scope="module")
def java(kafka_jars: KafkaJars, kafka_cluster: Cluster) -> None:
    jvm.start(jars.resolve(jvm.running_version() or jars.default_version(kafka_jars.version)))
    warm_up(kafka_cluster.kafka.bootstrap)


def _op(f: str, value: object, **extra: object) -> Op:
    return Op(type="invoke", process=0, f=f, value=value, time=0, extra=dict(extra))


def _client(cluster: Cluster, acks: str = "all", **kw: Any) -> JavaQueueClient:
    return JavaQueueClient(keys=PARTITIONS, acks=acks, timeout_s=5.0,
                           bootstrap=cluster.kafka.bootstrap, **kw).open(None, "n1")


def _read_all(c: JavaQueueClient | JavaGroupClient | KafkaQueueClient, want: dict[int, int],
              tries: int = 60) -> dict[str, list[list[int]]]:
    """Polls until each key of `want` was read up to that offset (or tries run out)."""
    read: dict[str, list[list[int]]] = {}
    for _ in range(tries):
        done = c.invoke(None, _op("poll", [["poll"]]))
        for k, recs in (done.value[0][1] if len(done.value[0]) > 1 else {}).items():
            read.setdefault(k, []).extend(recs)
        if all(str(k) in read and read[str(k)][-1][0] >= o for k, o in want.items()):
            break
    return read


def test_sends_get_offsets_and_polls_read_them(kafka_cluster: Cluster, java: None) -> None:
    c = _client(kafka_cluster)
    try:
        sent: dict[int, list[list[int]]] = {}
        for i in range(8):
            key, value = i % PARTITIONS, next(_values)
            done = c.invoke(None, _op("send", [["send", key, value]]))
            assert done.type == "ok", done
            (_, k, (offset, v)), = done.value
            assert (k, v) == (key, value) and isinstance(offset, int)
            sent.setdefault(key, []).append([offset, value])
        assert c.invoke(None, _op("assign", sorted(sent), seek_to_beginning=True)).type == "ok"
        read = _read_all(c, {k: recs[-1][0] for k, recs in sent.items()})
        for key, records in sent.items():
            got = {o: v for o, v in read[str(key)]}
            assert all(got.get(o) == v for o, v in records), (key, records)
            offsets = [o for o, _ in read[str(key)]]
            assert offsets == sorted(set(offsets))  # each once, in order
    finally:
        c.close(None)


def test_send_to_a_missing_partition_fails(kafka_cluster: Cluster, java: None) -> None:
    c = JavaQueueClient(keys=PARTITIONS, acks="1", timeout_s=1.0,
                        bootstrap=kafka_cluster.kafka.bootstrap).open(None, "n1")
    try:
        done = c.invoke(None, _op("send", [["send", PARTITIONS + 3, next(_values)]]))
        assert done.type == "fail" and "not present in metadata" in (done.error or ""), done
    finally:
        c.close(None)


def _txn(c: JavaTxnClient | KafkaTxnClient, sends: list[tuple[int, int]],
         abort: bool = False) -> Op:
    micro = [["send", k, v] for k, v in sends]
    return c.invoke(None, Op("invoke", 0, "txn", micro, extra={"abort": True} if abort else {}))


def test_a_committed_transaction_is_read_and_an_aborted_one_is_not(
        kafka_cluster: Cluster, java: None) -> None:
    q = JavaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                        bootstrap=kafka_cluster.kafka.bootstrap)
    c = JavaTxnClient(q).open(None, "n1")
    try:
        kept = [next(_values), next(_values)]
        dropped = [next(_values), next(_values)]
        ok = _txn(c, [(0, kept[0]), (1, kept[1])])
        assert ok.type == "ok", ok
        assert all(isinstance(m[2], list) for m in ok.value)  # offsets acknowledged
        aborted = _txn(c, [(0, dropped[0]), (1, dropped[1])], abort=True)
        assert aborted.type == "fail" and aborted.error == "aborted", aborted
        ok2 = _txn(c, [(0, next(_values)), (1, next(_values))])
        assert ok2.type == "ok", ok2  # the same producer goes on after an abort
        last = {int(m[1]): m[2][0] for m in ok2.value}
        assert c.invoke(None, _op("assign", [0, 1], seek_to_beginning=True)).type == "ok"
        read = _read_all(c.queue, last)
        values = {v for recs in read.values() for _, v in recs}
        assert set(kept) <= values and not set(dropped) & values
    finally:
        c.close(None)


def test_a_group_member_reads_what_was_sent_and_commits_it(
        kafka_cluster: Cluster, java: None) -> None:
    """--sub-via subscribe with commit processed: the member's auto-commit inside poll()
    commits what earlier polls handed over; the group's committed offsets show it."""
    q = JavaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                        bootstrap=kafka_cluster.kafka.bootstrap, topic=config_topic())
    kafka_cluster.admin.create_topic(PARTITIONS, 3, 2, topic=q.topic)
    settings = ConsumerSettings(commit="processed", auto_commit_interval_ms=100)
    g = JavaGroupClient(q, partitions=PARTITIONS, settings=settings).open(None, "n1")
    try:
        assert g.invoke(None, _op("subscribe", list(range(PARTITIONS)))).type == "ok"
        sent = {k: g.invoke(None, _op("send", [["send", k, next(_values)]])).value[0][2][0]
                for k in range(PARTITIONS)}
        read = _read_all(g, sent)
        assert all(str(k) in read for k in sent), read
        deadline = time.monotonic() + 20
        committed: dict[str, int] = {}
        while time.monotonic() < deadline and len(committed) < PARTITIONS:
            g.invoke(None, _op("poll", [["poll"]]))  # the auto-commit runs inside poll()
            committed = g.committed()
        assert committed == {str(k): o + 1 for k, o in sent.items()}
    finally:
        g.close(None)
        g.spares.close_all()


def test_a_fenced_producer_is_dropped_and_the_next_transaction_has_a_new_one(
        kafka_cluster: Cluster, java: None) -> None:
    """Another producer took its transactional.id: its next transaction fails (its send is
    refused with the old epoch: ProducerFenced, fatal, or InvalidProducerEpoch, whose abort
    is then fenced), the producer is closed, and the transaction after that runs on a new
    producer."""
    a = JavaTxnClient(_client(kafka_cluster)).open(None, "n1")
    b = JavaTxnClient(_client(kafka_cluster)).open(None, "n1")
    b.tid = a.tid
    try:
        assert _txn(a, [(0, next(_values))]).type == "ok"
        assert _txn(b, [(0, next(_values))]).type == "ok"  # its initTransactions fences a
        fenced = _txn(a, [(0, next(_values))])
        assert fenced.type == "fail" and (fenced.error or "").startswith(
            ("ProducerFencedException", "InvalidProducerEpochException")), fenced
        assert a.producer is None and not a.ready
        assert _txn(a, [(0, next(_values))]).type == "ok"
    finally:
        a.close(None)
        b.close(None)


def _txn_pair(cluster: Cluster, client: str
              ) -> tuple[JavaTxnClient | KafkaTxnClient, JavaTxnClient | KafkaTxnClient]:
    """Two transactional clients of `client`'s library with one transactional.id: the
    second's initTransactions fences the first."""
    if client == "java":
        a: JavaTxnClient | KafkaTxnClient = JavaTxnClient(_client(cluster)).open(None, "n1")
        b: JavaTxnClient | KafkaTxnClient = JavaTxnClient(_client(cluster)).open(None, "n1")
        b.tid = a.tid
        return a, b
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                             bootstrap=cluster.kafka.bootstrap)
    a, b = KafkaTxnClient(queue).open(None, "n1"), KafkaTxnClient(queue).open(None, "n1")
    assert isinstance(b, KafkaTxnClient)
    b.tid = b.producer_config["transactional.id"] = a.tid
    return a, b


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_a_commit_fenced_after_its_sends_is_info_and_the_next_txn_runs(
        kafka_cluster: Cluster, java: None, client: str) -> None:
    """Another producer took the transactional.id between a transaction's sends and its
    commit (its initTransactions aborted the open transaction): the commit is refused, the
    producer cannot abort either, so the outcome is `info` (a commit whose answer was lost
    before the fence would have been refused the same way) and the producer is dropped; the
    transaction's records are never read, and the next transaction runs on a new producer."""
    a, b = _txn_pair(kafka_cluster, client)
    try:
        assert _txn(a, [(0, next(_values))]).type == "ok"
        fenced = next(_values)
        assert a.begin({0}) is None
        offsets, error = a.send_run([(0, fenced)])
        assert error is None and isinstance(offsets[0], int), (offsets, error)
        assert b.begin({0}) is None  # fences a, aborting its open transaction
        b.abort()
        typ, why = a.commit()
        assert typ == "info" and (why or "").startswith("commit outcome unknown: "), (typ, why)
        assert a.producer is None and not a.ready
        after = _txn(a, [(0, next(_values))])
        assert after.type == "ok", after
        (_, _, (last, kept)), = after.value
        assert a.invoke(None, _op("assign", [0], seek_to_beginning=True)).type == "ok"
        read = {v for _, v in _read_all(a.queue, {0: last})["0"]}
        assert kept in read and fenced not in read
    finally:
        a.close(None)
        b.close(None)


def test_a_group_member_commits_only_while_subscribed_and_a_crash_closes_it(
        kafka_cluster: Cluster, java: None) -> None:
    """--client java, --sub-via subscribe: a `commit` before any membership fails (nothing
    was sent); a crash fetches, closes the member and ends `info`; a new member joins."""
    q = JavaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                        bootstrap=kafka_cluster.kafka.bootstrap, topic=config_topic())
    kafka_cluster.admin.create_topic(PARTITIONS, 3, 2, topic=q.topic)
    g = JavaGroupClient(q, partitions=PARTITIONS, settings=ConsumerSettings(commit="off"),
                        offset_ops=True).open(None, "n1")
    try:
        early = g.invoke(None, _op("commit", [["commit", {"0": 1}]]))
        assert early.type == "fail" and "not subscribed" in (early.error or ""), early
        assert g.invoke(None, _op("subscribe", list(range(PARTITIONS)))).type == "ok"
        assert g.invoke(None, _op("send", [["send", 0, next(_values)]])).type == "ok"
        crashed = g.invoke(None, _op("crash", None))
        assert crashed.type == "info" and (crashed.error or "").startswith("crashed"), crashed
        assert g.member is None
        again = g.open(None, "n1")
        assert again.invoke(None, _op("subscribe", list(range(PARTITIONS)))).type == "ok"
        assert again.member is not None
        again.close(None)
    finally:
        g.close(None)
        g.spares.close_all()


def _reads(done: Op) -> dict[str, list[list[int]]]:
    """What the polls of a completed `txn` read, per key."""
    out: dict[str, list[list[int]]] = {}
    for m in done.value:
        if m[0] == "poll" and len(m) > 1:
            for k, recs in m[1].items():
                out.setdefault(k, []).extend(recs)
    return out


def _txn_reading(c: JavaTxnClient | KafkaTxnClient, abort: bool = False, tries: int = 40) -> Op:
    """A consume-transform-produce `txn` (polls, then a send) repeated until its polls read
    something and it ended as asked: the group's first assignment comes in some poll, not
    the first, and one that comes after a read aborts the transaction (REBALANCE)."""
    want = "fail" if abort else "ok"
    for _ in range(tries):
        micro = [["poll"], ["poll"], ["send", 0, next(_values)]]
        done = c.invoke(None, Op("invoke", 0, "txn", micro,
                                 extra={"abort": True} if abort else {}))
        if (done.error or "").startswith("REBALANCE"):
            assert done.type == "fail", done
            continue
        assert done.type == want, done
        if _reads(done):
            return done
    raise AssertionError(f"no txn read anything in {tries} tries")


def _ctp_member(cluster: Cluster, client: str) -> JavaTxnClient | KafkaTxnClient:
    """A transactional client of `client`'s library in the group, on a topic of its own,
    committing offsets only inside its transactions (as the system assembles it),
    subscribed to every partition."""
    topic = config_topic()
    cluster.admin.create_topic(PARTITIONS, 3, 2, topic=topic)
    if client != "java":
        return txn_member(cluster, topic, timeout_s=5.0)
    q = JavaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                        bootstrap=cluster.kafka.bootstrap, topic=topic)
    group = JavaGroupClient(q, partitions=PARTITIONS, settings=ConsumerSettings(commit="off"))
    group.in_txn = True
    c = JavaTxnClient(q, group=group).open(None, "n1")
    assert c.invoke(None, _op("subscribe", list(range(PARTITIONS)))).type == "ok"
    return c


# both clients: their end-to-end consume-transform-produce runs are one per client in the
# suite (tests/kafka/test_kafka_txn.py), this is where the other one's path is walked
@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_a_consume_transform_produce_txn_commits_its_positions_and_an_abort_rewinds(
        kafka_cluster: Cluster, java: None, client: str) -> None:
    """--workload txn --sub-via subscribe: the group member's positions go into the
    transaction (send_offsets_to_transaction), so a commit moves the group's committed
    offsets past what it read; an abort leaves them, and the next transaction reads again
    from them (the member rewinds)."""
    c = _ctp_member(kafka_cluster, client)
    assert c.group is not None
    try:
        seed = _txn(c, [(k, next(_values)) for k in range(PARTITIONS) for _ in range(2)])
        assert seed.type == "ok", seed
        read = _reads(committed := _txn_reading(c))
        assert committed.type == "ok", committed
        after = c.group.committed()
        for k, recs in read.items():  # past what it read (and maybe a commit marker)
            assert after[k] > recs[-1][0], (k, recs, after)
        aborted = _txn_reading(c, abort=True)
        assert aborted.type == "fail" and aborted.error == "aborted", aborted
        assert c.group.committed() == after  # the aborted txn's positions never landed
        again = _reads(_txn_reading(c))
        lost = _reads(aborted)
        assert set(lost) & set(again), (lost, again)
        for k in set(lost) & set(again):  # the same first record: read again from the
            assert again[k][0] == lost[k][0], (k, lost[k], again[k])  # committed offset
            assert after.get(k, 0) <= lost[k][0][0]
    finally:
        c.close(None)
        c.group.spares.close_all()


def config_topic() -> str:
    return f"java-group-{uuid.uuid4().hex[:8]}"


def test_twenty_threads_each_drive_their_own_client(kafka_cluster: Cluster, java: None) -> None:
    """JPype attaches each thread; each has its own producer (concurrency 20)."""
    results: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        c = _client(kafka_cluster)
        try:
            for _ in range(3):
                done = c.invoke(None, _op("send", [["send", i % PARTITIONS, next(_values)]]))
                with lock:
                    results.append(done.type)
        finally:
            c.close(None)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == ["ok"] * 60


def _flushed_by_commit(cluster: Cluster, client: str) -> JavaTxnClient | KafkaTxnClient:
    """A transactional client of `client`'s library whose sends the commit flushes
    (--txn-sends at-commit)."""
    if client == "java":
        return JavaTxnClient(_client(cluster), sends="at-commit").open(None, "n1")
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                             bootstrap=cluster.kafka.bootstrap)
    out = KafkaTxnClient(queue, sends="at-commit").open(None, "n1")
    assert isinstance(out, KafkaTxnClient)
    # above the broker's message.max.bytes, so that the broker (not the client) refuses a send
    out.producer_config["message.max.bytes"] = 4_000_000
    return out


def _send_too_large(c: JavaTxnClient | KafkaTxnClient) -> None:
    """A send in c's open transaction that fails after it was handed to the producer (the
    Java client's own size check, the broker's for librdkafka): the transaction is then
    abortable, not fatal."""
    big = "x" * 1_500_000
    if isinstance(c, JavaTxnClient):
        record = jvm.cls("org.apache.kafka.clients.producer.ProducerRecord")(
            c.queue.topic, jvm.cls("java.lang.Integer")(0), None, big)
        c.producer.send(record)
    else:
        assert c.current is not None
        c.current.produce(c.queue.topic, value=big.encode(), partition=0)


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_sends_left_to_the_commit_get_offsets_and_a_failed_one_is_aborted_on_the_same_producer(
        kafka_cluster: Cluster, java: None, client: str) -> None:
    """--txn-sends at-commit: the sends are not waited for, the commit flushes them and they
    get their offsets; when one of them failed, the commit fails and the client answers with
    an abort on the same producer (`fail`, "aborted after ..."), which goes on to commit the
    next transactions (librdkafka's first one after it fails too, here every time)."""
    c = _flushed_by_commit(kafka_cluster, client)
    try:
        first = _txn(c, [(0, next(_values)), (1, next(_values))])
        assert first.type == "ok", first
        assert all(isinstance(m[2], list) and isinstance(m[2][0], int) for m in first.value)
        producer = c.producer
        assert c.begin({0}) is None
        assert c.send_async([(0, next(_values))]) is None
        _send_too_large(c)
        typ, why = c.commit()
        assert typ == "fail" and (why or "").startswith("aborted after "), (typ, why)
        assert c.producer is producer
        after = [_txn(c, [(0, next(_values)), (0, next(_values))]) for _ in range(3)]
        assert c.producer is producer
        # librdkafka's next transaction on it fails as well (OUT_OF_ORDER_SEQUENCE_NUMBER,
        # "skipped sequence numbers"), and is aborted; the Java client's commits
        first_may_fail = client == "librdkafka" and after[0].type == "fail" and \
            (after[0].error or "").startswith("aborted after")
        assert all(o.type == "ok" for o in after[1 if first_may_fail else 0:]), after
    finally:
        c.close(None)


def _rdkafka_handles() -> int:
    """librdkafka handles alive in this process (each has one thread named rdk:main)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
    return sum(n == "rdk:main" for n in names)


def test_a_dropped_librdkafka_producer_is_closed_not_left_to_the_collector(
        kafka_cluster: Cluster) -> None:
    """The client gives a producer up (a fatal error, an abort that failed): its handle and
    threads end within seconds, even while the transaction's own reference to it lives
    on until the next begin."""
    queue = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                             bootstrap=kafka_cluster.kafka.bootstrap)
    c = KafkaTxnClient(queue).open(None, "n1")
    assert isinstance(c, KafkaTxnClient)
    try:
        assert c.begin({0}) is None and c.current is not None
        assert c.send_run([(0, next(_values))])[1] is None
        alive = _rdkafka_handles()
        c._drop()
        assert c.current is not None  # still referenced
        deadline = time.monotonic() + 15
        while _rdkafka_handles() >= alive and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _rdkafka_handles() == alive - 1
    finally:
        c.current = None
        c.close(None)
