"""The standard nemesis package's own options: how often faults come, whom they aim at and
when (the schedule), how slow a slow link is, how lossy a lossy one, how far a clock fault
shifts a clock.

Declared here once (harness/options.py): `undertow run --help` lists them under
`Options of the nemesis package standard`, a TOML file sets them in its `[standard]` table
(the package's name: a `[nemesis]` table cannot be, `nemesis` is the top-level list of
faults in TOML files and test.json), and test.json records them under `options.standard`.
nemesis/packages.py hands them to the nemeses it builds (`Links`, `Clock`) and to the
clock fault's plan; a step of a TOML plan that names its own delay, probability or shift
still wins for that step. The scheduling options were TestSpec fields before
(`nemesis_interval_s`, `nemesis_targets`, `nemesis_schedule`): each names that key
(`formerly`), so old TOML files, scenarios and test.json files still set them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.options import NemesisOptions, option
from nemesis.faults import MAX_SKEW_MS
from nemesis.netfaults import DELAY_MS, DROP_PROBABILITY, JITTER_MS
from nemesis.targets import TARGETS

SCHEDULES = ("stagger", "phases")  # nemesis/schedule.py says what each does

BUMP_MAX_MS = 10_000.0  # a planned clock bump shifts by 100 ms up to this, either way
BUMP_MIN_MS = 100.0


def _ms(value: float) -> str | None:
    ok = math.isfinite(value) and value >= 0
    return None if ok else f"expected a number of milliseconds >= 0, got {value!r}"


def _positive_ms(value: float) -> str | None:
    ok = math.isfinite(value) and value > 0
    return None if ok else f"expected a number of milliseconds > 0, got {value!r}"


def _positive_s(value: float) -> str | None:
    ok = math.isfinite(value) and value > 0
    return None if ok else f"must be positive, got {value!r}"


def _comma_list(text: str) -> list[str]:
    """`one,leader` (or `none`: no target named, so `one`)."""
    if text.strip().lower() in ("none", ""):
        return []
    return [v.strip() for v in text.split(",") if v.strip()]


def _targets(value: Any) -> str | None:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return f"expected a list of targets, got {value!r}"
    wrong = [t for t in value if t not in TARGETS]
    return f"{wrong[0]!r} is not one of {', '.join(TARGETS)}" if wrong else None


def _probability(value: float) -> str | None:
    return None if 0 <= value <= 1 else f"expected a probability, 0 to 1, got {value!r}"


@dataclass(frozen=True, slots=True)
class StandardOptions(NemesisOptions):
    """How the standard package's faults are scheduled and aimed, and what they take."""

    interval_s: float = option(
        10.0, "Seconds between faults, on average.", flag="--nemesis-interval",
        check=_positive_s, metavar="S", formerly="nemesis_interval_s")
    targets: tuple[str, ...] = option(
        ("one", "minority", "majority"), "Comma list: one, minority, majority, all, leader, "
        "followers, controller, coordinator (of the consumer group, with --sub-via "
        "subscribe); none: one.", flag="--nemesis-targets", parse=_comma_list,
        check=_targets, metavar="T,...", formerly="nemesis_targets")
    schedule: str = option(
        "stagger", "stagger: faults throughout; phases: steady 20 %, faults, then everything "
        "healed and a fault-free recovery for the last 30 %.", flag="--nemesis-schedule",
        choices=SCHEDULES, formerly="nemesis_schedule")

    slow_delay_ms: float = option(
        DELAY_MS, "--nemesis slow: the delay added to each packet of a slowed node.",
        check=_ms, metavar="MS")
    slow_jitter_ms: float = option(
        JITTER_MS, "--nemesis slow: the jitter around that delay.", check=_ms, metavar="MS")
    lossy_drop_probability: float = option(
        DROP_PROBABILITY, "--nemesis lossy: the chance each packet of a lossy node is "
        "dropped, 0 to 1.", check=_probability, metavar="P")
    clock_bump_max_ms: float = option(
        BUMP_MAX_MS, "--nemesis clock: a clock bump shifts one node's clock by 100 ms up to "
        "this, forward or back.", check=_positive_ms, metavar="MS")
    clock_skew_max_ms: float = option(
        MAX_SKEW_MS, "--nemesis clock: a clock skew sets each node's clock up to this "
        "ahead or behind.", check=_ms, metavar="MS")

    def __post_init__(self) -> None:
        # test.json and the spec keep the targets as a list (JSON's); read back, a tuple
        object.__setattr__(self, "targets", tuple(self.targets))
