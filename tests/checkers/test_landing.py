"""HISTORY.md's rule for faults that never took effect: asked for, none seen to land, the
verdict is "unknown" with the reason in one line; one that landed keeps it `true`; an
invalid run stays invalid whatever its faults did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers.api import check_local
from checkers.landing import unlanded_reason
from checkers.testing import HistoryBuilder, replica_rows


def _run(tmp: Path, faults: list[tuple[str, dict[str, Any]]], *, lose: bool = False) -> Path:
    """Two ok sends and a poll that reads them (or misses the first, read past: a lost
    write), between the given nemesis completions."""
    h = HistoryBuilder()
    h.send(0, 1, 10, 0)
    for f, extra in faults:
        h.line("invoke", "nemesis", f, {"nodes": ["n2"]})
        h.line("info", "nemesis", f, {"nodes": ["n2"]}, **extra)
    h.send(1, 1, 11, 1)
    h.poll(2, {1: [(1, 11)] if lose else [(0, 10), (1, 11)]})
    vals = [11] if lose else [10, 11]
    rows = [row for n in ("n1", "n2", "n3") for row in replica_rows(n, 1, len(vals), vals)]
    return h.write(tmp, rows)


MISSED = {"landed": False, "evidence": "n2: nothing to kill: no live process on n2"}
LANDED = {"landed": True, "evidence": "n2: pid 7 gone"}


def test_no_fault_landed_makes_a_valid_run_unknown(tmp_path: Path) -> None:
    results = check_local(_run(tmp_path, [("kill", MISSED), ("pause", MISSED)]))
    assert results["valid"] == "unknown"
    assert results["unknown_reason"] == (
        "2 fault completion(s) said whether the fault landed, and none did: the first, kill "
        "at 0.0 s: n2: nothing to kill: no live process on n2")


@pytest.mark.parametrize("faults", [[("kill", MISSED), ("kill", LANDED)],
                                    [("kill", {})],  # no claim: landing not observed
                                    []])
def test_a_landed_fault_or_no_claim_keeps_the_verdict(
        tmp_path: Path, faults: list[tuple[str, dict[str, Any]]]) -> None:
    results = check_local(_run(tmp_path, faults))
    assert results["valid"] is True and "unknown_reason" not in results


def test_an_invalid_run_stays_invalid(tmp_path: Path) -> None:
    results = check_local(_run(tmp_path, [("kill", MISSED)], lose=True))
    assert results["valid"] is False and "lost-write" in results["bad_anomaly_types"]
    assert "faults_unlanded" in results["stats"]


def test_invocations_and_heals_without_claims_are_not_counted() -> None:
    rows: list[dict[str, Any]] = [{"type": "invoke", "f": "kill", "landed": False},
                                  {"type": "info", "f": "start", "value": {}}]
    assert unlanded_reason(rows) is None
