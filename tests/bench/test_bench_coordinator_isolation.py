"""bench.coordinator_isolation's per-run figures, from a hand-made run folder: commit
outcomes from the history, and the brokers' log lines that say how far a cycle got
(the coordinator moved, pending writes failed at the unload, a high watermark refused)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.coordinator_isolation import run_row, table

LOG_N2 = """\
2026-11-29T03:44:29.678 INFO state.change.logger - [Broker id=2] Follower __consumer_offsets-0 \
starts at leader epoch 5 from offset 565 with partition epoch 9 and high watermark 563. Current \
leader is 3. Previous leader Some(2) and previous leader epoch was 4.
2026-11-29T03:44:29.810 ERROR CoordinatorRuntime - [GroupCoordinator id=2] Execution of \
HighWatermarkUpdate failed due to New committed offset 601 of __consumer_offsets-0 must be less \
than or equal to 565..
2026-11-29T03:44:29.859 INFO DeferredEventQueue - failAll(NotCoordinatorException): failing x
"""
# broker 3 was a follower already (previous leader 2): not a move of its own
LOG_N3 = """\
2026-11-29T03:44:20.000 INFO state.change.logger - [Broker id=3] Follower __consumer_offsets-0 \
starts at leader epoch 4 from offset 500 with partition epoch 7 and high watermark 500. Current \
leader is 2. Previous leader Some(2) and previous leader epoch was 3.
"""


def _op(index: int, type_: str, process: int, f: str, value: object = None) -> str:
    return json.dumps({"index": index, "time": index, "type": type_, "process": process,
                       "f": f, "value": value})


def test_a_run_row_counts_commits_and_the_brokers_lines(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for node, text in (("n2", LOG_N2), ("n3", LOG_N3)):
        (run / "nodes" / node).mkdir(parents=True)
        (run / "nodes" / node / "kafka.log").write_text(text)
    lines = [_op(0, "invoke", 1, "commit", [["commit", {"0": 5}]]), _op(1, "ok", 1, "commit"),
             _op(2, "invoke", 2, "commit", [["commit", {"1": 3}]]), _op(3, "info", 2, "commit"),
             _op(4, "invoke", 3, "committed", [["committed", [0]]]),
             _op(5, "ok", 3, "committed", [["committed", {"0": 5}]])]
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    (run / "results.json").write_text(json.dumps({
        "valid": False, "bad_anomaly_types": ["stale-committed-offset"],
        "counts": {"stale-committed-offset": 2, "nonmonotonic-poll": 4}}))
    row = run_row("4.3.0", 7, run)
    assert row["ops"] == {"commit ok": 1, "commit info": 1, "committed ok": 1}
    assert (row["moved"], row["failAll"], row["hwm_failed"]) == (1, 1, 1)
    assert row["anomalies"] == {"stale-committed-offset": 2}  # the allowed ones left out
    out = table([row])
    assert "stale-committed-offset 2" in out and "1/1/0" in out
    assert "4.3.0    runs 1  valid 0  invalid 1" in out
