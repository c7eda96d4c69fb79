"""Judging a run: each checker of the Test in turn, combined by HISTORY.md's rule.

Combining ranks false over "unknown" over true; anomaly types, counts and
examples are merged, and so are the stats (each checker names its own). The
combined answer is written to results.json once, through the run-file writer.
`undertow check DIR` judges a folder by the same checkers, assembled from its test.json.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.protocols import Checker
from harness.runfiles import RunPaths, write_results
from harness.spec import TestSpec

_RANK = {False: 0, "unknown": 1, True: 2}


def _rank(valid: Any) -> int:
    return _RANK.get(valid, 1) if isinstance(valid, bool | str) else 1


def combine(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One results.json from several checkers' answers."""
    out: dict[str, Any] = {"valid": True, "anomaly_types": [], "bad_anomaly_types": [],
                           "counts": {}, "anomalies": {}, "stats": {}}
    errors: list[str] = []
    for r in results:
        if _rank(r.get("valid", "unknown")) < _rank(out["valid"]):
            out["valid"] = r.get("valid", "unknown")
        for key in ("anomaly_types", "bad_anomaly_types"):
            out[key] = sorted(set(out[key]) | set(r.get(key) or ()))
        for k, v in (r.get("counts") or {}).items():
            out["counts"][k] = out["counts"].get(k, 0) + int(v)
        for k, v in (r.get("anomalies") or {}).items():
            out["anomalies"].setdefault(k, []).extend(v)
        out["stats"].update(r.get("stats") or {})
        if r.get("error"):
            errors.append(str(r["error"]))
        for k, v in r.items():
            if k not in out and k != "error":
                out[k] = v
    if errors:
        out["error"] = "; ".join(errors)
    return out


def answer(checker: Checker, run_dir: Path, spec: TestSpec | None,
           log: logging.Logger) -> Mapping[str, Any]:
    """One checker's answer over run_dir; a checker that raises answers unknown."""
    t0 = time.monotonic()
    try:
        return checker.check(run_dir, spec)
    except Exception as e:  # a checker that cannot decide answers unknown
        log.exception("checker %s failed", checker.name)
        return {"valid": "unknown", "error": f"{checker.name}: {e!r}"}
    finally:
        log.info("checker %s: %.2f s", checker.name, time.monotonic() - t0)


def check(checkers: Sequence[Checker], run_dir: Path, spec: TestSpec | None,
          log: logging.Logger) -> dict[str, Any]:
    """Every checker over run_dir, combined and written to results.json; never raises."""
    results = combine([answer(c, run_dir, spec, log) for c in checkers])
    write_results(run_dir, results)
    return results


def run_checkers(run_dir: Path) -> tuple[TestSpec, Sequence[Checker]] | None:
    """The checkers a run folder was judged by, assembled from its test.json as the run
    assembled them (the workload's, then the nemesis package's: liveness); None for a
    folder without test.json. ValueError (SpecError, HistoryError) naming what is wrong
    when test.json cannot be read or names a part this installation lacks."""
    from harness.spec import load_test_json
    from harness.test import assemble

    path = RunPaths(Path(run_dir)).test_json
    if not path.is_file():
        return None
    spec = load_test_json(path)
    return spec, assemble(spec).checkers()
