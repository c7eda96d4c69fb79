"""Kafka releases 0.10.2 to 4.x: the release table, the pom each resolves with, the refusals,
and DumpLogSegments' pre-0.11 output (captured from a real 0.10.2.2 replica) parsed and
checked (no JVM)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from checkers.api import check_local
from checkers.testing import HistoryBuilder
from systems.kafka import dump, jars, releases

DATA = Path(__file__).parent.parent / "data"
DUMP_0_10 = DATA / "kafka-dump-0.10.2.2.txt"  # undertow-1 (21 records), undertow-0 (21)
DUMP_0_11 = DATA / "kafka-dump-0.11.0.3.txt"  # --deep-iteration: undertow-5, undertow-1


def test_the_table_gives_each_era_its_build_and_features() -> None:
    old = releases.release("0.10.2.2")
    assert old.artifact == "kafka_2.11" and old.era.extra_jars == ("javax.xml.bind:jaxb-api:2.3.1",)
    assert old.metadata_mode(None) == "zookeeper" and old.era.dump_format == "record-lines"
    assert old.era.unclean_default and not old.era.leader_epochs
    fix = releases.release("0.11.0.3")
    assert fix.era.leader_epochs and fix.era.idempotence
    assert releases.release("2.8.2").era.dump_format == "batch"
    assert releases.release("2.8.2").artifact == "kafka_2.13"
    assert releases.release("3.9.1").metadata_mode(None) == "kraft"
    assert releases.release("3.9.1").metadata_mode("zookeeper") == "zookeeper"
    assert releases.release("4.4.0").era.dump_class.startswith("org.apache.kafka.tools")
    with pytest.raises(releases.ReleaseError, match=r"lacks it \(added in 0\.11\.0\.0\)"):
        old.require("idempotence")
    fix.require("transactions")


def test_nearest_releases_are_named() -> None:
    assert releases.nearest("0.10.2.7")[0] == "0.10.2.2"
    assert set(releases.nearest("1.1.5", count=2)) == {"1.1.1", "1.1.0"}
    with pytest.raises(releases.ReleaseError, match=r"nearest that resolve: 0\.10\.2\.\d"):
        releases.release("0.9.0.1")


def test_the_pom_is_adapted_only_where_the_release_needs_it() -> None:
    """3.9 and 4.x resolve with the folder's pom as it is (their cached folders stay
    complete); a pre-2.x release gets its Scala 2.11 build and jaxb-api, and no second
    slf4j binding beside its own slf4j-log4j12."""
    assert jars.pom_text("4.4.0") == jars.POM.read_text() == jars.pom_text("3.9.1")
    old = jars.pom_text("0.10.2.2")
    assert "<artifactId>kafka_2.11</artifactId>" in old and "kafka_2.13" not in old
    assert "<artifactId>jaxb-api</artifactId><version>2.3.1</version>" in old
    assert "slf4j-simple" not in old
    assert jars.pom_digest("0.10.2.2") != jars.pom_digest("4.4.0")


def test_cached_lists_complete_folders_only(tmp_path: Path) -> None:
    for v, complete in (("0.10.2.2", True), ("1.1.1", False), ("4.4.0", True)):
        libs = tmp_path / v / "libs"
        libs.mkdir(parents=True)
        if complete:
            (libs / ".complete").write_text(f"{v} {jars.pom_digest(v)}\n")
    (tmp_path / ".resolve-x1").mkdir()  # another process's scratch folder
    assert [j.version for j in jars.cached(tmp_path)] == ["0.10.2.2", "4.4.0"]


def _replica_dir(root: Path, hws: dict[int, int]) -> Path:
    for key in hws:
        (root / f"undertow-{key}").mkdir(parents=True)
    lines = [f"undertow {k} {hw}" for k, hw in hws.items()]
    (root / "replication-offset-checkpoint").write_text(
        "0\n" + f"{len(lines)}\n" + "\n".join(lines) + "\n")
    return root


def test_a_0_10_dump_is_parsed() -> None:
    """The message-set format (offset, position, ..., payload) has no batches nor epochs."""
    text = DUMP_0_10.read_text()
    parsed = dump.parse_dump(text, "n1", "record-lines")
    assert sorted(parsed) == [0, 1]
    offsets = [o for o, _v, _e in parsed[1].records]
    assert offsets == list(range(21)) and parsed[1].leo == 21
    assert {e for _o, _v, e in parsed[1].records} == {0}
    assert parsed[1].records[0][1] == int(re.findall(r"payload: (\d+)", text)[0])
    assert dump.parse_dump(text, "n1", "batch") == {0: dump._Replica(), 1: dump._Replica()}


def test_a_0_11_dump_is_parsed_as_record_lines() -> None:
    """0.11 prints magic v2 records one a line (given --deep-iteration), producer ids and
    all, still without the batch's leader epoch."""
    text = DUMP_0_11.read_text()
    parsed = dump.parse_dump(text, "n1", "record-lines")
    lines = [ln for ln in text.splitlines() if ln.startswith("offset: ")]
    assert sum(len(r.records) for r in parsed.values()) == len(lines) > 0
    assert parsed[5].records[0][:2] == (0, int(lines[0].rsplit("payload: ", 1)[1]))


def test_a_planted_difference_in_a_dumped_0_10_replica_is_reported(tmp_path: Path) -> None:
    """Two replicas of key 1 from the same real dump; n2's has one value planted at an
    offset below both high watermarks: replica-divergence, and without it none."""
    text = DUMP_0_10.read_text()
    rows_n1 = dump.replica_rows("n1", _replica_dir(tmp_path / "n1", {0: 21, 1: 21}), text,
                                fmt="record-lines")
    records = [(r["offset"], r["value"]) for r in rows_n1 if r["key"] == 1 and "value" in r]
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("offset: 5 "))
    planted = "\n".join([*lines[:at], re.sub(r"payload: \d+$", "payload: 999999", lines[at]),
                         *lines[at + 1:]])

    def verdict(n2_text: str, name: str) -> dict[str, Any]:
        rows_n2 = dump.replica_rows("n2", _replica_dir(tmp_path / name, {0: 21, 1: 21}),
                                    n2_text, fmt="record-lines")
        b = HistoryBuilder()
        for o, v in records:
            b.send(0, 1, v, o)
        b.poll(99, {1: records})
        keep = [r for r in rows_n1 + rows_n2 if r["key"] == 1]
        return check_local(b.write(tmp_path / f"run-{name}", keep))

    clean = verdict(text, "same")
    found = verdict(planted, "planted")
    assert "replica-divergence" not in clean["anomaly_types"], clean["anomaly_types"]
    assert "replica-divergence" in found["anomaly_types"], found["anomaly_types"]
