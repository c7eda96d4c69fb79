"""The producer settings (the systems' options, formerly the spec's producer table): layered
like the broker's, checked before anything starts, and saved in test.json so a run repeats
with the same producer."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec import SpecError, build_spec, load_test_json
from systems.undertow.options import UndertowOptions


def test_producer_settings_layer_and_survive_test_json(tmp_path: Path) -> None:
    spec = build_spec({"producer": {"retries": 1, "delivery_timeout_ms": 9000}},
                      {"producer": {"retries": 4, "request-timeout-ms": 1500}})
    producer = UndertowOptions.of(spec)
    assert (producer.retries, producer.delivery_timeout_ms,
            producer.request_timeout_ms) == (4, 9000, 1500)
    assert producer.delivery_timeout_s == 9.0 and producer.request_timeout_s == 1.5
    spec.save(tmp_path / "test.json")
    assert load_test_json(tmp_path / "test.json") == spec
    assert UndertowOptions.of(build_spec()).retries is None  # the system's own default


@pytest.mark.parametrize("producer,says", [
    ({"retries": -1}, "--retries (undertow.retries): expected an integer >= 0"),
    ({"retries": "3"}, "--retries"),
    ({"delivery_timeout_ms": 0}, "--delivery-timeout-ms"),
    ({"delivery_timeout_ms": 1000, "request_timeout_ms": 2000}, "exceeds --delivery-timeout-ms"),
    ({"linger_ms": 5}, "unknown key 'producer.linger_ms'"),
    ({"enable_idempotence": True, "retries": 0}, "--idempotence needs --retries above 0"),
    ({"enable_idempotence": "yes"}, "--idempotence (undertow.enable_idempotence)"),
    ({"max_in_flight": 0}, "--max-in-flight (undertow.max_in_flight)"),
    ({"enable_idempotence": True, "max_in_flight": 6}, "--max-in-flight 5 or less"),
])
def test_bad_producer_settings_name_the_option(producer: dict[str, object], says: str) -> None:
    with pytest.raises(SpecError) as e:
        build_spec({"producer": producer}, where=("exp.toml",))
    assert says in str(e.value)


def test_idempotence_needs_acks_all() -> None:
    with pytest.raises(SpecError, match="--idempotence needs --acks all, not 1"):
        build_spec({"broker": {"acks": "1"}, "producer": {"enable_idempotence": True}})
    spec = build_spec({"producer": {"enable_idempotence": True}})
    assert UndertowOptions.of(spec).enable_idempotence


def test_the_systems_settings_are_their_options_whichever_way_they_are_given() -> None:
    """Both systems take the replication and producer settings as their own options
    (systems/settings.py): the system's table, the old `broker` / `producer` tables and the
    flags set them alike; test.json still shows the old tables."""
    from systems.kafka.options import KafkaOptions

    for layer in ({"undertow": {"acks": "1", "min_insync_replicas": 1}},
                  {"broker": {"acks": "1", "min_insync_replicas": 1}},
                  {"options": {"undertow": {"acks": "1", "min_insync_replicas": 1}}}):
        spec = build_spec(layer)
        assert not hasattr(spec, "broker") and not hasattr(spec, "producer")
        assert (UndertowOptions.of(spec).acks, UndertowOptions.of(spec).min_insync_replicas) \
            == ("1", 1)
        assert spec.to_json()["broker"]["acks"] == "1"
    kafka = build_spec({"system": "kafka", "kafka": {"acks": "1"}, "producer": {"retries": 2}})
    assert (KafkaOptions.of(kafka).acks, KafkaOptions.of(kafka).retries) == ("1", 2)
    assert "truncation" not in kafka.to_json()["broker"]  # our broker's own
    with pytest.raises(SpecError, match="--truncation: only --system undertow has it"):
        build_spec({"system": "kafka", "broker": {"truncation": "hw"}})


def test_an_old_test_json_s_broker_and_producer_tables_are_read(tmp_path: Path) -> None:
    """A test.json written while they were TestSpec's tables: the settings are the
    system's options; a key the run's system lacks is dropped (an old Kafka run's
    truncation), so the run still loads."""
    import json

    from systems.kafka.options import KafkaOptions

    old = {"system": "undertow", "seed": 3, "broker": {"acks": "1", "truncation": "hw",
                                                       "min_insync_replicas": 1},
           "producer": {"retries": 2, "delivery_timeout_ms": 4000}}
    (tmp_path / "test.json").write_text(json.dumps(old))
    own = UndertowOptions.of(load_test_json(tmp_path / "test.json"))
    assert (own.acks, own.truncation, own.retries, own.delivery_timeout_ms) == \
        ("1", "hw", 2, 4000)
    (tmp_path / "test.json").write_text(json.dumps({**old, "system": "kafka"}))
    kafka = KafkaOptions.of(load_test_json(tmp_path / "test.json"))
    assert (kafka.acks, kafka.retries) == ("1", 2)


@pytest.mark.parametrize("system", ["undertow", "kafka"])
def test_the_settings_flags_set_either_system_s_options(system: str) -> None:
    from harness.protocols import SetsAcks
    from harness.registry import get
    from tests.harness.test_core import spec_of

    s = spec_of("--system", system, "--acks", "1", "--min-insync-replicas", "1",
                "--retries", "2", "--no-unclean-leader-election")
    assert s["options"][system]["acks"] == "1" and s["options"][system]["retries"] == 2
    assert s["broker"]["acks"] == "1" and s["producer"]["retries"] == 2
    assert isinstance(get("system", system), SetsAcks)  # the txn workload's acks rule asks it
