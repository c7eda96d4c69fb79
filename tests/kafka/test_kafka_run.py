"""`undertow run --system kafka`: a whole run on local Kafka; what Kafka cannot do is refused."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import core
from harness.spec import SpecError, build_spec
from harness.test import assemble
from systems.kafka import jars
from systems.kafka.scenarios import SCENARIOS
from tests.kafka.pairs import clients


def _spec(**over: Any) -> Any:
    broker = over.pop("broker", {})
    return build_spec({"name": "kafka-test", "system": "kafka", "nemesis": ("kill", "pause"),
                       **over, "broker": broker})


@pytest.mark.parametrize(("over", "says"), [
    ({"nemesis": ("kill", "slow")}, "--nemesis slow: unsupported for Kafka"),
    ({"broker": {"truncation": "hw", "replication_factor": 2, "min_insync_replicas": 1}},
     "--truncation: only --system undertow has it, not kafka"),
    ({"backend": "ssh", "hosts": ("h1", "h2", "h3"), "nemesis": ("kill", "lossy")},
     "--nemesis lossy: unsupported for Kafka on the ssh backend"),
    ({"extra": {"controller_voters": 1}}, "exceeds the 2 brokers"),
    ({"extra": {"kafka_version": "3.9.1",
                "kafka_features": "eligible.leader.replicas.version=1"}},
     "Kafka 3.9.1 has no eligible.leader.replicas.version"),
    ({"extra": {"kafka_features": "no.such.version=1"}}, "not a feature the harness knows"),
    ({"extra": {"kafka_features": {"eligible.leader.replicas.version": 2}}}, "its levels are"),
    ({"extra": {"kafka_version": "0.9.0.1"}}, r"0\.10\.2\.0 and later; nearest that resolve: "
     r"0\.10\.2\.\d"),
    ({"extra": {"kafka_version": "1.1.1", "kafka_metadata": "kraft"}}, "runs zookeeper only"),
    ({"extra": {"kafka_version": "4.0.0", "kafka_metadata": "zookeeper"}}, "removed in 4.0.0"),
    ({"extra": {"kafka_version": "0.10.2.2"}, "workload": "txn"},
     r"transactions: Kafka 0.10.2.2 lacks it \(added in 0\.11\.0\.0\)"),
    ({"extra": {"kafka_version": "0.10.2.2"}, "producer": {"enable_idempotence": True}},
     r"idempotence: Kafka 0.10.2.2 lacks it \(added in 0\.11\.0\.0\)"),
])
def test_refused_before_anything_starts(over: dict[str, Any], says: str) -> None:
    with pytest.raises((SpecError, jars.KafkaJarsError), match=says):
        assemble(_spec(**over))


def test_the_scenarios_are_runnable_specs() -> None:
    for s in SCENARIOS.values():
        assert assemble(build_spec(dict(s.settings))).system.name == "kafka"


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("client", clients("librdkafka"))
def test_a_short_run_with_kills_and_pauses_is_valid(
        tmp_path: Path, kafka_jars: jars.KafkaJars, client: str) -> None:
    spec = _spec(time_limit_s=20.0, nemesis_interval_s=4.0, seed=7, keys=4,
                 max_writes_per_key=15, key_pool=40, results_dir=str(tmp_path),
                 extra={"client": client})
    outcome = core.run(spec)
    assert outcome.valid is True, outcome.summary()
    assert outcome.report is not None and outcome.report.is_file()
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["system"] == "kafka" and test["system_info"]["version"] == kafka_jars.version
    rows = (outcome.run_dir / "replicas.jsonl").read_text().splitlines()
    assert sum('"hw"' in r for r in rows) == 3 * 40  # a summary per replica of the pool
    # keys rotate through the pool: at most 15 sends each until all 40 were written (a fast
    # machine goes round again), every one read in the final reads
    ops = [json.loads(x) for x in (outcome.run_dir / "history.jsonl").read_text().splitlines()]
    sent = Counter(o["value"][0][1] for o in ops if o["f"] == "send" and o["type"] == "invoke")
    laps = -(-sum(sent.values()) // (15 * 40))
    assert len(sent) > 4 and max(sent.values()) <= 15 * (laps + 1)
    assert len(sent) == 40 or max(sent.values()) <= 15
    final = {k for o in ops if o["f"] == "assign" and o["type"] == "invoke"
             and o["time"] > 20e9 and o.get("seek_to_beginning") for k in o["value"]}
    assert final == set(sent)
    assert (outcome.run_dir / "nodes" / "n1" / "kafka.log").is_file()
    # kills and pauses seen to land on the brokers' JVMs; one that missed (a pause of a
    # node that a kill had taken down) says that no process was there
    faults = [o for o in ops if o["process"] == "nemesis" and o["type"] == "info"
              and o["f"] in ("kill", "pause")]
    landed = {o["f"] for o in faults if o["landed"] is True}
    assert landed == {"kill", "pause"}, faults
    assert all(o["evidence"].endswith(" gone") for o in faults
               if o["f"] == "kill" and o["landed"] and "; " not in o["evidence"])
    assert all("no live process" in o["evidence"] for o in faults if o["landed"] is False)
