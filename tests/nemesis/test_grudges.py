"""Grudge functions: pure, seeded, and shaped as HISTORY.md wants them."""

from __future__ import annotations

import random

import pytest

from nemesis import grudges as g

NODES3 = ["n1", "n2", "n3"]
NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def hears(grudge: g.Grudge, node: str, nodes: list[str]) -> set[str]:
    return {n for n in nodes if n not in grudge.get(node, frozenset())}


def test_isolate_cuts_one_node_both_ways() -> None:
    gr = g.isolate(NODES3, ["n2"])
    assert gr == {"n2": frozenset({"n1", "n3"}), "n1": frozenset({"n2"}),
                  "n3": frozenset({"n2"})}
    assert g.isolate(NODES3, NODES3) == {}  # nobody left to cut from
    with pytest.raises(g.GrudgeError, match="unknown"):
        g.isolate(NODES3, ["n9"])


def test_halves_put_a_minority_against_a_majority() -> None:
    gr = g.halves(NODES5)
    assert gr["n1"] == frozenset({"n3", "n4", "n5"})
    assert gr["n5"] == frozenset({"n1", "n2"})
    rh = g.random_halves(NODES5, random.Random(1))
    sizes = sorted(len(hears(rh, n, NODES5)) for n in NODES5)
    assert sizes == [2, 2, 3, 3, 3]
    assert rh == g.random_halves(NODES5, random.Random(1))  # seeded


def test_bridge_node_hears_everyone_and_the_halves_do_not_meet() -> None:
    gr = g.bridge(NODES5, random.Random(4))
    bridge = [n for n in NODES5 if n not in gr]
    assert len(bridge) == 1
    left = [n for n in NODES5 if n in gr and len(hears(gr, n, NODES5)) == 3]
    assert len(left) == 4  # 2 + the bridge + itself
    for n, dropped in gr.items():
        assert bridge[0] not in dropped and n not in dropped


@pytest.mark.parametrize("nodes", [NODES3, NODES5, [f"n{i}" for i in range(1, 8)]])
def test_majorities_ring_every_node_hears_a_different_majority(nodes: list[str]) -> None:
    gr = g.majorities_ring(nodes, random.Random(7))
    majority = len(nodes) // 2 + 1
    views = [frozenset(hears(gr, n, nodes)) for n in nodes]
    assert all(len(v) == majority for v in views)
    assert len(set(views)) == len(nodes)


def test_cut_between_leaves_everyone_else_connected() -> None:
    gr = g.cut_between(["n2"], ["n3", "n4"])
    assert gr == {"n2": frozenset({"n3", "n4"}), "n3": frozenset({"n2"}),
                  "n4": frozenset({"n2"})}
    assert "n1" not in gr


def test_validate_and_to_json() -> None:
    assert g.to_json(g.validate({"n1": ["n3", "n2"], "n2": []}, NODES3)) == {"n1": ["n2", "n3"]}
    with pytest.raises(g.GrudgeError, match="unknown node 'x'"):
        g.validate({"x": ["n1"]}, NODES3)
    with pytest.raises(g.GrudgeError, match="its own"):
        g.validate({"n1": ["n1"]}, NODES3)
    with pytest.raises(g.GrudgeError, match="list of nodes"):
        g.validate({"n1": "n2"}, NODES3)
    assert g.cut_nodes({"n1": ["n3"]}) == ["n1", "n3"]


def test_clients_are_a_pseudo_node_that_is_never_shaded() -> None:
    gr = g.validate({"client": ["n1"], "n2": ["n1"]}, NODES3)
    assert gr["client"] == frozenset({"n1"})
    assert g.cut_nodes(gr) == ["n1", "n2"]
