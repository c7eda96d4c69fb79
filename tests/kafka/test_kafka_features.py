"""Cluster features at format time: the table in systems.kafka.features against each
cached release's own StorageTool, and what test.json records for each release."""

from __future__ import annotations

import re
import subprocess

import pytest

from harness.spec import build_spec
from systems.kafka import config, features, jars

ELR = "eligible.leader.replicas.version"


def test_what_each_release_formats_by_default_or_when_asked() -> None:
    none = features.describe({}, (3, 9, 1))[ELR]
    assert none == {"level": None, "from": "the release lacks it"}
    assert features.describe({}, (4, 0, 2))[ELR]["level"] == 0
    assert features.describe({}, (4, 1, 0))[ELR]["level"] == 1
    assert features.describe({ELR: 1}, (4, 0, 2))[ELR] == {"level": 1,
                                                          "from": "format --feature"}
    spec = build_spec({"system": "kafka", "extra": {"kafka_features": f"{ELR}=1"}})
    asked = features.check(spec, (4, 0, 2))
    assert features.format_args(asked) == ["--feature", f"{ELR}=1"]
    assert config.format_command("java", "cp", "p", features.format_args(asked))[-2:] == \
        ["--feature", f"{ELR}=1"]


def _cached() -> list[jars.KafkaJars]:
    root = jars.cache_root()
    out = []
    for d in sorted(root.iterdir()) if root.is_dir() else ():
        if (j := jars._complete(root, d.name)) is not None:
            out.append(j)
    return out


@pytest.mark.kafka
def test_the_table_matches_each_cached_release_s_storage_tool() -> None:
    cached = _cached()
    if not cached:
        pytest.fail("no Kafka release in the cache (undertow image kafka)")
    for j in cached:
        out = subprocess.run(["java", *config.TOOL_OPTS, "-cp", j.classpath,
                              "kafka.tools.StorageTool", "version-mapping"],
                             capture_output=True, text=True, timeout=120)
        found = dict(re.findall(r"^([a-z.]+\.version)=(\d+)", out.stdout, re.M))
        release = jars.parse_version(j.version)
        f = features.FEATURES[ELR]
        if release < f.since:  # 3.9 has no version-mapping and no such feature
            assert ELR not in found, j.version
        else:
            assert int(found[ELR]) == f.default(release), (j.version, found)
