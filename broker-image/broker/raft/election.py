"""A Raft node's elections: KIP-996 pre-votes, votes with the log-up-to-date rule, becoming
leader (announced by BeginQuorumEpoch), check quorum and resigning. `RaftNode` (core.py)
inherits them; the state they read and write is its own, declared here for the type checker.
"""

from __future__ import annotations

import random

from .host import Outbound, RaftConfig, Role, _Acc
from .log import RaftLog
from .messages import BeginQuorumEpoch, Message, VoteRequest, VoteResponse
from .storage import SaveQuorumState


class Elections:
    """The election half of a RaftNode (see core.py's module docstring)."""

    id: str
    voters: tuple[str, ...]
    config: RaftConfig
    rng: random.Random
    unsafe_skip_log_up_to_date_check: bool
    is_voter: bool
    epoch: int
    voted_for: str | None
    leader: str | None
    log: RaftLog
    role: Role
    _acc: _Acc
    _now_ms: int
    _election_deadline_ms: int
    _next_fetch_ms: int
    _votes: set[str]
    _prevotes: set[str] | None
    _answered: set[str]
    _next_vote_resend_ms: int
    _leader_heard: bool
    _acked: dict[str, int]
    _last_fetch_ms: dict[str, int]
    _unannounced: set[str]
    _next_begin_ms: int

    def _append_local(self, record: object, *, control: bool) -> int:
        raise NotImplementedError  # RaftNode's: replication appends the leader's first entry

    def _send(self, dest: str, msg: Message) -> None:
        self._acc.messages.append(Outbound(dest, msg))


    def _reset_election_timer(self) -> None:
        base = self.config.election_timeout_ms
        self._election_deadline_ms = self._now_ms + base + self.rng.randrange(base)

    def _persist_quorum(self) -> None:
        self._acc.persist.append(SaveQuorumState(self.epoch, self.voted_for, self.leader))

    def _become_follower(self, epoch: int, leader: str | None) -> None:
        """Move to `epoch` (>= ours) following `leader` (None: unknown yet)."""
        if epoch > self.epoch:
            self.epoch, self.voted_for = epoch, None
        was_active = self.role in (Role.LEADER, Role.CANDIDATE)
        self.leader = leader
        self._leader_heard = False  # callers that heard the leader itself say so afterwards
        self.role = Role.FOLLOWER if self.is_voter else Role.OBSERVER
        self._votes.clear()
        self._prevotes = None
        self._persist_quorum()
        if leader is not None or was_active:
            # a higher epoch alone (a candidate's vote request) does not restart our timer, so
            # a stale candidate cannot keep the up-to-date voters from standing themselves
            self._reset_election_timer()
        self._next_fetch_ms = self._now_ms

    def _start_prevote(self) -> None:
        """Election timeout: forget the leader and ask whether a majority would vote for us."""
        if self.leader is not None or self.role is Role.CANDIDATE:
            self.role, self.leader = Role.FOLLOWER, None
            self._persist_quorum()
        self._prevotes = {self.id}
        self._reset_election_timer()
        self._answered = set()
        self._resend_vote_requests()
        self._maybe_pass_prevote()

    def _asking_votes(self) -> bool:
        return self._prevotes is not None or self.role is Role.CANDIDATE

    def _resend_vote_requests(self) -> None:
        """(Re)send this round's request to every voter that has not answered it. Sent once,
        a request to a voter that was down (or cut) was lost, and the round waited for the
        next election timeout: a restarted voter cost up to two timeouts. KRaft's prospective
        and candidate states likewise resend to the voters they have no answer from."""
        pre = self._prevotes is not None
        req = VoteRequest(self.epoch + 1 if pre else self.epoch, self.id, self.log.last_epoch,
                          self.log.end_offset, pre_vote=pre)
        for v in self.voters:
            if v != self.id and v not in self._answered:
                self._send(v, req)
        self._next_vote_resend_ms = self._now_ms + self.config.vote_resend_ms

    def _maybe_pass_prevote(self) -> None:
        if self._prevotes is not None and len(self._prevotes) > len(self.voters) // 2:
            self._start_election()

    def _start_election(self) -> None:
        self._prevotes = None
        self.epoch += 1
        self.voted_for, self.leader = self.id, None
        self.role = Role.CANDIDATE
        self._votes = {self.id}
        self._persist_quorum()
        self._reset_election_timer()
        self._answered = set()
        self._resend_vote_requests()
        self._maybe_win()

    def _maybe_win(self) -> None:
        if self.role is Role.CANDIDATE and len(self._votes) > len(self.voters) // 2:
            self._become_leader()

    def _on_vote_request(self, src: str, m: VoteRequest) -> None:
        if m.pre_vote:  # answered from our state, which it changes only to catch up on epochs
            if m.epoch - 1 > self.epoch:
                # the asker's own epoch is later than ours: an election we missed really
                # happened (a pre-vote passed for it), so join that epoch, as Raft does
                self._become_follower(m.epoch - 1, None)
            granted = self._prevote_grantable(m)
            self._send(src, VoteResponse(self.epoch, granted, self.leader, pre_vote=True))
            return
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, None)
        granted = self._grantable(m)
        if granted and self.voted_for is None:
            self.voted_for = m.candidate
            self._persist_quorum()
        if granted:
            self._reset_election_timer()
        self._send(src, VoteResponse(self.epoch, granted, self.leader))

    def _grantable(self, m: VoteRequest) -> bool:
        if not self.is_voter or m.candidate not in self.voters or m.epoch < self.epoch:
            return False
        if self.role is not Role.FOLLOWER or self.leader is not None:
            return False  # a candidate voted for itself; a known leader means the epoch is taken
        if self.voted_for not in (None, m.candidate):
            return False
        up_to_date = (m.last_epoch, m.log_end) >= (self.log.last_epoch, self.log.end_offset)
        return up_to_date or self.unsafe_skip_log_up_to_date_check

    def _prevote_grantable(self, m: VoteRequest) -> bool:
        if not self.is_voter or m.candidate not in self.voters or m.epoch <= self.epoch:
            return False
        if self.role is Role.LEADER:
            return False
        if (self.leader is not None and self._leader_heard
                and self._now_ms < self._election_deadline_ms):
            # our leader was heard from within the election timeout. A leader only remembered
            # (persisted before a restart, or named by another voter) does not count: KRaft's
            # follower grants pre-votes until it has fetched from its leader, so a voter that
            # restarts during an election helps finish it at once instead of refusing for an
            # election timeout while the leader it remembers may have resigned
            return False
        up_to_date = (m.last_epoch, m.log_end) >= (self.log.last_epoch, self.log.end_offset)
        return up_to_date or self.unsafe_skip_log_up_to_date_check

    def _on_prevote_response(self, src: str, m: VoteResponse) -> None:
        if m.epoch > self.epoch:  # a refusal from a later epoch, naming its leader if known
            self._become_follower(m.epoch, m.leader if m.leader in self.voters else None)
        elif (m.epoch == self.epoch and src == m.leader and self.leader is None
              and self.role is Role.FOLLOWER and src in self.voters):
            # the leader itself refused: it is alive, follow it. (A leader merely named by
            # another voter is the one we just timed out on: voters would keep handing a dead
            # leader back to each other.)
            self._become_follower(m.epoch, src)
            self._leader_heard = True
        elif self._prevotes is not None and m.granted and src in self.voters:
            self._prevotes.add(src)
            self._maybe_pass_prevote()

    def _on_vote_response(self, src: str, m: VoteResponse) -> None:
        this_round = (m.pre_vote if self._prevotes is not None else
                      not m.pre_vote and self.role is Role.CANDIDATE and m.epoch == self.epoch)
        if this_round:
            self._answered.add(src)  # no resend to src
        if m.pre_vote:
            self._on_prevote_response(src, m)
            return
        if m.epoch > self.epoch:
            self._become_follower(m.epoch, m.leader)
            return
        if m.epoch == self.epoch and self.role is Role.CANDIDATE and m.granted:
            if src in self.voters:
                self._votes.add(src)
            self._maybe_win()

    def _become_leader(self) -> None:
        self._prevotes = None
        self.role, self.leader = Role.LEADER, self.id
        self._persist_quorum()
        others = [v for v in self.voters if v != self.id]
        self._acked = {}
        self._last_fetch_ms = {v: self._now_ms for v in others}
        self._unannounced = set(others)
        self._append_local({"leader": self.id, "epoch": self.epoch}, control=True)
        self._announce()

    def _announce(self) -> None:
        for v in sorted(self._unannounced):
            self._send(v, BeginQuorumEpoch(self.epoch, self.id))
        self._next_begin_ms = self._now_ms + self.config.begin_epoch_resend_ms

    def _quorum_check_due_ms(self) -> int:
        """When the leader loses touch with a majority unless more fetches arrive (check quorum)."""
        need = len(self.voters) // 2  # other voters needed besides the leader itself
        if need == 0:
            return self._now_ms + 10**9
        times = sorted(self._last_fetch_ms.values(), reverse=True)
        return times[need - 1] + self.config.check_quorum_timeout_ms

    def _resign(self) -> None:
        """Check quorum failed: a majority stopped fetching, so stop acting as leader."""
        self.role, self.leader = Role.FOLLOWER, None
        self._unannounced.clear()
        self._persist_quorum()
        self._reset_election_timer()

    def _on_begin_epoch(self, m: BeginQuorumEpoch) -> None:
        if m.epoch < self.epoch or m.leader not in self.voters:
            return
        if m.epoch == self.epoch and self.leader == m.leader:
            self._reset_election_timer()
            self._leader_heard = True
            return
        if m.epoch == self.epoch and self.role is Role.LEADER:
            return  # two leaders in one epoch cannot happen; never yield to a forged claim
        self._become_follower(m.epoch, m.leader)
        self._leader_heard = True
