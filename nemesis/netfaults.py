"""Network faults through the run's `Net`: partitions (grudges) with `heal`, and
slow or lossy links with `fast`.

A `partition` invocation carries either an explicit `{"grudge": {...}}` or a
`{"kind": ...}` resolved now (the leader's isolation needs the live cluster);
its completion always carries the grudge applied and the nodes it cut.
"""

from __future__ import annotations

import logging
import random
import statistics
import threading
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from harness.faultkinds import LOSSY, PARTITION, SLOW, verbs
from harness.protocols import ProbesLinks, Run
from harness.runfiles import Op
from nemesis import grudges as g
from nemesis import shaping as sh
from nemesis.faults import NemesisError, resolve_key, roles_of, target_nodes
from nemesis.targets import LiveView, resolve

log = logging.getLogger("undertow.nemesis")

# a slow or lossy step's shaping when the step does not say (the package's options:
# --slow-delay-ms, --slow-jitter-ms, --lossy-drop-probability)
DELAY_MS, JITTER_MS, DROP_PROBABILITY = 100.0, 50.0, 0.2


def grudge_for(kind: str, run: Run, rng: random.Random, value: dict[str, Any]) -> g.Grudge:
    """The grudge of a partition kind, resolved now (leader kinds ask the cluster).

    `followers` cuts a key's leader off from its followers only: both still reach
    the controller and everyone else, so the leader can shrink its ISR to itself;
    with `"cut_clients": true` clients lose the leader too (nobody reads its tail).
    `leader-answers` drops a key's leader's answers to clients, one way: requests
    still reach it and are served, so producers time out on writes that happened.
    `followers-apart` cuts a key's first follower off from its other followers only
    (all still reach the leader): once the leader dies and one follower is elected,
    the other cannot fetch from it.
    """
    nodes = list(run.nodes)
    if kind == "one":
        return g.isolate(nodes, [rng.choice(nodes)])
    if kind == "halves":
        return g.halves(nodes)
    if kind in ("random-halves", "minority", "majority"):
        return g.random_halves(nodes, rng)
    if kind == "majorities-ring":
        return g.majorities_ring(nodes, rng)
    if kind == "bridge":
        return g.bridge(nodes, rng)
    view = LiveView(run)
    key = resolve_key(run, value, rng, view)
    value["key"] = key
    roles = roles_of(run)
    if kind in ("leader", "controller", "coordinator"):
        isolated = resolve(kind, nodes, rng, view, key)
        if "as" in value:
            roles[str(value["as"])] = isolated
        return g.isolate(nodes, isolated)
    if kind == "leader-answers":
        leader = view.leader_of(key)
        isolated = (leader,) if leader in nodes else (rng.choice(nodes),)
        if "as" in value:
            roles[str(value["as"])] = isolated
        return {g.CLIENT: frozenset(isolated)}
    if kind in ("followers", "followers-apart"):
        leader = view.leader_of(key)
        if leader not in nodes:
            leader = rng.choice(nodes)
        followers = tuple(n for n in (view.replicas_of(key) or nodes) if n != leader)
        if "as" in value:
            roles[str(value["as"])] = followers
        if "leader_as" in value:
            roles[str(value["leader_as"])] = (leader,)
        if kind == "followers-apart":
            return g.cut_between(followers[:1], followers[1:])
        grudge = g.cut_between([leader], followers)
        if value.get("cut_clients"):  # clients neither write to nor read from the leader
            return {**grudge, g.CLIENT: frozenset({leader})}
        return grudge
    raise NemesisError(f"partition kind {kind!r} is not one of {', '.join(g.KINDS)}")


def _cut_pairs(grudge: g.Grudge) -> list[tuple[str, str]]:
    """(node, peer) pairs of a grudge: who should no longer reach whom (a pair with the
    clients' pseudo-node is seen only where the Net carries clients: the link proxy)."""
    return sorted((str(n), str(p)) for n, peers in grudge.items() for p in peers)


def _link_evidence(run: Run, pairs: list[tuple[str, str]], want: str) -> dict[str, Any]:
    """`landed` and `evidence` from probes of pairs (the Net's ProbesLinks): a partition
    landed if every pair that could be seen is seen dropped, a heal if every one flows
    again; no claim when the run's Net cannot probe or no pair could be seen."""
    net = run.net
    if not pairs or not isinstance(net, ProbesLinks):
        return {}
    seen = net.probe(pairs)
    if all(v.seen == "unknown" for v in seen.values()):
        return {}
    landed = all(v.seen == want for v in seen.values() if v.seen != "unknown")
    evidence = ", ".join(f"{a}->{b} {s.seen}" + (f" ({s.how})" if s.how else "")
                         for a, b in pairs for s in [seen[(a, b)]])
    if not landed:
        log.warning("%s did not land: %s", "partition" if want == "dropped" else "heal",
                    evidence)
    return {"landed": landed, "evidence": evidence}


