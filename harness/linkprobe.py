"""Is traffic from one node to another dropped? A TCP connect, made from inside the node.

A partition's evidence (HISTORY.md's `landed`) is traffic seen dropped: from each cut
node, a connect to each peer it holds a grudge against, on a port where nobody listens.
A link that carries traffic answers at once, `Connection refused` (the peer's RST came
back) or connected; a cut one times out (iptables dropped the SYN or the RST) or is
refused by the node's own stack (`Invalid argument` from a blackhole route). One shell
script probes every peer of a node at once, so a partition costs about one timeout.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from harness.protocols import LinkSeen

PROBE_PORT = 1      # tcpmux: nobody listens there, so a flowing link answers "refused"
PROBE_TIMEOUT_S = 1
Seen = Literal["dropped", "flowing", "unknown"]
_DROPPED = ("Invalid argument", "Network is unreachable", "No route to host")


def script(addrs: Sequence[str]) -> str:
    """A bash script printing one line per address: `ADDR EXIT MESSAGE`."""
    probes = " ".join(
        f"( m=$(timeout {PROBE_TIMEOUT_S} bash -c "
        f"{shlex.quote(f'exec 3<>/dev/tcp/{a}/{PROBE_PORT}')} 2>&1 | tr '\\n' ' '); "
        f"echo {shlex.quote(a)} $? \"$m\" ) &" for a in addrs)
    return f"set -o pipefail; {probes} wait"


def parse(out: str) -> dict[str, Seen]:
    """ADDR -> what its probe saw."""
    seen: dict[str, Seen] = {}
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            continue
        addr, code, msg = parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""
        if code == 124 or any(d in msg for d in _DROPPED):
            seen[addr] = "dropped"
        elif code == 0 or "Connection refused" in msg:
            seen[addr] = "flowing"
        else:
            seen[addr] = "unknown"
    return seen


def probe_pairs(pairs: Sequence[tuple[str, str]], addrs: Mapping[str, str],
                run_in: Callable[[str, str], str]) -> dict[tuple[str, str], LinkSeen]:
    """Probe each (node, peer) pair: one script per node, the nodes at once; run_in(node,
    script) runs a bash script inside the node and returns its stdout."""
    by_node: dict[str, list[str]] = {}
    for node, peer in pairs:
        if node in addrs and peer in addrs:
            by_node.setdefault(node, []).append(peer)

    def one(node: str) -> dict[tuple[str, str], str]:
        peers = by_node[node]
        try:
            seen = parse(run_in(node, script([addrs[p] for p in peers])))
        except Exception:  # an observation never fails the fault it judges
            seen = {}
        return {(node, p): seen.get(addrs[p], "unknown") for p in peers}

    out: dict[tuple[str, str], str] = {}
    if by_node:
        with ThreadPoolExecutor(max_workers=len(by_node)) as pool:
            for got in pool.map(one, sorted(by_node)):
                out.update(got)
    return {pair: LinkSeen(out.get(pair, "unknown")) for pair in pairs}
