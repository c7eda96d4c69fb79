"""The suite's pytest-xdist groups: `just test` runs on two workers (`-n 2 --dist loadgroup`),
and the tests of one group run one after another on one worker.

Two groups: the tests on the session's shared Kafka cluster (one cluster, not one per
worker), and those on containers (one Docker engine's CPU, ports and names). xdist 3.8
carries a group in the test's node id, which pytest 9 no longer lets a plug-in change: the
groups hold on pytest 8 only, hence `pytest<9` in pyproject.toml (tests/test_xdist_groups.py
fails when they do not hold)."""

from __future__ import annotations

import pytest

KAFKA_CLUSTER = "kafka-cluster"
CONTAINERS = "containers"


def group_of(item: pytest.Item) -> str | None:
    if "kafka_cluster" in getattr(item, "fixturenames", ()):
        return KAFKA_CLUSTER
    if item.get_closest_marker("docker") or item.get_closest_marker("ssh"):
        return CONTAINERS
    return None


def mark_groups(items: list[pytest.Item]) -> None:
    """Give each test its group; call from a `tryfirst` collection hook, so that xdist's own
    hook, which reads the groups into the node ids, runs after it."""
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
