"""Fault windows per node from nemesis operations."""

from __future__ import annotations

from typing import Any

from harness.report.faults import ALL_NODES, closed_by, fault_nodes, fault_windows


def test_pairs_and_nodes() -> None:
    ops = [
        (0, "kill", {"nodes": ["n1", "n2"]}, 10, 12),
        (2, "partition", {"grudge": {"n1": ["n3"], "n2": ["n3"], "n3": ["n1", "n2"]}}, 20, 21),
        (4, "start", {"nodes": ["n1"]}, 30, 31),
        (6, "heal", {}, 40, 41),
        (8, "lose-unflushed", {"nodes": ["n2"]}, 50, 51),
        (10, "clock-skew", {"nodes": ["n3"]}, 60, 61),
        (12, "pause", {"nodes": ["n3"]}, 70, 71),
    ]
    w = {(x.node, x.kind, x.start_ns, x.end_ns) for x in fault_windows(ops, 100)}
    assert w == {
        ("n1", "kill", 10, 31),       # start n1 ends n1's kill only
        ("n2", "kill", 10, 100),      # n2 never restarted: open to the end
        ("n1", "partition", 20, 41), ("n2", "partition", 20, 41), ("n3", "partition", 20, 41),
        ("n2", "lose-unflushed", 50, 51),  # no undo: an instant
        ("n3", "clock-skew", 60, 100),
        ("n3", "pause", 70, 100),
    }


def test_unknown_verbs_pair_by_name() -> None:
    assert closed_by("stop-bitflip") == {"bitflip"}
    assert closed_by("bitflip-stop") == {"bitflip"}
    assert closed_by("bitflip") == frozenset()
    ops: list[tuple[int, str, Any, int, int]] = [
        (0, "bitflip", {}, 5, 6), (2, "bitflip-stop", {}, 9, 10), (4, "mystery", {}, 11, 12)]
    w = {(x.node, x.kind, x.start_ns, x.end_ns) for x in fault_windows(ops, 50)}
    assert w == {(ALL_NODES, "bitflip", 5, 10), (ALL_NODES, "mystery", 11, 12)}


def test_fault_nodes_shapes() -> None:
    assert fault_nodes({"nodes": ["b", "a"]}) == ["a", "b"]
    assert fault_nodes({"grudge": {"n1": [], "n2": ["n3"]}}) == ["n2", "n3"]
    assert fault_nodes(None) == [] and fault_nodes({"grudge": "x"}) == []
