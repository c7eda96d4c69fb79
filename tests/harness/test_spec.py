"""The spec's producer table: layered like the broker's, checked before anything starts,
and saved in test.json so a run repeats with the same producer."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.spec import SpecError, build_spec, load_test_json


def test_producer_settings_layer_and_survive_test_json(tmp_path: Path) -> None:
    spec = build_spec({"producer": {"retries": 1, "delivery_timeout_ms": 9000}},
                      {"producer": {"retries": 4, "request-timeout-ms": 1500}})
    assert (spec.producer.retries, spec.producer.delivery_timeout_ms,
            spec.producer.request_timeout_ms) == (4, 9000, 1500)
    assert spec.producer.delivery_timeout_s == 9.0 and spec.producer.request_timeout_s == 1.5
    spec.save(tmp_path / "test.json")
    assert load_test_json(tmp_path / "test.json") == spec
    assert build_spec().producer.retries is None  # the system's own default


@pytest.mark.parametrize("producer,says", [
    ({"retries": -1}, "--retries (producer.retries): expected an integer >= 0"),
    ({"retries": "3"}, "--retries"),
    ({"delivery_timeout_ms": 0}, "--delivery-timeout-ms"),
    ({"delivery_timeout_ms": 1000, "request_timeout_ms": 2000}, "exceeds --delivery-timeout-ms"),
    ({"linger_ms": 5}, "[producer]: unknown key 'linger_ms'"),
    ({"enable_idempotence": True, "retries": 0}, "--idempotence needs --retries above 0"),
    ({"enable_idempotence": "yes"}, "--idempotence (producer.enable_idempotence)"),
    ({"max_in_flight": 0}, "--max-in-flight (producer.max_in_flight)"),
    ({"enable_idempotence": True, "max_in_flight": 6}, "--max-in-flight 5 or less"),
])
def test_bad_producer_settings_name_the_option(producer: dict[str, object], says: str) -> None:
    with pytest.raises(SpecError) as e:
        build_spec({"producer": producer}, where=("exp.toml",))
    assert says in str(e.value)


def test_idempotence_needs_acks_all() -> None:
    with pytest.raises(SpecError, match="--idempotence needs --acks all, not 1"):
        build_spec({"broker": {"acks": "1"}, "producer": {"enable_idempotence": True}})
    assert build_spec({"producer": {"enable_idempotence": True}}).producer.enable_idempotence
