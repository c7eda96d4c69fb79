"""The controller quorum on a node: Raft messages carried over `peers`, and the metadata log.

Raft traffic uses its own connection per peer (the "raft" request), so replica long polls
and heartbeats never delay elections, and the link proxy's faults apply to it like to
everything else.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .config import NodeConfig
from .raft import RaftConfig
from .raft.metadata_log import RaftMetadataLog
from .rpc import Peer, RpcError

log = logging.getLogger("broker.quorum")

MAX_IN_FLIGHT_PER_PEER = 32  # beyond this (a paused or cut peer) messages are dropped


class PeerRaftTransport:
    """Fire-and-forget sends of Raft messages; Raft retries whatever is lost."""

    def __init__(self, cfg: NodeConfig, timeout_s: float = 1.0) -> None:
        self.cfg = cfg
        self.timeout_s = timeout_s
        self.peers: dict[str, Peer] = {}
        self.in_flight: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.dropped = 0

    def send(self, dest: str, message: dict[str, Any]) -> None:
        if dest not in self.cfg.peers:
            log.warning("raft: no address for %r in peers; message dropped", dest)
            return
        if self.in_flight.get(dest, 0) >= MAX_IN_FLIGHT_PER_PEER:
            self.dropped += 1
            return
        self.in_flight[dest] = self.in_flight.get(dest, 0) + 1
        t = asyncio.get_running_loop().create_task(self._send(dest, message))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _send(self, dest: str, message: dict[str, Any]) -> None:
        peer = self.peers.get(dest)
        if peer is None:
            peer = self.peers[dest] = Peer(self.cfg.peers[dest])
        try:
            resp = await peer.call({"type": "raft", "from": self.cfg.node_id,
                                    "message": message}, timeout_s=self.timeout_s)
            if resp.get("error") and resp["error"] != "NOT_CONTROLLER":
                log.warning("raft message to %s refused: %s %s", dest, resp["error"],
                            resp.get("message"))
        except RpcError:
            pass
        finally:
            self.in_flight[dest] -= 1

    def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for p in self.peers.values():
            p.close()


CHECK_QUORUM_TIMEOUT_FACTOR = 1.5  # Kafka's LeaderState: check quorum = 1.5 x fetch timeout


def raft_config(cfg: NodeConfig) -> RaftConfig:
    """Kafka's controller.quorum.* settings as the Raft core's timings. A leader resigns after
    1.5 fetch timeouts without a majority, as KRaft's does: with the fetch timeout equal to
    the broker session (2 s each here), resigning at one timeout came before the session of
    a broker cut off with the majority ran out, so its fence waited for the next controller
    and a full session more (every broker gets one on activation)."""
    s = cfg.settings
    return RaftConfig(election_timeout_ms=s.quorum_election_timeout_ms,
                      fetch_interval_ms=s.quorum_fetch_interval_ms,
                      begin_epoch_resend_ms=s.quorum_fetch_interval_ms,
                      vote_resend_ms=s.quorum_fetch_interval_ms,
                      check_quorum_timeout_ms=int(s.quorum_fetch_timeout_ms
                                                  * CHECK_QUORUM_TIMEOUT_FACTOR),
                      first_election_stagger_ms=s.quorum_election_timeout_ms)


def make_metadata_log(cfg: NodeConfig) -> tuple[RaftMetadataLog, PeerRaftTransport]:
    """This voter's replicated metadata log (state under data_dir/__cluster_metadata/raft)."""
    transport = PeerRaftTransport(cfg)
    mlog = RaftMetadataLog(cfg.node_id, cfg.controller_quorum_voters,
                           cfg.data_dir / "__cluster_metadata" / "raft", transport,
                           config=raft_config(cfg))
    return mlog, transport
