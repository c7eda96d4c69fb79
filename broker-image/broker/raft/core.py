"""A sans-IO Raft node shaped like KRaft: epochs, votes with the log-up-to-date rule, followers
that FETCH from the leader (the fetch offset acknowledges), a high watermark from a majority of
fetch offsets that only advances over an entry of the leader's own epoch, snapshots, and
KIP-996's pre-vote: a voter whose election timer expires first asks whether it could win, without
raising its epoch, and voters that still hear from a leader say no. A voter cut off from the
quorum therefore cannot inflate its epoch and, on rejoining, depose a healthy leader; it learns
the leader from the refusals instead.

No sockets, no clock, no asyncio: every event (tick, receive, propose) takes `now_ms` and returns
a Ready of effects. The host must, in order: apply `persist` to durable storage, send `messages`,
restore the state machine from `restore` if set, then apply `committed`.
"""

from __future__ import annotations

import random
from typing import Any

from .election import Elections
from .host import NotLeaderError, Outbound, RaftConfig, Ready, Role, _Acc
from .log import RaftLog
from .messages import (
    BeginQuorumEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    OffsetAndEpoch,
    Snapshot,
    VoteRequest,
    VoteResponse,
)
from .storage import (
    AppendEntries,
    Persisted,
    SaveSnapshot,
    TruncateLog,
)

# the host contract's names, as importers of this module have always found them here
__all__ = ["NotLeaderError", "Outbound", "RaftConfig", "RaftNode", "Ready", "Role"]


