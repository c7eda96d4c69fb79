"""Cluster features set when the storage is formatted (`kafka-storage format --feature`).

`--kafka-features` (KafkaOptions) names them: a table (`{"eligible.leader.replicas.version"
= 1}` in TOML's `[kafka]`) or `name=level,...` (`--kafka-features ...`). Each feature has the
first release whose StorageTool takes it and the levels a new cluster gets by default;
a feature a release lacks is refused before anything starts. Checked against each
release's own `kafka-storage version-mapping` (3.9.1 knows only kraft.version and
transaction.version, and refuses the rest: "Unsupported feature").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.spec import SpecError, TestSpec
from systems.kafka.options import KafkaOptions

EXTRA_KEY = "kafka_features"
Release = tuple[int, ...]  # as jars.parse_version gives it (0.10.2.2 has four parts)


@dataclass(frozen=True, slots=True)
class Feature:
    """A feature's levels, the first release that formats it, its default by release."""

    name: str
    levels: tuple[int, ...]
    since: Release
    defaults: tuple[tuple[Release, int], ...]  # (from this release on, the new cluster's level)
    why: str

    def default(self, release: Release) -> int:
        level = 0
        for first, lv in self.defaults:
            if release >= first:
                level = lv
        return level


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("eligible.leader.replicas.version", (0, 1), (4, 0, 0), (((4, 1, 0), 1),),
            "KIP-966 eligible leader replicas: a replica that left the ISR while it was "
            "below min ISR may still be elected; one that shut down uncleanly may not"),
    Feature("transaction.version", (0, 1, 2), (3, 9, 0), (((4, 0, 0), 2),),
            "KIP-890 part 2 at level 2: a new producer epoch at every transaction end, "
            "which closes KAFKA-17754 for clients that speak it (Kafka's Java client 4.0+)"),
)}


def requested(spec: TestSpec) -> dict[str, int]:
    """The features the spec asks for, by name (refusing malformed ones)."""
    raw: Any = KafkaOptions.of(spec).kafka_features or {}
    if isinstance(raw, str):
        pairs = [p.split("=", 1) for p in raw.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise SpecError(f"{EXTRA_KEY} {raw!r}: expected name=level[,name=level...]")
        raw = {k.strip(): v.strip() for k, v in pairs}
    if not isinstance(raw, Mapping):
        raise SpecError(f"{EXTRA_KEY}: expected a table or name=level list, got {raw!r}")
    out: dict[str, int] = {}
    for name, level in raw.items():
        try:
            out[str(name)] = int(level)
        except (TypeError, ValueError):
            raise SpecError(f"{EXTRA_KEY} {name}={level!r}: the level is not an integer") \
                from None
    return out


def check(spec: TestSpec, release: Release | None) -> dict[str, int]:
    """The requested features, refused when unknown or when `release` (None: the newest
    4.x) cannot format them."""
    asked = requested(spec)
    for name, level in asked.items():
        f = FEATURES.get(name)
        if f is None:
            raise SpecError(f"{EXTRA_KEY}: {name!r} is not a feature the harness knows "
                            f"({', '.join(FEATURES)})")
        if level not in f.levels:
            raise SpecError(f"{EXTRA_KEY}: {name}={level}; its levels are "
                            f"{', '.join(map(str, f.levels))}")
        if release is not None and release < f.since:
            raise SpecError(f"{EXTRA_KEY}: Kafka {'.'.join(map(str, release))} has no {name} "
                            f"(from {'.'.join(map(str, f.since))} on)")
    return asked


def format_args(asked: Mapping[str, int]) -> list[str]:
    """StorageTool format's arguments for them."""
    return [a for name, level in sorted(asked.items())
            for a in ("--feature", f"{name}={level}")]


def describe(asked: Mapping[str, int], release: Release) -> dict[str, Any]:
    """For test.json: each known feature's level on this run's new cluster and why."""
    out: dict[str, Any] = {}
    for f in FEATURES.values():
        if release < f.since:
            out[f.name] = {"level": None, "from": "the release lacks it"}
        elif f.name in asked:
            out[f.name] = {"level": asked[f.name], "from": "format --feature"}
        else:
            out[f.name] = {"level": f.default(release), "from": "the release's default"}
    return out
