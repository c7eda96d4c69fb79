"""The run-file checks of HISTORY.md as one harness.protocols.Checker (what `undertow check` runs).

Log checks per key, the dependency-graph cycles and the replica checks all read
the same tables, so they run as one job; an input that breaks the contract
answers "unknown" with the reader's `file:line: problem`. The Spark is the one the
spec names, by checkers.spark_server's rule (the warm server when it is up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.runfiles import HistoryError
from harness.spec import TestSpec


class RunFileChecker:
    """Every anomaly of HISTORY.md, from history.jsonl (and replicas.jsonl when present)."""

    name = "run-files"

    def check(self, run_dir: Path, spec: TestSpec | None) -> dict[str, Any]:
        from checkers.api import check_run
        from checkers.spark_server import SparkError, resolve

        try:
            target = (resolve(spec.spark, spec.spark_master, spec.spark_remote)
                      if spec is not None else resolve("auto", "local[2]"))
            return check_run(run_dir, target)
        except (HistoryError, SparkError) as e:
            what = "bad history" if isinstance(e, HistoryError) else "no Spark"
            return {"valid": "unknown", "error": f"{what}: {e}"}
