"""Apache Kafka releases, 0.10.2 to 4.x: the one place where a release's quirks live.

Each era (a range of releases that run alike) says which Scala build Maven serves,
what jars newer JDKs dropped and the release still needs, how it logs, which
metadata modes it has, how DumpLogSegments prints, which client features (idempotence,
transactions) exist and which safety defaults changed. Everything else in
systems/kafka asks `release(version)` instead of comparing version numbers itself.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

Version = tuple[int, ...]
_VERSION = re.compile(r"\d+(\.\d+){2,3}")

ZOOKEEPER = "zookeeper"
KRAFT = "kraft"
METADATA_MODES = (ZOOKEEPER, KRAFT)


class ReleaseError(ValueError):
    """A release the harness cannot run: one line naming what would do instead."""


@dataclass(frozen=True, slots=True)
class Era:
    """What every release from `since` up to the next era's shares."""

    since: Version
    scala: str  # the Scala build of kafka_<scala> resolved from Maven Central
    extra_jars: tuple[str, ...]  # group:artifact:version that newer JDKs dropped
    log4j1: bool  # the broker logs through log4j 1 (a log4j.properties is given)
    modes: tuple[str, ...]  # metadata modes the harness runs on it
    default_mode: str
    # DumpLogSegments' output: "record-lines" (one line per record, no leader epoch; before
    # 2.x, given --deep-iteration) or "batch" (a batch line with its leader epoch, then
    # `| offset:` record lines)
    dump_format: str
    dump_class: str
    idempotence: bool  # the idempotent producer and transactions (KIP-98, 0.11.0)
    leader_epochs: bool  # truncation by leader epoch (KIP-101, 0.11.0)
    unclean_default: bool  # unclean.leader.election.enable's default


_JAXB = ("javax.xml.bind:jaxb-api:2.3.1",)
_OLD_DUMP = "kafka.tools.DumpLogSegments"
_NEW_DUMP = "org.apache.kafka.tools.DumpLogSegments"

# Sorted by `since`. KRaft is run from 3.9 on (static quorum, combined nodes: the
# configuration systems/kafka/config.py writes); ZooKeeper until 3.9 (4.0 removed it).
ERAS: tuple[Era, ...] = (
    Era((0, 10, 2), "2.11", _JAXB, True, (ZOOKEEPER,), ZOOKEEPER, "record-lines", _OLD_DUMP,
        idempotence=False, leader_epochs=False, unclean_default=True),
    Era((0, 11, 0), "2.11", _JAXB, True, (ZOOKEEPER,), ZOOKEEPER, "record-lines", _OLD_DUMP,
        idempotence=True, leader_epochs=True, unclean_default=False),
    Era((2, 0, 0), "2.12", (), True, (ZOOKEEPER,), ZOOKEEPER, "batch", _OLD_DUMP,
        idempotence=True, leader_epochs=True, unclean_default=False),
    Era((2, 4, 0), "2.13", (), True, (ZOOKEEPER,), ZOOKEEPER, "batch", _OLD_DUMP,
        idempotence=True, leader_epochs=True, unclean_default=False),
    Era((3, 9, 0), "2.13", (), False, (KRAFT, ZOOKEEPER), KRAFT, "batch", _OLD_DUMP,
        idempotence=True, leader_epochs=True, unclean_default=False),
    Era((4, 0, 0), "2.13", (), False, (KRAFT,), KRAFT, "batch", _NEW_DUMP,
        idempotence=True, leader_epochs=True, unclean_default=False),
)
OLDEST: Version = ERAS[0].since
# Where a feature first appeared: named when a run asks for it on an older release.
ADDED_IN = {"idempotence": "0.11.0.0", "transactions": "0.11.0.0",
            "kraft": "3.9.0 (as run here; KRaft itself from 2.8.0)"}

