"""`undertow check RUN_DIR...`: one Spark session for all folders, one line per run."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from harness.spec import READERS, SPARK_CHOICES

if TYPE_CHECKING:
    from harness.protocols import Checker
    from harness.spec import TestSpec


def summary_line(run_dir: Path, results: dict[str, Any]) -> str:
    v = results["valid"]
    verdict = {True: "valid", False: "INVALID"}.get(v, "unknown")
    counts = " ".join(f"{k}={n}" for k, n in results["counts"].items())
    last = str(results.get("error", "")).strip().splitlines()[-1:] or [""]
    err = f" error: {last[0]}" if "error" in results else ""
    return f"{run_dir}: {verdict}" + (f" ({counts})" if counts else "") + err


@click.command("check")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--spark", "choice", type=click.Choice(SPARK_CHOICES), default="auto",
              show_default=True,
              help="auto: the warm Spark (`undertow spark start`) when it is up, else a cold "
                   "local session; cold: always a new session; warm: the warm Spark or exit 2.")
@click.option("--spark-master", default=None,
              help="Spark master URL for a cold session [default: local[*]]; a non-local "
                   "one (spark://HOST:PORT) is used as given.")
@click.option("--spark-remote", default=None,
              help="Spark Connect address (sc://HOST:PORT) of a long-lived Spark.")
@click.option("--reader", type=click.Choice(READERS), default="auto", show_default=True,
              help="Who reads history.jsonl: spark (its executors, by byte ranges; on a "
                   "cluster the file must be at the same path on every worker), driver "
                   "(this process), auto (spark for 256 MiB and more, except on Spark "
                   "Connect).")
def check(run_dirs: tuple[Path, ...], choice: str, spark_master: str | None,
          spark_remote: str | None, reader: str) -> None:
    """Check run folders (history.jsonl, and replicas.jsonl when present); write results.json.

    A run folder is judged by the checkers its run had (from test.json: liveness, the
    workload's own); a folder without test.json by the run-file checks of HISTORY.md.

    Exit 0 valid, 1 invalid, 3 unknown, 2 bad usage or unreadable input (worst of all).
    """
    from checkers.spark import SessionStarter
    from checkers.spark_server import SparkError, resolve
    from harness.runfiles import EXIT_USAGE, HistoryError, exit_code, worst_exit_code, write_results

    try:
        target = resolve(choice, spark_master, spark_remote)
    except SparkError as e:
        click.echo(f"undertow check: {e}", err=True)
        raise SystemExit(EXIT_USAGE) from e
    codes: list[int] = []
    starter = None
    if any((d / "history.jsonl").is_file() for d in run_dirs):
        t_start = time.monotonic()
        # starts while we parse
        starter = SessionStarter(target.master, target.remote, local=target.shares_files)
    try:
        # imported once the JVM is on its way: scipy (the cycle search) alone takes a second
        from checkers.api import check_read_by_spark, check_tables, parse_workers
        from checkers.sparkread import classic, wants_spark_read
        from checkers.tables import load_tables
        from harness.checking import run_checkers

        for d in run_dirs:
            if not (d / "history.jsonl").is_file():
                codes.append(_error(starter, f"{d}: error: no history.jsonl in this folder"))
                continue
            assert starter is not None
            try:
                planned = run_checkers(d)
            except ValueError as e:  # SpecError, HistoryError: test.json names the problem
                codes.append(_error(starter, f"{d}: error: {e}"))
                continue
            t0 = time.monotonic()
            try:
                if wants_spark_read(d, reader) and classic(spark := starter.get()):
                    waited_s = time.monotonic() - t0
                    results = check_read_by_spark(spark, d)
                else:
                    tables = load_tables(d, workers=parse_workers())
                    read_s = time.monotonic() - t0
                    t1 = time.monotonic()
                    spark = starter.get()
                    waited_s = time.monotonic() - t1
                    results = check_tables(spark, d, tables, local=target.shares_files,
                                           read_s=read_s)
            except HistoryError as e:
                codes.append(_error(starter, f"{d}: error: {e}"))
                continue
            if planned is not None:
                results = as_the_run(results, d, *planned)
            results["stats"]["spark_wait_s"] = round(waited_s, 3)  # start not hidden by reading
            results["stats"]["spark"] = target.label
            results["stats"]["since_start_s"] = round(time.monotonic() - t_start, 3)
            write_results(d, results)
            click.echo(summary_line(d, results))
            codes.append(exit_code(results["valid"]))
    finally:
        if starter is not None:
            starter.close()
    raise SystemExit(worst_exit_code(codes))


def as_the_run(results: dict[str, Any], run_dir: Path, spec: TestSpec,
               checkers: Sequence[Checker]) -> dict[str, Any]:
    """The run-file checks' results (made on this command's one Spark session) combined
    with the run's other checkers (liveness, a workload's own), in the run's order, as the
    run itself combined them."""
    from checkers.suite import RunFileChecker
    from harness.checking import answer, combine

    log = logging.getLogger("undertow.check")
    answers = [results if isinstance(c, RunFileChecker) else answer(c, run_dir, spec, log)
               for c in checkers]
    if not any(isinstance(c, RunFileChecker) for c in checkers):
        answers.insert(0, results)  # the contract's checks always run here
    return combine(answers)


def _error(starter: Any, message: str) -> int:
    """Print an input error (after the JVM's start, which borrows stderr); exit code 2."""
    from harness.runfiles import EXIT_USAGE

    if starter is not None:
        starter.wait()
    click.echo(message, err=True)
    return EXIT_USAGE
