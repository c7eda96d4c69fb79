"""The seeded Raft simulator: safe Raft survives thousands of faulty schedules; Raft with the
log-up-to-date vote check switched off is caught within a few seeds."""

from __future__ import annotations

import os

import pytest
from broker.raft.sim import SimConfig, run_seed, run_seeds

WORKERS = min(2, os.cpu_count() or 1)


def test_1000_seeded_schedules_hold_every_invariant() -> None:
    s = run_seeds(0, 1000, workers=WORKERS)
    assert s.schedules == 1000
    assert not s.violations, [(r.seed, r.violation) for r in s.violations[:5]]
    # the schedules do real work: entries commit and leaders fail over
    assert s.committed > 1000 * 20
    assert len(s.failovers_ms) > 500


@pytest.mark.soak
def test_10000_seeded_schedules_hold_every_invariant() -> None:
    s = run_seeds(0, 10_000, workers=WORKERS)
    assert s.schedules == 10_000
    assert not s.violations, [(r.seed, r.violation) for r in s.violations[:5]]


def test_skipping_the_up_to_date_check_is_caught_within_50_seeds() -> None:
    broken = SimConfig(unsafe_skip_log_up_to_date_check=True)
    found = [r for r in (run_seed(seed, broken) for seed in range(50)) if r.violation]
    assert found, "the simulator missed a vote rule that loses committed entries"


def test_broken_variant_caught_by_the_basic_checks_alone() -> None:
    """Without the leader-completeness check, the loss still shows as a lost or changed entry."""
    broken = SimConfig(unsafe_skip_log_up_to_date_check=True, check_leader_completeness=False)
    found = [r.violation for r in (run_seed(seed, broken) for seed in range(50)) if r.violation]
    assert found
    assert any("lost committed" in v or "differs from the committed" in v for v in found), found


def test_same_seed_same_schedule() -> None:
    assert run_seed(123) == run_seed(123)
    assert run_seed(123) != run_seed(124)


def test_crash_only_schedules_fail_over_and_converge() -> None:
    cfg = SimConfig(faults=("crash_leader", "restart"), drop_p=0.0, dup_p=0.0)
    results = [run_seed(seed, cfg, vary=False) for seed in range(20)]
    assert all(r.violation is None for r in results), [r.violation for r in results]
    failovers = [ms for r in results for ms in r.failovers_ms]
    assert failovers
    # election timeout 150-300 ms: a new leader commits within a few timeouts
    assert max(failovers) < 3000, failovers
