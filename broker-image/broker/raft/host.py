"""What a Raft node and its host exchange: the node's role and timing, the effects each
event returns (`Ready`: persist, send, restore, commit, in that order) and the error of a
proposal made to a node that does not lead. Split from the node (core.py), which re-exports
these names."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from .messages import Entry, Message, Snapshot
from .storage import PersistOp


class Role(Enum):
    FOLLOWER = "follower"  # includes KRaft's Unattached and Voted (leader unknown)
    CANDIDATE = "candidate"
    LEADER = "leader"
    OBSERVER = "observer"  # not a voter: only fetches (a broker-only node)


@dataclass(frozen=True)
class RaftConfig:
    """Timing and sizes. Election timeouts are drawn from [election_timeout_ms, 2x) per reset."""

    election_timeout_ms: int = 1000
    fetch_interval_ms: int = 100
    begin_epoch_resend_ms: int = 100
    # a pre-vote or vote request unanswered this long goes again (KRaft retries its Vote
    # requests until the election times out): a voter that comes back mid-round then hears the
    # question at once instead of one to two election timeouts later
    vote_resend_ms: int = 100
    check_quorum_timeout_ms: int = 2000
    max_fetch_entries: int = 200
    snapshot_threshold_entries: int = 1000
    first_election_stagger_ms: int = 0  # fresh quorum: voter i waits i times this longer

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_interval_ms", "begin_epoch_resend_ms",
                     "vote_resend_ms", "check_quorum_timeout_ms", "max_fetch_entries",
                     "snapshot_threshold_entries"):
            if getattr(self, name) <= 0:
                raise ValueError(f"RaftConfig.{name} must be positive, got {getattr(self, name)}")


@dataclass(frozen=True)
class Outbound:
    dest: str
    message: Message


@dataclass(frozen=True)
class Ready:
    persist: tuple[PersistOp, ...] = ()
    messages: tuple[Outbound, ...] = ()
    restore: Snapshot | None = None
    committed: tuple[Entry, ...] = ()


class NotLeaderError(Exception):
    """propose() on a node that is not the leader; `leader` is the known leader or None."""

    def __init__(self, node: str, leader: str | None, epoch: int) -> None:
        super().__init__(f"{node} is not the Raft leader (leader: {leader}, epoch {epoch})")
        self.leader = leader
        self.epoch = epoch


@dataclass
class _Acc:
    persist: list[PersistOp] = field(default_factory=list)
    messages: list[Outbound] = field(default_factory=list)
    restore: Snapshot | None = None
    committed: list[Entry] = field(default_factory=list)
