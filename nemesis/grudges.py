"""Partitions as grudges: node -> the peers whose traffic it drops (Jepsen's shape).

Pure functions of the node list (and a seeded `random.Random` where the shape is
random), so a partition plan is data that a seed replays and a test can check.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from harness.protocols import Grudge as Grudge  # the one definition; nemesis builds them
from harness.protocols import complete_grudge

KINDS = ("one", "halves", "random-halves", "majorities-ring", "bridge", "leader",
         "followers", "controller", "coordinator", "minority", "majority",
         "leader-answers", "followers-apart")


class GrudgeError(ValueError):
    """A grudge that names unknown nodes or has the wrong shape."""


def isolate(nodes: Sequence[str], isolated: Collection[str]) -> Grudge:
    """Cut `isolated` (one node or several) off from everyone else, both ways."""
    inside = [n for n in nodes if n in set(isolated)]
    unknown = set(isolated) - set(nodes)
    if unknown:
        raise GrudgeError(f"cannot isolate unknown nodes {sorted(unknown)}; nodes: {list(nodes)}")
    rest = [n for n in nodes if n not in set(isolated)]
    if not inside or not rest:
        return {}
    return complete_grudge([inside, rest])


def cut_between(a: Collection[str], b: Collection[str]) -> Grudge:
    """a and b cannot hear each other; everyone else still hears both (a bridge)."""
    out: dict[str, frozenset[str]] = {}
    for n in a:
        out[n] = frozenset(b) - {n}
    for n in b:
        out[n] = (out.get(n, frozenset()) | frozenset(a)) - {n}
    return {n: p for n, p in out.items() if p}


def split(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """The first floor(n/2) nodes (a minority) and the rest (a majority)."""
    k = len(nodes) // 2
    return list(nodes[:k]), list(nodes[k:])


def halves(nodes: Sequence[str]) -> Grudge:
    """Minority half against majority half, in node order."""
    a, b = split(nodes)
    return complete_grudge([a, b]) if a and b else {}


def random_halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """A shuffled minority against the majority."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    return halves(shuffled)


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot see each other, and one node that sees both."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if len(shuffled) < 3:
        return halves(shuffled)
    mid = len(shuffled) // 2  # shuffled[mid] is the bridge: it drops nothing
    left, right = shuffled[:mid], shuffled[mid + 1:]
    out: dict[str, frozenset[str]] = {n: frozenset(right) for n in left}
    out.update({n: frozenset(left) for n in right})
    return out


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Every node sees a majority (itself included), but no two see the same one.

    Nodes sit on a shuffled ring; each hears from its nearest neighbours until it
    has a majority. With an odd count the extra neighbour is the next one clockwise,
    so for 3 nodes the grudge is one-way (each node hears only its successor).
    """
    ring = list(nodes)
    rng.shuffle(ring)
    n = len(ring)
    if n < 3:
        return {}
    majority = n // 2 + 1
    others = majority - 1
    out: dict[str, frozenset[str]] = {}
    for i, node in enumerate(ring):
        near = {ring[(i + d) % n] for d in range(1, others // 2 + 1)}
        near |= {ring[(i - d) % n] for d in range(1, others // 2 + 1)}
        if others % 2:
            near.add(ring[(i + others // 2 + 1) % n])
        dropped = frozenset(ring) - near - {node}
        if dropped:
            out[node] = dropped
    return out


CLIENT = "client"  # the clients' pseudo-node: {"client": ["n1"]} cuts clients off n1


def validate(grudge: Mapping[str, Collection[str]], nodes: Sequence[str]) -> Grudge:
    """A grudge over known nodes (and "client"), as frozensets; GrudgeError names the problem."""
    known = {*nodes, CLIENT}
    out: dict[str, frozenset[str]] = {}
    for node, peers in grudge.items():
        if node not in known:
            raise GrudgeError(f"grudge names unknown node {node!r}; nodes: {list(nodes)}")
        if isinstance(peers, str):
            raise GrudgeError(f"grudge[{node!r}] must be a list of nodes, got {peers!r}")
        bad = set(peers) - known
        if bad:
            raise GrudgeError(f"grudge[{node!r}] names unknown nodes {sorted(bad)}")
        if node in peers:
            raise GrudgeError(f"grudge[{node!r}]: a node cannot drop its own traffic")
        if peers:
            out[node] = frozenset(peers)
    return out


def to_json(grudge: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """The history's shape: {"n1": ["n2", "n3"], ...}, sorted, empty entries dropped."""
    return {n: sorted(p) for n, p in sorted(grudge.items()) if p}


def cut_nodes(grudge: Mapping[str, Collection[str]]) -> list[str]:
    """Every node the grudge touches (dropping or dropped), for shading per node."""
    touched = set(grudge)
    for peers in grudge.values():
        touched |= set(peers)
    return sorted(touched - {CLIENT})
