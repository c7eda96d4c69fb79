"""bench/kip101.py's table: each run's lost-write / replica-lost-write counts, from its row or,
for a row written before rows carried them, from the run's results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import kip101


def _row(seed: int, run_dir: Path, **more: Any) -> dict[str, Any]:
    return {"release": "0.10.2.2", "scenario": "kafka-kip101-loss", "seed": seed,
            "valid": False, "found": ["lost-write"], "passed": True, "run_dir": str(run_dir),
            "wall_s": 140.0, "first_anomaly_s": 4.5, **more}


def test_counts_come_from_the_row_or_the_runs_results(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "results.json").write_text(json.dumps(
        {"valid": False, "counts": {"replica-lost-write": 3, "duplicate": 1}}))
    rows = [_row(1, tmp_path / "new", counts={"lost-write": 2, "replica-lost-write": 5}),
            _row(2, old), _row(3, tmp_path / "gone")]
    assert kip101.row_losses(rows[0]) == {"lost-write": 2, "replica-lost-write": 5}
    assert kip101.row_losses(rows[1]) == {"lost-write": 0, "replica-lost-write": 3}
    assert kip101.row_losses(rows[2]) is None
    lines = kip101.table(rows).splitlines()
    assert "| 2 / 5 |" in lines[2] and "| 0 / 3 |" in lines[3] and "| - |" in lines[4]
    assert "| 0.10.2.2 | kafka-kip101-loss | 3 / 3 | 1 / 3 | 4.5 |" in lines
