"""`python -m bench.checker`: time `undertow check` on 1M and 10M-op histories.

Each history is checked once per `--readers` (driver: this process reads it;
spark: Spark's executors read it by byte ranges), and with `--cluster 1,2` also on
a standalone cluster of that many one-core workers on this machine (Spark reading);
every check must give the same results. Beside it, in the same run, the
single-process floor: the strict Python reader in one process, the DuckDB reader on
one thread, then the same per-key numpy log checks in a plain loop (no Spark).
Peak memory is the largest sum of RSS over the checker's process tree (Python
driver, JVM, Python workers; on a cluster also its master, workers and executors),
sampled every 0.2 s, and beside it each part's own peak. Histories are generated
once into bench/out/ and reused: `--shape compact` (gen.generate, about 110 bytes a
line) or `realistic` (gen.generate_realistic, re-sampled from a real run, about 260).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from bench import proctree
from bench.checker.gen import PLANTED, generate, generate_realistic

OUT = Path(__file__).resolve().parents[1] / "out"


PARTS = ("driver", "jvm", "python_workers", "cluster")


def tree_rss_bytes(*roots: int) -> dict[str, int]:
    """RSS of the first root's tree by part (PARTS: the first root itself, the JVMs under
    it, the other processes under it) and of the other roots' trees ("cluster")."""
    procs = proctree.snapshot()
    out = dict.fromkeys(PARTS, 0)
    for i, root in enumerate(roots):
        for p in (root, *proctree.descendants(procs, root)):
            if p in procs:
                part = ("cluster" if i else "driver" if p == root else
                        "jvm" if procs[p].name == "java" else "python_workers")
                out[part] += procs[p].rss_bytes
    return out


def timed_check(run_dir: Path, master: str, reader: str = "auto",
                also: tuple[int, ...] = ()) -> tuple[float, int, int, dict[str, int]]:
    """Wall seconds, peak RSS (its tree and the trees of `also`), exit code of `undertow
    check`, and each part's own peak (PARTS; parts peak at different moments)."""
    exe = Path(sys.executable).with_name("undertow")
    t0 = time.monotonic()
    proc = subprocess.Popen([str(exe), "check", "--spark", "cold", "--spark-master", master,
                             "--reader", reader, str(run_dir)])
    peak = 0
    peaks = dict.fromkeys(PARTS, 0)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            now = tree_rss_bytes(proc.pid, *also)
            peak = max(peak, sum(now.values()))
            for k, v in now.items():
                peaks[k] = max(peaks[k], v)
            done.wait(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    code = proc.wait(timeout=3600)
    wall = time.monotonic() - t0
    done.set()
    th.join()
    return wall, peak, code, peaks


def floor(run_dir: Path) -> dict[str, Any]:
    from checkers.api import verdict  # noqa: F401  (same package the CLI uses)
    from checkers.fastscan import scan_fast
    from checkers.spark import log_checks_local
    from checkers.tables import build_tables
    from harness.runfiles import scan_history

    t0 = time.monotonic()
    scan_history(run_dir / "history.jsonl", workers=1)
    t01 = time.monotonic()
    scan = scan_fast(run_dir / "history.jsonl", workers=1)  # DuckDB, one thread
    t1 = time.monotonic()
    t = build_tables(scan, None)
    t2 = time.monotonic()
    log = log_checks_local(t)
    t3 = time.monotonic()
    counts: dict[str, int] = {}
    for tag, typ, n in zip(log["tag"], log["type"], log["n"], strict=True):
        if tag == "c":
            counts[str(typ)] = counts.get(str(typ), 0) + int(n)
    return {"parse_s": round(t01 - t0, 2), "parse_duckdb_1thread_s": round(t1 - t01, 2),
            "tables_s": round(t2 - t1, 2),
            "log_checks_s": round(t3 - t2, 2), "counts": counts}


# the check's own timings (results.json stats): Spark's parse, the driver's cross-line
# checks, the per-key job, the verdict with the cycle search
STAGES = ("read_s", "parse_s", "driver_s", "spark_job_s", "graph_s")
VERDICT = ("valid", "anomaly_types", "bad_anomaly_types", "counts", "anomalies")


def measured(run_dir: Path, size: int, label: str, master: str, reader: str,
             also: tuple[int, ...] = ()) -> dict[str, Any]:
    """One timed check as a row; the results.json it wrote goes in `verdict`."""
    load_before = os.getloadavg()[0]
    wall, peak, code, peaks = timed_check(run_dir, master, reader, also)
    results = orjson.loads((run_dir / "results.json").read_bytes())
    st = results["stats"]
    return {
        "ops": size, "check": label, "lines": st.get("lines"), "check_wall_s": round(wall, 1),
        "peak_rss_gb": round(peak / 2**30, 2),
        "peak_rss_gb_by_part": {k: round(v / 2**30, 2) for k, v in peaks.items() if v},
        "exit": code, "reader": st.get("reader",
                                                                              "driver"),
        "read_s": st.get("read_s", st.get("parse_s")), "check_s": st.get("check_s"),
        "stages_s": {k: st[k] for k in STAGES if k in st},
        "counts": results["counts"], "error": results.get("error"),
        "planted_found": all(p in results["counts"] for p in PLANTED),
        "load_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "verdict": {k: results.get(k) for k in VERDICT}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000000,10000000", help="ops (history lines)")
    ap.add_argument("--shape", choices=("compact", "realistic"), default="compact")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--readers", default="driver,spark",
                    help="who reads the history, one check each (undertow check --reader)")
    ap.add_argument("--cluster", default="",
                    help="worker counts of standalone clusters to check on too, e.g. 1,2")
    ap.add_argument("--no-floor", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        name = f"{size // 1_000_000}m" if size >= 1_000_000 else str(size)
        run_dir = OUT / (("r" if args.shape == "realistic" else "h") + name)
        run_dir.mkdir(parents=True, exist_ok=True)
        hist = run_dir / "history.jsonl"
        if not hist.exists():
            t = time.monotonic()
            (generate_realistic if args.shape == "realistic" else generate)(
                hist.with_suffix(".tmp"), size)
            hist.with_suffix(".tmp").rename(hist)
            print(f"generated {hist} in {time.monotonic() - t:.0f} s", flush=True)
        print(f"{hist}: {hist.stat().st_size / 1e9:.2f} GB", flush=True)
        these = [measured(run_dir, size, f"{args.master} reader={r}", args.master, r)
                 for r in args.readers.split(",") if r]
        for n in (int(w) for w in args.cluster.split(",") if w):
            from checkers.spark_server import StandaloneCluster

            with StandaloneCluster(OUT / f"cluster-{n}", workers=n, cores=1,
                                   memory="3g") as c:
                these.append(measured(run_dir, size, f"cluster of {n} one-core workers",
                                      c.url, "spark", tuple(p.pid for p in c.procs)))
        first = these[0]["verdict"]
        for row in these:
            row["same_verdict"] = row.pop("verdict") == first
            print(orjson.dumps(row).decode(), flush=True)
        if not args.no_floor:
            fl = floor(run_dir)
            log_types = {k: v for k, v in these[0]["counts"].items()
                         if not k.startswith("G") or k == "G1a"}
            print(orjson.dumps({"ops": size, "floor": fl,
                                "floor_agrees": fl["counts"] == log_types}).decode(),
                  flush=True)
            these.append({"ops": size, "floor": fl})
        rows += these
    (OUT / "checker.json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    print(f"cpus={os.cpu_count()} results in {OUT / 'checker.json'}")


if __name__ == "__main__":
    main()
