"""Replica dumps of real Kafka agree with what the consumer read; a planted difference is caught."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from checkers.api import check_local
from harness.runfiles import Op
from systems.kafka import dump
from systems.kafka.client import KafkaQueueClient
from systems.kafka.dump import parse_dump
from tests.kafka.cluster import PARTITIONS, Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(2_000_000)


class _History:
    """history.jsonl lines as the contract has them."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, op: Op) -> None:
        row = {"index": len(self.rows), "time": len(self.rows) * 1000, "type": op.type,
               "process": op.process, "f": op.f, "value": op.value, **op.extra}
        self.rows.append(row)

    def write(self, path: Path) -> None:
        path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))


def _run(c: KafkaQueueClient, h: _History, f: str, value: Any, **extra: Any) -> Op:
    op = Op(type="invoke", process=0, f=f, value=value, extra=extra)
    h.add(op)
    done: Op = c.invoke(None, op)
    h.add(done)
    return done


def test_dumps_agree_with_reads_and_a_planted_difference_is_reported(
        kafka_cluster: Cluster, tmp_path: Path) -> None:
    h = _History()
    c = KafkaQueueClient(keys=PARTITIONS, acks="all", timeout_s=5.0,
                         bootstrap=kafka_cluster.kafka.bootstrap).open(None, "n1")
    try:
        for i in range(20):
            assert _run(c, h, "send", [["send", i % PARTITIONS, next(_values)]]).type == "ok"
        _run(c, h, "assign", list(range(PARTITIONS)), seek_to_beginning=True)
        read: dict[int, dict[int, int]] = {}
        for _ in range(40):
            done = _run(c, h, "poll", [["poll"]])
            for k, recs in done.value[0][1].items():
                read.setdefault(int(k), {}).update({o: v for o, v in recs})
            if sum(map(len, read.values())) >= 20 and len(read) == PARTITIONS:
                break
    finally:
        c.close(None)
    time.sleep(1.5)  # the HW checkpoint is written every 500 ms
    rows = kafka_cluster.kafka.dump_replicas(None)
    for node in kafka_cluster.kafka.nodes:
        for key in range(PARTITIONS):
            summary = [r for r in rows if r["node"] == node and r["key"] == key and "hw" in r]
            assert len(summary) == 1 and summary[0]["hw"] <= summary[0]["leo"]
            held = {r["offset"]: r["value"] for r in rows
                    if r["node"] == node and r["key"] == key and "offset" in r}
            committed = {o: v for o, v in held.items() if o < summary[0]["hw"]}
            assert all(read[key].get(o) == v for o, v in committed.items()), (node, key)
            assert all(held.get(o) == v for o, v in read[key].items()), (node, key)

    h.write(tmp_path / "history.jsonl")
    (tmp_path / "replicas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    clean = check_local(tmp_path)
    assert clean["valid"] is True, clean
    planted = [dict(r) for r in rows]
    victim = next(r for r in planted if r["node"] == "n2" and "offset" in r and r["offset"] == 0)
    victim["value"] = 999_999_999  # one committed record changed in one dumped replica
    (tmp_path / "replicas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in planted))
    bad = check_local(tmp_path)
    assert bad["valid"] is False and "replica-divergence" in bad["anomaly_types"], bad


def test_parse_dump_reads_batches_records_and_epochs() -> None:
    text = (
        "Dumping /d/undertow-3/00000000000000000000.log\n"
        "Log starting offset: 0\n"
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 0 "
        "producerEpoch: 0 partitionLeaderEpoch: 4 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 75 magic: 2 "
        "compresscodec: none crc: 1 isvalid: true\n"
        "| offset: 0 CreateTime: 1 keySize: -1 valueSize: 2 sequence: 0 "
        "headerKeys: [] payload: 17\n"
        "| offset: 1 CreateTime: 1 keySize: -1 valueSize: 2 sequence: 1 "
        "headerKeys: [] payload: 18\n"
    )
    rep = parse_dump(text, "n1")[3]
    assert rep.records == [(0, 17, 4), (1, 18, 4)] and rep.leo == 2


def test_one_dump_of_several_nodes_is_split_by_the_file_each_part_names() -> None:
    a, b = Path("/d/n1/undertow-0/0.log"), Path("/d/n2/undertow-0/0.log")
    text = (f"Dumping {a}\nLog starting offset: 0\n| offset: 0 payload: 1\n"
            f"Dumping {b}\nLog starting offset: 0\n| offset: 0 payload: 2\n")
    parts = dump.split_by_node(text, {"n1": [a], "n2": [b], "n3": []})
    assert parts == {"n1": f"Dumping {a}\nLog starting offset: 0\n| offset: 0 payload: 1",
                     "n2": f"Dumping {b}\nLog starting offset: 0\n| offset: 0 payload: 2",
                     "n3": ""}
    with pytest.raises(dump.DumpError, match="a file of no node"):
        dump.split_by_node(text, {"n1": [a]})
