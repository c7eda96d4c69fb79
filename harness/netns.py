"""A network namespace per node on this machine, so a local run can cut links (root only).

Each node gets a namespace with one veth end (10.213.S.(10+i)/24) whose other end
sits on a bridge in a switch namespace of the run's own; one more veth joins the
harness's namespace to that bridge (10.213.S.1). Clients and the harness reach
every node, and nodes reach each other, through the bridge. The bridge lives in
its own namespace because bridged frames pass the iptables of the bridge's
namespace (br_netfilter): in the harness's, a Docker engine's FORWARD policy
would drop them; the switch namespace has no rules. A partition is
`ip route add blackhole PEER/32` inside the node's namespace: the node sends
nothing to that peer, so no TCP exchange between them completes, in either
direction. The harness and its clients (the pseudo-node "client", at
10.213.S.1) are cut only by a grudge that names them as the side that drops:
`{"client": ["n1"]}` is a blackhole route to the harness inside n1, so n1 still
receives and serves what clients send on open connections while its answers
(and acknowledgements) are lost, one way, as with iptables on n1's egress.
Dropping clients' requests alone (`{"n1": ["client"]}`) needs filtering on
ingress, which routes cannot do: it is refused. Heal deletes the routes.
No iptables is needed. Everything made is registered in harness.leftovers first
(kind "netns": the bridge and the namespaces), so `undertow heal` removes it.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from harness import leftovers
from harness.linkprobe import PROBE_TIMEOUT_S, probe_pairs
from harness.net import CLIENT, checked_grudge
from harness.protocols import LinkSeen

IP = "ip"
SUBNET = "10.213.{}.0/24"
_NAME = re.compile(r"[a-z0-9]{1,6}")


class Unsupported(NotImplementedError):
    """This machine or user cannot make namespaces (not root, no `ip`)."""


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [IP, *(("netns", "exec", ns, IP) if ns else ()), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")
    return done


def supported() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        _ip("-V")
    except (OSError, RuntimeError) as e:
        return f"the `ip` command is missing or broken: {e}"
    return None


def _used_subnets() -> set[int]:
    out = _ip("-o", "-4", "addr", "show", check=False).stdout
    return {int(m[1]) for m in re.finditer(r"inet 10\.213\.(\d+)\.", out)}


class Namespaces:
    """The namespaces, veths and bridge of one run; a Net (partition/heal) over them."""

    def __init__(self, run_id: str, nodes: Sequence[str]) -> None:
        why = supported()
        if why is not None:
            raise Unsupported(f"partitions on the local backend: {why}")
        for n in nodes:
            if not _NAME.fullmatch(n):
                raise ValueError(f"netns: node name {n!r} must be 1-6 lowercase letters/digits")
        self.run_id = run_id
        self.nodes = tuple(nodes)
        tag = f"{zlib.crc32(run_id.encode()) & 0xFFFFFF:06x}"
        self.bridge = f"utb{tag}"  # in the switch namespace
        self.switch = f"ut{tag}sw"
        self.uplink = (f"utu{tag}", f"utd{tag}")  # harness end (10.213.S.1), bridge end
        self.ns = {n: f"ut{tag}{n}" for n in self.nodes}
        self.veth = {n: (f"ut{tag}{n}h", f"ut{tag}{n}c") for n in self.nodes}
        self.subnet = 0
        self.addr: dict[str, str] = {}
        self.item: str | None = None
        self.cut: dict[str, set[str]] = {n: set() for n in self.nodes}  # node -> peers it cut
        self._lock = threading.Lock()

    def prefix(self, node: str) -> list[str]:
        """Run a command inside the node's namespace."""
        return [IP, "netns", "exec", self.ns[node]]

    def up(self) -> dict[str, str]:
        """Make everything; node -> its address. Undone by down() or `undertow heal`."""
        free = sorted(set(range(1, 255)) - _used_subnets())
        if not free:
            raise RuntimeError("netns: every 10.213.x.0/24 subnet is in use")
        s = self.subnet = free[zlib.crc32(self.run_id.encode()) % len(free)]
        self.item = leftovers.register(self.run_id, "netns", undo_module="harness.netns",
                                       bridge=self.uplink[0],
                                       namespaces=sorted([*self.ns.values(), self.switch]),
                                       veths=[])
        sw = self.switch
        _ip("netns", "add", sw)
        _ip("link", "add", self.bridge, "type", "bridge", ns=sw)
        _ip("link", "set", self.bridge, "up", ns=sw)
        up, down = self.uplink
        _ip("link", "add", up, "type", "veth", "peer", "name", down)
        _ip("link", "set", down, "netns", sw)
        _ip("link", "set", down, "master", self.bridge, ns=sw)
        _ip("link", "set", down, "up", ns=sw)
        _ip("addr", "add", f"10.213.{s}.1/24", "dev", up)
        _ip("link", "set", up, "up")
        for i, n in enumerate(self.nodes):
            ns, (host, inside) = self.ns[n], self.veth[n]
            addr = f"10.213.{s}.{10 + i}"
            _ip("netns", "add", ns)
            _ip("link", "add", host, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", ns)
            _ip("link", "set", host, "netns", sw)
            _ip("link", "set", host, "master", self.bridge, ns=sw)
            _ip("link", "set", host, "up", ns=sw)
            _ip("addr", "add", f"{addr}/24", "dev", inside, ns=ns)
            _ip("link", "set", inside, "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)
            self.addr[n] = addr
        return dict(self.addr)

    # -- Net ---------------------------------------------------------------------

    @property
    def client_addr(self) -> str:
        """The harness's (and its clients') address as the nodes see it."""
        return f"10.213.{self.subnet}.1"

    def _routes(self, grudge: Mapping[str, Collection[str]]) -> list[tuple[str, str]]:
        """(node, peer) pairs: a blackhole route to peer inside node; refuses what routes
        cannot do before any is added."""
        out: list[tuple[str, str]] = []
        for node, peers in checked_grudge(grudge, {*self.nodes, CLIENT}).items():
            for peer in peers:
                if peer == CLIENT:
                    raise ValueError(f"netns partition: {node} cannot drop clients' requests "
                                     "alone (routes do not filter ingress); cut their answers "
                                     f"with {{'client': [{node!r}]}}")
                # clients drop peer's answers: peer routes nothing back to the harness
                out.append((peer, CLIENT) if node == CLIENT else (node, peer))
        return out

    def partition(self, run: Any, grudge: Mapping[str, Collection[str]]) -> None:
        """Each node stops sending to the peers it holds a grudge against (added to any cut);
        a node the clients hold a grudge against stops answering them."""
        with self._lock:
            for node, peer in self._routes(grudge):
                if peer in self.cut[node]:
                    continue
                to = self.client_addr if peer == CLIENT else self.addr[peer]
                _ip("route", "add", "blackhole", f"{to}/32", ns=self.ns[node])
                self.cut[node].add(peer)

    def heal(self, run: Any) -> None:
        with self._lock:
            for node, peers in self.cut.items():
                for peer in sorted(peers):
                    to = self.client_addr if peer == CLIENT else self.addr[peer]
                    _ip("route", "del", "blackhole", f"{to}/32", ns=self.ns[node], check=False)
                peers.clear()

    def probe(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LinkSeen]:
        """From inside each node's namespace, a connect to each peer (harness.linkprobe)."""
        return probe_pairs(pairs, self.addr, lambda node, script: subprocess.run(
            [*self.prefix(node), "bash", "-c", script], capture_output=True, text=True,
            timeout=PROBE_TIMEOUT_S + 10).stdout)

    def slow(self, run: Any, nodes: Collection[str], delay_ms: float, jitter_ms: float) -> None:
        raise Unsupported("slow links between namespaces are not built (no netem here)")

    def lossy(self, run: Any, nodes: Collection[str], drop_probability: float) -> None:
        raise Unsupported("lossy links between namespaces are not built (no netem here)")

    def fast(self, run: Any) -> None:
        """Nothing is ever slowed."""

    def down(self) -> list[str]:
        """Delete the namespaces, veths and bridge (processes inside must be gone first)."""
        problems = _undo({"bridge": self.uplink[0],
                          "namespaces": [*self.ns.values(), self.switch], "veths": []})
        if self.item is not None and not problems:
            leftovers.release(self.run_id, self.item)
            self.item = None
        return problems


def _undo(data: Mapping[str, Any]) -> list[str]:
    problems = []
    for ns in data.get("namespaces", ()):
        done = _ip("netns", "del", str(ns), check=False)
        if done.returncode != 0 and "No such file" not in done.stderr:
            problems.append(f"netns del {ns}: {done.stderr.strip()}")
    for veth in data.get("veths", ()):  # gone with its namespace's end, normally
        _ip("link", "del", str(veth), check=False)
    # the harness's end of the uplink (gone with the switch namespace, normally)
    done = _ip("link", "del", str(data["bridge"]), check=False)
    if done.returncode != 0 and "Cannot find" not in done.stderr:
        problems.append(f"link del {data['bridge']}: {done.stderr.strip()}")
    return problems


def _heal_hook(data: dict[str, Any]) -> str:
    problems = _undo(data)
    if problems:
        raise RuntimeError("; ".join(problems))
    return f"removed link {data['bridge']} and namespaces {', '.join(data['namespaces'])}"


leftovers.register_hook("netns", _heal_hook)
