"""The generic machinery of fault sequences: a system's cycle repeated on the schedule.

Systems declare their known bugs' sequences as data (harness.faultplan.FaultSequence,
e.g. systems/undertow/sequences.py, systems/kafka/scenarios.py); nemesis/packages.py
reads them through harness.registry and plans each with `cycles`. Nothing here
registers a fault.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from harness.faultplan import Cycle, Step
from harness.spec import TestSpec
from nemesis.schedule import schedule_of

WARMUP_S = 4.0  # let every partition take writes before the first fault


def cycles(period_s: float, cycle: Cycle) -> Callable[[TestSpec, random.Random], list[Step]]:
    """Repeat a cycle every period (plus up to 2 s of seeded jitter) until the time limit.

    Under the `phases` schedule the cycles start after the steady phase, and only whole
    cycles that end before the recovery phase run (a cut cycle would leave a fault in it).
    """
    def plan(spec: TestSpec, rng: random.Random) -> list[Step]:
        sched = schedule_of(spec)
        span_start, span_end = sched.fault_span
        out: list[Step] = []
        t = max(WARMUP_S, span_start) + rng.uniform(0, 2)
        while t < span_end:
            steps = cycle(t, rng)
            if sched.kind == "phases":
                if max(s.at_s for s in steps) >= span_end:
                    break
                out += steps
            else:
                out += [s for s in steps if s.at_s < spec.time_limit_s]
            t += period_s + rng.uniform(0, 2)
        return out
    return plan
