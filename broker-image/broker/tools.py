"""Offline tools over a node's data dir (the broker may be down).

  python -m broker.tools dump --data-dir D --node n1      replicas.jsonl rows on stdout
  python -m broker.tools lose-unflushed --data-dir D      cut logs back to the last flush

lose-unflushed prints `{"dropped": records, "cut_bytes": {"<replica dir>/<file>": bytes}}`:
the records cut and, per log file that lost any, the bytes (the fault's evidence).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .log import PartitionLog, list_partition_dirs, lose_unflushed


def dump_rows(data_dir: Path, node: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for _topic, pid, d in list_partition_dirs(data_dir):
        lg = PartitionLog(d)
        rows.extend(lg.dump_rows(node, pid, lg.latest_epoch))
        lg.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.tools", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="print the node's replicas as replicas.jsonl rows")
    d.add_argument("--data-dir", required=True, type=Path)
    d.add_argument("--node", required=True)
    lu = sub.add_parser("lose-unflushed", help="cut every log back to its last flushed offset")
    lu.add_argument("--data-dir", required=True, type=Path)
    args = ap.parse_args(argv)
    if not args.data_dir.is_dir():
        print(f"broker.tools: --data-dir {args.data_dir} is not a directory", file=sys.stderr)
        return 2
    if args.cmd == "dump":
        for row in dump_rows(args.data_dir, args.node):
            sys.stdout.write(json.dumps(row) + "\n")
        return 0
    total = 0
    cut: dict[str, int] = {}
    for _topic, pid, part_dir in list_partition_dirs(args.data_dir):
        before = _log_sizes(part_dir)
        n = lose_unflushed(part_dir)
        after = _log_sizes(part_dir)
        total += n
        cut |= {f"{part_dir.name}/{name}": size - after.get(name, 0)
                for name, size in before.items() if size > after.get(name, 0)}
        if n:
            print(f"partition {pid}: dropped {n} unflushed records", file=sys.stderr)
    print(json.dumps({"dropped": total, "cut_bytes": cut}))
    return 0


def _log_sizes(part_dir: Path) -> dict[str, int]:
    """Each log file of a replica and its size in bytes."""
    return {p.name: p.stat().st_size for p in part_dir.glob("*.log")}


if __name__ == "__main__":
    sys.exit(main())
