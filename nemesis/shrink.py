"""The shrinker's core: from a failing fault plan to a smallest one that still fails.

Pure and deterministic given its `trial` callable (tests pass plain functions;
`undertow shrink` passes one that makes a whole run). A candidate keeps some of
the plan's fault windows (nemesis.windows), maybe shortened, maybe moved
earlier, under some time limit. Stages, in order:

1. delta debugging over the windows (Zeller's ddmin): keep each half, then drop
   each half; then quarters, ... down to single windows;
2. cut the time limit (less healthy tail after the last kept step): every later
   trial is then a shorter run with a smaller history to check;
3. shorten each kept window (its steps drawn towards its start, halving);
4. move the faults earlier (less healthy lead) and cut the tail again.

A candidate is kept when one of `tries` trials reproduces (the trial says so,
and stops at the first that does); rejecting one costs all `tries`. A stop
request (Ctrl-C) ends the search with the best candidate so far. A budget ends
the search early enough that the best candidate's confirmation runs (it has had
one when it was kept; `tries` in all say how often it reproduces) still fit, at
the duration of the last trial: a budget-bound search ends confirmed, in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

MIN_WINDOW_S = 0.5  # a window is not shortened below this
MIN_LEAD_S = 2.0  # the cluster runs healthy at least this long before the first fault
MIN_TAIL_S = 3.0  # and at least this long after the last step


@dataclass(frozen=True, slots=True)
class Candidate:
    """Which windows to keep, each window's duration factor, a shift and the time limit."""

    keep: tuple[int, ...]
    time_limit_s: float
    scale: tuple[tuple[int, float], ...] = ()  # (window, factor < 1) for shortened windows
    shift_s: float = 0.0  # every step this much earlier

    @property
    def size(self) -> int:
        return len(self.keep)

    def scales(self) -> dict[int, float]:
        return dict(self.scale)


@dataclass(frozen=True, slots=True)
class TrialResult:
    """What one trial reports: reproduced one of the bad types; stopped (interrupted)."""

    reproduced: bool
    stopped: bool = False
    info: Any = None  # the caller's (e.g. the trial's run folder)
    error: str | None = None  # with stopped: the trial could not run (the search ends)


@dataclass(frozen=True, slots=True)
class Trial:
    n: int  # 1, 2, ...
    stage: str
    candidate: Candidate
    result: TrialResult
    seconds: float = 0.0  # how long it took


@dataclass(frozen=True, slots=True)
class Progress:
    """Sent before each trial: trial n of at most m, the stage, the candidate, the best."""

    n: int
    at_most: int
    stage: str
    candidate: Candidate
    best: Candidate


