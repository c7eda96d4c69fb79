"""python -m bench.coordinator_isolation [--runs 10] [--first-seed 1] [--seconds 90]
[--releases A,B,C] [--out DIR] [--stop-at HH:MM] [--summary-only]: the KAFKA-20634 hunt
(systems/kafka/coordinator_hunt.py), seeded runs per release, as a table.

The runs are `undertow matrix --scenario kafka-coordinator-isolation --kafka-versions R
--first-seed F --runs n`, seed by seed from F up to --runs, each release R in turn (the
matrix keeps finished runs), so the releases alternate seed by seed and each sees the
machine's load alike; one run at a time; --stop-at HH:MM (UTC) starts none after that.
Then, per run: the verdict, the bad anomalies with counts, commit operations ok / info /
fail, committed reads ok, and lines counted in the brokers' logs that say how far the
cycles got: `moved` (a leader of __consumer_offsets-0 became its follower: the
coordinator moved), `failAll` (the old coordinator's unload failing its pending writes
with NOT_COORDINATOR: the ordinary path, commits were waiting when leadership moved) and
`HighWatermarkUpdate failed` (the error the pull request names: a high watermark reached
the old coordinator after its log was truncated, i.e. the window of the bug was
entered).
Writes bench/out/coordinator_isolation.json.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

SCENARIO = "kafka-coordinator-isolation"
RELEASES = "4.3.0,4.3.1,4.4.0"
OUT = Path(__file__).parent / "out" / "coordinator_isolation.json"
LOG_MARKS = {"failAll": "failAll(NotCoordinatorException)",
             "hwm_failed": "Execution of HighWatermarkUpdate failed"}


def run_matrix(releases: str, runs: int, seconds: float, out: Path,
               stop_at: str | None = None, first_seed: int = 1) -> None:
    """Seed by seed (first_seed to runs), release by release; no run starts at or after
    `stop_at` (HH:MM UTC)."""
    for i in range(first_seed, runs + 1):
        for release in releases.split(","):
            if stop_at and time.strftime("%H:%M", time.gmtime()) >= stop_at:
                print(f"stop: {stop_at} UTC reached, no new run", flush=True)
                return
            subprocess.run([sys.executable, "-m", "harness.cli", "matrix", "--scenario",
                            SCENARIO, "--kafka-versions", release, "--first-seed",
                            str(first_seed), "--runs", str(i - first_seed + 1),
                            "--time-limit", str(seconds), "--out", str(out)], check=False)


def run_row(release: str, seed: int, folder: Path) -> dict[str, Any]:
    """One run's figures from its folder."""
    res = json.loads((folder / "results.json").read_text())
    ops: Counter[str] = Counter()
    for line in (folder / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["f"] in ("commit", "committed") and op["type"] != "invoke":
            ops[f"{op['f']} {op['type']}"] += 1
    marks = dict.fromkeys(LOG_MARKS, 0)
    moved = 0
    for log in sorted((folder / "nodes").glob("n*/kafka.log")):
        text = log.read_text(errors="replace")
        for k, needle in LOG_MARKS.items():
            marks[k] += text.count(needle)
        node_id = log.parent.name[1:]  # n2 is broker 2
        moved += len(re.findall(r"Follower __consumer_offsets-0 starts at leader epoch .*"
                                rf"Previous leader Some\({node_id}\)", text))
    bad = set(res.get("bad_anomaly_types") or [])
    return {"release": release, "seed": seed, "valid": res.get("valid"),
            "anomalies": {k: v for k, v in (res.get("counts") or {}).items() if k in bad},
            "ops": dict(ops), "moved": moved, **marks, "run_dir": str(folder)}


def rows(out: Path) -> list[dict[str, Any]]:
    """Every finished run of the matrix folder, release by release (from the folders, not
    matrix.json, which holds only what its last invocation asked for)."""
    from harness.matrix import finished

    found = []
    for cell in sorted((out / "cells").glob(f"*/{SCENARIO}")):
        done = finished(cell)
        found += [run_row(cell.parent.name, seed, done[seed]) for seed in sorted(done)]
    return found


def table(found: list[dict[str, Any]]) -> str:
    head = (f"{'release':8} {'seed':>4} {'verdict':8} {'commit ok/info/fail':>19} "
            f"{'read ok':>7} {'moved':>5} {'failAll':>7} {'hwm err':>7}  anomalies / run folder")
    out = [head]
    for r in found:
        o = r["ops"]
        c = f"{o.get('commit ok', 0)}/{o.get('commit info', 0)}/{o.get('commit fail', 0)}"
        an = ", ".join(f"{k} {v}" for k, v in sorted(r["anomalies"].items())) or "none"
        out.append(f"{r['release']:8} {r['seed']:>4} {r['valid']!s:8} {c:>19} "
                   f"{o.get('committed ok', 0):>7} {r['moved']:>5} {r['failAll']:>7} "
                   f"{r['hwm_failed']:>7}  {an}")
        out.append(f"{'':18}{r['run_dir']}")
    for rel in dict.fromkeys(r["release"] for r in found):
        mine = [r for r in found if r["release"] == rel]
        out.append(f"{rel:8} runs {len(mine)}  valid {sum(r['valid'] is True for r in mine)}"
                   f"  invalid {sum(r['valid'] is False for r in mine)}  runs with a "
                   f"HighWatermarkUpdate error {sum(r['hwm_failed'] > 0 for r in mine)}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="the last seed")
    ap.add_argument("--first-seed", type=int, default=1,
                    help="the first seed (another batch's folder keeps the seeds before)")
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--releases", default=RELEASES)
    ap.add_argument("--out", type=Path, default=Path("results/coordinator-isolation"))
    ap.add_argument("--stop-at", default=None, metavar="HH:MM",
                    help="start no run at or after this time (UTC)")
    ap.add_argument("--summary-only", action="store_true",
                    help="summarise the matrix folder as it is; run nothing")
    a = ap.parse_args()
    if not a.summary_only:
        run_matrix(a.releases, a.runs, a.seconds, a.out, a.stop_at, a.first_seed)
    found = rows(a.out)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(found, indent=1))
    print(table(found))


if __name__ == "__main__":
    main()
