"""The run-file checks of HISTORY.md as one harness.protocols.Checker (what `undertow check` runs).

Log checks per key, the dependency-graph cycles and the replica checks all read
the same tables, so they run as one job; an input that breaks the contract
answers "unknown" with the reader's `file:line: problem`. The Spark is the one the
run's options name (checkers/options.py, `[checkers]`), by checkers.spark_server's rule
(the warm server when it is up).

In a run, the Spark session starts (and runs one tiny job, see checkers.spark.warm_up)
in the background while the workload runs (`prepare`), so the verdict does not wait
for a JVM; at nice 10 until the time limit is up, so the workload keeps the CPU it needs
(on a busy machine the start then mostly happens after it). If that start failed, the
check starts a session the ordinary way.
UNDERTOW_SPARK_EARLY=0 turns the early start off (the bench compares both).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkers.options import SparkOptions
from harness.runfiles import HistoryError, write_results
from harness.spec import TestSpec

if TYPE_CHECKING:
    from checkers.spark import SessionStarter
    from checkers.spark_server import SparkTarget
    from harness.runfiles import HistoryScan

EARLY_ENV = "UNDERTOW_SPARK_EARLY"
EARLY_NICE = 10
log = logging.getLogger(__name__)


def _target(spec: TestSpec | None) -> SparkTarget:
    from checkers.spark_server import resolve

    opts = SparkOptions.of(spec) if spec is not None else SparkOptions()
    return resolve(opts.spark, opts.spark_master, opts.spark_remote)


class RunFileChecker:
    """Every anomaly of HISTORY.md, from history.jsonl (and replicas.jsonl when present);
    the checkers' part (harness/options.py): which Spark checks is its options'."""

    name = "run-files"
    options = SparkOptions

    def __init__(self) -> None:
        self._early: tuple[SparkTarget, SessionStarter] | None = None
        self._early_error = ""
        self._unnice: threading.Timer | None = None
        self._reading: EarlyRead | None = None

    def prepare(self, spec: TestSpec) -> None:
        """Start the Spark session in the background (harness.protocols.Prepares)."""
        from checkers.spark import SessionStarter
        from checkers.spark_server import SparkError

        if self._early is not None or os.environ.get(EARLY_ENV) == "0":
            return
        try:
            target = _target(spec)
        except SparkError:
            return  # check says so, in results.json
        # niced while the workload's time limit runs: it comes first (a nice JVM only gives
        # way when the machine is busy); from then on, and for the check, nice 0 again
        starter = SessionStarter(target.master, target.remote, local=target.shares_files,
                                 nice=EARLY_NICE, hush=False)  # the run's terminal stays
        self._early = (target, starter)
        self._unnice = threading.Timer(spec.time_limit_s, starter.unnice)
        self._unnice.daemon = True
        self._unnice.start()

    def history_written(self, history: Path) -> None:
        """Start reading the finished history in the background, when the early session
        will check it and the driver reads it (harness.protocols.ReadsHistoryEarly)."""
        from checkers.sparkread import wants_spark_read

        if self._early is not None and not wants_spark_read(history.parent):
            self._reading = EarlyRead(history)

    def release(self) -> None:
        """Stop the early session, if any (waits for a start under way); never raises."""
        early, self._early = self._early, None
        self._reading = None
        if self._unnice is not None:
            self._unnice.cancel()
        if early is not None:
            try:
                early[1].close()
            except Exception:  # a JVM already gone (killed on Ctrl-C): nothing left to stop
                log.debug("stopping the early Spark session", exc_info=True)

    def check(self, run_dir: Path, spec: TestSpec | None) -> dict[str, Any]:
        from checkers.api import check_run
        from checkers.spark_server import SparkError

        try:
            results = self._check_early(run_dir)
            if results is None:
                results = check_run(run_dir, _target(spec))
                if self._early_error:
                    results["stats"]["spark_early"] = self._early_error
                    write_results(run_dir, results)
            return results
        except (HistoryError, SparkError) as e:
            what = "bad history" if isinstance(e, HistoryError) else "no Spark"
            return {"valid": "unknown", "error": f"{what}: {e}"}
        # the early session stays until `release`, which the run calls after the verdict:
        # stopping a Spark context takes seconds the verdict need not wait for

    def _check_early(self, run_dir: Path) -> dict[str, Any] | None:
        """The check in the session started early (the driver reads the history while its
        start ends; a history large enough for Spark to read, by checkers.sparkread's rule,
        is read by Spark once the session is up); None when there is none or it failed to
        start."""
        from checkers.api import check_read_by_spark, check_tables, parse_workers
        from checkers.sparkread import classic, wants_spark_read
        from checkers.tables import load_tables

        if self._early is None:
            return None
        target, starter = self._early
        by_spark = wants_spark_read(run_dir)
        t0 = time.monotonic()
        reading, self._reading = self._reading, None
        scan = reading.result() if reading is not None and reading.run_dir == run_dir.resolve() \
            else None
        tables = None if by_spark else load_tables(run_dir, workers=parse_workers(),
                                                   scan=scan)
        t1 = time.monotonic()
        try:
            spark = starter.get()
        except Exception as e:
            self._early_error = f"failed ({type(e).__name__}: {str(e)[:300]}), started late"
            log.warning("the early Spark start failed: %s", self._early_error)
            self.release()
            return None
        waited_s = time.monotonic() - t1
        if tables is None and classic(spark):
            results = check_read_by_spark(spark, run_dir)
        else:
            read_s = t1 - t0
            if tables is None:  # Spark Connect cannot read it: the driver does
                r0 = time.monotonic()
                tables = load_tables(run_dir, workers=parse_workers())
                read_s = time.monotonic() - r0
            results = check_tables(spark, run_dir, tables, local=target.shares_files,
                                   read_s=read_s)
        results["stats"].update(spark=target.label, spark_early=True,
                                spark_wait_s=round(waited_s, 3))
        write_results(run_dir, results)
        return results


class EarlyRead:
    """history.jsonl read in a thread (checkers.fastscan.scan_fast, DuckDB's C++ mostly
    outside the GIL) while the run dumps replicas and tears the cluster down."""

    def __init__(self, history: Path) -> None:
        from checkers.api import parse_workers

        self.run_dir = history.parent.resolve()
        self._history = history
        self._workers = parse_workers()
        self._scan: HistoryScan | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, name="history-read", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        from checkers.fastscan import scan_fast

        try:
            self._scan = scan_fast(self._history, workers=self._workers)
        except BaseException as e:  # raised again by result(), as a read in check would
            self._error = e

    def result(self) -> HistoryScan:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._scan is not None
        return self._scan
