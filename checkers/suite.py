"""The run-file checks of HISTORY.md as one harness.protocols.Checker (what `undertow check` runs).

Log checks per key, the dependency-graph cycles and the replica checks all read
the same tables, so they run as one job; an input that breaks the contract
answers "unknown" with the reader's `file:line: problem`.
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

        master = spec.spark_master if spec is not None else "local[2]"
        try:
            return check_run(run_dir, spark_master=master)
        except HistoryError as e:
            return {"valid": "unknown", "error": f"bad history: {e}"}
