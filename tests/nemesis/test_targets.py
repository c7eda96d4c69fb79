"""Target resolution: pure picks by seed, and leader/followers/controller from a view."""

from __future__ import annotations

import random

import pytest

from nemesis.targets import StaticView, TargetError, pick, resolve

NODES = ("n1", "n2", "n3", "n4", "n5")


@pytest.mark.parametrize(("target", "count"),
                         [("one", 1), ("minority", 2), ("majority", 3), ("all", 5)])
def test_pure_targets_pick_the_right_count_deterministically(target: str, count: int) -> None:
    got = pick(target, NODES, random.Random(3))
    assert len(got) == count and set(got) <= set(NODES)
    assert list(got) == sorted(got)  # in node order
    assert got == pick(target, NODES, random.Random(3))
    seen = {pick(target, NODES, random.Random(s)) for s in range(30)}
    assert len(seen) > 1 or count == 5  # the seed matters


def test_dynamic_targets_ask_the_cluster() -> None:
    view = StaticView(leaders={0: "n2", 1: "n4"}, controller_node="n1", coordinator_node="n5",
                      replicas={0: ("n2", "n3", "n4"), 1: ("n4", "n5", "n1")})
    rng = random.Random(0)
    assert resolve("leader", NODES, rng, view, key=0) == ("n2",)
    assert resolve("leader", NODES, rng, view, key=1) == ("n4",)
    assert resolve("followers", NODES, rng, view, key=0) == ("n3", "n4")
    assert resolve("followers", NODES, rng, view, key=1) == ("n1", "n5")
    assert resolve("controller", NODES, rng, view) == ("n1",)
    assert resolve("coordinator", NODES, rng, view) == ("n5",)
    assert len(resolve("coordinator", NODES, rng, StaticView(leaders={}))) == 1  # no group


def test_no_leader_falls_back_to_one_node_and_bad_names_fail() -> None:
    view = StaticView(leaders={})
    got = resolve("leader", NODES, random.Random(0), view, key=3)
    assert len(got) == 1
    with pytest.raises(TargetError, match="not one of"):
        resolve("everyone", NODES, random.Random(0), view)
    with pytest.raises(TargetError, match="needs the live cluster"):
        resolve("leader", NODES, random.Random(0), None)
