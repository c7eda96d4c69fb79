"""Did a slow or lossy link take effect, and did `fast` end it? Judged from round trips
timed through each shaped node's links before and after (the Net's TimesLinks;
HISTORY.md's `landed` and `evidence`).

- slow: the median round trip grew by at least half the delay asked for (jitter is
  spread around the delay, so the median shows the delay);
- lossy: some round trips stalled a retransmission timeout or more (a lost segment
  holds the stream until it is sent again); none stalled is a miss only when at least
  5 stalls were expected (so a miss by chance is under 1 %), else no claim;
- fast: every node that was shaped has its median round trip back within 20 ms of
  what it was before it was first shaped, and under 5 % of its round trips stalled.

A node whose round trips could not be timed (its links cut, or a Net that cannot time
them) makes no claim; a fault on several nodes landed if it landed on every node with a
claim (as a partition on every pair), and its evidence names each.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from harness.protocols import Run, TimesLinks

log = logging.getLogger("undertow.nemesis")

BASELINE_S = 0.25  # clean round trips are fast: a short budget gives dozens
MEASURE_S = 1.0    # a shaped link: enough round trips through a 100 ms delay
STALL_MS = 150.0   # 3/4 of the proxy's (and Linux's) 200 ms minimum retransmission timeout
EXPECTED_STALLS = 5.0
HEALED_MS = 20.0

Timings = Mapping[str, Sequence[float]]


def time_links(run: Run, nodes: Sequence[str], budget_s: float) -> dict[str, list[float]] | None:
    """Round trips through each node's links now, or None when the run's Net cannot."""
    net = run.net
    if not isinstance(net, TimesLinks) or not nodes:
        return None
    return net.round_trips(nodes, budget_s)


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def _stalls(xs: Sequence[float], base_ms: float) -> int:
    return sum(1 for x in xs if x >= base_ms + STALL_MS)


def judge_slow(before: Sequence[float], after: Sequence[float],
               delay_ms: float) -> tuple[bool, str] | None:
    if not before or not after or delay_ms <= 0:
        return None
    b, a = _median(before), _median(after)
    why = (f"round trip {a:.0f} ms (median of {len(after)}), {b:.1f} ms before: "
           f"+{a - b:.0f} ms of {delay_ms:g} asked")
    return a - b >= delay_ms / 2, why


def judge_lossy(before: Sequence[float], after: Sequence[float],
                drop_probability: float) -> tuple[bool, str] | None:
    if not before or not after or drop_probability <= 0:
        return None
    stalled = _stalls(after, _median(before))
    why = (f"{stalled} of {len(after)} round trips stalled >= {STALL_MS:g} ms "
           f"({stalled / len(after):.0%}, {drop_probability:.0%} asked)")
    if stalled == 0 and len(after) * drop_probability < EXPECTED_STALLS:
        return None
    return stalled > 0, why


def judge_fast(base_ms: float, after: Sequence[float]) -> tuple[bool, str] | None:
    if not after:
        return None
    a, stalled = _median(after), _stalls(after, base_ms)
    why = (f"round trip {a:.1f} ms (median of {len(after)}), {base_ms:.1f} ms before "
           f"it was shaped, {stalled} stalled")
    return a - base_ms < HEALED_MS and stalled < 0.05 * len(after), why


def claim(verb: str, verdicts: Mapping[str, tuple[bool, str] | None]) -> dict[str, Any]:
    """The completion's `landed` and `evidence` from each node's verdict ({} when none)."""
    made = {n: v for n, v in verdicts.items() if v is not None}
    if not made:
        return {}
    landed = all(ok for ok, _ in made.values())
    evidence = "; ".join(f"{n}: {why}" for n, (_, why) in sorted(made.items()))
    if not landed:
        log.warning("%s did not land: %s", verb, evidence)
    return {"landed": landed, "evidence": evidence}
