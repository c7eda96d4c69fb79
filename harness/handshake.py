"""Round trips of a node's links, timed as TCP handshakes from the harness with its broker port.

Why handshakes: where links are shaped with iptables (harness.iptables: the docker and ssh
backends), both the slow rule (netem on the node's interface, or an NFQUEUE rule and
harness.nfqdelay) and the lossy rule (`-m statistic --mode random` DROP) act on the node's
egress broker traffic (OUTPUT, `-m multiport --ports <broker port>`). The SYN-ACK a node
sends when the harness connects to its broker port is such traffic, so a connect timed
from the harness is one round trip through the node's delay and its random drop: a
dropped SYN-ACK holds the connect until a retransmission (the initial retransmission
timeout is 1 s on Linux), which nemesis.shaping counts as a stall. No echo runs inside the
node and nothing the system speaks is sent: each connection is closed at once, before a
byte. The address dialled is the one clients dial (the node's address on the broker port).

The handshakes with a node start at a steady pace over the budget, each in a thread of
its own, not one after another: a stalled one (a second) holds none of the others, so a
lossy node shows its share of stalls among all of them, not one stall that ate the budget,
and one handshake that timed out cannot leave the node with no round trip at all.

What gives no round trip: a connect refused (the node is down: its port is closed; the
node is not dialled again in that measurement) or one that got no answer within
CONNECT_TIMEOUT_S (a partition that cuts clients off the node drops every SYN or its
SYN-ACK; a paused node's listen backlog is full). A node whose every attempt failed so
has no round trips, and nemesis.shaping makes no claim for it; a timeout is never
counted as a stall (a loss the shaping asked for shows as a retransmission well within
the timeout, which covers the harness's first two retransmitted SYNs, at 1 s and 3 s).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

CONNECT_TIMEOUT_S = 4.0  # covers SYNs retransmitted at 1 s and 3 s, and a delay of ~3 s
MAX_HANDSHAKES = 50      # per node and measurement, as many as the link proxy's pings


class Refused(Exception):
    """The node's port refused the connection: nothing listens there now."""


Target = tuple[int, int, int, tuple[Any, ...]]  # family, type, proto, sockaddr


def resolve(addr: tuple[str, int]) -> Target | None:
    """Where to connect for host:port (resolved once, not in the handshake's time)."""
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(
            addr[0], addr[1], type=socket.SOCK_STREAM)[0]
    except OSError:
        return None
    return family, kind, proto, tuple(sockaddr)


def handshake_ms(target: Target, timeout_s: float = CONNECT_TIMEOUT_S) -> float | None:
    """One TCP handshake with target (connect, then close), in ms; None when no connection
    was made in timeout_s. Raises Refused when the port refused it."""
    family, kind, proto, sockaddr = target
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(timeout_s)
        t0 = time.perf_counter()
        try:
            sock.connect(sockaddr)
        except ConnectionRefusedError as e:
            raise Refused(str(e)) from e
        except OSError:  # timed out, unreachable, reset
            return None
        return (time.perf_counter() - t0) * 1e3
    finally:
        sock.close()


def time_handshakes(addrs: Mapping[str, tuple[str, int]], budget_s: float, *,
                    max_per_node: int = MAX_HANDSHAKES,
                    timeout_s: float = CONNECT_TIMEOUT_S) -> dict[str, list[float]]:
    """Node -> the time of each handshake with its address (ms): max_per_node handshakes
    with every node, one started every budget_s / max_per_node (a busy machine that falls
    behind starts the rest at once), each waited for up to timeout_s. Never raises: a node
    that could not be timed has no round trips."""
    out: dict[str, list[float]] = {n: [] for n in addrs}
    lock = threading.Lock()
    refused: set[str] = set()
    targets = {n: t for n, a in addrs.items() if (t := resolve(a)) is not None}

    def one(node: str, target: Target) -> None:
        try:
            ms = handshake_ms(target, timeout_s)
        except Exception:  # Refused: the node is down (no more handshakes with it); and an
            with lock:     # observation never fails the fault it judges
                refused.add(node)
            return
        if ms is not None:
            with lock:
                out[node].append(ms)

    threads: list[threading.Thread] = []
    start, interval = time.monotonic(), max(0.0, budget_s) / max(1, max_per_node)
    for i in range(max_per_node if targets else 0):
        wait = start + i * interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # the pace, not a wait for an event: there is none to wait for
        with lock:
            now = [(n, t) for n, t in targets.items() if n not in refused]
        for node, target in now:
            th = threading.Thread(target=one, args=(node, target), daemon=True,
                                  name=f"handshake-{node}")
            th.start()
            threads.append(th)
    end = time.monotonic() + timeout_s + 5.0
    for th in threads:
        th.join(max(0.0, end - time.monotonic()))
    with lock:
        return {n: list(xs) for n, xs in out.items()}
