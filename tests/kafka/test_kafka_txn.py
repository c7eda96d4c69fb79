"""`undertow run --system kafka --workload txn`: transactions through confluent-kafka's
transactional producer, on a real 3-node Kafka."""

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
from systems.kafka.txn_client import KafkaTxnClient
from tests.enough import Ops, valid_run_with_enough
from tests.kafka.pairs import clients


def _spec(**over: Any) -> Any:
    broker = over.pop("broker", {})
    return build_spec({"name": "kafka-txn", "system": "kafka", "workload": "txn",
                       "nemesis": ("kill", "pause"), **over, "broker": broker})


def test_txn_needs_acks_all() -> None:
    with pytest.raises(SpecError, match="--workload txn needs --acks all"):
        assemble(_spec(broker={"acks": "1", "min_insync_replicas": 1}))


def test_the_txn_client_reads_at_the_spec_isolation() -> None:
    test = assemble(_spec(isolation="read-uncommitted"))
    client = test.system.client(test)
    assert isinstance(client, KafkaTxnClient) and client.isolation == "read_uncommitted"


def _txns(run_dir: Path) -> Counter[str]:
    ops = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    return Counter(o["type"] for o in ops if o["f"] == "txn" and o["type"] != "invoke")


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("client", clients("java"))
def test_a_short_txn_run_is_valid_with_commits_and_aborts(
        tmp_path: Path, kafka_jars: jars.KafkaJars, client: str) -> None:
    outcome = core.run(_spec(time_limit_s=20.0, nemesis_interval_s=6.0, seed=3, keys=4,
                             results_dir=str(tmp_path), extra={"client": client}))
    assert outcome.valid is True, outcome.summary()
    done = _txns(outcome.run_dir)
    assert done["ok"] > 10 and done["fail"] > 3, done  # committed, and aborted at the coin
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert "G1a" not in results["anomaly_types"]


def test_txn_with_subscribe_joins_the_group_without_committing_outside_transactions() -> None:
    test = assemble(_spec(sub_via="subscribe", isolation="read-committed"))
    client = test.system.client(test)
    assert isinstance(client, KafkaTxnClient) and client.group is not None
    assert client.group.settings.commit == "off" and client.group.isolation == "read_committed"


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("client", clients("librdkafka"))
def test_a_short_consume_transform_produce_run_reads_each_offset_once(
        tmp_path: Path, kafka_jars: jars.KafkaJars, client: str) -> None:
    """--sub-via subscribe: each transaction sends the group consumer's positions into itself
    (send_offsets_to_transaction); with kills and pauses the run is valid and every offset
    below the group's final committed positions was read by exactly one committed txn.
    Phases: the group forms before the first fault and commits again after the last (a
    run whose faults began before the group had formed once committed nothing at all)."""
    from harness.report.groups import exactly_once

    def spec(seconds: float, results: Path) -> Any:
        return _spec(time_limit_s=seconds, nemesis_interval_s=6.0, seed=3, keys=4,
                     nemesis_schedule="phases", sub_via="subscribe",
                     results_dir=str(results), extra={"client": client})

    def enough(ops: Ops) -> bool:  # no transaction at all in a 30 s run at load 30
        eos = exactly_once(ops)
        return eos is not None and eos.transactions >= 2 and sum(k.once for k in eos.keys) >= 5

    _, ops = valid_run_with_enough(spec, enough, tmp_path, 30.0, 90.0)
    eos = exactly_once(ops)
    assert eos is not None and eos.committed_index is not None
    assert eos.holds, [k for k in eos.keys if k.unread or k.repeated]
    assert eos.transactions >= 2 and sum(k.once for k in eos.keys) >= 5  # loaded machines
