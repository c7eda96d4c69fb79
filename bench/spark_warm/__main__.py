"""`python -m bench.spark_warm`: what a warm Spark and a standalone cluster change.

1. Cold against warm: `undertow check` of one default 60 s run's folder (the part of a
   run between the end of the workload and the verdict), with a new local session
   (`--spark cold`) and on the warm server of `undertow spark start` (`--spark warm`),
   alternating cold, warm, cold, warm, ... in one run; the server is started once, before
   the first round, and stopped at the end.
2. A standalone cluster (master and workers from pyspark's scripts on 127.0.0.1, one core
   each): `undertow check --spark-master spark://...` of the same folder with one worker,
   then with two, each cluster started for its rounds and stopped after.

The folder is `--run DIR`, else a default `undertow run` made once into bench/out/spark-warm/.
Every check writes its results into a copy, and all verdicts must agree. Prints a table and
writes bench/out/spark_warm.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from checkers.spark_server import DIR_ENV, StandaloneCluster, free_port

OUT = Path(__file__).resolve().parents[1] / "out"
UNDERTOW = str(Path(sys.executable).with_name("undertow"))
SAME = ("valid", "anomaly_types", "bad_anomaly_types", "counts", "anomalies")


def default_run(results: Path) -> Path:
    """A default 60 s experiment's folder (made once, then reused)."""
    latest = results / "queue-kill-partition" / "latest"
    if not (latest / "history.jsonl").exists():
        print(f"bench: $ undertow run --results-dir {results} --seed 1 --spark cold",
              flush=True)
        subprocess.run([UNDERTOW, "run", "--results-dir", str(results), "--seed", "1",
                        "--spark", "cold"], check=False, timeout=1200)
    if not (latest / "history.jsonl").exists():
        raise SystemExit(f"bench: no run folder at {latest}")
    return latest.resolve()


def timed_check(run: Path, *args: str, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """Wall seconds of `undertow check ARGS` on a fresh copy of the folder, and its results."""
    with tempfile.TemporaryDirectory(prefix="bench-spark-", dir=OUT) as d:
        copy = Path(d) / "run"
        copy.mkdir()
        for name in ("history.jsonl", "replicas.jsonl", "test.json"):
            if (run / name).exists():
                shutil.copy(run / name, copy / name)
        t0 = time.monotonic()
        done = subprocess.run([UNDERTOW, "check", *args, str(copy)], env=env,
                              capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - t0
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"bench: undertow check {' '.join(args)} exited "
                             f"{done.returncode}: {done.stderr[-800:]}")
        return wall, json.loads((copy / "results.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_warm", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, help="a run folder (default: a default run, made once)")
    ap.add_argument("--rounds", type=int, default=3, help="cold/warm pairs (0: skip them)")
    ap.add_argument("--cluster-rounds", type=int, default=2,
                    help="checks per cluster size (0: skip the cluster)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    run = args.run.resolve() if args.run else default_run(OUT / "spark-warm" / "results")
    warm_dir = OUT / "spark-warm" / "server"
    env = {**os.environ, DIR_ENV: str(warm_dir)}
    rows: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []

    def record(kind: str, wall: float, results: dict[str, Any]) -> None:
        row = {"kind": kind, "wall_s": round(wall, 2), "valid": results["valid"],
               "spark": results["stats"].get("spark"),
               "spark_job_s": results["stats"].get("spark_job_s"),
               "read_s": results["stats"].get("read_s"),
               "spark_wait_s": results["stats"].get("spark_wait_s"),
               "in_check_s": results["stats"].get("since_start_s"),
               "load_1m": round(os.getloadavg()[0], 1)}
        rows.append(row)
        verdicts.append({k: results.get(k) for k in SAME})
        print(json.dumps(row), flush=True)

    start_s = None
    if args.rounds:
        t0 = time.monotonic()
        subprocess.run([UNDERTOW, "spark", "start", "--port", str(free_port())], env=env,
                       check=True, timeout=600)
        start_s = round(time.monotonic() - t0, 1)
    try:
        for _ in range(args.rounds):
            record("cold", *timed_check(run, "--spark", "cold", env=env))
            record("warm", *timed_check(run, "--spark", "warm", env=env))
    finally:
        if args.rounds:
            subprocess.run([UNDERTOW, "spark", "stop"], env=env, check=False, timeout=300)
    for workers in (1, 2) if args.cluster_rounds else ():
        with StandaloneCluster(OUT / "spark-warm" / f"cluster-{workers}",
                               workers=workers) as cluster:
            for _ in range(args.cluster_rounds):
                record(f"cluster-{workers}w",
                       *timed_check(run, "--spark-master", cluster.url, env=env))
    if any(v != verdicts[0] for v in verdicts):
        raise SystemExit("bench: the verdicts differ between Sparks")
    lines = json.loads((run / "results.json").read_text())["stats"].get("lines") \
        if (run / "results.json").exists() else None
    summary = {"run": str(run), "history_bytes": (run / "history.jsonl").stat().st_size,
               "lines": lines, "warm_start_s": start_s, "rows": rows,
               "median_wall_s": {k: round(statistics.median(r["wall_s"] for r in rows
                                                            if r["kind"] == k), 2)
                                 for k in dict.fromkeys(r["kind"] for r in rows)},
               "verdict": verdicts[0]["valid"], "cpus": os.cpu_count()}
    (OUT / "spark_warm.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{run} ({summary['history_bytes'] / 1e6:.0f} MB, {lines} lines); warm server "
          f"started in {start_s} s; all verdicts {summary['verdict']!r}, identical")
    print("| how | median check wall | every round |")
    print("|---|---|---|")
    for kind, med in summary["median_wall_s"].items():
        every = ", ".join(f"{r['wall_s']:.1f}" for r in rows if r["kind"] == kind)
        print(f"| {kind} | {med:.1f} s | {every} |")
    print(f"results in {OUT / 'spark_warm.json'}")


if __name__ == "__main__":
    main()