@dataclass(frozen=True, slots=True)
class Shrunk:
    original: Candidate
    best: Candidate
    trials: tuple[Trial, ...]
    stopped: str | None  # why it ended early: "interrupted", "budget", "error: ..."; or None

    def runs_of(self, c: Candidate) -> list[Trial]:
        return [t for t in self.trials if t.candidate == c]

    @property
    def reproduced(self) -> tuple[int, int]:
        """(runs of the best candidate that reproduced, runs of it)."""
        runs = self.runs_of(self.best)
        return sum(t.result.reproduced for t in runs), len(runs)


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Shrinker:
    """One search; `run()` returns the best candidate and every trial it took."""

    spans: Sequence[tuple[float, float]]  # each window's (from, to) in the original plan
    time_limit_s: float
    trial: Callable[[Candidate], TrialResult]
    tries: int = 3
    should_stop: Callable[[], str | None] = lambda: None
    on_progress: Callable[[Progress], None] = lambda p: None
    max_halvings: int = 2  # per window, in stage 2
    budget_s: float | None = None  # searching and confirming end within this long
    clock: Callable[[], float] = time.monotonic
    trials: list[Trial] = field(default_factory=list)
    _seen: dict[Candidate, bool] = field(default_factory=dict)
    _stage: str = "ddmin"

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError("tries must be at least 1")
        self.original = Candidate(tuple(range(len(self.spans))), self.time_limit_s)
        self.best = self.original
        self._started = self.clock()

    # -- the model of a candidate's timing (what nemesis.windows.restrict does to steps)

    def window(self, c: Candidate, w: int) -> tuple[float, float]:
        a, b = self.spans[w]
        return a - c.shift_s, a + (b - a) * c.scales().get(w, 1.0) - c.shift_s

    def first_s(self, c: Candidate) -> float:
        return min((self.window(c, w)[0] for w in c.keep), default=0.0)

    def last_s(self, c: Candidate) -> float:
        return max((self.window(c, w)[1] for w in c.keep), default=0.0)

    # -- trials

    def at_most(self) -> int:
        """An upper bound on the trials this search can still take (shown as progress)."""
        k = self.best.size
        left = {"ddmin": k * (k + 3) // 2 + k * self.max_halvings + 12,
                "tail": k * self.max_halvings + 12, "shorten": k * self.max_halvings + 8,
                "time": 8, "confirm": 0}[self._stage]
        return len(self.trials) + self.tries * left + self._due()

    def _due(self) -> int:
        """Confirmation runs the best candidate still needs."""
        return max(0, self.tries - len([t for t in self.trials if t.candidate == self.best]))

    def _over_budget(self) -> bool:
        """Whether the next trial, and while searching the best's confirmation after it,
        would end past the budget (a trial taking as long as the last one did, a run of the
        best as long as its last run)."""
        if self.budget_s is None:
            return False
        last = self.trials[-1].seconds if self.trials else 0.0
        best = [t.seconds for t in self.trials if t.candidate == self.best][-1:] or [last]
        need = best[0] if self._stage == "confirm" else last + self._due() * best[0]
        return self.clock() - self._started + need > self.budget_s

    def _one(self, c: Candidate) -> TrialResult:
        reason = self.should_stop() or ("budget" if self._over_budget() else None)
        if reason:
            raise _Stop(reason)
        n = len(self.trials) + 1
        self.on_progress(Progress(n, max(n, self.at_most()), self._stage, c, self.best))
        t0 = self.clock()
        r = self.trial(c)
        self.trials.append(Trial(n, self._stage, c, r, self.clock() - t0))
        if r.stopped:
            raise _Stop("interrupted" if r.error is None else f"error: {r.error}")
        return r

    def reproduces(self, c: Candidate) -> bool:
        """Up to `tries` trials of c, stopping at the first that reproduces; cached."""
        if c not in self._seen:
            self._seen[c] = any(self._one(c).reproduced for _ in range(self.tries))
        if self._seen[c]:
            self.best = c
        return self._seen[c]

    # -- stages

    def _ddmin(self) -> None:
        items = list(self.best.keep)
        rejected: list[frozenset[int]] = []

        def keeps(keep: Sequence[int]) -> bool:
            """Whether keeping these windows reproduces; a subset of a rejected set is taken
            as rejected without a trial (fewer faults rarely break more)."""
            if any(rej >= frozenset(keep) for rej in rejected):
                return False
            if self.reproduces(replace(self.best, keep=tuple(keep))):
                return True
            rejected.append(frozenset(keep))
            return False

        n = 2
        while len(items) >= 2:
            chunks = _split(items, n)
            found = next((ch for ch in chunks if keeps(ch)), None)
            if found is not None:
                items, n = found, 2
                continue
            if n > 2:
                for ch in chunks:
                    rest = tuple(x for x in items if x not in ch)
                    if keeps(rest):
                        items, n, found = list(rest), max(n - 1, 2), ch
                        break
                if found is not None:
                    continue
            if n >= len(items):
                return
            n = min(2 * n, len(items))

    def _shorten(self) -> None:
        for w in self.best.keep:
            for _ in range(self.max_halvings):
                a, b = self.window(self.best, w)
                if (b - a) / 2 < MIN_WINDOW_S:
                    break
                scales = self.best.scales()
                scales[w] = scales.get(w, 1.0) / 2
                if not self.reproduces(replace(self.best, scale=tuple(sorted(scales.items())))):
                    break

    def _cut(self, amount: float, floor: float, make: Callable[[float], Candidate]) -> None:
        """Cut `amount` (seconds) to the floor at once (one trial when that works), else
        halve it from the top while it still reproduces."""
        if amount - floor < 1.0 or self.reproduces(make(floor)):
            return
        y = amount / 2
        while y - floor >= 1.0 and self.reproduces(make(y)):
            y /= 2

    def _tail(self) -> None:
        self._cut(self.best.time_limit_s - self.last_s(self.best), MIN_TAIL_S,
                  lambda tail: replace(self.best,
                                       time_limit_s=round(self.last_s(self.best) + tail, 3)))

    def _time(self) -> None:
        self._cut(self.first_s(self.best), MIN_LEAD_S, lambda lead: replace(
            self.best, shift_s=round(self.best.shift_s + self.first_s(self.best) - lead, 3)))
        self._tail()

    def _confirm(self) -> None:
        """Run the best candidate until it has had `tries` runs: how often it reproduces."""
        while self._due():
            self._one(self.best)

    def run(self) -> Shrunk:
        """The stages, then the best candidate's confirmation; the budget ends only the
        search (the confirmation was reserved), anything else ends both."""
        stopped: str | None = None
        try:
            for stage, step in (("ddmin", self._ddmin), ("tail", self._tail),
                                ("shorten", self._shorten), ("time", self._time)):
                self._stage = stage
                step()
        except _Stop as e:
            stopped = e.reason
        if stopped in (None, "budget"):
            self._stage = "confirm"
            try:
                self._confirm()
            except _Stop as e:
                stopped = e.reason
        return Shrunk(self.original, self.best, tuple(self.trials), stopped)


def _split(items: Sequence[int], n: int) -> list[list[int]]:
    """items in n chunks of near-equal size, in order."""
    k, r = divmod(len(items), n)
    out, i = [], 0
    for j in range(n):
        size = k + (1 if j < r else 0)
        out.append(list(items[i:i + size]))
        i += size
    return [c for c in out if c]

