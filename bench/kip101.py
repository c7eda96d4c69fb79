"""python -m bench.kip101 --runs N --releases 0.10.2.2,0.11.0.3: KIP-101 on real Kafka releases.

Each run is `undertow run --scenario S --kafka-version V --seed SEED` in its own process
(a real local ZooKeeper-era cluster, then the checkers), for S in kafka-kip101-loss and
kafka-kip101-divergence. On a release without leader epochs (before 0.11.0) a run passes
when it is invalid with the scenario's expected anomaly; on a later release (the fix)
when it is valid. Prints a table (release, scenario, seed, verdict, anomaly types, the
counts of `lost-write` and `replica-lost-write`, time to the first anomaly, run folder)
and the totals; rows go to OUT/rows.jsonl as they
finish, so a cut-short batch keeps what it ran. Runs go round-robin over releases and
scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.findbugs.firsts import first_anomaly_s
from harness.scenarios import all_scenarios
from systems.kafka.releases import release

SCENARIOS = ("kafka-kip101-loss", "kafka-kip101-divergence")
OUT = Path("bench/out/kip101")
LOSSES = ("lost-write", "replica-lost-write")  # the counts a row shows: KIP-101's two faces


def one_run(scenario: str, version: str, seed: int, results_dir: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--scenario", scenario,
           "--kafka-version", version, "--seed", str(seed), "--results-dir", str(results_dir)]
    latest = results_dir / scenario / "latest"
    before = latest.resolve() if latest.exists() else None
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    row: dict[str, Any] = {"release": version, "scenario": scenario, "seed": seed,
                           "wall_s": round(time.monotonic() - t0, 1), "exit": done.returncode}
    try:
        run_dir = latest.resolve(strict=True)
        if run_dir == before:
            raise OSError(f"no new run folder (exit {done.returncode})")
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError) as e:
        row.update(valid="error", found=[], passed=False,
                   error=f"{e}; {done.stdout[-300:]}{done.stderr[-300:]}")
        return row
    found = sorted(results.get("bad_anomaly_types") or [])
    has_bug = not release(version).era.leader_epochs
    expected = set(all_scenarios()[scenario].expected)
    passed = (results.get("valid") is False and expected <= set(found)) if has_bug \
        else results.get("valid") is True
    row.update(valid=results.get("valid"), found=found, passed=passed, run_dir=str(run_dir),
               counts=losses(results), first_anomaly_s=first_anomaly_s(run_dir, results))
    return row


def losses(results: dict[str, Any]) -> dict[str, int]:
    """The run's count of each of LOSSES (0 when the checkers found none)."""
    counts = results.get("counts") or {}
    return {t: int(counts.get(t, 0)) for t in LOSSES}


def row_losses(row: dict[str, Any]) -> dict[str, int] | None:
    """A row's LOSSES counts; a row written before rows carried them reads its run's
    results.json; None when neither says."""
    if isinstance(row.get("counts"), dict):
        return {t: int(row["counts"].get(t, 0)) for t in LOSSES}
    try:
        return losses(json.loads((Path(row["run_dir"]) / "results.json").read_text()))
    except (KeyError, OSError, ValueError):
        return None


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| release | scenario | seed | verdict | bad anomaly types | "
             + " / ".join(LOSSES) + " | first anomaly (s) | wall (s) | pass | run folder |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        first = r.get("first_anomaly_s")
        n = row_losses(r)
        lines.append(f"| {r['release']} | {r['scenario']} | {r['seed']} | {r.get('valid')} | "
                     f"{', '.join(r.get('found') or []) or '-'} | "
                     f"{'-' if n is None else ' / '.join(str(n[t]) for t in LOSSES)} | "
                     f"{'-' if first is None else f'{first:.1f}'} | {r.get('wall_s', '-')} | "
                     f"{'yes' if r.get('passed') else 'NO'} | {r.get('run_dir', '-')} |")
    lines += ["", "| release | scenario | passed / runs | runs with lost-write | "
              "median first anomaly (s) |", "|---|---|---|---|---|"]
    for v, s in sorted({(r["release"], r["scenario"]) for r in rows}):
        mine = [r for r in rows if (r["release"], r["scenario"]) == (v, s)]
        firsts = [r["first_anomaly_s"] for r in mine if r.get("first_anomaly_s") is not None]
        med = f"{statistics.median(firsts):.1f}" if firsts else "-"
        hits = sum(bool((row_losses(r) or {}).get("lost-write")) for r in mine)
        lines.append(f"| {v} | {s} | {sum(bool(r.get('passed')) for r in mine)} / "
                     f"{len(mine)} | {hits} / {len(mine)} | {med} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.kip101", description=__doc__)
    ap.add_argument("--runs", type=int, default=10, help="seeded runs per release and scenario")
    ap.add_argument("--releases", default="0.10.2.2,0.11.0.3")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop starting runs after this many seconds")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summarize", action="store_true",
                    help="only print the table of the runs in OUT/rows.jsonl")
    args = ap.parse_args()
    rows_file = args.out / "rows.jsonl"
    if args.summarize:
        print(table([json.loads(x) for x in rows_file.read_text().splitlines() if x]))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    versions = [v for v in args.releases.split(",") if v]
    scenarios = [s for s in args.scenarios.split(",") if s]
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    load = os.getloadavg()
    for i in range(args.runs):
        for v in versions:
            for s in scenarios:
                if args.budget_s is not None and time.monotonic() - t0 > args.budget_s:
                    break
                row = one_run(s, v, args.first_seed + i, args.out / "runs")
                rows.append(row)
                print(json.dumps(row), flush=True)
                with rows_file.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    print(table(rows))
    print(f"load average at start {load}, at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
