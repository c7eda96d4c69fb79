"""The shrinker's core on plain trial functions: it finds exactly the faults that matter."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.shrink import MIN_LEAD_S, MIN_TAIL_S, Candidate, Progress, Shrinker, TrialResult


def spans(n: int, every_s: float = 5.0, length_s: float = 3.0) -> list[tuple[float, float]]:
    return [(10.0 + i * every_s, 10.0 + i * every_s + length_s) for i in range(n)]


def needs(*windows: int) -> Callable[[Candidate], TrialResult]:
    def trial(c: Candidate) -> TrialResult:
        return TrialResult(set(windows) <= set(c.keep))
    return trial


def test_two_planted_windows_of_twelve_are_found_exactly() -> None:
    sh = Shrinker(spans(12), 80.0, needs(3, 7))
    out = sh.run()
    assert out.best.keep == (3, 7) and out.stopped is None
    assert out.reproduced == (3, 3)  # the confirmation gave the best its three runs
    assert len(out.trials) <= 40


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 24).flatmap(
    lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=3))))
def test_ddmin_finds_any_planted_set(case: tuple[int, set[int]]) -> None:
    n, planted = case
    out = Shrinker(spans(n), 200.0, needs(*planted), tries=1).run()
    assert set(out.best.keep) == planted


def test_a_flaky_failure_is_kept_when_one_of_the_tries_reproduces() -> None:
    calls = itertools.count()

    def trial(c: Candidate) -> TrialResult:  # reproduces every third run, when 5 is kept
        return TrialResult(5 in c.keep and next(calls) % 3 == 2)

    out = Shrinker(spans(8), 60.0, trial, tries=3).run()
    assert out.best.keep == (5,)
    hits, runs = out.reproduced
    assert runs == 3 and 1 <= hits <= 3


def test_never_reproducing_keeps_the_original() -> None:
    out = Shrinker(spans(4), 40.0, lambda c: TrialResult(False), tries=2).run()
    assert out.best == out.original and out.reproduced == (0, 2)


def test_windows_shortened_then_lead_and_tail_cut() -> None:
    sh = Shrinker([(40.0, 50.0)], 100.0, lambda c: TrialResult(True))
    out = sh.run()
    a, b = sh.window(out.best, 0)
    assert (b - a) == 2.5  # halved twice (max_halvings)
    assert a == MIN_LEAD_S and out.best.time_limit_s == b + MIN_TAIL_S


def test_the_tail_is_cut_before_windows_are_shortened() -> None:
    sh = Shrinker(spans(8), 100.0, needs(1))  # window 1 is 15-18 s of a 100 s run
    out = sh.run()
    stages = [t.stage for t in out.trials]
    first_short = stages.index("shorten")
    assert stages.index("tail") < first_short
    assert all(t.candidate.time_limit_s == 18.0 + MIN_TAIL_S
               for t in out.trials[first_short:] if t.stage == "shorten")


def test_time_cuts_back_off_when_the_floor_does_not_reproduce() -> None:
    def trial(c: Candidate) -> TrialResult:  # needs 15 s of lead before its one window
        return TrialResult(40.0 - c.shift_s >= 15.0)

    sh = Shrinker([(40.0, 41.0)], 60.0, trial, tries=1)
    out = sh.run()
    assert sh.first_s(out.best) == 20.0  # the floor failed, 20 passed, 10 failed


def test_budget_stop_keeps_the_best_so_far() -> None:
    seen: list[Progress] = []
    sh = Shrinker(spans(16), 120.0, needs(2), tries=1, on_progress=seen.append,
                  should_stop=lambda: "budget" if len(seen) >= 3 else None)
    out = sh.run()
    assert out.stopped == "budget" and len(out.trials) == 3
    assert 2 in out.best.keep and out.best.size < 16
    assert [p.n for p in seen] == [1, 2, 3] and all(p.at_most >= p.n for p in seen)


class FakeClock:
    """Time that moves only when a trial runs: each trial takes `each_s`."""

    def __init__(self, each_s: float) -> None:
        self.now, self.each_s = 0.0, each_s

    def __call__(self) -> float:
        return self.now

    def trial(self, inner: Callable[[Candidate], TrialResult]) -> Callable[
            [Candidate], TrialResult]:
        def run(c: Candidate) -> TrialResult:
            self.now += self.each_s
            return inner(c)
        return run


def test_the_budget_leaves_room_to_confirm_the_best() -> None:
    clock = FakeClock(60.0)  # trials of a minute, a budget of ten
    sh = Shrinker(spans(16), 120.0, clock.trial(needs(5)), tries=3, budget_s=600.0,
                  clock=clock)
    out = sh.run()
    assert out.stopped == "budget" and clock.now <= 600.0
    assert out.reproduced == (3, 3)  # the search stopped while the confirmation still fit
    assert 5 in out.best.keep and out.best.size < 16
    assert out.trials[-1].stage == "confirm" and out.trials[-1].seconds == 60.0


def test_a_budget_that_is_not_reached_changes_nothing() -> None:
    clock = FakeClock(1.0)
    out = Shrinker(spans(12), 80.0, clock.trial(needs(3, 7)), budget_s=1e6,
                   clock=clock).run()
    assert out.best.keep == (3, 7) and out.stopped is None and out.reproduced == (3, 3)


def test_the_bound_on_trials_holds_and_ends_at_the_last_trial() -> None:
    seen: list[Progress] = []
    out = Shrinker(spans(10), 90.0, needs(4, 5), on_progress=seen.append).run()
    assert all(p.at_most >= len(out.trials) for p in seen)
    assert seen[-1].at_most == seen[-1].n == len(out.trials)


def test_an_interrupted_trial_ends_the_search_at_once() -> None:
    n = itertools.count()

    def trial(c: Candidate) -> TrialResult:
        i = next(n)
        return TrialResult(i == 0, stopped=i == 1)

    out = Shrinker(spans(8), 60.0, trial).run()
    assert out.stopped == "interrupted" and len(out.trials) == 2
    assert out.best.size == 4  # the first half reproduced before the interrupt


def test_a_trial_that_cannot_run_ends_the_search_with_the_best_so_far() -> None:
    out = Shrinker(spans(6), 60.0, lambda c: TrialResult(
        False, stopped=True, error="OSError: no ports")).run()
    assert out.stopped == "error: OSError: no ports" and out.best == out.original
    assert len(out.trials) == 1
