"""The suite's pytest-xdist groups: `just test` runs on two workers (`-n 2 --dist loadgroup`),
and the tests of one group run one after another on one worker.

The groups: the tests on the session's shared Kafka cluster (one cluster, not one per
worker), those on containers (one Docker engine's CPU, ports and names), and the tests of
one module that share a module-scoped fixture (a Spark session, a cluster, a JVM): split
over two workers, each worker started the fixture for itself (test_sparkread's classic
Spark, 20 to 35 s, twice). xdist 3.8
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
    if _uses_a_module_fixture(item):
        return f"module-{item.nodeid.split('::', 1)[0]}"
    return None


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test asks (itself or through its fixtures) for a module-scoped fixture."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's own resolution of the test's fixtures
    if info is None:
        return False
    return any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


def mark_groups(items: list[pytest.Item]) -> None:
    """Give each test its group; call from a `tryfirst` collection hook, so that xdist's own
    hook, which reads the groups into the node ids, runs after it."""
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
