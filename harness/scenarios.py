"""Named scenarios, gathered from every registered system: a known bug, or a safe control.

A scenario is a build_spec layer (TestSpec fields and parts' options, e.g. `keys`,
`nemesis_interval_s` or the system's settings in a `broker` / `producer` table, where they
were spec fields before) plus what
the checkers must report, and the options that fix the bug (its control). Each
system declares its own (`System.scenarios`); names are unique across systems.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from harness import registry
from harness.spec import SpecError


@dataclass(frozen=True, slots=True)
class Scenario:
    """A known bug (or a safe run) as settings, faults and the anomalies it must show."""

    name: str
    description: str
    settings: Mapping[str, Any]
    expected: tuple[str, ...]  # anomaly types the checkers must report (all of them)
    # `undertow run` options that fix the bug: the same faults with these settings must be
    # valid (the control run that shows the loss comes from the setting, not the harness)
    fixed_by: tuple[str, ...] = ()
    # what it must report from a release on, where that differs from `expected`:
    # (("4.1.0", ()),) says valid from 4.1.0 (releases compared number by number)
    by_release: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def safe(self) -> bool:
        return not self.expected

    def expected_on(self, release: str | None) -> tuple[str, ...]:
        """What the checkers must report on that release (None: the system's default)."""
        out = self.expected
        if release is None:
            return out
        for first, expected in sorted(self.by_release, key=lambda x: release_tuple(x[0])):
            if release_tuple(release) >= release_tuple(first):
                out = expected
        return out


def release_tuple(release: str) -> tuple[int, ...]:
    """'4.1.2' -> (4, 1, 2): releases compared number by number (non-numbers as 0)."""
    return tuple(int(p) if p.isdigit() else 0 for p in release.split("."))



@runtime_checkable
class HasScenarios(Protocol):
    """A system that brings named scenarios."""

    scenarios: Mapping[str, Scenario]


def all_scenarios() -> dict[str, Scenario]:
    """Every registered system's scenarios, by name (systems in name order)."""
    out: dict[str, Scenario] = {}
    for name in registry.names("system"):
        system = registry.get("system", name)
        if isinstance(system, HasScenarios):
            out.update(system.scenarios)
    return out


def scenario(name: str) -> Scenario:
    """The named scenario, or a SpecError listing the names."""
    known = all_scenarios()
    try:
        return known[name]
    except KeyError:
        raise SpecError(f"--scenario: {name!r} is not known; known: "
                        f"{', '.join(sorted(known))}") from None


def control_label(name: str) -> str:
    """How a control run (a scenario with its fixed_by options) is named in results and tables."""
    return f"{name} (fixed)"
