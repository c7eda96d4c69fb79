"""One consumer-group member on our broker, as Kafka's classic (eager) consumer runs it.

join: join_group until a generation is formed (a leader runs the group's
assignor over every member's subscription and what each owned, and sends the
assignment with its sync_group); heartbeat: keeps the session and says when to
rejoin; commit / committed: the group's offsets; leave. Synchronous, one thread
at a time, over a BrokerClient (whose `group_request` follows the coordinator).
Eager protocol: a member gives up all its partitions when it rejoins, so
cooperative-sticky (which needs the cooperative protocol) is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from systems.undertow.assignors import Member, TopicPartition, assignor
from systems.undertow.client import BrokerClient, ClientError

EAGER_ASSIGNORS = ("range", "roundrobin", "sticky")
REJOIN = frozenset({"REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"})
UNSTABLE = "UNSTABLE_OFFSET_COMMIT"  # a transaction holds the offsets pending: ask again
UNSTABLE_BACKOFF_S = 0.02


class GroupError(Exception):
    """The group refused us for good (a bad setting, an inconsistent protocol)."""


class GroupMember:
    def __init__(self, client: BrokerClient, group: str, topics: Sequence[str],
                 partitions: Mapping[str, int], *, strategy: str = "range",
                 client_id: str = "undertow", session_timeout_ms: int = 10_000,
                 rebalance_timeout_ms: int = 30_000) -> None:
        if strategy not in EAGER_ASSIGNORS:
            raise ValueError(f"GroupMember: strategy {strategy!r} is not one of "
                             f"{', '.join(EAGER_ASSIGNORS)} (eager protocol)")
        self.client = client
        self.group = group
        self.topics = list(topics)
        self.partitions = dict(partitions)
        self.strategy = strategy
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.assignment: tuple[TopicPartition, ...] = ()
        self.owned: tuple[TopicPartition, ...] = ()  # what it held before the last rejoin

    def _request(self, msg: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        return self.client.group_request({"group": self.group, **msg}, timeout_s=timeout_s)

    def join(self) -> tuple[TopicPartition, ...]:
        """(Re)join until a generation hands us an assignment; returns it."""
        wait_s = (self.rebalance_timeout_ms + self.session_timeout_ms) / 1000 + 5
        while True:
            self.owned, self.assignment = self.assignment or self.owned, ()
            meta = {"topics": self.topics, "owned": [list(tp) for tp in self.owned],
                    "generation": self.generation}
            reply = self._request({"type": "join_group", "member_id": self.member_id,
                                   "client_id": self.client_id,
                                   "protocols": [[self.strategy, meta]],
                                   "session_timeout_ms": self.session_timeout_ms,
                                   "rebalance_timeout_ms": self.rebalance_timeout_ms}, wait_s)
            err = reply.get("error")
            if err == "UNKNOWN_MEMBER_ID":
                self.member_id, self.generation = "", -1
                continue
            if err:
                raise GroupError(f"join {self.group}: {err}: {reply.get('message')}")
            self.member_id, self.generation = reply["member_id"], reply["generation"]
            assignments: dict[str, Any] = {}
            if "members" in reply:
                assignments = self._assign(reply["protocol"], reply["members"])
            synced = self._request({"type": "sync_group", "member_id": self.member_id,
                                    "generation": self.generation,
                                    "assignments": assignments}, wait_s)
            if synced.get("error") in REJOIN:
                continue
            if synced.get("error"):
                raise GroupError(f"sync {self.group}: {synced['error']}: "
                                 f"{synced.get('message')}")
            self.assignment = tuple(sorted((str(t), int(p))
                                           for t, p in synced.get("assignment") or []))
            return self.assignment

    def _assign(self, protocol: str, members: Mapping[str, Any]) -> dict[str, Any]:
        """The leader's part: the group's assignor over every member's subscription."""
        ms = [Member(mid, frozenset(m.get("topics", [])),
                     frozenset((str(t), int(p)) for t, p in m.get("owned", [])),
                     int(m.get("generation", -1)))
              for mid, m in members.items()]
        out = assignor(protocol)(self.partitions, ms)
        return {mid: [list(tp) for tp in tps] for mid, tps in out.items()}

    def heartbeat(self) -> bool:
        """True while the generation stands; False: call join (a rebalance is on, or we were
        removed). A coordinator that cannot be reached raises ClientError."""
        reply = self._request({"type": "group_heartbeat", "member_id": self.member_id,
                               "generation": self.generation})
        if reply.get("error") in REJOIN:
            if reply["error"] == "UNKNOWN_MEMBER_ID":
                self.member_id, self.generation = "", -1
            return False
        if reply.get("error"):
            raise ClientError(str(reply["error"]), str(reply.get("message")), definite=True)
        return True

    def commit(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """Commit within our generation; False when the group moved on (rejoin first)."""
        reply = self._request({"type": "offset_commit", "member_id": self.member_id,
                               "generation": self.generation,
                               "offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())]})
        if reply.get("error") in REJOIN:
            return False
        if reply.get("error"):
            raise ClientError(str(reply["error"]), str(reply.get("message")), definite=False)
        return True

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return fetch_committed(self.client, self.group, partitions)

    def leave(self) -> None:
        if self.member_id:
            self._request({"type": "leave_group", "member_id": self.member_id})
        self.member_id, self.generation, self.assignment, self.owned = "", -1, (), ()


def commit_sync(client: BrokerClient, group: str, member_id: str, generation: int,
                offsets: Mapping[TopicPartition, int], *, timeout_s: float | None = None
                ) -> tuple[Literal["ok", "fail", "info"], str | None]:
    """One synchronous commit of those offsets for (member id, generation), as a Kafka
    consumer's commitSync: `ok` once acknowledged; `fail` when the group refused the only
    attempt a broker received (fenced, a rebalance on); `info` when any attempt may have
    landed (a coordinator that moved after it took one, an answer lost), and why."""
    delivered: list[str] = []
    try:
        reply = client.group_request(
            {"type": "offset_commit", "group": group, "member_id": member_id,
             "generation": generation,
             "offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())]},
            timeout_s=timeout_s, delivered=delivered)
    except ClientError as e:
        return "info", f"{e.code}: {e}"
    err = reply.get("error")
    if err is None:
        return "ok", None
    why = f"{err}: {reply.get('message')}"
    if delivered:
        return "info", f"{why} (after an earlier attempt that may have landed: {delivered[0]})"
    return "fail", why


def fetch_committed(client: BrokerClient, group: str, partitions: Sequence[TopicPartition], *,
                    timeout_s: float | None = None) -> dict[TopicPartition, int]:
    """The group's committed offsets of those partitions that have one, once stable (Kafka's
    requireStable): asked again while a transaction holds offsets of them pending, so a
    consumer never starts from an offset an open transaction is about to move."""
    deadline = time.monotonic() + (client.timeout_s if timeout_s is None else timeout_s)
    while True:
        reply = client.group_request({"type": "offset_fetch", "group": group,
                                      "partitions": [list(tp) for tp in partitions],
                                      "require_stable": True},
                                     timeout_s=max(0.1, deadline - time.monotonic()))
        err = reply.get("error")
        if err is None:
            return {(str(t), int(p)): int(o) for t, p, o in reply["offsets"]}
        if err != UNSTABLE or time.monotonic() + UNSTABLE_BACKOFF_S >= deadline:
            raise ClientError(str(err), str(reply.get("message")), definite=True)
        time.sleep(UNSTABLE_BACKOFF_S)


def run_member(member: GroupMember, stop: threading.Event,
               on_assignment: Callable[[int, tuple[TopicPartition, ...]], None], *,
               heartbeat_interval_s: float = 0.1) -> None:
    """Join, then heartbeat every interval and rejoin when told, until `stop` is set (what a
    consumer's poll loop and heartbeat thread do between them); each new assignment is
    handed to `on_assignment` with its generation."""
    if stop.is_set():
        return
    assignment = member.join()
    on_assignment(member.generation, assignment)
    while not stop.wait(heartbeat_interval_s):
        if not member.heartbeat():
            assignment = member.join()
            on_assignment(member.generation, assignment)
