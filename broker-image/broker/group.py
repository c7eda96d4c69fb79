"""One consumer group on its coordinator, in the shape of Kafka's classic group protocol.

Pure: no I/O, no clock of its own (every call takes `now_ms`), so each rule is
tested alone and a new coordinator rebuilds a group by replaying records.

- join: a member (new, with member_id "") asks to join with the protocols it
  supports (assignor name -> metadata). Any join starts a rebalance: the
  replies wait until every known member has rejoined, or until the rebalance
  timeout removes those that did not. The rebalance ends with a new
  generation, the protocol every member supports (by the members' votes), and a
  leader, which alone is sent all members' metadata.
- sync: the leader sends the assignment; every member gets its own once the
  group record holding it is appended (the Append effect's replies).
- heartbeat: keeps the session; it tells members of a rebalance to rejoin.
- leave, session timeout (no heartbeat for `session_timeout_ms`), a missed
  rejoin or sync (past `rebalance_timeout_ms`, Kafka's max.poll.interval.ms):
  the member is removed and the others rebalance.
- fencing: sync, heartbeat and commit carry (member id, generation); an unknown
  member gets UNKNOWN_MEMBER_ID and an old generation ILLEGAL_GENERATION.
- offsets: a commit is an Append of an offsets record; it counts (fetch sees
  it) once appended.
- transactional offsets (Kafka's TxnOffsetCommit, KIP-98 and KIP-447): a member
  of the current generation commits offsets inside a producer's transaction; the
  `txn_offsets` record makes them pending, by producer id, and they become the
  group's committed offsets when that producer's commit marker lands in the
  group's partition (the transaction coordinator wrote the partition into the
  transaction: AddOffsetsToTxn), or are dropped at its abort marker. A fetch that
  requires stable offsets is refused (UNSTABLE_OFFSET_COMMIT, retriable) for a
  partition with pending offsets, so a new owner never starts from an offset a
  transaction is about to move.

The records (`group`, `offsets`) are what the coordinator appends to the
group's partition of the internal offsets topic; `replay` rebuilds the group
from them. Members restored by a replay get a fresh session from the moment of
the replay, as in Kafka after a coordinator moves.
"""

from __future__ import annotations

import uuid
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .txnindex import MARKER

UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
UNSTABLE_OFFSET_COMMIT = "UNSTABLE_OFFSET_COMMIT"  # retriable: a transaction holds offsets

EMPTY, STABLE = "Empty", "Stable"
PREPARING, COMPLETING = "PreparingRebalance", "CompletingRebalance"
NO_GENERATION = -1


def coordinator_partition(group_id: str, partitions: int) -> int:
    """The offsets-topic partition (0-based) that holds the group; its leader coordinates it."""
    return zlib.crc32(group_id.encode()) % partitions


@dataclass(frozen=True)
class Reply:
    """A reply for a member's pending join or sync (`kind`), or for the request at hand."""

    member_id: str
    kind: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Append:
    """A record to append to the offsets partition; `then` is sent once it is committed."""

    record: dict[str, Any]
    then: tuple[Reply, ...] = ()


Effect = Reply | Append


