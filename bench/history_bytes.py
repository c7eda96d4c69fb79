"""python -m bench.history_bytes RUN_DIR...: how a run's history grows with its length.

For each run folder: lines, bytes per line, the longest line, sends, keys sent to,
records per completed poll (mean and most), assigns and how many sought to the
beginning. Compare a 60 s and a 300 s run of the same options: with keys rotating,
bytes per line should not grow with the run's length.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.runfiles import read_jsonl


def measure(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "history.jsonl"
    size = path.stat().st_size
    rows = read_jsonl(path)
    longest = max((len(line) for line in path.read_bytes().split(b"\n")), default=0)
    sends = [r for r in rows if r.get("f") == "send" and r.get("type") == "invoke"]
    polls = [r for r in rows if r.get("f") == "poll" and r.get("type") != "invoke"]
    per_poll = [sum(len(recs) for m in r.get("value") or () if len(m) > 1
                    for recs in m[1].values()) for r in polls]
    assigns = [r for r in rows if r.get("f") == "assign" and r.get("type") == "invoke"]
    return {
        "run": str(run_dir), "lines": len(rows), "bytes_per_line": round(size / max(1, len(rows))),
        "longest_line": longest, "sends": len(sends),
        "keys": len({m[1] for r in sends for m in r.get("value") or ()}),
        "records_per_poll": round(sum(per_poll) / max(1, len(per_poll)), 1),
        "most_records_in_a_poll": max(per_poll, default=0),
        "assigns": len(assigns), "seeks": sum(bool(r.get("seek_to_beginning")) for r in assigns),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (or their latest links)")
    args = ap.parse_args()
    cols = ("lines", "bytes_per_line", "longest_line", "sends", "keys", "records_per_poll",
            "most_records_in_a_poll", "assigns", "seeks")
    print("| run | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for run in args.runs:
        m = measure(run.resolve())
        print(f"| {m['run']} | " + " | ".join(str(m[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