class RaftNode(Elections):
    """One quorum member (voter) or observer. See the module docstring for the host contract."""

    def __init__(
        self,
        node_id: str,
        voters: tuple[str, ...] | list[str],
        persisted: Persisted,
        *,
        config: RaftConfig | None = None,
        rng: random.Random,
        now_ms: int = 0,
        unsafe_skip_log_up_to_date_check: bool = False,
    ) -> None:
        """`unsafe_skip_log_up_to_date_check` is TEST-ONLY: it grants votes to candidates with
        stale logs, which loses committed entries; the simulator must catch it."""
        if not voters:
            raise ValueError("controller.quorum.voters is empty")
        self.id = node_id
        self.voters = tuple(sorted(set(voters)))
        self.config = config or RaftConfig()
        self.rng = rng
        self.unsafe_skip_log_up_to_date_check = unsafe_skip_log_up_to_date_check
        self.is_voter = node_id in self.voters
        self.epoch = persisted.epoch
        self.voted_for = persisted.voted_for
        self.leader: str | None = persisted.leader
        self.log = RaftLog(persisted.snapshot, list(persisted.entries))
        self.high_watermark = self.log.start_offset  # volatile: relearned from the leader
        self._applied = self.log.start_offset
        self._acc = _Acc(restore=persisted.snapshot)
        self._now_ms = now_ms
        # follower / candidate / observer state
        self._election_deadline_ms = 0
        self._next_fetch_ms = now_ms
        self._votes: set[str] = set()
        self._prevotes: set[str] | None = None  # None: not asking for pre-votes
        self._answered: set[str] = set()  # voters that answered this round's (pre-)vote request
        self._next_vote_resend_ms = now_ms
        self._leader_heard = False  # the leader answered a fetch or announced itself to us
        # leader state
        self._acked: dict[str, int] = {}
        self._last_fetch_ms: dict[str, int] = {}
        self._unannounced: set[str] = set()
        self._next_begin_ms = 0
        self.role = Role.FOLLOWER if self.is_voter else Role.OBSERVER
        if self.leader == self.id:  # a restarted leader does not resume leading
            self.leader = None
        self._reset_election_timer()
        if self.voters == (self.id,):  # KRaft: the only voter stands at once, no timeout
            self._election_deadline_ms = now_ms
        elif self.is_voter and self.epoch == 0 and self.log.end_offset == 0:
            # a brand-new quorum: voters stand in id order, so the first one usually leads
            self._election_deadline_ms += self.config.first_election_stagger_ms * \
                self.voters.index(self.id)

    # ----- public API -------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def applied_offset(self) -> int:
        """The end of what the host has been handed (restore + committed), for take_snapshot."""
        return self._applied

    @property
    def leader_ready(self) -> bool:
        """Leader whose own-epoch entry is committed: everything before it is committed too,
        so the active controller may act (KRaft waits for this before serving)."""
        return (self.role is Role.LEADER and self.high_watermark > self.log.start_offset
                and self.log.epoch_before(self.high_watermark) == self.epoch)

    def next_timer_ms(self) -> int:
        """When the host must call tick() next at the latest."""
        if self.role is Role.LEADER:
            t = self._next_begin_ms if self._unannounced else self._now_ms + 10**9
            return min(t, self._quorum_check_due_ms())
        if self._asking_votes():
            return min(self._election_deadline_ms, self._next_vote_resend_ms)
        if self.role is Role.CANDIDATE or (self.leader is None and self.role is Role.FOLLOWER):
            return self._election_deadline_ms
        return min(self._election_deadline_ms, self._next_fetch_ms)

    def tick(self, now_ms: int) -> Ready:
        self._now_ms = max(self._now_ms, now_ms)
        now = self._now_ms
        if self.role is Role.LEADER:
            if self._unannounced and now >= self._next_begin_ms:
                self._announce()
            if now >= self._quorum_check_due_ms():
                self._resign()
        elif self.role is Role.OBSERVER:
            if now >= self._election_deadline_ms:
                # fetch timeout: rediscover the leader. The timer restarts even when no leader
                # was known, or next_timer_ms() would stay in the past and the host would spin.
                self.leader = None
                self._reset_election_timer()
            if now >= self._next_fetch_ms:
                self._send_fetch()
        elif now >= self._election_deadline_ms:
            self._start_prevote()
        elif self._asking_votes() and now >= self._next_vote_resend_ms:
            self._resend_vote_requests()
        elif self.leader is not None and now >= self._next_fetch_ms:
            self._send_fetch()
        return self._ready()

    def propose(self, now_ms: int, record: object) -> tuple[int, Ready]:
        """Append a record at the leader; returns its offset (committed later, maybe never)."""
        self._now_ms = max(self._now_ms, now_ms)
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.id, self.leader, self.epoch)
        offset = self._append_local(record, control=False)
        return offset, self._ready()

    def receive(self, now_ms: int, src: str, msg: Message) -> Ready:
        self._now_ms = max(self._now_ms, now_ms)
        if isinstance(msg, VoteRequest):
            self._on_vote_request(src, msg)
        elif isinstance(msg, VoteResponse):
            self._on_vote_response(src, msg)
        elif isinstance(msg, BeginQuorumEpoch):
            self._on_begin_epoch(msg)
        elif isinstance(msg, FetchRequest):
            self._on_fetch(src, msg)
        elif isinstance(msg, FetchResponse):
            self._on_fetch_response(src, msg)
        elif isinstance(msg, FetchSnapshotRequest):
            self._on_fetch_snapshot(src, msg)
        else:
            self._on_fetch_snapshot_response(src, msg)
        return self._ready()

    def wants_snapshot(self) -> bool:
        """True when the applied part of the log is past the snapshot threshold."""
        return self._applied - self.log.start_offset >= self.config.snapshot_threshold_entries

    def take_snapshot(self, end_offset: int, state: object) -> Ready:
        """The host's state machine `state` after applying [0, end_offset) replaces that prefix."""
        if not self.log.start_offset < end_offset <= self._applied:
            raise ValueError(
                f"snapshot end {end_offset} outside ({self.log.start_offset}, {self._applied}]"
            )
        snap = Snapshot(end_offset, self.log.epoch_before(end_offset), state)
        self.log.compact(snap)
        self._acc.persist.append(SaveSnapshot(snap))
        return self._ready()

    def status(self) -> dict[str, Any]:
        """The quorum as this node sees it (the admin API's view)."""
        out: dict[str, Any] = {
            "node": self.id, "role": self.role.value, "leader": self.leader, "epoch": self.epoch,
            "voted_for": self.voted_for, "voters": list(self.voters),
            "log_start_offset": self.log.start_offset, "log_end_offset": self.log.end_offset,
            "high_watermark": self.high_watermark, "leader_ready": self.leader_ready,
        }
        if self.role is Role.LEADER:
            out["voter_states"] = {
                v: self._voter_state(v)
                for v in self.voters
            }
        return out

    def _voter_state(self, v: str) -> dict[str, Any]:
        """A voter's log end as its last fetch acknowledged, and the commit point it can know."""
        end = self.log.end_offset if v == self.id else self._acked.get(v)
        return {"log_end_offset": end,
                "high_watermark": None if end is None else min(end, self.high_watermark),
                "last_fetch_ms": None if v == self.id else self._last_fetch_ms.get(v)}

    # ----- replication: leader side ----------------------------------------------------

    def _append_local(self, record: object, *, control: bool) -> int:
        e = Entry(self.log.end_offset, self.epoch, record, control)
        self.log.append([e])
        self._acc.persist.append(AppendEntries((e,)))
        self._advance_leader_hw()
        return e.offset

    def _advance_leader_hw(self) -> None:
        offsets = sorted(
            [self.log.end_offset] + [self._acked.get(v, 0) for v in self.voters if v != self.id],
            reverse=True,
        )
        candidate = offsets[len(self.voters) // 2]
        # KRaft: commit only over an entry of the leader's own epoch
        if candidate > self.high_watermark and self.log.epoch_before(candidate) == self.epoch:
            self._set_hw(candidate)

    def _fetch_error(self, src: str, m: FetchRequest, error: str) -> None:
        self._send(src, FetchResponse(self.epoch, self.leader, error, m.fetch_offset,
                                      m.last_fetched_epoch, self.high_watermark))

    def _on_fetch(self, src: str, m: FetchRequest) -> None:
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, None)
            return
        if self.role is not Role.LEADER:
            self._fetch_error(src, m, "NOT_LEADER")
            return
        if m.epoch < self.epoch:
            self._fetch_error(src, m, "FENCED_EPOCH")
            return
        voter = m.replica in self.voters and m.replica != self.id
        if voter:
            self._last_fetch_ms[m.replica] = self._now_ms
            self._unannounced.discard(m.replica)
        f, le, log = m.fetch_offset, m.last_fetched_epoch, self.log
        base = FetchResponse(self.epoch, self.id, None, f, le, self.high_watermark)
        if log.snapshot is not None and (f < log.start_offset or (
                f == log.start_offset and le != log.snapshot.epoch)):
            self._send(src, _with(base, snapshot_id=_snap_id(log.snapshot)))
            return
        if f > log.end_offset or log.epoch_before(f) != le:
            found = log.end_offset_for_epoch(le)
            end = min(found.offset, f)
            if log.snapshot is not None and (end < log.start_offset or found.epoch < 0):
                self._send(src, _with(base, snapshot_id=_snap_id(log.snapshot)))
            else:
                self._send(src, _with(base, diverging=OffsetAndEpoch(end, found.epoch)))
            return
        if voter and f > self._acked.get(m.replica, 0):
            self._acked[m.replica] = f
            self._advance_leader_hw()
        entries = log.read(f, self.config.max_fetch_entries)
        self._send(src, _with(base, high_watermark=self.high_watermark, entries=entries))

    def _on_fetch_snapshot(self, src: str, m: FetchSnapshotRequest) -> None:
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, None)
            return
        if self.role is not Role.LEADER or m.epoch < self.epoch:
            err = "NOT_LEADER" if self.role is not Role.LEADER else "FENCED_EPOCH"
            self._send(src, FetchSnapshotResponse(self.epoch, self.leader, err, None))
            return
        self._send(src, FetchSnapshotResponse(self.epoch, self.id, None, self.log.snapshot))

    # ----- replication: follower side --------------------------------------------------

    def _send_fetch(self) -> None:
        target = self.leader
        if target is None:  # an observer looking for the leader: ask any voter
            target = self.voters[self.rng.randrange(len(self.voters))]
        self._send(target, FetchRequest(self.epoch, self.id, self.log.end_offset,
                                        self.log.last_epoch))
        self._next_fetch_ms = self._now_ms + self.config.fetch_interval_ms

    def _accept_from_leader(self, src: str, epoch: int, leader: str | None,
                            error: str | None) -> bool:
        """Common epoch handling of fetch answers; True when `src` is our leader and all is well."""
        if epoch > self.epoch:
            self._become_follower(epoch, leader if leader in self.voters else None)
        elif epoch < self.epoch:
            return False
        elif self.leader is None and leader in self.voters and \
                self.role in (Role.FOLLOWER, Role.OBSERVER):
            self._become_follower(epoch, leader)
        if error is not None or self.leader != src:
            return False
        if self.role not in (Role.FOLLOWER, Role.OBSERVER):
            return False
        self._reset_election_timer()
        self._leader_heard = True
        return True

    def _on_fetch_response(self, src: str, m: FetchResponse) -> None:
        if not self._accept_from_leader(src, m.epoch, m.leader, m.error):
            return
        log = self.log
        if m.fetch_offset != log.end_offset or m.last_fetched_epoch != log.last_epoch:
            return  # late or duplicated answer to an older fetch
        if m.diverging is not None:
            local = log.end_offset_for_epoch(m.diverging.epoch)
            cut = max(log.start_offset, min(m.diverging.offset, local.offset))
            log.truncate(cut)
            self._acc.persist.append(TruncateLog(cut))
            self._send_fetch()
        elif m.snapshot_id is not None:
            self._send(src, FetchSnapshotRequest(self.epoch, self.id, m.snapshot_id))
            self._next_fetch_ms = self._now_ms + self.config.fetch_interval_ms
        else:
            if m.entries:
                log.append(m.entries)
                self._acc.persist.append(AppendEntries(m.entries))
            hw = min(m.high_watermark, log.end_offset)
            if hw > self.high_watermark:
                self._set_hw(hw)
            if m.entries:
                self._send_fetch()

    def _on_fetch_snapshot_response(self, src: str, m: FetchSnapshotResponse) -> None:
        if not self._accept_from_leader(src, m.epoch, m.leader, m.error) or m.snapshot is None:
            return
        snap = self.log
        if m.snapshot.end_offset <= snap.start_offset:
            return
        keeps_suffix = (m.snapshot.end_offset <= snap.end_offset
                        and snap.epoch_before(m.snapshot.end_offset) == m.snapshot.epoch)
        if not keeps_suffix:
            snap.truncate(snap.start_offset)
            self._acc.persist.append(TruncateLog(snap.start_offset))
            snap.entries = []
            snap.snapshot = m.snapshot
        else:
            snap.compact(m.snapshot)
        self._acc.persist.append(SaveSnapshot(m.snapshot))
        if self._applied < m.snapshot.end_offset:
            self._applied = m.snapshot.end_offset
            self._acc.restore = m.snapshot
            self._acc.committed.clear()
        self.high_watermark = max(self.high_watermark, m.snapshot.end_offset)
        self._send_fetch()

    # ----- shared -----------------------------------------------------------------------

    def _set_hw(self, hw: int) -> None:
        self.high_watermark = hw
        start = max(self._applied, self.log.start_offset)
        if hw > start:
            self._acc.committed.extend(self.log.read(start, hw - start))
            self._applied = hw

    def _ready(self) -> Ready:
        a = self._acc
        self._acc = _Acc()
        return Ready(tuple(a.persist), tuple(a.messages), a.restore, tuple(a.committed))


def _snap_id(s: Snapshot) -> OffsetAndEpoch:
    return OffsetAndEpoch(s.end_offset, s.epoch)


def _with(base: FetchResponse, **changes: Any) -> FetchResponse:
    from dataclasses import replace

    return replace(base, **changes)
