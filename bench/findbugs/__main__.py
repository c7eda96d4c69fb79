"""python -m bench.findbugs --runs N --time-limit S: every scenario, N seeded runs each.

Each run is `undertow run --scenario NAME --seed SEED` in its own process (a real
local cluster, then the checkers). A bug is found when the run is invalid and
reports every expected anomaly type; `safe` passes when valid. With `--control`,
each known-bug scenario runs instead with the settings that fix it (its
`fixed_by` options: the same fault sequence) and passes when valid. Prints a table of
seeds and verdicts and the median time to the first anomaly; writes
bench/out/findbugs/summary.json and summary.md (`--out` elsewhere). Runs go round-robin
over the scenarios, so a cut-short benchmark still covers each one.
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
from harness.scenarios import all_scenarios, control_label

SCENARIOS = all_scenarios()

OUT = Path("bench/out/findbugs")


def one_run(name: str, seed: int, time_limit_s: float | None, results_dir: Path,
            control: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--scenario", name, "--seed", str(seed),
           "--results-dir", str(results_dir), *(SCENARIOS[name].fixed_by if control else ())]
    if time_limit_s is not None:
        cmd += ["--time-limit", str(time_limit_s)]
    run_dir = results_dir / name / "latest"
    before = run_dir.resolve() if run_dir.exists() else None
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "UNDERTOW_PROXY_LOOP":
                               os.environ.get("UNDERTOW_PROXY_LOOP", "asyncio")})
    wall_s = time.monotonic() - t0
    row: dict[str, Any] = {"scenario": _label(name, control), "seed": seed,
                           "wall_s": round(wall_s, 1), "exit": done.returncode}
    try:
        run_dir = run_dir.resolve(strict=True)
        if run_dir == before:  # no new run folder: the run failed before making one
            raise OSError(f"no new run folder under {results_dir / name} (exit "
                          f"{done.returncode})")
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError) as e:
        row.update(valid="error", found=[], error=f"{e}; {done.stdout[-300:]}{done.stderr[-300:]}")
        return row
    expected = () if control else SCENARIOS[name].expected
    found = sorted(results.get("bad_anomaly_types") or [])
    if expected:
        ok = results.get("valid") is False and set(expected) <= set(found)
    else:
        ok = results.get("valid") is True
    row.update(valid=results.get("valid"), found=found, passed=ok, run_dir=str(run_dir),
               first_anomaly_s=first_anomaly_s(run_dir, results),
               liveness_ok=(results.get("stats") or {}).get("liveness", {}).get("ok"))
    if results.get("error"):
        row["error"] = str(results["error"])[:300]
    return row


def _label(name: str, control: bool) -> str:
    return control_label(name) if control else name


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    labels = [(n, s, False) for n, s in SCENARIOS.items()] + \
        [(n, s, True) for n, s in SCENARIOS.items() if s.fixed_by]
    for name, s, control in labels:
        mine = [r for r in rows if r["scenario"] == _label(name, control)]
        if not mine:  # not run in this batch
            continue
        firsts = [r["first_anomaly_s"] for r in mine if r.get("first_anomaly_s") is not None]
        out[_label(name, control)] = {
            "runs": len(mine), "passed": sum(1 for r in mine if r.get("passed")),
            "expected": ["(valid)"] if control or not s.expected else list(s.expected),
            "median_first_anomaly_s": round(statistics.median(firsts), 1) if firsts else None}
    return out


def table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = ["| scenario | seed | verdict | bad anomaly types | first anomaly (s) | pass |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        first = r.get("first_anomaly_s")
        lines.append(f"| {r['scenario']} | {r['seed']} | {r.get('valid')} | "
                     f"{', '.join(r.get('found') or []) or '-'} | "
                     f"{'-' if first is None else f'{first:.1f}'} | "
                     f"{'yes' if r.get('passed') else 'NO'} |")
    lines += ["", "| scenario | passed / runs | median time to first anomaly (s) | expected |",
              "|---|---|---|---|"]
    for name, s in summary.items():
        med = s["median_first_anomaly_s"]
        lines.append(f"| {name} | {s['passed']} / {s['runs']} | "
                     f"{'-' if med is None else med} | {', '.join(s['expected'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.findbugs", description=__doc__)
    ap.add_argument("--runs", type=int, default=10, help="seeded runs per scenario")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="seconds per run (default: each scenario's own, <= 120)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated scenario names")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop starting runs after this many seconds")
    ap.add_argument("--control", action="store_true",
                    help="run the known-bug scenarios with the settings that fix them "
                         "(each one's fixed_by); each passes when valid")
    ap.add_argument("--out", type=Path, default=OUT,
                    help=f"folder for the runs, rows.jsonl and the summaries (default {OUT})")
    ap.add_argument("--summarize", action="store_true",
                    help="only print the table of every run recorded in rows.jsonl")
    ap.add_argument("--rows", action="append", type=Path, default=None, metavar="FILE",
                    help="with --summarize: these rows files instead (repeat; e.g. batches "
                         "run side by side in other checkouts)")
    args = ap.parse_args()
    out = args.out
    if args.summarize:
        recorded = [json.loads(x) for f in (args.rows or [out / "rows.jsonl"])
                    for x in f.read_text().splitlines() if x]
        for r in recorded:  # recompute with the current definition
            if r.get("run_dir") and Path(r["run_dir"], "results.json").exists():
                res = json.loads(Path(r["run_dir"], "results.json").read_text())
                r["first_anomaly_s"] = first_anomaly_s(Path(r["run_dir"]), res)
        md = table(recorded, summarize(recorded))
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary-all.md").write_text(md + "\n")
        print(md)
        return
    names = [n for n in args.scenarios.split(",") if n]
    for n in names:
        if n not in SCENARIOS:
            ap.error(f"--scenarios: {n!r} is not one of {', '.join(SCENARIOS)}")
    if args.control:
        names = [n for n in names if SCENARIOS[n].fixed_by]
    out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for i in range(args.runs):
        for name in names:
            if args.budget_s is not None and time.monotonic() - t0 > args.budget_s:
                break
            row = one_run(name, args.first_seed + i, args.time_limit, out / "runs",
                          control=args.control)
            rows.append(row)
            print(json.dumps(row), flush=True)
            with (out / "rows.jsonl").open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    summary = summarize(rows)
    md = table(rows, summary)
    (out / "summary.json").write_text(json.dumps({"rows": rows, "summary": summary,
                                                  "load_at_start": load,
                                                  "load_at_end": os.getloadavg()}, indent=1))
    (out / "summary.md").write_text(md + "\n")
    print(md)
    print(f"load average at start {load}, at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
