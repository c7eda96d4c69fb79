"""`python -m bench.compare --old DIR`: this checkout against another, side by side in one run.

The machine is shared and noisy, so the two are measured alternately, round by
round (old, new, new, old, ...), each with its own venv and code:
- `python -m bench.harness --system S` (history writer, 3-node start to ready, client
  ops/s, and where both sides record it the CPU ms per client op: cpu_servers,
  cpu_harness);
- with `--history`, `undertow check` of the same recorded run folder (a copy each
  time: check writes results.json), wall time; `--history` names it (a folder the
  harness wrote, e.g. results/queue-kill-partition/latest);
- with `--bench txn` instead, `python -m bench.txn --rounds 1` (committed transactions
  per second, acknowledged records per second with idempotence on and off, the brokers'
  CPU per transaction when the checkout's bench.txn reports it).
`--together` runs old and new at the same moment in each round (each its own cluster)
instead of one after the other: on a machine whose load swings from second to second
both then see the same load (bench.harness: both start their clusters at once, so their
timed windows overlap to within the difference in start times).
Prints a table of medians (and every value) and writes bench/out/compare.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
OUT = HERE / "bench" / "out"


def _harness(checkouts: dict[str, Path], seconds: float, system: str,
             starts: int) -> dict[str, dict[str, float]]:
    """bench.harness in each checkout, all at once (each has its own bench/out)."""
    procs = {side: subprocess.Popen(
        [str(checkout / ".venv" / "bin" / "python"), "-m", "bench.harness", "--seconds",
         str(seconds), "--starts", str(starts), "--system", system], cwd=checkout,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for side, checkout in checkouts.items()}
    out = {}
    for side, proc in procs.items():
        if proc.wait(timeout=900) != 0:
            raise RuntimeError(f"{checkouts[side]}: bench.harness exited {proc.returncode}")
        name = "harness.json" if system == "undertow" else f"harness-{system}.json"
        res = json.loads((checkouts[side] / "bench" / "out" / name).read_text())
        row = {k: float(res[k]) for k in ("writer_ops_per_s", "start_to_ready_s", "ops_per_s")}
        cpu = res.get("cpu", {})  # CPU ms per client op (a checkout before it has none)
        row |= {f"cpu_{k}": float(cpu[f"{k}_ms_per_op"]) for k in ("servers", "harness")
                if f"{k}_ms_per_op" in cpu}
        out[side] = row
    return out


TXN_FIGURES = ("txns_per_s", "idempotent_records_per_s", "plain_records_per_s",
               "broker_cpu_ms_per_txn")


def _txn(checkouts: dict[str, Path], seconds: float, producers: int) -> dict[str, dict[str,
                                                                                      float]]:
    """bench.txn in each checkout, all at once; their figures by side."""
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as d:
        procs = {side: subprocess.Popen(
            [str(checkout / ".venv" / "bin" / "python"), "-m", "bench.txn", "--seconds",
             str(seconds), "--rounds", "1", "--producers", str(producers), "--out",
             str(Path(d) / f"{side}.json")], cwd=checkout, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL) for side, checkout in checkouts.items()}
        out = {}
        for side, proc in procs.items():
            if proc.wait(timeout=900) != 0:
                raise RuntimeError(f"{checkouts[side]}: bench.txn exited {proc.returncode}")
            res = json.loads((Path(d) / f"{side}.json").read_text())["summary"]
            out[side] = {k: float(res[k]) for k in TXN_FIGURES if k in res}
    return out


def _check(checkout: Path, history: Path) -> dict[str, float]:
    undertow = checkout / ".venv" / "bin" / "undertow"
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as d:
        run = Path(d) / "run"
        run.mkdir()
        for name in ("history.jsonl", "replicas.jsonl", "test.json"):
            if (history / name).exists():
                shutil.copy(history / name, run / name)
        t0 = time.monotonic()
        done = subprocess.run([str(undertow), "check", "--spark-master", "local[2]", str(run)],
                              cwd=checkout, capture_output=True, text=True, timeout=1800)
        took = time.monotonic() - t0
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{checkout}: undertow check exited {done.returncode}: "
                               f"{done.stderr[-500:]}")
        verdict = json.loads((run / "results.json").read_text())
    return {"check_s": took, "valid": float(verdict["valid"] is True)}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="the other checkout (with .venv)")
    ap.add_argument("--bench", choices=("harness", "txn"), default="harness",
                    help="what to measure (default: bench.harness, and check with --history)")
    ap.add_argument("--producers", type=int, default=8, help="bench.txn --producers")
    ap.add_argument("--together", action="store_true",
                    help="old and new at the same moment in each round (each its own "
                         "cluster), not one after the other")
    ap.add_argument("--history", type=Path, default=None,
                    help="a recorded run folder to check (none: no check figure)")
    ap.add_argument("--system", default="undertow", help="bench.harness --system")
    ap.add_argument("--starts", type=int, default=3, help="bench.harness --starts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0,
                    help="bench.harness --seconds, or bench.txn --seconds")
    args = ap.parse_args()
    if args.bench == "txn" and args.history is not None:
        ap.error("--history goes with --bench harness")
    sides = {"old": args.old.resolve(), "new": HERE}
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")  # neither always first
        for group in [order] if args.together else [(side,) for side in order]:
            if args.bench == "txn":
                got = _txn({side: sides[side] for side in group}, args.seconds, args.producers)
            else:
                got = _harness({side: sides[side] for side in group}, args.seconds,
                               args.system, args.starts)
            for side, row in got.items():
                if args.history is not None:
                    row.update(_check(sides[side], args.history.resolve()))
                row["load_1m"] = os.getloadavg()[0]
                rows[side].append(row)
                print(f"round {r + 1} {side}: "
                      + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)
    med = {side: {k: statistics.median(x[k] for x in rs) for k in rs[0]}
           for side, rs in rows.items()}
    print(f"\n{'figure':<24} {'old (median)':>14} {'new (median)':>14} {'new/old':>8}")
    for k in ("writer_ops_per_s", "start_to_ready_s", "ops_per_s", "cpu_servers",
              "cpu_harness", "check_s", *TXN_FIGURES, "load_1m"):
        if k not in med["old"] or k not in med["new"]:
            continue
        o, n = med["old"][k], med["new"][k]
        print(f"{k:<24} {o:>14,.2f} {n:>14,.2f} {n / o if o else float('nan'):>8.2f}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "compare.json").write_text(json.dumps({"old": str(sides["old"]), "bench": args.bench,
                                                  "system": args.system,
                                                  "together": args.together,
                                                  "rounds": rows, "median": med},
                                                 indent=1) + "\n")


if __name__ == "__main__":
    main()
