"""systems/kafka/java/calls.py: ClientCalls.java compiled once per client version into the
cache (a source that does not compile is one line), and the calls themselves on the shared
cluster: an assignment at each key's position, a poll's records flattened in order, and a
value that is no number raised, not dropped."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from systems.kafka import config
from systems.kafka.jars import CACHE_ENV, KafkaJars
from systems.kafka.java import calls, jars, jvm
from systems.kafka.java.client import JavaQueueClient, warm_up
from tests.kafka.cluster import PARTITIONS, Cluster

pytestmark = [pytest.mark.kafka]


@pytest.fixture(scope="module")
def client_jars(kafka_jars: KafkaJars) -> jars.ClientJars:
    return jars.resolve(jvm.running_version() or jars.default_version(kafka_jars.version))


def test_the_calls_are_compiled_once_per_client_version_into_the_cache(
        client_jars: jars.ClientJars, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    where = calls.classes(client_jars)
    assert where.parent == tmp_path / "clients" / "calls"
    assert where.name.startswith(client_jars.version + "-")
    compiled = where / "undertow" / "kafka" / "ClientCalls.class"
    assert compiled.is_file()

    def no_javac() -> str:
        raise AssertionError("compiled a second time")

    monkeypatch.setattr(calls, "_javac", no_javac)
    assert calls.classes(client_jars) == where
    assert [p.name for p in where.parent.iterdir()] == [where.name]  # no scratch left


def test_a_source_that_does_not_compile_is_one_line(
        client_jars: jars.ClientJars, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    broken = tmp_path / "ClientCalls.java"
    broken.write_text("package undertow.kafka;\npublic final class ClientCalls { int x = ; }\n")
    monkeypatch.setattr(calls, "SOURCE", broken)
    with pytest.raises(jars.ClientJarsError) as e:
        calls.classes(client_jars)
    msg = str(e.value)
    assert msg.startswith(f"ClientCalls.java does not compile against kafka-clients "
                          f"{client_jars.version}: ") and "\n" not in msg
    assert not list((tmp_path / "cache" / "clients" / "calls").iterdir())


@pytest.fixture(scope="module")
def java(client_jars: jars.ClientJars, kafka_cluster: Cluster) -> None:
    jvm.start(client_jars)
    warm_up(kafka_cluster.kafka.bootstrap)


def _client(cluster: Cluster, topic: str = config.TOPIC) -> JavaQueueClient:
    return JavaQueueClient(keys=PARTITIONS, timeout_s=5.0, bootstrap=cluster.kafka.bootstrap,
                           topic=topic).open(None, "n1")


@pytest.mark.slow
def test_an_assignment_starts_each_key_at_its_position_or_its_beginning(
        kafka_cluster: Cluster, java: None) -> None:
    c = _client(kafka_cluster)
    try:
        values = [7_100_000 + i for i in range(4)]
        sent = [c.produce(1, v) for v in values[:3]] + [c.produce(2, values[3])]
        offsets = [o for o in sent if o is not None]
        assert len(offsets) == 4
        c.positions[1] = offsets[1]  # key 1 from its second record; key 2 from the beginning
        c.positions.pop(2, None)
        calls.assign(c.consumer, c.topic, [1, 2], c.positions)
        got: dict[int, list[tuple[int, int]]] = {}
        for _ in range(30):
            for key, offset, value in calls.records(calls.poll(c.consumer, 1000)):
                got.setdefault(key, []).append((offset, value))
            if (offsets[2], values[2]) in got.get(1, []) and \
                    (offsets[3], values[3]) in got.get(2, []):
                break
        assert got[1][0] == (offsets[1], values[1])  # nothing before its position
        assert got[1][:2] == [(offsets[1], values[1]), (offsets[2], values[2])]
        assert got[2][0][0] == 0 and (offsets[3], values[3]) in got[2]
        assert [o for o, _ in got[2]] == sorted({o for o, _ in got[2]})  # in order, once
    finally:
        c.close(None)


@pytest.mark.slow
def test_a_value_that_is_no_number_is_raised_not_dropped(
        kafka_cluster: Cluster, java: None) -> None:
    topic = f"calls-{uuid.uuid4().hex[:8]}"
    admin = jvm.cls("org.apache.kafka.clients.admin.Admin").create(jvm.properties(
        {"bootstrap.servers": kafka_cluster.kafka.bootstrap}))
    try:
        admin.createTopics(jvm.jlist([jvm.cls("org.apache.kafka.clients.admin.NewTopic")(
            topic, 1, jvm.cls("java.lang.Short")(3))])).all().get()
    finally:
        admin.close(jvm.duration_ms(1000))
    c = _client(kafka_cluster, topic)
    try:
        assert c.produce(0, 5) == 0
        c.producer.send(jvm.cls("org.apache.kafka.clients.producer.ProducerRecord")(
            topic, jvm.cls("java.lang.Integer")(0), None, "five")).get()
        calls.assign(c.consumer, topic, [0], {0: 0})
        with pytest.raises(jvm.exception_type(), match=r"NumberFormatException|five"):
            for _ in range(30):
                list(calls.records(calls.poll(c.consumer, 1000)))
    finally:
        c.close(None)
