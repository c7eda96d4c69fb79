"""KIP-966's last replica standing on several Kafka releases: seeded runs through
`undertow matrix`, then one line per run (release, column, seed, verdict, anomalies,
time to the first anomaly, run folder).

    python -m bench.lrs --kafka-versions 4.0.2,4.1.2,3.9.1 --runs 10 --out results/lrs

Resumable like the matrix (finished runs are kept); the page is <out>/matrix.html.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SCENARIO = "kafka-last-replica-standing"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kafka-versions", default="4.0.2,4.1.2,3.9.1")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("results/lrs"))
    ap.add_argument("--no-control", action="store_true")
    a = ap.parse_args()
    cmd = [sys.executable, "-m", "harness.cli", "matrix", "--scenario", SCENARIO,
           "--kafka-versions", a.kafka_versions, "--runs", str(a.runs),
           "--first-seed", str(a.first_seed), "--out", str(a.out),
           *(() if a.no_control else ("--control",))]
    code = subprocess.run(cmd, check=False).returncode
    data = json.loads((a.out / "matrix.json").read_text())
    print(f"{'release':8} {'column':40} {'seed':>4}  {'verdict':28} "
          f"{'first s':>7}  anomalies / run folder")
    for c in data["cells"]:
        for r in c["runs"]:
            first = "" if r["first_anomaly_s"] is None else f"{r['first_anomaly_s']:.1f}"
            print(f"{c['release']:8} {c['column']:40} {r['seed']:>4}  {r['outcome'][:28]:28} "
                  f"{first:>7}  {r['counts']}  {a.out / r['path']}")
    for c in data["cells"]:
        print(f"{c['release']:8} {c['column']:40} {c['verdicts'] or 'does not apply'}"
              f"{'  DIFFERS' if c['differs'] else ''}")
    return code


if __name__ == "__main__":
    sys.exit(main())
