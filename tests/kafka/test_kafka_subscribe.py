"""`undertow run --system kafka --sub-via subscribe`: the consumers share the keys through
one consumer group of real Kafka."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from harness.control.local import free_port
from harness.runfiles import Op
from harness.spec import SpecError, build_spec
from harness.spec import TestSpec as RunSpec  # not "Test*": pytest would try to collect it
from harness.test import assemble
from systems.kafka import jars
from systems.kafka.client import KafkaQueueClient
from systems.kafka.group_client import GroupConsumer, KafkaGroupClient, close_spare
from tests.enough import Ops, valid_run_with_enough
from tests.kafka.pairs import clients
from workloads.options import ConsumerSettings
from workloads.spares import Spares


def test_offset_operations_are_both_kafka_clients_on_the_queue_workload() -> None:
    from workloads import offsets

    base = {"system": "kafka", "sub_via": "subscribe", "consumer": {"commit": "processed"}}
    system = assemble(build_spec(base)).system
    assert offsets.enabled(build_spec(base), system)
    assert offsets.enabled(build_spec({**base, "extra": {"client": "java"}}), system)
    assert not offsets.enabled(build_spec({**base, "workload": "txn"}), system)


def test_an_assignor_librdkafka_lacks_is_refused() -> None:
    spec = build_spec({"system": "kafka", "sub_via": "subscribe",
                       "consumer": {"assignor": "sticky"}})
    with pytest.raises(SpecError, match="--assignor sticky"):
        assemble(spec)


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("client", clients("java"))
def test_a_short_subscribe_run_is_valid(tmp_path: Path, kafka_jars: jars.KafkaJars,
                                        client: str) -> None:
    """The Java client commits inside poll() only: its run commits `processed`, which makes
    its commits operations (and its processes read the committed offsets)."""
    def spec(seconds: float, results: Path) -> RunSpec:
        return build_spec({"name": "kafka-subscribe", "system": "kafka",
                           "sub_via": "subscribe", "nemesis": ("kill",),
                           "nemesis_interval_s": 6.0, "time_limit_s": seconds, "seed": 11,
                           "keys": 4, "key_pool": 12, "concurrency": 6,
                           "results_dir": str(results), "extra": {"client": client},
                           "consumer": {"commit": "processed" if client == "java" else "auto"}})

    def commits(ops: Ops) -> int:  # 1 in a 20 s run at load 30
        return sum(1 for o in ops if o["f"] == "commit" and o["type"] == "ok")

    _, ops = valid_run_with_enough(spec, lambda ops: client != "java" or commits(ops) >= 3,
                                   tmp_path, 20.0, 60.0)
    fs = Counter((o["f"], o["type"]) for o in ops)
    assert fs["subscribe", "ok"] >= 6
    readers = {o["process"] for o in ops if o["f"] == "poll" and o["type"] == "ok"
               and "assignment" in o and o["value"][0][1]}
    assert len(readers) >= 2  # the group spread the keys over more than one member
    final = [o for o in ops if o["type"] == "ok" and o.get("fetch_committed")]
    assert len(final) == 1 and final[0]["committed"]
    if client == "java":
        assert fs["commit", "ok"] >= 3 and fs["committed", "ok"] >= 1, fs
    else:
        assert not fs["commit", "invoke"] and not fs["committed", "invoke"]


@pytest.mark.kafka
@pytest.mark.slow
def test_librdkafka_commits_and_reads_offsets_as_operations(tmp_path: Path,
                                                            kafka_jars: jars.KafkaJars) -> None:
    """--commit processed: each commit is an operation (auto-commit off), processes read
    the committed offsets, the register checker judges them, kills of the coordinator
    included."""
    def spec(seconds: float, results: Path) -> RunSpec:
        return build_spec({"name": "kafka-offset-ops", "system": "kafka",
                           "sub_via": "subscribe", "nemesis": ("kill",),
                           "nemesis_targets": ("coordinator",), "nemesis_interval_s": 6.0,
                           "time_limit_s": seconds, "seed": 12, "keys": 4, "key_pool": 4,
                           "concurrency": 5, "results_dir": str(results),
                           "consumer": {"commit": "processed"}})

    def enough(ops: Ops) -> bool:  # no commit at all in a 20 s run at load 30
        fs = Counter((o["f"], o["type"]) for o in ops)
        return fs["commit", "ok"] >= 5 and fs["committed", "ok"] >= 3

    outcome, ops = valid_run_with_enough(spec, enough, tmp_path, 20.0, 60.0)
    fs = Counter((o["f"], o["type"]) for o in ops)
    assert fs["commit", "ok"] >= 5 and fs["committed", "ok"] >= 3, fs
    commits = [o for o in ops if o["f"] == "commit" and o["type"] == "invoke"]
    assert all(o["held"] and "generation" not in o for o in commits)
    answered = [o["value"][0][1] for o in ops if o["f"] == "committed" and o["type"] == "ok"]
    assert any(v is not None for a in answered for v in a.values())
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert results["stats"]["offset_registers"] >= 1


def test_a_rejoin_as_first_op_leaves_the_predecessors_waiting_membership() -> None:
    """A membership handed on after an `info` is taken over by the next process's first
    subscribe; when that one is a rejoin it must leave, not stay in the group polled by no
    one (librdkafka rejoins only once polled, so a forgotten member holds up every
    rebalance). Real librdkafka consumers, pointed at a port nothing listens on."""
    inner = KafkaQueueClient(keys=2, bootstrap=f"127.0.0.1:{free_port()}")
    spares: Spares[GroupConsumer] = Spares(close_spare)
    client = KafkaGroupClient(inner, partitions=2, settings=ConsumerSettings(), spares=spares)
    plain = Op("invoke", 0, "subscribe", [0, 1])
    assert client.invoke(None, plain).type == "ok"
    first = client.consumer
    assert first is not None
    client.close(None)  # after an info: the membership waits for the next process
    successor = KafkaGroupClient(inner, partitions=2, settings=ConsumerSettings(),
                                 spares=spares)
    rejoin = Op("invoke", 1, "subscribe", [0, 1], extra={"rejoin": True})
    assert successor.invoke(None, rejoin).type == "ok"
    assert spares.take() is None
    assert successor.consumer is not None and successor.consumer is not first
    with pytest.raises(RuntimeError, match="closed"):
        first.assignment()
    successor.ops.leave()
