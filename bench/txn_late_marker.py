"""python -m bench.txn_late_marker [--runs 10] [--seconds 120] [--cells a,b] [--seed 1]
[--until HH:MM] [--txn-sends awaited|at-commit] [--scenario kafka-txn-late-marker-slow]:
the KAFKA-17754 hunt (systems/kafka/hunts.py), seeded runs per cell, as a table. With
`--scenario kafka-txn-late-marker-slow` the coordinator's links are slowed instead of its
process paused, on that scenario's backend (docker).

Cells (client, release, transaction.version):
- librdkafka-3.9.1, librdkafka-4.4.0: confluent-kafka on the release's default feature
  levels (3.9.1: transaction.version 0; 4.4.0: 2, which librdkafka does not speak);
- java-tv1-4.4.0, java-tv2-4.4.0: Kafka's Java client 4.4.0 on a 4.4.0 cluster
  formatted with transaction.version=1 or =2 (KIP-890 part 2);
- java-3.9.1: the Java client (the newest 4.x, as for any broker before 4.0) on 3.9.1 at
  its default feature levels (transaction.version 0: the protocol before KIP-890).
Each run is `undertow run --scenario kafka-txn-late-marker` with the cell's options and
seed = --seed + i. Prints, per run: seed, verdict, anomaly types with counts, the time
from the main phase's start to the first anomaly (the latest operation an anomaly
example names, the earliest such over all examples), and the run folder; then per cell
the valid/invalid counts and the median time to the first anomaly. Writes
bench/out/txn_late_marker.json (or --out). One process runs every cell: the Java cells share one
JVM (one kafka-clients version, 4.4.0). --until (UTC) starts no run after that time, so a
hunt fits a deadline and stops between runs, never inside one. --txn-sends is the txn
workload's option for every cell: `at-commit` leaves the sends to the producer, so a send
that fails fails the commit, which is answered by an abort on the same producer (the
path KAFKA-17754 needs; with `awaited`, the default, a failed send aborts before any
commit, and a commit fails only when the producer cannot abort).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import kafka_20785
from workloads.options import TXN_SENDS

CELLS: dict[str, dict[str, Any]] = {
    "librdkafka-3.9.1": {"client": "librdkafka", "kafka_version": "3.9.1"},
    "librdkafka-4.4.0": {"client": "librdkafka", "kafka_version": "4.4.0"},
    "java-tv1-4.4.0": {"client": "java", "kafka_version": "4.4.0",
                       "kafka_features": {"transaction.version": 1}},
    "java-tv2-4.4.0": {"client": "java", "kafka_version": "4.4.0",
                       "kafka_features": {"transaction.version": 2}},
    "java-3.9.1": {"client": "java", "kafka_version": "3.9.1"},
}
# the hunt with pauses (any backend), and with the coordinator's links slowed (docker, ssh)
SCENARIOS = ("kafka-txn-late-marker", "kafka-txn-late-marker-slow")
OUT = Path(__file__).parent / "out" / "txn_late_marker.json"


def first_anomaly_s(run_dir: Path, results: dict[str, Any]) -> float | None:
    """Seconds from the first operation to the earliest moment a bad anomaly was visible
    (the types Kafka's transactions allow, G0 and the like, are not the bug hunted)."""
    times: dict[int, int] = {}
    start: int | None = None
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        times[int(op["index"])] = int(op["time"])
        start = int(op["time"]) if start is None else start
    best: int | None = None
    bad = set(results.get("bad_anomaly_types") or [])
    for kind, examples in (results.get("anomalies") or {}).items():
        if kind not in bad:
            continue
        for ex in examples if isinstance(examples, list) else []:
            idx = [int(v) for k, v in ex.items() if k.endswith("index") and isinstance(v, int)
                   and int(v) in times]
            if idx:
                seen = max(times[i] for i in idx)
                best = seen if best is None else min(best, seen)
    return None if best is None or start is None else (best - start) / 1e9


def txn_facts(run_dir: Path, results: dict[str, Any]) -> dict[str, Any]:
    """The transactions' completions, the pauses and slow links that landed and the commits
    that failed
    and were answered by an abort on the same producer (the clients' "aborted after"): a
    run with few commits, no pause or no such abort had little chance to show the bug."""
    avail = results.get("availability")
    if not isinstance(avail, dict):
        return {"txns": None, "pauses": None, "slows": None, "commit_aborts": None,
                "k20785": None}
    txn = (avail.get("ops") or {}).get("txn") or {}
    kinds = [w.get("kind") for w in avail.get("windows") or []]
    aborts = 0
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        if '"aborted after' in line:
            op = json.loads(line)
            aborts += op.get("f") == "txn" and str(op.get("error")).startswith("aborted after")
    return {"txns": [txn.get("ok", 0), txn.get("fail", 0), txn.get("info", 0)],
            "pauses": kinds.count("pause"), "slows": kinds.count("slow"),
            "commit_aborts": aborts,
            "k20785": kafka_20785.facts(run_dir, kafka_20785.WITHIN_S)["matched"]}


def run_one(cell: str, seed: int, seconds: float, results_dir: str,
            txn_sends: str = "awaited", scenario_name: str = SCENARIOS[0]) -> dict[str, Any]:
    from harness import core
    from harness.run_cli import _scenario_layer
    from harness.spec import build_spec

    scenario = _scenario_layer(scenario_name)
    extra = {**scenario.get("extra", {}), **CELLS[cell], "txn_sends": txn_sends}
    spec = build_spec(scenario, {"seed": seed, "time_limit_s": seconds,
                                 "results_dir": results_dir, "extra": extra,
                                 "name": f"late-marker-{cell}"})
    t0 = time.monotonic()
    outcome = core.run(spec)
    path = outcome.run_dir / "results.json"
    # a run that never reached a verdict (e.g. the cluster not ready in time) has none
    results = json.loads(path.read_text()) if path.is_file() else \
        {"valid": f"no verdict: {outcome.error or 'no results.json'}"[:80]}
    return {"cell": cell, "seed": seed, "txn_sends": txn_sends, "scenario": scenario_name,
            "valid": results.get("valid"),
            "counts": results.get("counts") or {t: 1 for t in results.get("anomaly_types", [])},
            "bad": results.get("bad_anomaly_types", []),
            "first_anomaly_s": first_anomaly_s(outcome.run_dir, results),
            **txn_facts(outcome.run_dir, results),
            "run_dir": str(outcome.run_dir), "wall_s": round(time.monotonic() - t0, 1)}


def table(rows: list[dict[str, Any]]) -> str:
    out = [f"{'cell':18} {'seed':>5} {'verdict':8} {'first(s)':>8} {'txn ok/fail/info':>16}"
           f" {'pauses':>6} {'c-abort':>7} {'20785':>5}  anomalies (bad ones marked *) / run "
           "folder"]
    for r in rows:
        first = "-" if r["first_anomaly_s"] is None else f"{r['first_anomaly_s']:.1f}"
        counts = ", ".join(f"{k}{'*' if k in r['bad'] else ''} {v}"
                           for k, v in sorted(r["counts"].items())) or "none"
        txns = "-" if r.get("txns") is None else "/".join(map(str, r["txns"]))
        pauses = "-" if r.get("pauses") is None else str(r["pauses"]) + (
            f"+{r['slows']}s" if r.get("slows") else "")
        aborts = "-" if r.get("commit_aborts") is None else str(r["commit_aborts"])
        k20785 = "-" if r.get("k20785") is None else str(r["k20785"])
        out.append(f"{r['cell']:18} {r['seed']:>5} {r['valid']!s:8} {first:>8} {txns:>16}"
                   f" {pauses:>6} {aborts:>7} {k20785:>5}  {counts}")
        out.append(f"{'':49}{r['run_dir']}")
    out.append("pauses: the pauses that landed (+Ns: and N slow links)")
    out.append("c-abort: commits that failed and were answered by an abort on the same producer")
    out.append("20785: commits answered INVALID_TXN_STATE for a transaction the coordinator had "
               "aborted (KAFKA-20785, bench/kafka_20785.py)")
    out.append("")
    for cell in dict.fromkeys(r["cell"] for r in rows):
        mine = [r for r in rows if r["cell"] == cell]
        firsts = [r["first_anomaly_s"] for r in mine if r["first_anomaly_s"] is not None]
        med = f"{statistics.median(firsts):.1f} s" if firsts else "-"
        out.append(f"{cell:18} runs {len(mine)}  valid {sum(r['valid'] is True for r in mine)}"
                   f"  invalid {sum(r['valid'] is False for r in mine)}"
                   f"  unknown {sum(r['valid'] not in (True, False) for r in mine)}"
                   f"  median first anomaly {med}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--results-dir", default="results/late-marker")
    ap.add_argument("--until", default=None, help="HH:MM UTC: start no run after it")
    ap.add_argument("--txn-sends", default="awaited", choices=TXN_SENDS,
                    help="the txn workload's --txn-sends, for every cell")
    ap.add_argument("--scenario", default=SCENARIOS[0], choices=SCENARIOS,
                    help="the hunt's pauses, or its slow links (on the scenario's backend, "
                         "docker)")
    ap.add_argument("--out", type=Path, default=OUT, help="the JSON of the runs")
    ap.add_argument("--table", action="store_true",
                    help="print the table of the runs recorded in the JSON, run nothing")
    a = ap.parse_args()
    if a.table:
        recorded: list[dict[str, Any]] = json.loads(a.out.read_text())
        for r in recorded:  # read again from each run folder, as this code reads them
            res = Path(r["run_dir"]) / "results.json"
            if res.is_file():
                results = json.loads(res.read_text())
                r.update(txn_facts(Path(r["run_dir"]), results),
                         first_anomaly_s=first_anomaly_s(Path(r["run_dir"]), results))
        print(table(recorded))
        return
    until: dt.datetime | None = None
    if a.until:
        try:
            hm = dt.datetime.strptime(a.until, "%H:%M")
        except ValueError:
            ap.error(f"--until: {a.until!r} is not HH:MM")
        until = dt.datetime.now(dt.UTC).replace(
            hour=hm.hour, minute=hm.minute, second=0, microsecond=0)
    cells = [c.strip() for c in a.cells.split(",") if c.strip()]
    unknown = [c for c in cells if c not in CELLS]
    if unknown:
        ap.error(f"--cells: unknown {', '.join(unknown)}; known: {', '.join(CELLS)}")
    rows: list[dict[str, Any]] = []
    for i in range(a.runs):  # the cells alternate, so each sees the machine's load alike
        for cell in cells:
            if until is not None and dt.datetime.now(dt.UTC) >= until:
                print(f"--until {a.until} reached: no more runs", flush=True)
                print(table(rows))
                return
            rows.append(run_one(cell, a.seed + i, a.seconds, a.results_dir, a.txn_sends,
                                a.scenario))
            print(table(rows[-1:]).split("\n")[1], flush=True)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
