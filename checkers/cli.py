"""`undertow check RUN_DIR...`: one Spark session for all folders, one line per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

EXIT = {True: 0, False: 1, "unknown": 3}
SEVERITY = {2: 3, 1: 2, 3: 1, 0: 0}  # worst first: 2, 1, 3, 0


def summary_line(run_dir: Path, results: dict[str, Any]) -> str:
    v = results["valid"]
    verdict = {True: "valid", False: "INVALID"}.get(v, "unknown")
    counts = " ".join(f"{k}={n}" for k, n in results["counts"].items())
    err = f" error: {results['error']}" if "error" in results else ""
    return f"{run_dir}: {verdict}" + (f" ({counts})" if counts else "") + err


@click.command("check")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Spark master URL to run the jobs on.")
@click.option("--spark-remote", default=None,
              help="Spark Connect address (sc://host:port) of a long-lived Spark.")
def check(run_dirs: tuple[Path, ...], spark_master: str, spark_remote: str | None) -> None:
    """Check run folders (history.jsonl, and replicas.jsonl when present); write results.json.

    Exit 0 valid, 1 invalid, 3 unknown, 2 bad usage or unreadable input (worst of all).
    """
    from checkers.api import check_with
    from checkers.spark import spark_session
    from harness.history import HistoryError

    codes: list[int] = []
    todo: list[Path] = []
    for d in run_dirs:
        if not (d / "history.jsonl").is_file():
            click.echo(f"{d}: error: no history.jsonl in this folder", err=True)
            codes.append(2)
        else:
            todo.append(d)
    if todo:
        local = spark_remote is None and spark_master.startswith("local")
        with spark_session(spark_master, spark_remote) as spark:
            for d in todo:
                try:
                    results = check_with(spark, d, local=local)
                except HistoryError as e:
                    click.echo(f"{d}: error: {e}", err=True)
                    codes.append(2)
                    continue
                click.echo(summary_line(d, results))
                codes.append(EXIT.get(results["valid"], 3))
    raise SystemExit(max(codes, key=lambda c: SEVERITY[c]))
