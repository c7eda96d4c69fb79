"""The broker's MetadataLog over the Raft quorum: what the controller appends is committed by a
majority of voters; every node (voter or observer) reads the same committed records.

Offsets here are dense metadata offsets (the n-th committed metadata record), not Raft offsets:
Raft's own LeaderChange records are skipped, and each append() is one Raft entry (atomic).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .core import RaftConfig
from .driver import RaftDriver, RaftTransport
from .messages import Entry, Snapshot
from .storage import FileStorage

MetadataRecord = dict[str, Any]


class RaftMetadataLog:
    def __init__(self, node_id: str, voters: tuple[str, ...] | list[str], data_dir: Path,
                 transport: RaftTransport, *, config: RaftConfig | None = None,
                 seed: int | None = None) -> None:
        self.records: list[MetadataRecord] = []
        self.driver = RaftDriver(
            node_id, voters, FileStorage(data_dir), transport, config=config, seed=seed,
            on_commit=self._on_commit, on_restore=self._on_restore,
            snapshot_state=lambda: {"records": list(self.records)},
        )

    # ----- lifecycle and wiring ------------------------------------------------------------

    async def start(self) -> None:
        await self.driver.start()

    async def stop(self) -> None:
        await self.driver.stop()

    def deliver(self, src: str, message: dict[str, Any]) -> None:
        """Hand an incoming Raft message (as sent by the peer's transport) to the quorum."""
        self.driver.deliver(src, message)

    # ----- the MetadataLog surface -----------------------------------------------------

    async def append(self, records: list[MetadataRecord], *, timeout_s: float = 5.0) -> int:
        """Commit `records` as one Raft entry; returns the metadata offset after them.

        Only on the ready leader (is_active); raises NotLeaderError (leader hint), ProposalLost
        or TimeoutError (outcome unknown: the records may still commit)."""
        if not records:
            return self.committed_offset
        await self.driver.propose(list(records), timeout_s=timeout_s)
        return self.committed_offset

    def read(self, from_offset: int, limit: int = 1000) -> list[tuple[int, MetadataRecord]]:
        start = max(0, from_offset)
        return [(start + i, r) for i, r in enumerate(self.records[start:start + limit])]

    @property
    def committed_offset(self) -> int:
        return len(self.records)

    # ----- the quorum ------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """This node is the active controller: Raft leader with its own epoch committed, so
        every record of earlier controllers is already in `records`."""
        return self.driver.leader_ready

    @property
    def leader(self) -> str | None:
        return self.driver.leader

    @property
    def epoch(self) -> int:
        return self.driver.epoch

    def quorum_view(self) -> dict[str, Any]:
        """For the admin API: leader, epoch, and (from the leader) each voter's log end and
        commit point; elsewhere this node's own."""
        st = self.driver.status()
        return {
            "leader": st.get("leader"), "epoch": st.get("epoch"), "role": st.get("role"),
            "voters": st.get("voters"), "log_end_offset": st.get("log_end_offset"),
            "high_watermark": st.get("high_watermark"),
            "voter_states": st.get("voter_states"),
            "metadata_offset": self.committed_offset,
        }

    def _on_commit(self, e: Entry) -> None:
        if not e.control and isinstance(e.record, list):
            self.records.extend(e.record)

    def _on_restore(self, snap: Snapshot) -> None:
        state = snap.state
        if not isinstance(state, dict) or not isinstance(state.get("records"), list):
            raise ValueError(f"metadata snapshot to offset {snap.end_offset} lacks 'records'")
        self.records = list(state["records"])
