"""Kafka's jars cache, the spec -> server.properties mapping, the client's error table (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec import SpecError, build_spec
from systems.kafka import config, jars, releases, zk
from systems.kafka.client import ERRORS, Sent, outcome, single_try
from systems.kafka.options import KafkaOptions


def test_versions_before_0_10_2_and_nonsense_are_refused() -> None:
    assert jars.parse_version("4.1.1") == (4, 1, 1)
    assert jars.parse_version("0.10.2.2") == (0, 10, 2, 2)
    with pytest.raises(jars.KafkaJarsError, match=r"0\.10\.2\.0 and later"):
        jars.parse_version("0.10.1.1")
    with pytest.raises(jars.KafkaJarsError, match="not a release number"):
        jars.parse_version("latest")


def test_newest_complete_cached_4x_is_used(tmp_path: Path) -> None:
    (tmp_path / "4.3.0" / "libs").mkdir(parents=True)  # resolved with another pom
    (tmp_path / "4.3.0" / "libs" / ".complete").write_text("4.3.0 0123456789abcdef")
    for v, complete in (("4.0.0", True), ("4.2.0", True), ("4.10.1", False), ("3.9.1", True)):
        libs = tmp_path / v / "libs"
        libs.mkdir(parents=True)
        if complete:
            (libs / ".complete").write_text(f"{v} {jars.pom_digest()}")
    found = jars.newest_cached(tmp_path)
    assert found is not None and found.version == "4.2.0" and found.cached
    assert jars.resolve(root=tmp_path).version == "4.2.0"  # no Maven: the cache answers
    assert jars.resolve("3.9.1", root=tmp_path).libs == tmp_path / "3.9.1" / "libs"


def _props(b: KafkaOptions) -> dict[str, str]:
    nodes = {n: config.KafkaNode(n, config.node_id(n), "127.0.0.1", 9000 + i, 9100 + i)
             for i, n in enumerate(("n1", "n2", "n3"))}
    return config.server_properties(nodes["n2"], nodes, Path("/data"), b, partitions=8)


def test_server_properties_follow_the_spec() -> None:
    p = _props(KafkaOptions(replication_factor=3, min_insync_replicas=2,
                              unclean_leader_election=True, flush="every-message"))
    assert p["node.id"] == "2" and p["process.roles"] == "broker,controller"
    assert p["controller.quorum.voters"] == "1@127.0.0.1:9100,2@127.0.0.1:9101,3@127.0.0.1:9102"
    assert p["min.insync.replicas"] == "2" and p["default.replication.factor"] == "3"
    assert p["unclean.leader.election.enable"] == "true"
    assert p["log.flush.interval.messages"] == "1"
    assert "log.flush.interval.messages" not in _props(KafkaOptions())
    assert _props(KafkaOptions())["unclean.leader.election.enable"] == "false"


def test_controlled_shutdown_is_set_explicitly_in_zookeeper_mode_only() -> None:
    nodes = config.make_nodes(("n1", "n2"), "127.0.0.1", iter(range(9100, 9200)).__next__)
    old = releases.release("0.10.2.2")
    props = [zk.broker_properties(nodes["n1"], "127.0.0.1:2181", Path("/data"),
                                  KafkaOptions(), old, partitions=4, controlled_shutdown=on)
             for on in (True, False)]
    assert [p["controlled.shutdown.enable"] for p in props] == ["true", "false"]
    from click.testing import CliRunner

    from harness.cli import main

    r = CliRunner().invoke(main, ["run", "--system", "kafka", "--kafka-version", "4.4.0",
                                  "--nemesis", "kill", "--no-kafka-controlled-shutdown"])
    assert r.exit_code == 2 and "ZooKeeper mode only" in r.output, r.output


def test_hw_truncation_is_refused() -> None:
    """Our broker's own settings are no option of the kafka system: refused, naming it."""
    for broker, flag in (({"truncation": "hw"}, "--truncation"),
                         ({"txn_epoch_fencing": False}, "--txn-fencing"),
                         ({"offsets_commit_acks": 1}, "--offsets-commit-acks")):
        with pytest.raises(SpecError, match=f"{flag}: only --system undertow has it, not kafka"):
            build_spec({"system": "kafka", "broker": broker})
    # an old file's full [broker] table (an old `undertow plan` of a Kafka run) names
    # what Kafka always does: accepted
    old = {"truncation": "leader-epoch", "txn_epoch_fencing": True, "offsets_commit_acks": -1,
           "acks": "1", "min_insync_replicas": 1}
    assert KafkaOptions.of(build_spec({"system": "kafka", "broker": old})).acks == "1"
    from click.testing import CliRunner

    from harness.cli import main

    r = CliRunner().invoke(main, ["run", "--system", "kafka", "--truncation", "hw"])
    assert r.exit_code == 2 and "--truncation: only --system undertow has them, not kafka" \
        in r.output, r.output