class Partition:
    """`partition` by grudge or kind; `heal` ends every partition."""

    kinds = (PARTITION,)
    fs = verbs(kinds)
    name = PARTITION.start

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.RLock()
        self.active = False
        self.cut: list[tuple[str, str]] = []  # the pairs the partition in force cut

    def setup(self, run: Run) -> Partition:
        if run.net is None:
            raise NemesisError(f"--nemesis partition: the {run.spec.backend} backend has no Net")
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        net = run.net
        assert net is not None
        v: dict[str, Any] = dict(op.value) if isinstance(op.value, Mapping) else {}
        with self.lock:
            if op.f == PARTITION.start:
                if "grudge" in v:
                    grudge = g.validate(v["grudge"], run.nodes)
                else:
                    grudge = grudge_for(str(v.get("kind", "random-halves")), run, self.rng, v)
                out = {**v, "grudge": g.to_json(grudge), "nodes": g.cut_nodes(grudge)}
                self.active = True
                try:
                    net.partition(run, grudge)
                except Exception as e:
                    return op.complete("info", out, error=f"{type(e).__name__}: {e}")
                self.cut = _cut_pairs(grudge)
                return op.complete("info", out, **_link_evidence(run, self.cut, "dropped"))
            if op.f == PARTITION.stop:
                try:
                    net.heal(run)
                    self.active = False
                except Exception as e:
                    return op.complete("info", v, error=f"{type(e).__name__}: {e}")
                healed, self.cut = self.cut, []
                return op.complete("info", v, **_link_evidence(run, healed, "flowing"))
        raise NemesisError(f"partition nemesis cannot {op.f!r}")

    def teardown(self, run: Run) -> None:
        if run.net is not None:
            with self.lock:
                try:
                    run.net.heal(run)
                finally:
                    self.active = False


class Links:
    """`slow` (delay and jitter) and `lossy` (drop probability) links of some nodes;
    `fast` ends all shaping. Each says whether it landed from round trips timed through
    the nodes' links before and after (nemesis.shaping), where the Net can time them."""

    kinds = (SLOW, LOSSY)
    fs = verbs(kinds)
    name = "links"

    def __init__(self, seed: int = 0, delay_ms: float = DELAY_MS, jitter_ms: float = JITTER_MS,
                 drop_probability: float = DROP_PROBABILITY) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.RLock()
        self.delay_ms, self.jitter_ms, self.drop_probability = delay_ms, jitter_ms, drop_probability
        self.base_ms: dict[str, float] = {}  # each shaped node's round trip before shaping

    def setup(self, run: Run) -> Links:
        if run.net is None:
            raise NemesisError(f"--nemesis slow/lossy: the {run.spec.backend} backend has no Net")
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        net = run.net
        assert net is not None
        v: dict[str, Any] = dict(op.value) if isinstance(op.value, Mapping) else {}
        with self.lock:
            try:
                if op.f in (SLOW.start, LOSSY.start):
                    nodes = target_nodes(run, v, self.rng)
                    fresh = [n for n in nodes if n not in self.base_ms]
                    before = self._before(run, nodes)
                    try:
                        if op.f == SLOW.start:
                            delay = float(v.get("delay_ms", self.delay_ms))
                            jitter = float(v.get("jitter_ms", self.jitter_ms))
                            v.update(nodes=list(nodes), delay_ms=delay, jitter_ms=jitter)
                            net.slow(run, nodes, delay, jitter)
                            judge = partial(sh.judge_slow, delay_ms=delay)
                        else:
                            p = float(v.get("drop_probability", self.drop_probability))
                            v.update(nodes=list(nodes), drop_probability=p)
                            net.lossy(run, nodes, p)
                            judge = partial(sh.judge_lossy, drop_probability=p)
                    except Exception:  # not shaped (e.g. no netem): `fast` has nothing to judge
                        for n in fresh:
                            self.base_ms.pop(n, None)
                        raise
                    after = sh.time_links(run, nodes, sh.MEASURE_S) or {}
                    return op.complete("info", v, **sh.claim(op.f, {
                        n: judge(before.get(n, []), after.get(n, [])) for n in nodes}))
                if op.f in (SLOW.stop, LOSSY.stop):
                    net.fast(run)
                    base, self.base_ms = self.base_ms, {}
                    after = sh.time_links(run, sorted(base), 2 * sh.BASELINE_S) or {}
                    return op.complete("info", v, **sh.claim(op.f, {
                        n: sh.judge_fast(b, after.get(n, [])) for n, b in base.items()}))
                raise NemesisError(f"links nemesis cannot {op.f!r}")
            except NemesisError:
                raise
            except Exception as e:
                return op.complete("info", v, error=f"{type(e).__name__}: {e}")

    def _before(self, run: Run, nodes: Sequence[str]) -> dict[str, list[float]]:
        """Round trips before this shaping: a node shaped already is judged against its
        round trip before it was first shaped (a new slow replaces the old delay)."""
        fresh = [n for n in nodes if n not in self.base_ms]
        got = sh.time_links(run, fresh, sh.BASELINE_S) or {}
        for n in fresh:
            if got.get(n):
                self.base_ms[n] = statistics.median(got[n])
        return {n: [self.base_ms[n]] for n in nodes if n in self.base_ms}

    def teardown(self, run: Run) -> None:
        if run.net is not None:
            with self.lock:
                self.base_ms = {}
                run.net.fast(run)
