"""python -m bench.cold_cpu RUN_DIR: where a cold check's CPU goes, stage by stage.

On a shared machine wall times follow the load; CPU time (user + system of this
process and every process under it: the Spark JVM and its Python workers) follows
the work. One cold local session, then: its start, the warm-up job
(checkers.spark.warm_up), reading the history, the log job, the verdict (cycle
search), the same log job again on the now warm JVM, each with wall and CPU time.
`--no-warm-up` skips the warm-up job (then the first job pays for it).
Extra JVM options (e.g. a class-data archive) can come from JDK_JAVA_OPTIONS.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench.harness.cpu import sample


def tree_cpu_s() -> float:
    """CPU seconds of this process and its live descendants."""
    spent = sample()
    return spent.harness + spent.servers


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.cold_cpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--no-warm-up", action="store_true")
    args = ap.parse_args()

    from checkers.api import parse_workers, verdict
    from checkers.spark import log_checks_spark, spark_session, warm_up
    from checkers.tables import load_tables

    last = [time.monotonic(), tree_cpu_s()]

    def stage(name: str) -> None:
        now = [time.monotonic(), tree_cpu_s()]
        print(f"{name:<10} wall {now[0] - last[0]:6.1f} s  cpu {now[1] - last[1]:6.1f} s  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        last[:] = [time.monotonic(), tree_cpu_s()]

    with spark_session(args.master) as spark:
        stage("session")
        if not args.no_warm_up:
            warm_up(spark, local=True)
            stage("warm-up")
        t = load_tables(args.run_dir, workers=parse_workers())
        stage("read")
        log = log_checks_spark(spark, t, local=True)
        stage("job")
        results = verdict(t, log)
        stage("verdict")
        log_checks_spark(spark, t, local=True)
        stage("job again")
    print(f"{t.lines} lines, valid {results['valid']}, {results['counts']}")


if __name__ == "__main__":
    main()
