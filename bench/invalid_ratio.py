"""`python -m bench.invalid_ratio INVALID VALID`: does an invalid history check in at most
1.5 times the time of a valid one of the same size?

INVALID and VALID are run folders (e.g. a `kip101-loss` run and the same scenario's
control, `--truncation leader-epoch`). The two are made the same size: the longer
history is cut to the shorter's line count (a prefix of a history is a history; its
open operations end info) and keeps its replicas.jsonl, which is then larger than the
other's; `--without-replicas` checks both histories without their replicas.jsonl.
Both are then checked alternately, `--rounds` times each, in one Spark session warmed
first (so no JVM start is in either figure), each from a fresh copy (check writes
results.json). Prints each check's wall time, its CPU time (this process, the JVM and
its Python workers: what a loaded machine changes least) and stages (read, Spark job,
cycle search), the medians and their ratios; writes bench/out/invalid_ratio.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from checkers.fastscan import line_count

OUT = Path(__file__).resolve().parent / "out"
BOUND = 1.5


def same_size(src: Path, dst: Path, n: int, names: tuple[str, ...]) -> None:
    """src's folder at dst, its history cut to its first n lines, and its files `names`."""
    dst.mkdir(parents=True)
    for name in names:
        if (src / name).exists():
            shutil.copy(src / name, dst / name)
    with (src / "history.jsonl").open("rb") as fin, (dst / "history.jsonl").open("wb") as fout:
        for i, line in enumerate(fin):
            if i == n:
                break
            fout.write(line)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.invalid_ratio", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("invalid", type=Path)
    ap.add_argument("valid", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--without-replicas", action="store_true")
    args = ap.parse_args()

    from bench.cold_cpu import tree_cpu_s
    from checkers.api import check_with
    from checkers.spark import spark_session, warm_up

    OUT.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ratio-", dir=OUT) as d:
        n = min(line_count(str(src / "history.jsonl")) for src in (args.invalid, args.valid))
        sources = {}
        for kind, src in (("invalid", args.invalid), ("valid", args.valid)):
            sources[kind] = Path(d) / f"{kind}-src"
            same_size(src.resolve(), sources[kind], n,
                      ("test.json",) if args.without_replicas else ("test.json", "replicas.jsonl"))
        with spark_session(args.master) as spark:
            warm_up(spark, local=True)
            for r in range(args.rounds):
                for kind in (("invalid", "valid") if r % 2 == 0 else ("valid", "invalid")):
                    run = Path(d) / f"{kind}-{r}"
                    shutil.copytree(sources[kind], run)
                    t0, c0 = time.monotonic(), tree_cpu_s()
                    res = check_with(spark, run)
                    wall, cpu = time.monotonic() - t0, tree_cpu_s() - c0
                    s = res["stats"]
                    row = {"kind": kind, "round": r, "valid": res["valid"], "lines": n,
                           "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                           "read_s": s.get("read_s"),
                           "spark_job_s": s.get("spark_job_s"), "graph_s": s.get("graph_s"),
                           "counts": res["counts"], "load_1m": round(os.getloadavg()[0], 1)}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                    shutil.rmtree(run)
    for kind, want in (("invalid", False), ("valid", True)):
        got = {r["valid"] for r in rows if r["kind"] == kind}
        if got != {want}:
            raise SystemExit(f"bench: the {kind} folder checked {sorted(map(str, got))}")
    med = {m: {k: statistics.median(r[m] for r in rows if r["kind"] == k)
               for k in ("invalid", "valid")} for m in ("wall_s", "cpu_s")}
    ratio = {m: round(v["invalid"] / v["valid"], 2) for m, v in med.items()}
    summary = {"lines": n, "replicas": not args.without_replicas, "medians": med,
               "ratio": ratio, "bound": BOUND, "rows": rows}
    (OUT / "invalid_ratio.json").write_text(json.dumps(summary, indent=1) + "\n")
    what = "" if args.without_replicas else " and replicas"
    for m, v in med.items():
        print(f"{n} lines{what}, {m} medians of {args.rounds}: invalid {v['invalid']:.2f}, "
              f"valid {v['valid']:.2f}: ratio {ratio[m]:.2f} (bound {BOUND})")


if __name__ == "__main__":
    main()
