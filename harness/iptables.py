"""Net over iptables on each node (docker and ssh backends), through Remote.exec.

Same meaning as harness.net's proxy rules, so a nemesis behaves alike on every backend:

- A grudge maps a node to the peers whose packets it drops: on that node,
  `iptables -A INPUT -s <peer> -j DROP` (Jepsen's partitions). `partition` replaces the
  grudge in force; `heal` ends it.
- Clients are the pseudo-node "client" (the harness's address as the nodes see it). Only
  the broker port is cut for them, so the control channel (ssh) survives:
  `{"n1": ["client"]}` drops clients' requests on n1 (INPUT --dport),
  `{"client": ["n1"]}` drops n1's answers to clients (OUTPUT --sport on n1).
- `lossy` drops a node's outgoing broker traffic at random (`-m statistic --mode random`),
  both to peers and to clients; `fast` ends it.
- `slow` delays the node's egress broker traffic. Where the kernel has the netem qdisc,
  with `tc qdisc replace ... netem delay`. Where it has not (as on the CI machines), with
  iptables' NFQUEUE target and a delayer process (harness.nfqdelay) bound to that queue in
  the node's network namespace, if the backend can start one there (`delayers`: the docker
  backend run as root); otherwise `slow` raises Unsupported rather than pretend.

Evidence (HISTORY.md's `landed`): `probe` connects from inside each node to its peers
(harness.linkprobe), for partitions; `round_trips` times TCP handshakes from the harness
with each node's broker port (harness.handshake), whose SYN-ACKs pass the node's slow and
lossy rules, for slow, lossy and fast.

A DROP rule goes first in its chain (`-I`), the NFQUEUE rule last (`-A`): a packet the
delayer lets go (NF_ACCEPT) leaves the chain there, so a drop after the queue rule would
never see a slowed node's broker traffic (lossy, or a cut of clients, on a slowed node).

Every rule carries the comment `<tag>:part`, `<tag>:loss` or `<tag>:slow` (tag = one per run), and a
heal deletes exactly the rules with that comment, listed back from `iptables -S`.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.handshake import time_handshakes
from harness.linkprobe import PROBE_TIMEOUT_S, probe_pairs
from harness.net import CLIENT, check_delay, check_drop_probability, checked_grudge
from harness.protocols import Exec, Grudge, LinkSeen, Remote, Run

CHAINS = ("INPUT", "OUTPUT")


class Unsupported(NotImplementedError):
    """A fault this node's kernel cannot make (e.g. slow links without netem)."""


class IptablesError(RuntimeError):
    """An iptables command failed on a node; says which node and command."""


class DelayerHost(Protocol):
    """Starts a long-lived process inside a node's network namespace (for harness.nfqdelay)."""

    def spawn(self, node: str, argv: Sequence[str]) -> subprocess.Popen[str]: ...


DELAYER_READY_S = 10.0


@dataclass(frozen=True, slots=True)
class Rule:
    """One iptables rule the harness added: chain and match, without -A/-D."""

    node: str
    chain: str
    spec: tuple[str, ...]

    def argv(self, op: str) -> list[str]:
        return ["iptables", "-w", op, self.chain, *self.spec]


