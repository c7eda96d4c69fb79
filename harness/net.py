"""Net over the harness's link proxy: partitions as grudges, slow and lossy links.

The rules, as iptables and netem would apply them on each node:

- A grudge maps a node to the peers whose packets it drops (iptables -A INPUT
  -s peer -j DROP on that node). On the proxied link src -> dst (connections
  src dials), the `fwd` direction is blocked when dst drops src, the `bwd`
  direction (dst's answers) when src drops dst. So a one-way grudge is one-way
  in packets, and, as with TCP over iptables, a connection whose answers are
  lost is as good as dead to the dialer.
- Clients are the pseudo-node "client". A grudge between nodes never cuts
  clients: only a grudge that names "client" does, either as a key
  (`{"client": ["n1"]}`: clients drop n1's answers) or as a peer
  (`{"n1": ["client"]}`: n1 drops clients' requests).
- `partition` replaces the grudge in force; `heal` ends it.
- slow / lossy act on a node's egress (netem on its interface): a chunk sent by
  a slowed node is delayed; between two slowed nodes a round trip pays twice.
- `fast` ends every slow and lossy link.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from harness.protocols import Grudge, LinkSeen, Run
from harness.proxy import CLEAN, Links, Shape
from harness.proxyprobe import PROBE_TIMEOUT_S, pair_seen

CLIENT = "client"


def _fmt_ms(x: float) -> str:
    return f"{x:g}"


def checked_grudge(grudge: Grudge, known: set[str]) -> dict[str, frozenset[str]]:
    """A grudge with every name checked against `known`, self-drops and empty entries gone.

    Shared by every Net (the link proxy here, iptables on containers and hosts), so a
    bad grudge is refused with the same message whichever backend runs.
    """
    clean: dict[str, frozenset[str]] = {}
    for node, peers in grudge.items():
        bad = sorted({node, *peers} - known)
        if bad:
            raise ValueError(f"partition: unknown node(s) {', '.join(bad)} in grudge "
                             f"{dict(grudge)!r}; known: {', '.join(sorted(known))}")
        drops = frozenset(peers) - {node}
        if drops:
            clean[node] = drops
    return clean


def check_delay(delay_ms: float, jitter_ms: float) -> None:
    """Refuse a negative delay or jitter (every Net's `slow`)."""
    if delay_ms < 0 or jitter_ms < 0:
        raise ValueError(f"slow: delay_ms {delay_ms} and jitter_ms {jitter_ms} "
                         "must not be negative")


def check_drop_probability(drop_probability: float) -> None:
    """Refuse a probability outside [0, 1] (every Net's `lossy`)."""
    if not 0.0 <= drop_probability <= 1.0:
        raise ValueError(f"lossy: drop_probability {drop_probability} is not in [0, 1]")


class ProxyNet:
    """harness.protocols.Net for the local backend; thread-safe."""

    def __init__(self, proxy: Links, nodes: Iterable[str]) -> None:
        self.proxy = proxy
        self.nodes = tuple(nodes)
        self._lock = threading.Lock()
        self._grudge: dict[str, frozenset[str]] = {}
        self._slow: dict[str, tuple[float, float]] = {}
        self._loss: dict[str, float] = {}

    # -- Net ---------------------------------------------------------------

    def partition(self, run: Run | None, grudge: Grudge) -> None:
        clean = checked_grudge(grudge, {*self.nodes, CLIENT})
        with self._lock:
            self._grudge = clean
            self._apply()

    def heal(self, run: Run | None) -> None:
        with self._lock:
            self._grudge = {}
            self._apply()

    def slow(self, run: Run | None, nodes: Collection[str], delay_ms: float,
             jitter_ms: float = 0.0) -> None:
        self._check(nodes, "slow")
        check_delay(delay_ms, jitter_ms)
        with self._lock:
            for n in nodes:
                self._slow[n] = (float(delay_ms), float(jitter_ms))
            self._apply()

    def lossy(self, run: Run | None, nodes: Collection[str], drop_probability: float) -> None:
        self._check(nodes, "lossy")
        check_drop_probability(drop_probability)
        with self._lock:
            for n in nodes:
                self._loss[n] = float(drop_probability)
            self._apply()

    def fast(self, run: Run | None) -> None:
        with self._lock:
            self._slow = {}
            self._loss = {}
            self._apply()

    # -- what is in force ----------------------------------------------------

    def in_force(self) -> list[str]:
        """Short descriptions of every fault in force, for the progress line."""
        with self._lock:
            out: list[str] = []
            if self._grudge:
                out.append("partition: " + describe(self._grudge))
            for n, (d, j) in sorted(self._slow.items()):
                out.append(f"slow {n} +{_fmt_ms(d)}ms" + (f"±{_fmt_ms(j)}" if j else ""))
            for n, p in sorted(self._loss.items()):
                out.append(f"lossy {n} {p:.0%}")
            return out

    # -- evidence (HISTORY.md's `landed`) --------------------------------------

    def probe(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LinkSeen]:
        """ProbesLinks: each pair (a, b) by a probe through the links a->b and b->a (a
        grudge cuts both: one loses the requests, the other the answers), all at once."""
        carried = {(li.src, li.dst) for li in self.proxy.links()}
        of = {pair: [k for k in dict.fromkeys((pair, (pair[1], pair[0]))) if k in carried]
              for pair in pairs}
        links = sorted({k for ks in of.values() for k in ks})
        try:
            got = self.proxy.probe(links, PROBE_TIMEOUT_S) if links else {}
        except Exception as e:  # an observation never fails the fault it judges
            return {pair: LinkSeen("unknown", f"probe failed: {e}") for pair in pairs}
        return {pair: pair_seen([(k, got[k]) for k in ks]) for pair, ks in of.items()}

    def round_trips(self, nodes: Sequence[str], budget_s: float) -> dict[str, list[float]]:
        """TimesLinks: round trips through every link to or from each node, at once."""
        of = {n: [(li.src, li.dst) for li in self.proxy.links() if n in (li.src, li.dst)]
              for n in nodes}
        links = sorted({k for ks in of.values() for k in ks})
        try:
            got = self.proxy.round_trips(links, budget_s) if links else {}
        except Exception:
            return {n: [] for n in nodes}
        return {n: [ms for k in ks for ms in got[k].rtts_ms] for n, ks in of.items()}

    @property
    def grudge(self) -> dict[str, frozenset[str]]:
        with self._lock:
            return dict(self._grudge)

    # -- internals -------------------------------------------------------------

    def _check(self, nodes: Collection[str], what: str) -> None:
        bad = sorted(set(nodes) - {*self.nodes, CLIENT})
        if bad:
            raise ValueError(f"{what}: unknown node(s) {', '.join(bad)}; "
                             f"known: {', '.join(self.nodes)}")

    def _direction(self, sender: str, receiver: str) -> Shape:
        shape = CLEAN
        if sender in self._grudge.get(receiver, ()):
            shape = replace(shape, blocked=True)
        if sender in self._slow:
            d, j = self._slow[sender]
            shape = replace(shape, delay_ms=d, jitter_ms=j)
        if sender in self._loss:
            shape = replace(shape, loss=self._loss[sender])
        return shape

    def shapes(self) -> list[tuple[str, str, Shape, Shape]]:
        """(src, dst, fwd, bwd) for every link, from the state in force."""
        return [(li.src, li.dst, self._direction(li.src, li.dst), self._direction(li.dst, li.src))
                for li in self.proxy.links()]

    def _apply(self) -> None:
        self.proxy.set_shapes(self.shapes())


def describe(grudge: Mapping[str, Collection[str]]) -> str:
    return "; ".join(f"{n} drops {','.join(sorted(p))}" for n, p in sorted(grudge.items()) if p)
