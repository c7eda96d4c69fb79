"""python -m bench.kafka_20785 RUN_DIR...: KAFKA-20785 in a txn run's folder.

Under transaction version 2, when the transaction coordinator aborts a transaction on
its own (its transaction.timeout.ms passed) it bumps the producer's epoch; a commit that
was already on its way then arrives with the epoch before, passes the retry check, fails
the state check, and is answered INVALID_TXN_STATE, which the Java client treats as
fatal, although the transaction was rolled back (KAFKA-20785; fixed on Kafka's trunk in
2026-08 by answering PRODUCER_FENCED; under version 1 the same race is answered
PRODUCER_FENCED already). The coordinator logs "state is COMPLETE_ABORT, but received
transaction marker result to send: COMMIT" for each.

For each run folder: the `txn` operations whose commit was answered
InvalidTxnStateException (`info`, "commit outcome unknown"), the coordinators' warnings,
and how many of those commits have a warning within --within-ms of them (the history's
clock set on the brokers' by the first pair, so the first always matches).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

WARNING = "but received transaction marker result to send: COMMIT"
WITHIN_S = 0.25  # a commit and a warning this close in time are one race


def commits(run: Path) -> list[float]:
    """Seconds into the history of the commits answered InvalidTxnStateException."""
    out = []
    with (run / "history.jsonl").open() as f:
        for line in f:
            if "InvalidTxnStateException" in line:
                op = json.loads(line)
                if op["type"] == "info" and op["f"] == "txn":
                    out.append(op["time"] / 1e9)
    return sorted(out)


def warnings(run: Path) -> list[dt.datetime]:
    """When the coordinators logged the race (their logs' wall-clock time stamps)."""
    return sorted(dt.datetime.fromisoformat(line[:23])
                  for log in run.glob("nodes/*/kafka.log")
                  for line in log.open(errors="replace") if WARNING in line)


def facts(run: Path, within_s: float) -> dict[str, Any]:
    ts, ws = commits(run), warnings(run)
    spec = run / "test.json"
    features = json.loads(spec.read_text()).get("options", {}).get("kafka", {}).get(
        "kafka_features") if spec.is_file() else None
    matched = 0
    if ts and ws:
        zero = ws[0] - dt.timedelta(seconds=ts[0])
        matched = sum(min(abs((w - zero).total_seconds() - t) for w in ws) <= within_s
                      for t in ts)
    return {"run": str(run), "features": features, "commits": len(ts),
            "warnings": len(ws), "matched": matched}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--within-ms", type=float, default=WITHIN_S * 1000)
    a = ap.parse_args()
    missing = [str(r) for r in a.runs if not (r / "history.jsonl").is_file()]
    if missing:
        ap.error(f"not a run folder (no history.jsonl): {', '.join(missing)}")
    for run in a.runs:
        f = facts(run, a.within_ms / 1000)
        print(f"{f['run']}  features {f['features']}  InvalidTxnState commits {f['commits']}"
              f"  coordinator warnings {f['warnings']}  matched {f['matched']}")


if __name__ == "__main__":
    main()