def test_producer_idempotent_only_with_acks_all() -> None:
    assert config.producer_config("b:1", "all", timeout_s=3)["enable.idempotence"] is True
    one = config.producer_config("b:1", "1", timeout_s=3)
    assert one["enable.idempotence"] is False and one["retries"] == 0 and one["acks"] == "1"


def test_producer_settings_of_the_spec_reach_librdkafka() -> None:
    c = config.producer_config("b:1", "1", timeout_s=9, retries=3, request_timeout_s=1.5)
    assert (c["retries"], c["message.timeout.ms"], c["request.timeout.ms"]) == (3, 9000, 1500)
    assert "max.in.flight.requests.per.connection" not in c  # librdkafka's own default
    off = config.producer_config("b:1", "all", timeout_s=3, idempotence=False, max_in_flight=2)
    assert off["max.in.flight.requests.per.connection"] == 2
    assert off["enable.idempotence"] is False and off["retries"] == 2_147_483_647


# Every row of ERRORS with the completion it must give, with and without retries.
EXPECTED = [
    ("_QUEUE_FULL", "fail", "fail"),
    ("_MSG_SIZE_TOO_LARGE", "fail", "fail"),
    ("_UNKNOWN_PARTITION", "fail", "fail"),
    ("_UNKNOWN_TOPIC", "fail", "fail"),
    ("_INVALID_ARG", "fail", "fail"),
    ("_PURGE_QUEUE", "fail", "fail"),
    ("_STATE", "fail", "fail"),
    ("NOT_LEADER_OR_FOLLOWER", "fail", "info"),
    ("NOT_ENOUGH_REPLICAS", "fail", "info"),
    ("UNKNOWN_TOPIC_OR_PART", "fail", "info"),
    ("LEADER_NOT_AVAILABLE", "fail", "info"),
    ("FENCED_LEADER_EPOCH", "fail", "info"),
    ("UNKNOWN_LEADER_EPOCH", "fail", "info"),
    ("MSG_SIZE_TOO_LARGE", "fail", "info"),
    ("INVALID_REQUIRED_ACKS", "fail", "info"),
    ("CORRUPT_MESSAGE", "fail", "info"),
    ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", "info", "info"),
    ("REQUEST_TIMED_OUT", "info", "info"),
    ("NETWORK_EXCEPTION", "info", "info"),
    ("KAFKA_STORAGE_ERROR", "info", "info"),
    ("_MSG_TIMED_OUT", "info", "info"),
    ("_TIMED_OUT", "info", "info"),
    ("_TRANSPORT", "info", "info"),
    ("_PURGE_INFLIGHT", "info", "info"),
    ("_FATAL", "info", "info"),
    ("OUT_OF_ORDER_SEQUENCE_NUMBER", "info", "info"),
    ("_INCONSISTENT", "info", "info"),
    ("SOMETHING_NEW", "info", "info"),  # not in the table: unknown, so info
]


@pytest.mark.parametrize(("name", "single_try", "with_retries"), EXPECTED,
                         ids=[row[0] for row in EXPECTED])
def test_error_row(name: str, single_try: str, with_retries: str) -> None:
    for acks in ("0", "1"):
        assert outcome(name, retries=0, acks=acks) == single_try
        assert outcome(name, retries=5, acks=acks) == with_retries
    # acks=all: librdkafka's uncounted resends make even retries=0 more than one try
    assert outcome(name, retries=0, acks="all") == with_retries
    assert outcome(name, retries=5, acks="all") == with_retries


def test_a_refusal_after_an_uncounted_resend_is_not_definite() -> None:
    """Issue 29 (0.10.2.2, seed 3): the old leader appended the acks=all record, lost its
    leadership and answered NOT_LEADER; librdkafka resent it without counting a retry and
    the new leader, alone in the ISR, answered NOT_ENOUGH_REPLICAS, yet the record was read."""
    assert outcome("NOT_ENOUGH_REPLICAS", retries=0, acks="all") == "info"
    assert outcome("NOT_ENOUGH_REPLICAS", retries=0, acks="1") == "fail"
    assert single_try(retries=0, acks="1") and not single_try(retries=0, acks="all")
    assert outcome("_QUEUE_FULL", retries=0, acks="all") == "fail"  # never left the client


def test_every_row_has_a_case() -> None:
    assert set(ERRORS) == {row[0] for row in EXPECTED if row[0] in ERRORS}
    assert len(ERRORS) == len(EXPECTED) - 1
    assert all(isinstance(v, Sent) for v in ERRORS.values())
