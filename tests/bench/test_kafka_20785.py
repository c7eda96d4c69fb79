"""bench.kafka_20785: the commits answered InvalidTxnStateException, paired with the
coordinators' warnings by time."""

from __future__ import annotations

import json
from pathlib import Path

from bench.kafka_20785 import WARNING, facts

LOG = ("2026-11-30T06:05:{s} [data-plane-kafka-request-handler-1] WARN "
       "kafka.coordinator.transaction.TransactionCoordinator - [TransactionCoordinator id=1] "
       "TransactionalId: txn-1's state is COMPLETE_ABORT, " + WARNING + "\n")


def _op(time_s: float, error: str, typ: str = "info") -> str:
    return json.dumps({"index": 0, "time": int(time_s * 1e9), "type": typ, "process": 1,
                       "f": "txn", "value": [], "error": error}) + "\n"


def test_each_commit_is_paired_with_a_warning_at_its_time(tmp_path: Path) -> None:
    bad = "commit outcome unknown: InvalidTxnStateException: The producer attempted ..."
    (tmp_path / "history.jsonl").write_text(
        _op(10.0, bad) + _op(12.0, "commit outcome unknown: ProducerFencedException: x")
        + _op(20.5, bad) + _op(31.0, bad))
    (tmp_path / "test.json").write_text(json.dumps(
        {"options": {"kafka": {"kafka_features": {"transaction.version": 2}}}}))
    node = tmp_path / "nodes" / "n1"
    node.mkdir(parents=True)
    # warnings at 10 s and 20.6 s of the history's clock (0 = 06:04:55.000); none at 31 s
    (node / "kafka.log").write_text("2026-11-30T06:05:00.000 an INFO line\n"
                                    + LOG.format(s="05.000") + LOG.format(s="15.600"))
    f = facts(tmp_path, within_s=0.25)
    assert (f["commits"], f["warnings"], f["matched"]) == (3, 2, 2)
    assert f["features"] == {"transaction.version": 2}
    assert facts(tmp_path, within_s=0.05)["matched"] == 1  # 20.6 against 20.5: 100 ms off
