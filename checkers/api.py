"""Checking run folders: read strictly, run the Spark log job and the graph search,
write results.json (HISTORY.md's shape)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from checkers.graph import cycle_results, find_cycles
from checkers.logcheck import EXAMPLES
from checkers.offsets import offset_results
from checkers.spark_server import SparkTarget
from checkers.tables import OK, Tables, load_tables
from harness.runfiles import F_CODES, write_results

ALWAYS_ALLOWED = frozenset({"int-send-skip"})
ALLOWED_WITH_SUBSCRIBE = frozenset({"poll-skip", "nonmonotonic-poll"})


def parse_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


def verdict(t: Tables, log: dict[str, Any]) -> dict[str, Any]:
    """results.json from the log job's answer (see checkers.logcheck.OUT_COLUMNS)."""
    t0 = time.monotonic()
    from checkers.spark import take_edges

    counts: dict[str, int] = {}
    anomalies: dict[str, list[Any]] = {}
    for tag, typ, n, detail in zip(log["tag"], log["type"], log["n"], log["detail"],
                                   strict=True):
        if tag == "c":
            counts[typ] = counts.get(typ, 0) + int(n)
        elif tag == "x":
            ex = anomalies.setdefault(typ, [])
            if len(ex) < EXAMPLES:
                ex.append(orjson.loads(detail))
    for ex_list in anomalies.values():
        ex_list.sort(key=lambda x: (x.get("key", 0), x.get("offset") or 0, str(x)))
    n_pr, pr_rows = take_edges(log, "pr")
    if n_pr:  # per operation: an operation that read its own sends in two keys counts once
        counts["precommitted-read"] = len(np.unique(np.concatenate([a for a, _ in pr_rows])))
    offsets = offset_results(t.registers) if t.registers is not None else None
    if offsets is not None:
        counts.update(offsets["counts"])
        anomalies.update(offsets["anomalies"])
    cycles = find_cycles(t, take_edges(log, "ww"), take_edges(log, "wr"))
    c_counts, c_examples, c_bad = cycle_results(cycles)
    counts.update(c_counts)
    anomalies.update(c_examples)
    allowed = set(ALWAYS_ALLOWED)
    if t.has_subscribe:
        allowed |= ALLOWED_WITH_SUBSCRIBE
    allowed |= {c for c in c_counts if c not in c_bad}
    types = sorted(counts)
    bad = [x for x in types if x not in allowed]
    any_ok = bool((t.op_status == OK).any())
    valid: bool | str = False if bad else (
        True if any_ok and not (offsets and offsets["unknown"]) else "unknown")
    send_ops = t.op_n_sends > 0
    poll_f = (t.op_f == F_CODES["poll"]) | (t.op_f == F_CODES["txn"])
    return {
        "valid": valid,
        "anomaly_types": types,
        "bad_anomaly_types": bad,
        "counts": {k: counts[k] for k in types},
        "anomalies": {k: anomalies.get(k, []) for k in types},
        "stats": {"ops": len(t.op), "ok": int((t.op_status == OK).sum()),
                  "sends_ok": int(t.op_n_sends[t.op_status == OK].sum()),
                  "send_ops": int(send_ops.sum()),
                  "polls_ok": int((poll_f & (t.op_status == OK)).sum()),
                  "lines": t.lines, "graph_s": round(time.monotonic() - t0, 3),
                  **(offsets["stats"] if offsets else {})},
    }


def with_availability(results: dict[str, Any], t: Tables, run_dir: Path) -> None:
    """results.json's `availability` (checkers.availability), beside the verdict and never
    changing it: a failure to measure it is noted there, and `valid` stands. The same
    nemesis lines decide whether any fault landed (checkers.landing), which can lower a
    `true` verdict to "unknown"."""
    from checkers import landing
    from checkers.availability import availability
    from harness.runfiles import read_notes

    t0 = time.monotonic()
    try:
        notes = read_notes(Path(run_dir) / "history.jsonl", workers=parse_workers(),
                           assigned=t.assigned is None)  # the DuckDB reader keeps none
    except Exception as e:  # unreadable notes: no availability, the verdict stands
        results["availability"] = {"error": f"{type(e).__name__}: {e}"}
        return
    landing.apply(results, notes.nemesis)
    try:
        results["availability"] = availability(t, run_dir, notes)
    except Exception as e:  # availability is a measurement, never a verdict
        results["availability"] = {"error": f"{type(e).__name__}: {e}"}
    results["stats"]["availability_s"] = round(time.monotonic() - t0, 3)


