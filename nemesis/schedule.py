"""When faults may be in force: `stagger` (throughout) or `phases` (steady, faults, recovery).

`stagger` spreads fault windows over the whole run, each about one interval long
with gaps of about one interval between them, as Jepsen's `stagger` does.
`phases` runs the cluster healthy first (a baseline of latency and throughput),
then the same staggered windows confined to the middle of the run, then heals
everything at once and leaves the cluster alone to the end: the recovery phase
is what shows whether it serves again once every fault is gone (liveness), the
way Jepsen's and redpanda-chaos's "steady, fault, heal, recovery" tests do.
Pure: every choice comes from the `random.Random` the caller passes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harness.spec import TestSpec
from nemesis.options import StandardOptions
from nemesis.plan import windows

STEADY_FRACTION = 0.2  # phases: the first 20 % of the run has no fault
RECOVERY_FRACTION = 0.3  # phases: the last 30 % has none either


@dataclass(frozen=True, slots=True)
class Schedule:
    """The span of a run in which faults may be in force, and their windows in it."""

    kind: str  # "stagger" or "phases" (nemesis.options.SCHEDULES)
    interval_s: float
    time_limit_s: float

    @property
    def fault_span(self) -> tuple[float, float]:
        """(start, end) in seconds: no fault starts before start or is in force after end."""
        if self.kind == "phases":
            return (STEADY_FRACTION * self.time_limit_s,
                    (1.0 - RECOVERY_FRACTION) * self.time_limit_s)
        return (0.0, self.time_limit_s)

    def windows(self, rng: random.Random) -> list[tuple[float, float]]:
        """Fault windows (start, end); under phases the last one is cut at the span's end."""
        if self.kind != "phases":
            return windows(rng, self.interval_s, self.time_limit_s)
        start, end = self.fault_span
        first = start + rng.uniform(0.0, 0.5) * min(self.interval_s, end - start)
        return [(s, min(e, end)) for s, e in windows(rng, self.interval_s, end, first_s=first)]

    def to_json(self) -> dict[str, Any]:
        """What test.json and the report show: the schedule and, under phases, its phases."""
        out: dict[str, Any] = {"kind": self.kind, "interval_s": self.interval_s}
        if self.kind == "phases":
            start, end = self.fault_span
            out["phases"] = [{"name": "steady", "from_s": 0.0, "to_s": round(start, 3)},
                             {"name": "faults", "from_s": round(start, 3), "to_s": round(end, 3)},
                             {"name": "recovery", "from_s": round(end, 3),
                              "to_s": self.time_limit_s}]
        return out


def schedule_of(spec: TestSpec) -> Schedule:
    """The run's schedule: the package's --nemesis-schedule and --nemesis-interval."""
    opts = StandardOptions.of(spec)
    return Schedule(opts.schedule, opts.interval_s, spec.time_limit_s)