@dataclass
class Member:
    member_id: str
    client_id: str
    protocols: dict[str, Any]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heard_ms: int
    assignment: Any = None
    joining: bool = False  # a join reply is owed
    syncing: bool = False  # a sync reply is owed


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    deadline_ms: int | None = None  # of the join or sync phase
    assignment_appended: bool = True
    # offsets committed inside transactions, by producer id, until its marker
    pending: dict[int, dict[tuple[str, int], int]] = field(default_factory=dict)

    # -- requests --------------------------------------------------------------------
    def join(self, member_id: str, client_id: str, protocols: Sequence[tuple[str, Any]],
             session_timeout_ms: int, rebalance_timeout_ms: int, now_ms: int,
             new_id: str | None = None) -> list[Effect]:
        """A (re)join; the reply comes when the rebalance completes. A new member (member_id "")
        is named `new_id`, or client_id and a random suffix."""
        mid = member_id or new_id or f"{client_id}-{uuid.uuid4().hex[:12]}"
        names = [n for n, _ in protocols]
        if not names or (self.members and not self._common(names)):
            return [Reply(mid, "join", _error(INCONSISTENT_GROUP_PROTOCOL,
                                              f"no protocol in common with {names}"))]
        if member_id and member_id not in self.members:
            return [Reply(mid, "join", _error(UNKNOWN_MEMBER_ID, f"{mid} is not a member"))]
        m = self.members.get(mid)
        if m is None:
            m = self.members[mid] = Member(mid, client_id, dict(protocols), session_timeout_ms,
                                           rebalance_timeout_ms, now_ms)
        m.protocols = dict(protocols)
        m.session_timeout_ms, m.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        m.heard_ms = now_ms
        m.joining = True
        out = self._prepare(now_ms) if self.state != PREPARING else []
        return out + self._maybe_complete_join(now_ms)

    def sync(self, member_id: str, generation: int, assignments: Mapping[str, Any] | None,
             now_ms: int) -> list[Effect]:
        """The leader's sync carries the assignment; every member's reply waits for its append."""
        err = self._fence(member_id, generation)
        if err:
            return [Reply(member_id, "sync", err)]
        if self.state == PREPARING:
            return [Reply(member_id, "sync", _error(REBALANCE_IN_PROGRESS, "rejoin the group"))]
        m = self.members[member_id]
        m.heard_ms = now_ms
        if self.state == STABLE and self.assignment_appended:
            return [Reply(member_id, "sync", {"error": None, "assignment": m.assignment})]
        m.syncing = True
        if self.state == COMPLETING and member_id == self.leader and assignments is not None:
            for mid, mem in self.members.items():
                mem.assignment = assignments.get(mid)
            self.state, self.deadline_ms, self.assignment_appended = STABLE, None, False
            return [Append(self.record())]
        return []

    def appended(self, record: Mapping[str, Any]) -> list[Effect]:
        """A record this coordinator appended is committed: it counts now."""
        if record.get("type") == "offsets":
            self._apply_offsets(record)
            return []
        if record.get("type") == "txn_offsets":
            self._add_pending(record)
            return []
        if record.get("generation") != self.generation or self.assignment_appended:
            return []
        self.assignment_appended = True
        out: list[Effect] = []
        for m in self.members.values():
            if m.syncing:
                m.syncing = False
                out.append(Reply(m.member_id, "sync", {"error": None, "assignment": m.assignment}))
        return out

    def append_failed(self, record: Mapping[str, Any], now_ms: int) -> list[Effect]:
        """A record this coordinator appended is not known to be committed. If it held the
        assignment its members wait for, they get none: the group rebalances (as Kafka)."""
        if (record.get("type") != "group" or record.get("generation") != self.generation
                or self.state != STABLE or self.assignment_appended):
            return []
        self.assignment_appended = True  # nothing waits on an append any more
        return self._prepare(now_ms)

    def heartbeat(self, member_id: str, generation: int, now_ms: int) -> dict[str, Any]:
        err = self._fence(member_id, generation)
        if err:
            return err
        self.members[member_id].heard_ms = now_ms
        if self.state == PREPARING:
            return _error(REBALANCE_IN_PROGRESS, "rejoin the group")
        return {"error": None}

    def leave(self, member_id: str, now_ms: int) -> tuple[dict[str, Any], list[Effect]]:
        if member_id not in self.members:
            return _error(UNKNOWN_MEMBER_ID, f"{member_id} is not a member"), []
        return {"error": None}, self._remove([member_id], now_ms)

    def commit(self, member_id: str, generation: int, offsets: Mapping[tuple[str, int], int],
               now_ms: int, producer: tuple[int, int] | None = None) -> list[Effect]:
        """Offsets of a member of this generation, or of anyone while the group is empty;
        `producer` (id, epoch): inside that producer's transaction (pending until its marker)."""
        if not (generation == NO_GENERATION and not member_id and not self.members):
            err = self._fence(member_id, generation)
            if err:
                return [Reply(member_id, "commit", err)]
            if self.state == COMPLETING:
                return [Reply(member_id, "commit", _error(REBALANCE_IN_PROGRESS, "sync first"))]
            self.members[member_id].heard_ms = now_ms
        rec: dict[str, Any] = {"type": "offsets", "group": self.group_id,
                               "offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())]}
        if producer is not None:
            rec.update(type="txn_offsets", producer_id=producer[0], producer_epoch=producer[1])
        return [Append(rec, (Reply(member_id, "commit", {"error": None}),))]

    def committed(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The committed offset of each partition that has one."""
        return {tp: self.offsets[tp] for tp in partitions if tp in self.offsets}

    def unstable(self, partitions: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
        """The partitions whose offsets an open transaction holds pending."""
        held = {tp for offsets in self.pending.values() for tp in offsets}
        return [tp for tp in partitions if tp in held]

    def txn_marker(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction marker is committed in the group's partition: its
        pending offsets become the group's (commit) or are dropped (abort)."""
        offsets = self.pending.pop(producer_id, None)
        if commit and offsets:
            self.offsets.update(offsets)

    def tick(self, now_ms: int) -> list[Effect]:
        """Session timeouts; joins and syncs that missed the rebalance deadline."""
        late = [m.member_id for m in self.members.values()
                if not (m.joining or m.syncing) and now_ms - m.heard_ms > m.session_timeout_ms]
        if self.deadline_ms is not None and now_ms >= self.deadline_ms:
            if self.state == PREPARING:
                late += [mid for mid, m in self.members.items() if not m.joining]
            elif self.state == COMPLETING:
                late += [mid for mid, m in self.members.items() if not m.syncing]
        return self._remove(sorted(set(late)), now_ms) if late else []

    # -- records -----------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """The group record: who is in which generation, with which assignment."""
        return {"type": "group", "group": self.group_id, "generation": self.generation,
                "protocol": self.protocol, "leader": self.leader,
                "members": {mid: {"client_id": m.client_id, "protocols": m.protocols,
                                  "session_timeout_ms": m.session_timeout_ms,
                                  "rebalance_timeout_ms": m.rebalance_timeout_ms,
                                  "assignment": m.assignment}
                            for mid, m in sorted(self.members.items())}}

    @classmethod
    def replay(cls, group_id: str, records: Sequence[Mapping[str, Any]], now_ms: int) -> Group:
        """The group as its committed records leave it, on a coordinator that just took over."""
        g = cls(group_id)
        for rec in records:
            marker = parse_marker_record(rec)
            if marker is not None:
                g.txn_marker(*marker)
                continue
            if rec.get("group") != group_id:
                continue
            if rec.get("type") == "offsets":
                g._apply_offsets(rec)
            elif rec.get("type") == "txn_offsets":
                g._add_pending(rec)
            elif rec.get("type") == "group":
                g.generation, g.protocol = rec["generation"], rec["protocol"]
                g.leader = rec["leader"]
                g.members = {mid: Member(mid, m["client_id"], dict(m["protocols"]),
                                         m["session_timeout_ms"], m["rebalance_timeout_ms"],
                                         now_ms, m["assignment"])
                             for mid, m in rec["members"].items()}
                g.state = STABLE if g.members else EMPTY
        return g

    def _apply_offsets(self, rec: Mapping[str, Any]) -> None:
        for t, p, o in rec["offsets"]:
            self.offsets[(t, p)] = o

    def _add_pending(self, rec: Mapping[str, Any]) -> None:
        held = self.pending.setdefault(int(rec["producer_id"]), {})
        for t, p, o in rec["offsets"]:
            held[(t, p)] = o

    # -- rebalancing -------------------------------------------------------------
    def _fence(self, member_id: str, generation: int) -> dict[str, Any] | None:
        if member_id not in self.members:
            return _error(UNKNOWN_MEMBER_ID, f"{member_id!r} is not a member of {self.group_id}")
        if generation != self.generation:
            return _error(ILLEGAL_GENERATION,
                          f"generation {generation} is not the group's {self.generation}")
        return None

    def _common(self, names: Sequence[str]) -> set[str]:
        common = set(names)
        for m in self.members.values():
            common &= set(m.protocols)
        return common

    def _prepare(self, now_ms: int) -> list[Effect]:
        """Into PreparingRebalance: owed syncs are refused so those members rejoin."""
        out: list[Effect] = []
        for m in self.members.values():
            if m.syncing:
                m.syncing = False
                out.append(Reply(m.member_id, "sync", _error(REBALANCE_IN_PROGRESS, "rejoin")))
        self.state = PREPARING
        self.deadline_ms = now_ms + max((m.rebalance_timeout_ms for m in self.members.values()),
                                        default=0)
        return out

    def _remove(self, gone: Sequence[str], now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        for mid in gone:
            m = self.members.pop(mid)
            for kind, owed in (("join", m.joining), ("sync", m.syncing)):
                if owed:
                    out.append(Reply(mid, kind, _error(UNKNOWN_MEMBER_ID, "removed")))
        if self.state != PREPARING:
            out += self._prepare(now_ms)
        return out + self._maybe_complete_join(now_ms)

    def _maybe_complete_join(self, now_ms: int) -> list[Effect]:
        if self.state != PREPARING or not all(m.joining for m in self.members.values()):
            return []
        self.generation += 1
        if not self.members:
            self.state, self.protocol, self.leader, self.deadline_ms = EMPTY, None, None, None
            return [Append(self.record())]
        votes = Counter(next(n for n in m.protocols if n in self._common(list(m.protocols)))
                        for m in self.members.values())
        self.protocol = max(sorted(votes), key=lambda n: votes[n])
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = COMPLETING
        self.deadline_ms = now_ms + max(m.rebalance_timeout_ms for m in self.members.values())
        out: list[Effect] = []
        for m in self.members.values():
            m.joining, m.assignment = False, None
            body: dict[str, Any] = {"error": None, "generation": self.generation,
                                    "protocol": self.protocol, "leader": self.leader,
                                    "member_id": m.member_id}
            if m.member_id == self.leader:
                body["members"] = {mid: o.protocols[self.protocol]
                                   for mid, o in self.members.items()}
            out.append(Reply(m.member_id, "join", body))
        return out


def parse_marker_record(rec: Mapping[str, Any]) -> tuple[int, bool] | None:
    """(producer id, commit) of a transaction marker among the partition's records (its
    value, broker/txnindex.py's marker_value, parsed as JSON); None for anything else."""
    kind = rec.get(MARKER)
    if kind not in ("commit", "abort"):
        return None
    return int(rec["producer_id"]), kind == "commit"


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": code, "message": message}
