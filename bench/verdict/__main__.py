"""`python -m bench.verdict`: how long a default run waits for its verdict, old and new.

The figure is the time from the end of the workload (harness.log's "final reads" line:
the time limit and the final heal are over) to the verdict (its "verdict" line, logged
as soon as results.json is written, before the report). It covers the final reads,
dumping replicas, tearing the cluster down, reading the history and the Spark job.

Four ways, run one after the other in each round, on the same seed:
- cold-late: a cold local Spark started when checking begins (UNDERTOW_SPARK_EARLY=0,
  what runs did before the early start);
- cold-early: a cold local Spark started in the background as the workload begins;
- warm-late / warm-early: the same on the warm server of `undertow spark start`
  (started once, before the first round, stopped at the end).
Prints a table and writes bench/out/verdict.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from checkers.spark_server import DIR_ENV, free_port

OUT = Path(__file__).resolve().parents[1] / "out"
UNDERTOW = str(Path(sys.executable).with_name("undertow"))
WAYS = {"cold-late": ("cold", "0"), "cold-early": ("cold", "1"),
        "warm-late": ("warm", "0"), "warm-early": ("warm", "1")}


def log_time(log: str, needle: str) -> datetime:
    """The timestamp of the first harness.log line containing needle."""
    for line in log.splitlines():
        if needle in line:
            return datetime.fromisoformat(line.split(" ", 1)[0])
    raise SystemExit(f"bench: no {needle!r} line in harness.log")


def one_run(way: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    spark, early = WAYS[way]
    with tempfile.TemporaryDirectory(prefix="bench-verdict-", dir=OUT) as d:
        done = subprocess.run(
            [UNDERTOW, "run", "--results-dir", d, "--seed", str(args.seed),
             "--time-limit", str(args.time_limit), "--spark", spark],
            env={**env, "UNDERTOW_SPARK_EARLY": early}, capture_output=True, text=True,
            timeout=args.time_limit + 1200)
        run = next(Path(d).glob("*/latest")).resolve()
        if done.returncode not in (0, 1):
            raise SystemExit(f"bench: {way} run exited {done.returncode}: "
                             f"{done.stdout[-500:]} {done.stderr[-1500:]}")
        log = (run / "harness.log").read_text()
        results = json.loads((run / "results.json").read_text())
        stats = results["stats"]
        end, verdict = log_time(log, "final reads"), log_time(log, "verdict ")
        checking = log_time(log, "MainThread: checking")
        row = {"way": way, "end_to_verdict_s": round((verdict - end).total_seconds(), 2),
               "end_to_checking_s": round((checking - end).total_seconds(), 2),
               "valid": results["valid"], "lines": stats.get("lines"),
               "history_mb": round((run / "history.jsonl").stat().st_size / 1e6, 1),
               "read_s": stats.get("read_s"), "spark_wait_s": stats.get("spark_wait_s"),
               "spark_job_s": stats.get("spark_job_s"), "graph_s": stats.get("graph_s"),
               "spark": stats.get("spark"), "load_1m": round(os.getloadavg()[0], 1)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.verdict", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the four ways")
    ap.add_argument("--time-limit", type=float, default=60.0, help="each run's time limit")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ways", default=",".join(WAYS),
                    help=f"which ways, comma-separated (of {', '.join(WAYS)})")
    args = ap.parse_args()
    ways = [w for w in args.ways.split(",") if w]
    if unknown := [w for w in ways if w not in WAYS]:
        raise SystemExit(f"bench: --ways: unknown {', '.join(unknown)}")
    OUT.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, DIR_ENV: str(OUT / "verdict-server")}
    warm = any(WAYS[w][0] == "warm" for w in ways)
    if warm:
        subprocess.run([UNDERTOW, "spark", "start", "--port", str(free_port())], env=env,
                       check=True, timeout=600)
    rows: list[dict[str, Any]] = []
    try:
        for _ in range(args.rounds):
            rows += [one_run(w, args, env) for w in ways]
    finally:
        if warm:
            subprocess.run([UNDERTOW, "spark", "stop"], env=env, check=False, timeout=300)
    median = {w: round(statistics.median(r["end_to_verdict_s"] for r in rows
                                         if r["way"] == w), 2) for w in ways}
    summary = {"time_limit_s": args.time_limit, "seed": args.seed, "rows": rows,
               "median_end_to_verdict_s": median, "cpus": os.cpu_count()}
    (OUT / "verdict.json").write_text(json.dumps(summary, indent=1) + "\n")
    print("| way | median end of workload -> verdict | every round (s) | read, wait, job (s) |")
    print("|---|---|---|---|")
    for w in ways:
        mine = [r for r in rows if r["way"] == w]
        every = ", ".join(f"{r['end_to_verdict_s']:.1f}" for r in mine)
        parts = "; ".join(f"{r['read_s']}, {r['spark_wait_s']}, {r['spark_job_s']}"
                          for r in mine)
        print(f"| {w} | {median[w]:.1f} s | {every} | {parts} |")
    print(f"results in {OUT / 'verdict.json'}")


if __name__ == "__main__":
    main()