# Releases Maven Central serves (Apache's release history), the hint for "the nearest
# releases that resolve"; releases newer than this list are read from Maven's own
# metadata in ~/.m2 when it is there.
KNOWN: tuple[str, ...] = (
    "0.10.2.0", "0.10.2.1", "0.10.2.2", "0.11.0.0", "0.11.0.1", "0.11.0.2", "0.11.0.3",
    "1.0.0", "1.0.1", "1.0.2", "1.1.0", "1.1.1", "2.0.0", "2.0.1", "2.1.0", "2.1.1",
    "2.2.0", "2.2.1", "2.2.2", "2.3.0", "2.3.1", "2.4.0", "2.4.1", "2.5.0", "2.5.1",
    "2.6.0", "2.6.1", "2.6.2", "2.6.3", "2.7.0", "2.7.1", "2.7.2", "2.8.0", "2.8.1", "2.8.2",
    "3.0.0", "3.0.1", "3.0.2", "3.1.0", "3.1.1", "3.1.2", "3.2.0", "3.2.1", "3.2.3",
    "3.3.1", "3.3.2", "3.4.0", "3.4.1", "3.5.0", "3.5.1", "3.5.2", "3.6.0", "3.6.1",
    "3.6.2", "3.7.0", "3.7.1", "3.7.2", "3.8.0", "3.8.1", "3.9.0", "3.9.1",
    "4.0.0", "4.0.1", "4.1.0", "4.1.1",
)


def parse(version: str) -> Version:
    """'0.10.2.2' -> (0, 10, 2, 2), '4.1.1' -> (4, 1, 1); ReleaseError for anything else."""
    v = version.strip()
    if not _VERSION.fullmatch(v):
        raise ReleaseError(f"--kafka-version: {version!r} is not a release number like 4.1.1 "
                           "or 0.10.2.2")
    return tuple(int(p) for p in v.split("."))


def is_release(name: str) -> bool:
    """A release number (not a range, not a folder of something else)."""
    return _VERSION.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class Release:
    """One release and its era's quirks."""

    version: str
    era: Era

    @property
    def parts(self) -> Version:
        return parse(self.version)

    @property
    def artifact(self) -> str:
        return f"kafka_{self.era.scala}"

    def metadata_mode(self, asked: str | None) -> str:
        """The mode asked for (checked against the release), else the release's default."""
        if asked is None:
            return self.era.default_mode
        if asked not in METADATA_MODES:
            raise ReleaseError(f"--kafka-metadata {asked}: one of {', '.join(METADATA_MODES)}")
        if asked not in self.era.modes:
            why = ("KRaft is run from " + ADDED_IN["kraft"]) if asked == KRAFT else \
                "ZooKeeper mode was removed in 4.0.0"
            raise ReleaseError(f"--kafka-metadata {asked}: Kafka {self.version} runs "
                               f"{' or '.join(self.era.modes)} only ({why})")
        return asked

    def require(self, feature: str) -> None:
        """ReleaseError unless the release has `feature` (idempotence, transactions)."""
        if feature in ("idempotence", "transactions") and not self.era.idempotence:
            raise ReleaseError(f"{feature}: Kafka {self.version} lacks it (added in "
                               f"{ADDED_IN[feature]})")


def release(version: str) -> Release:
    """The release's quirks; ReleaseError before the oldest era."""
    parts = parse(version)
    if parts < OLDEST:
        raise ReleaseError(f"--kafka-version {version}: the harness runs 0.10.2.0 and later; "
                           f"nearest that resolve: {', '.join(nearest(version))}")
    i = bisect.bisect_right([e.since for e in ERAS], parts) - 1
    return Release(version.strip(), ERAS[i])


def known(m2: Path | None = None) -> list[str]:
    """The releases known to resolve: KNOWN plus what Maven's metadata in ~/.m2 lists."""
    found = set(KNOWN)
    base = (m2 or Path.home() / ".m2" / "repository") / "org" / "apache" / "kafka"
    for scala in ("2.11", "2.12", "2.13"):
        for meta in (base / f"kafka_{scala}").glob("maven-metadata*.xml"):
            try:
                found.update(re.findall(r"<version>([\d.]+)</version>", meta.read_text()))
            except OSError:
                continue
    return sorted((v for v in found if _VERSION.fullmatch(v) and parse(v) >= OLDEST),
                  key=parse)


def nearest(version: str, *, count: int = 3, m2: Path | None = None) -> list[str]:
    """The known releases closest to `version` (same line first, then by distance)."""
    try:
        want = parse(version)
    except ReleaseError:
        want = (0,)

    def distance(v: str) -> tuple[int, ...]:
        p = parse(v)
        w = want + (0,) * (len(p) - len(want))
        return tuple(abs(a - b) for a, b in zip(p, w, strict=False))

    return sorted(known(m2), key=distance)[:count]
