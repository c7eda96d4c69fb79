"""The KAFKA-17754 hunt: its scenario assembles in every bench cell, transaction.version
reaches StorageTool's format, and the coordinator a txn run's pauses aim at."""

from __future__ import annotations

from typing import Any

import pytest

from bench.txn_late_marker import CELLS
from harness.run_cli import _scenario_layer
from harness.spec import SpecError, build_spec
from harness.test import assemble
from systems.kafka import features
from systems.kafka.options import KafkaOptions


def _cell(cell: str, **more: Any) -> Any:
    sc = _scenario_layer("kafka-txn-late-marker")
    return build_spec(sc, {"extra": {**sc["extra"], **CELLS[cell], **more}})


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_each_cell_assembles_with_jepsens_settings(cell: str) -> None:
    test = assemble(_cell(cell))
    client: Any = test.system.client(test)
    assert client.timeout_ms == 1000  # transaction.timeout.ms, as Jepsen's
    assert KafkaOptions.of(test.spec).request_timeout_ms == 3000
    assert KafkaOptions.of(test.spec).delivery_timeout_ms == 10000
    version = CELLS[cell].get("kafka_features", {}).get("transaction.version")
    asked = features.format_args(features.requested(test.spec))
    assert asked == ([] if version is None else ["--feature", f"transaction.version={version}"])


def test_a_feature_the_format_hook_does_not_know_is_refused() -> None:
    with pytest.raises(SpecError, match=r"'share\.version' is not a feature the harness knows"):
        assemble(_cell("librdkafka-4.4.0", kafka_features={"share.version": 1}))
    with pytest.raises(SpecError, match=r"transaction\.version=7; its levels are 0, 1, 2"):
        assemble(_cell("librdkafka-4.4.0", kafka_features="transaction.version=7"))


def test_the_bench_times_the_first_bad_anomaly_and_counts_aborted_commits(tmp_path: Any) -> None:
    """An allowed G0 earlier than a G1a does not set the first-anomaly time; a failed
    commit answered by an abort counts, a workload's own abort does not."""
    import json

    from bench.txn_late_marker import first_anomaly_s, txn_facts
    ops = [{"index": 0, "time": 1_000_000_000, "type": "invoke", "f": "txn"},
           {"index": 1, "time": 2_000_000_000, "type": "fail", "f": "txn", "error": "aborted"},
           {"index": 2, "time": 4_500_000_000, "type": "fail", "f": "txn",
            "error": "aborted after KafkaException: x"},
           {"index": 3, "time": 6_000_000_000, "type": "ok", "f": "txn"}]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    results = {"bad_anomaly_types": ["G1a"],
               "anomalies": {"G0": [{"ops": [1, 2], "index": 1}],
                             "G1a": [{"reader_index": 3, "writer_index": 2}]},
               "availability": {"ops": {"txn": {"ok": 1, "fail": 2, "info": 0}},
                                "windows": [{"kind": "pause"}, {"kind": "kill"}]}}
    assert first_anomaly_s(tmp_path, results) == 5.0
    assert txn_facts(tmp_path, results) == {"txns": [1, 2, 0], "pauses": 1, "slows": 0,
                                            "commit_aborts": 1, "k20785": 0}
    assert first_anomaly_s(tmp_path, {**results, "bad_anomaly_types": []}) is None


def test_the_slow_variant_slows_the_coordinator_then_pauses_a_leader_and_heals_both() -> None:
    import random

    from harness.faultkinds import PAUSE, SLOW
    from systems.kafka.hunts import SLOW_SEQUENCE, late_marker_slow

    assert SLOW_SEQUENCE.kinds == (PAUSE, SLOW)
    for seed in range(20):
        slow, pause, fast, resume = late_marker_slow(100.0, random.Random(seed))
        assert (slow.f, pause.f, fast.f, resume.f) == (SLOW.start, PAUSE.start, SLOW.stop,
                                                        PAUSE.stop)
        assert slow.value["target"] == "coordinator"
        assert 500 <= slow.value["delay_ms"] <= 2000
        assert slow.value["jitter_ms"] == slow.value["delay_ms"] // 10
        assert pause.value["target"] == "leader" and resume.value == {"role": "L"}
        assert slow.at_s == 100.0 <= pause.at_s <= 101.5
        assert 101.0 <= fast.at_s <= 106.0
        assert pause.at_s + 1.0 <= resume.at_s <= pause.at_s + 6.0


def test_the_slow_variant_assembles_on_the_docker_backend() -> None:
    sc = _scenario_layer("kafka-txn-late-marker-slow")
    test = assemble(build_spec(sc, {"extra": {**sc["extra"], **CELLS["java-tv1-4.4.0"]}}))
    assert test.spec.backend == "docker"
    assert test.spec.nemesis == ("kafka-txn-late-marker-slow",)
    assert KafkaOptions.of(test.spec).request_timeout_ms == 3000
