"""What `availability` adds to a check: `python -m bench.availability --lines 10000000`.

Generates (once) a realistic history (bench.checker.gen.generate_realistic: re-sampled
from a real run, 2.4 % of sends ended info with an error message), then in one process
reads it as the check's driver does (checkers.tables.load_tables) and measures
checkers.availability on those tables: its own pass over the file for the nemesis and
error lines (harness.runfiles.read_notes) and the column work. With --full-check it
also runs `undertow check` on the folder, whose results.json stats give the whole
check's time and availability's part of it (`availability_s`). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.checker.gen import generate_realistic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    ap.add_argument("--full-check", action="store_true")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    run_dir = args.out / f"h-avail-{args.lines}"
    history = run_dir / "history.jsonl"
    if not history.is_file():
        run_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        generate_realistic(history, args.lines)
        print(f"generated {history} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    from checkers.api import parse_workers
    from checkers.availability import availability
    from checkers.tables import load_tables
    from harness.runfiles import read_notes

    t0 = time.monotonic()
    tables = load_tables(run_dir, workers=parse_workers())
    t1 = time.monotonic()
    notes = read_notes(history)
    t2 = time.monotonic()
    av = availability(tables, run_dir)
    t3 = time.monotonic()
    out = {"lines": tables.lines, "bytes": history.stat().st_size,
           "read_s": round(t1 - t0, 2), "notes_s": round(t2 - t1, 2),
           "availability_s": round(t3 - t2, 2), "error_lines": len(notes.errors),
           "send_ok_share": av["ops"]["send"]["ok_share"],
           "load": os.getloadavg()[0]}
    if args.full_check:
        del tables
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "harness.cli", "check", "--spark", "cold",
                        "--spark-master", args.master, "--reader", "driver", str(run_dir)],
                       check=False, stdout=subprocess.DEVNULL)
        stats = json.loads((run_dir / "results.json").read_text())["stats"]
        out.update(check_wall_s=round(time.monotonic() - t0, 2),
                   check_read_s=stats.get("read_s"), check_s=stats.get("check_s"),
                   check_availability_s=stats.get("availability_s"),
                   load_after=os.getloadavg()[0])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