def check_tables(spark: Any, run_dir: Path, t: Tables, *, local: bool = True,
                 read_s: float = 0.0) -> dict[str, Any]:
    """Check loaded tables in an open session; write and return results.json."""
    from checkers.spark import log_checks_spark

    t1 = time.monotonic()
    try:
        log = log_checks_spark(spark, t, local=local)
        spark_job_s = time.monotonic() - t1
        results = verdict(t, log)
        results["stats"]["spark_job_s"] = round(spark_job_s, 3)
    except Exception as e:  # a checker that cannot decide answers unknown
        results = {"valid": "unknown", "anomaly_types": [], "bad_anomaly_types": [],
                   "counts": {}, "anomalies": {}, "error": f"{type(e).__name__}: {e}",
                   "stats": {"ops": len(t.op)}}
    results["stats"]["read_s"] = round(read_s, 3)
    with_availability(results, t, Path(run_dir))
    results["stats"]["check_s"] = round(time.monotonic() - t1, 3)
    write_results(Path(run_dir), results)
    return results


def check_read_by_spark(spark: Any, run_dir: Path) -> dict[str, Any]:
    """Check one folder, Spark reading its history (checkers.sparkread); HistoryError
    for bad input, else a verdict; write and return results.json."""
    from checkers.sparkread import load_and_check
    from harness.runfiles import HistoryError

    t0 = time.monotonic()
    t = None
    try:
        t, log, times = load_and_check(spark, Path(run_dir))
        results = verdict(t, log)
        results["stats"].update(times)
    except HistoryError:
        raise
    except Exception as e:  # a checker that cannot decide answers unknown
        results = {"valid": "unknown", "anomaly_types": [], "bad_anomaly_types": [],
                   "counts": {}, "anomalies": {}, "error": f"{type(e).__name__}: {e}",
                   "stats": {}}
    results["stats"]["reader"] = "spark"
    if t is not None:
        with_availability(results, t, Path(run_dir))
    results["stats"]["check_s"] = round(time.monotonic() - t0, 3)
    write_results(Path(run_dir), results)
    return results


def check_with(spark: Any, run_dir: Path, *, local: bool = True,
               reader: str = "auto") -> dict[str, Any]:
    """Check one folder in an open session; HistoryError for bad input, else a verdict.
    `reader`: who reads the history (harness.spec.READERS)."""
    from checkers.sparkread import classic, wants_spark_read

    if wants_spark_read(Path(run_dir), reader) and classic(spark):
        return check_read_by_spark(spark, Path(run_dir))
    t0 = time.monotonic()
    t = load_tables(Path(run_dir), workers=parse_workers())
    return check_tables(spark, run_dir, t, local=local, read_s=time.monotonic() - t0)


def check_runs(dirs: Sequence[Path], target: SparkTarget | None = None,
               reader: str = "auto") -> list[dict[str, Any]]:
    """Check many folders in one Spark session (input errors raise HistoryError)."""
    from checkers.spark import spark_session
    from checkers.spark_server import resolve

    target = target or resolve("cold", "local[*]")
    with spark_session(target.master, target.remote) as spark:
        out = [check_with(spark, Path(d), local=target.shares_files, reader=reader)
               for d in dirs]
    for d, results in zip(dirs, out, strict=True):
        results["stats"]["spark"] = target.label
        write_results(Path(d), results)
    return out


def check_run(run_dir: Path, target: SparkTarget | None = None,
              reader: str = "auto") -> dict[str, Any]:
    """Check one folder; writes run_dir/results.json and returns it."""
    return check_runs([run_dir], target, reader)[0]


def check_local(run_dir: Path, *, write: bool = False) -> dict[str, Any]:
    """The same checks without Spark, in this process (tests, the bench's floor)."""
    from checkers.spark import log_checks_local

    t = load_tables(Path(run_dir), workers=parse_workers())
    results = verdict(t, log_checks_local(t))
    with_availability(results, t, Path(run_dir))
    if write:
        write_results(Path(run_dir), results)
    return results