class IptablesNet:
    """harness.protocols.Net over iptables; thread-safe.

    addrs: node -> IP address (as the other nodes reach it); client_addr: the harness's
    address as the nodes see it (None: grudges naming "client" are refused).
    on_add / on_remove are told of every rule (for harness.leftovers on real hosts).
    """

    def __init__(self, remote: Remote, addrs: Mapping[str, str], *, tag: str,
                 broker_port: int, client_addr: str | None = None, sudo: bool = False,
                 on_add: Callable[[Rule], None] | None = None,
                 on_remove: Callable[[Rule], None] | None = None,
                 delayers: DelayerHost | None = None,
                 timeout_s: float = 20.0) -> None:
        if not tag or any(c.isspace() or c in "'\"" for c in tag):
            raise ValueError(f"IptablesNet: tag {tag!r} must be a non-empty word")
        self.remote = remote
        self.addrs = dict(addrs)
        self.tag = tag
        self.broker_port = broker_port
        self.client_addr = client_addr
        self.sudo = sudo
        self.on_add = on_add
        self.on_remove = on_remove
        self.timeout_s = timeout_s
        self.delayers = delayers
        self.queue_num = zlib.crc32(tag.encode()) % 60000 + 1000  # one queue per run
        self._delayer_procs: dict[str, subprocess.Popen[str]] = {}
        self._lock = threading.Lock()
        self._grudge: dict[str, frozenset[str]] = {}
        self._loss: dict[str, float] = {}
        self._slow: dict[str, tuple[float, float]] = {}

    # -- Net -------------------------------------------------------------------

    def partition(self, run: Run | None, grudge: Grudge) -> None:
        clean = checked_grudge(grudge, {*self.addrs, CLIENT})
        if CLIENT in {*clean, *(p for ps in clean.values() for p in ps)} and not self.client_addr:
            raise ValueError("partition: this backend does not know the clients' address")
        with self._lock:
            self._remove_tagged("part")
            self._grudge = clean
            self._add(self._partition_rules(clean))

    def heal(self, run: Run | None) -> None:
        with self._lock:
            self._remove_tagged("part")
            self._grudge = {}

    def probe(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LinkSeen]:
        """From each node (its network namespace), a connect to each peer (harness.linkprobe)."""
        return probe_pairs(pairs, self.addrs, lambda node, script: self.remote.exec(
            node, ["bash", "-c", script], timeout_s=PROBE_TIMEOUT_S + 10).stdout)

    def round_trips(self, nodes: Sequence[str], budget_s: float) -> dict[str, list[float]]:
        """TimesLinks: handshakes from the harness with each node's broker port, timed
        (harness.handshake). The address dialled is addrs[node]: on the docker and ssh
        backends the one clients dial too, reachable from the harness. Never raises."""
        dial = {n: (self.addrs[n], self.broker_port) for n in nodes if n in self.addrs}
        try:
            got = time_handshakes(dial, budget_s)
        except Exception:  # (no thread to be had) an observation never fails the fault
            got = {}
        return {n: got.get(n, []) for n in nodes}

    def lossy(self, run: Run | None, nodes: Collection[str], drop_probability: float) -> None:
        self._check(nodes, "lossy")
        check_drop_probability(drop_probability)
        with self._lock:
            for n in nodes:
                self._remove_tagged("loss", only=n)
                self._loss[n] = float(drop_probability)
                if drop_probability > 0:
                    self._add([Rule(n, "OUTPUT", (
                        "-p", "tcp", "-m", "multiport", "--ports", str(self.broker_port),
                        "-m", "statistic", "--mode", "random",
                        "--probability", f"{drop_probability:.6f}", *self._comment("loss"),
                        "-j", "DROP"))])

    def slow(self, run: Run | None, nodes: Collection[str], delay_ms: float,
             jitter_ms: float = 0.0) -> None:
        self._check(nodes, "slow")
        check_delay(delay_ms, jitter_ms)
        with self._lock:
            for n in nodes:
                self._end_slow(n)
                dev = self._egress_dev(n)
                cmd = ["tc", "qdisc", "replace", "dev", dev, "root", "netem",
                       "delay", f"{delay_ms:g}ms", f"{jitter_ms:g}ms"]
                r = self._exec(n, cmd)
                if r.ok:
                    pass
                elif "unknown" in r.stderr.lower() or "not supported" in r.stderr.lower():
                    if self.delayers is None:
                        raise Unsupported(
                            f"slow: node {n} has no netem qdisc ({r.stderr.strip()}), and this "
                            "backend cannot run a packet delayer in its network namespace "
                            "(the docker backend can, as root); lossy links work")
                    self._slow_by_queue(n, delay_ms, jitter_ms)
                else:
                    raise IptablesError(f"slow on {n}: {shlex.join(cmd)}: {r.stderr.strip()}")
                self._slow[n] = (delay_ms, jitter_ms)

    def fast(self, run: Run | None) -> None:
        with self._lock:
            self._remove_tagged("loss")
            self._loss = {}
            for n in sorted({*self._slow, *self._delayer_procs}):
                self._end_slow(n)
                self._slow.pop(n, None)

    def _slow_by_queue(self, node: str, delay_ms: float, jitter_ms: float) -> None:
        """Start a delayer bound to our queue in the node's netns, then queue its egress."""
        assert self.delayers is not None
        argv = [sys.executable, "-m", "harness.nfqdelay", "--queue", str(self.queue_num),
                "--delay-ms", f"{delay_ms:g}", "--jitter-ms", f"{jitter_ms:g}",
                "--parent", str(os.getpid()), "--ready-file", "-"]
        proc = self.delayers.spawn(node, argv)
        self._delayer_procs[node] = proc
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], DELAYER_READY_S)
        line = proc.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            err = _stop(proc)
            del self._delayer_procs[node]
            raise IptablesError(f"slow on {node}: the packet delayer did not start: "
                                f"{err or f'no answer in {DELAYER_READY_S:g} s'}")
        self._add([Rule(node, "OUTPUT", (
            "-p", "tcp", "-m", "multiport", "--ports", str(self.broker_port),
            *self._comment("slow"), "-j", "NFQUEUE", "--queue-num", str(self.queue_num),
            "--queue-bypass"))])

    def _end_slow(self, node: str) -> None:
        """Undo whichever slow is on the node: the queue rule and its delayer, or netem."""
        proc = self._delayer_procs.pop(node, None)
        if proc is not None:
            self._remove_tagged("slow", only=node)  # packets flow again (bypass) ...
            _stop(proc)  # ... and the delayer lets go of what it still holds
        elif node in self._slow:
            dev = self._egress_dev(node)
            self._exec(node, ["tc", "qdisc", "del", "dev", dev, "root"])

    # -- state -------------------------------------------------------------------

    def in_force(self) -> list[str]:
        with self._lock:
            out = [f"{n} drops {','.join(sorted(p))}" for n, p in sorted(self._grudge.items())]
            out += [f"lossy {n} {p:.0%}" for n, p in sorted(self._loss.items()) if p]
            out += [f"slow {n} +{d:g}ms" for n, (d, _j) in sorted(self._slow.items())]
            return out

    def rules(self, node: str) -> list[Rule]:
        """The rules with this run's tag now on a node (read back from iptables -S)."""
        out: list[Rule] = []
        for chain in CHAINS:
            r = self._exec(node, ["iptables", "-w", "-S", chain])
            if not r.ok:
                raise IptablesError(f"iptables -S {chain} on {node}: {r.stderr.strip()}")
            for line in r.stdout.splitlines():
                words = shlex.split(line)
                if len(words) > 2 and words[0] == "-A" and self._is_ours(words):
                    out.append(Rule(node, words[1], tuple(words[2:])))
        return out

    # -- internals ---------------------------------------------------------------------

    def _comment(self, kind: str) -> tuple[str, ...]:
        return ("-m", "comment", "--comment", f"{self.tag}:{kind}")

    def _is_ours(self, words: list[str], kind: str | None = None) -> bool:
        for i, w in enumerate(words[:-1]):
            if w == "--comment":
                c = words[i + 1]
                return c == f"{self.tag}:{kind}" if kind else c.startswith(f"{self.tag}:")
        return False

    def _partition_rules(self, grudge: Mapping[str, frozenset[str]]) -> list[Rule]:
        rules: list[Rule] = []
        port = str(self.broker_port)
        for node, peers in sorted(grudge.items()):
            for peer in sorted(peers):
                if node == CLIENT:  # clients drop peer's answers: cut on the peer's egress
                    rules.append(Rule(peer, "OUTPUT", (
                        "-d", str(self.client_addr), "-p", "tcp", "--sport", port,
                        *self._comment("part"), "-j", "DROP")))
                elif peer == CLIENT:  # node drops clients' requests
                    rules.append(Rule(node, "INPUT", (
                        "-s", str(self.client_addr), "-p", "tcp", "--dport", port,
                        *self._comment("part"), "-j", "DROP")))
                else:
                    rules.append(Rule(node, "INPUT", (
                        "-s", self.addrs[peer], *self._comment("part"), "-j", "DROP")))
        return rules

    def _add(self, rules: list[Rule]) -> None:
        by_node: dict[str, list[Rule]] = {}
        for rule in rules:
            by_node.setdefault(rule.node, []).append(rule)
        for node, rs in by_node.items():
            for rule in rs:
                if self.on_add:
                    self.on_add(rule)  # registered before it exists, so a heal finds it
            script = " && ".join(shlex.join(r.argv("-I" if r.spec[-1] == "DROP" else "-A"))
                                 for r in rs)
            res = self._exec(node, ["sh", "-c", script])
            if not res.ok:
                raise IptablesError(f"adding rules on {node} failed: {res.stderr.strip()}")

    def _remove_tagged(self, kind: str, only: str | None = None) -> None:
        """Delete every rule of this kind carrying our tag, as iptables lists them now."""
        for node in ([only] if only else sorted(self.addrs)):
            ours = [r for r in self.rules(node) if self._is_ours(["", *r.spec], kind)]
            if not ours:
                continue
            script = "; ".join(shlex.join(r.argv("-D")) for r in ours)
            res = self._exec(node, ["sh", "-c", script])
            if not res.ok:
                raise IptablesError(f"deleting rules on {node} failed: {res.stderr.strip()}")
            for rule in ours:
                if self.on_remove:
                    self.on_remove(rule)

    def _egress_dev(self, node: str) -> str:
        peer = next((a for n, a in sorted(self.addrs.items()) if n != node),
                    self.client_addr or "")
        r = self._exec(node, ["ip", "-o", "route", "get", peer])
        words = r.stdout.split()
        if not r.ok or "dev" not in words:
            raise IptablesError(f"cannot find {node}'s interface towards {peer}: {r.stderr}")
        return words[words.index("dev") + 1]

    def _check(self, nodes: Collection[str], what: str) -> None:
        bad = sorted(set(nodes) - set(self.addrs))
        if bad:
            raise ValueError(f"{what}: unknown node(s) {', '.join(bad)}; "
                             f"known: {', '.join(sorted(self.addrs))}")

    def _exec(self, node: str, cmd: list[str]) -> Exec:
        argv = ["sudo", "-n", *cmd] if self.sudo else cmd
        return self.remote.exec(node, argv, timeout_s=self.timeout_s)


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM a delayer (it releases every held packet), then reap it; its stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        _out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
    return (err or "").strip()
