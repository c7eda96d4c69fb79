"""`kafka-retries-without-idempotence` on a real 3-node Kafka: librdkafka resends a produce
whose answers the leader's clients lost, and without idempotence Kafka appends it twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import core, netns
from harness.spec import build_spec
from systems.kafka import config, jars
from systems.kafka.options import KafkaOptions
from systems.kafka.scenarios import SCENARIOS

NAME = "kafka-retries-without-idempotence"


def test_an_attempt_times_out_on_the_client_well_before_the_delivery_timeout() -> None:
    """librdkafka's client-side attempt timeout is socket.timeout.ms; request.timeout.ms is
    only the broker's wait for acks. Without the first under message.timeout.ms nothing is
    ever resent, and the scenario could not find a duplicate."""
    p = KafkaOptions.of(build_spec(dict(SCENARIOS[NAME].settings)))
    c = config.producer_config("b:1", "all", timeout_s=p.delivery_timeout_s,
                               retries=p.retries, request_timeout_s=p.request_timeout_s,
                               idempotence=p.enable_idempotence)
    assert c["socket.timeout.ms"] == c["request.timeout.ms"] == 1000
    assert c["message.timeout.ms"] == 8000 and c["retries"] == 5
    assert c["enable.idempotence"] is False


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.skipif(netns.supported() is not None, reason=f"netns: {netns.supported()}")
def test_retries_without_idempotence_write_duplicates(
        tmp_path: Path, kafka_jars: jars.KafkaJars) -> None:
    spec = build_spec({**SCENARIOS[NAME].settings, "time_limit_s": 16.0, "seed": 1, "keys": 4,
                       "results_dir": str(tmp_path)})
    outcome = core.run(spec)
    assert outcome.valid is False, outcome.summary()
    results = outcome.results
    assert "duplicate" in results["bad_anomaly_types"], results["anomaly_types"]
    dup = results["anomalies"]["duplicate"][0]
    assert len(dup["offsets"]) >= 2
