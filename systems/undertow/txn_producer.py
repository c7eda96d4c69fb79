"""Kafka's transactional producer over BrokerClient: init, add partitions, send, commit, abort.

The coordinator of the transactional.id is found through any node, kept for
the next requests (as Kafka's producer keeps it), looked up again once it
moved, and asked again while it loads or finishes an earlier transaction
(Kafka's retriable coordinator errors). Whether a transaction committed follows the
history's rules:
- a transaction whose commit was never sent is certainly not committed (only
  an end_txn with commit can commit it; the coordinator aborts the rest, at the
  latest at its timeout): `Outcome.ABORTED`;
- a commit answered ok is committed; one refused as fenced or in the wrong state
  was aborted first (a timeout or a newer instance did it): `ABORTED`;
- a commit with no definite answer in time is `UNKNOWN`.
After anything but a clean commit or abort the producer initialises again
(which also aborts whatever it left open), as Kafka's producer must.
`send_offsets` is Kafka's sendOffsetsToTransaction: a consumer group's offsets
join the transaction and are committed with it (consume, transform, produce).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable, Mapping
from typing import Any

from broker.protocol import LEADER_NOT_AVAILABLE

from systems.undertow.client import BACKOFF_S, BrokerClient, ClientError, _Unsent

# The coordinator is elsewhere, loading, or busy with the id's previous transaction.
RETRY = frozenset({"NOT_COORDINATOR", LEADER_NOT_AVAILABLE, "COORDINATOR_LOAD_IN_PROGRESS",
                   "CONCURRENT_TRANSACTIONS"})
# A commit refused because the transaction was aborted first.
ABORTED_FIRST = frozenset({"INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE",
                           "INVALID_PRODUCER_ID_MAPPING"})


class Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


class TxnProducer:
    """One transactional.id's producer; `cl` becomes its idempotent, transactional client."""

    def __init__(self, cl: BrokerClient, transactional_id: str, *,
                 transaction_timeout_ms: int = 10_000) -> None:
        self.cl = cl
        self.tid = transactional_id
        self.timeout_ms = transaction_timeout_ms
        cl.idempotent = True
        cl.transactional = True
        self.partitions: set[int] = set()  # added to the ongoing transaction
        self.groups: set[str] = set()  # whose offsets the ongoing transaction holds
        self.coordinator: str | None = None  # as last found
        self.ready = False  # initialised, with no transaction left in doubt

    # -- coordinator requests ------------------------------------------------------------
    def _find(self, deadline: float) -> str:
        last = "no node answered"
        for node in self.cl.addrs:
            try:
                reply = self.cl._call(node, {"type": "find_txn_coordinator",
                                             "transactional_id": self.tid},
                                      min(deadline, time.monotonic() + 1.0))
            except (_Unsent, ClientError) as e:
                last = str(e)
                continue
            if reply.get("error") is None and reply.get("node") in self.cl.addrs:
                return str(reply["node"])
            last = f"{reply.get('error')}: {reply.get('message')}"
        raise _Unsent(f"no coordinator for {self.tid!r}: {last}")

    def request(self, msg: Mapping[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """msg to the id's coordinator, again while RETRY says so. The reply (its `error` may
        be a definite refusal); ClientError when no definite answer came in time, `definite`
        when no attempt reached a coordinator."""
        deadline = time.monotonic() + (self.cl.timeout_s if timeout_s is None else timeout_s)
        last, reached = "no attempt", False
        while True:
            try:
                node = self.coordinator = self.coordinator or self._find(deadline)
                reply = self.cl._call(node, {**msg, "transactional_id": self.tid}, deadline)
                code = reply.get("error")
                if code not in RETRY:
                    return reply
                last = f"{code}: {reply.get('message')}"
                reached = reached or code == "NOT_COORDINATOR"  # it may be a write's outcome
            except _Unsent as e:  # no coordinator found, or it refused the connection
                last = str(e)
                self.coordinator = None
            except ClientError as e:
                last, reached = f"{e.code}: {e}", True
            if code_moved(last):
                self.coordinator = None
            if time.monotonic() + BACKOFF_S >= deadline:
                raise ClientError(last.split(":", 1)[0], f"{msg['type']} {self.tid}: {last}",
                                  definite=not reached)
            time.sleep(BACKOFF_S)

    # -- the producer's life --------------------------------------------------------------
    def init(self) -> None:
        """A producer id and a new epoch for the id (aborting what an earlier instance left
        open); raises ClientError."""
        reply = self.request({"type": "init_txn_producer", "timeout_ms": self.timeout_ms})
        if reply.get("error"):
            raise ClientError(str(reply["error"]), str(reply.get("message")), definite=True)
        self.cl.producer = (int(reply["producer_id"]), int(reply["producer_epoch"]))
        self.cl._seqs = {}
        self.partitions, self.groups = set(), set()
        self.ready = True

    def begin(self) -> None:
        if not self.ready:
            self.init()
        self.partitions, self.groups = set(), set()

    def add_partitions(self, keys: Iterable[int]) -> None:
        """Add keys to the ongoing transaction before sending to them; raises ClientError."""
        want = set(keys) - self.partitions
        if not want:
            return
        assert self.cl.producer is not None, "begin() first"
        pid, epoch = self.cl.producer
        try:
            reply = self.request({"type": "add_txn_partitions", "producer_id": pid,
                                  "producer_epoch": epoch, "partitions": sorted(want)})
        except ClientError:
            self.ready = False
            raise
        if reply.get("error"):
            self.ready = False
            raise ClientError(str(reply["error"]), str(reply.get("message")), definite=True)
        self.partitions |= want

    def send_offsets(self, group: str, offsets: Mapping[tuple[str, int], int], *,
                     generation: int, member_id: str) -> None:
        """The group's offsets (topic, partition) -> next offset, committed with the ongoing
        transaction (KIP-98): its coordinator adds the group's offsets partition to the
        transaction, then the group's coordinator holds them pending, refusing a member of
        an older generation (KIP-447). Raises ClientError; the transaction must then abort."""
        assert self.cl.producer is not None, "begin() first"
        pid, epoch = self.cl.producer
        try:
            if group not in self.groups:
                reply = self.request({"type": "add_txn_offsets", "producer_id": pid,
                                      "producer_epoch": epoch, "group": group})
                if reply.get("error"):
                    raise ClientError(str(reply["error"]), str(reply.get("message")),
                                      definite=True)
                self.groups.add(group)
            reply = self.cl.group_request({
                "type": "txn_offset_commit", "group": group, "transactional_id": self.tid,
                "producer_id": pid, "producer_epoch": epoch, "member_id": member_id,
                "generation": generation,
                "offsets": [[t, p, o] for (t, p), o in sorted(offsets.items())]})
            if reply.get("error"):
                raise ClientError(str(reply["error"]), str(reply.get("message")), definite=True)
        except ClientError:
            self.ready = False
            raise

    def end(self, commit: bool) -> Outcome:
        """Commit or abort the ongoing transaction: what became of it."""
        if not self.partitions and not self.groups:
            return Outcome.COMMITTED if commit else Outcome.ABORTED  # nothing was written
        if self.cl.producer is None:  # a send of unknown outcome dropped the producer id:
            self.abandon()  # no end_txn can be sent; never committed, the next init aborts
            return Outcome.ABORTED
        pid, epoch = self.cl.producer
        try:
            reply = self.request({"type": "end_txn", "producer_id": pid,
                                  "producer_epoch": epoch, "commit": commit})
        except ClientError as e:
            self.ready = False
            return Outcome.ABORTED if not commit or e.definite else Outcome.UNKNOWN
        code = reply.get("error")
        self.partitions, self.groups = set(), set()
        if code is None:
            return Outcome.COMMITTED if commit else Outcome.ABORTED
        self.ready = False
        if not commit or code in ABORTED_FIRST:
            return Outcome.ABORTED
        return Outcome.UNKNOWN

    def abandon(self) -> None:
        """Something failed mid-transaction: never commit it; the next begin initialises
        again, which aborts it at once (else the coordinator's timeout does)."""
        self.ready = False
        self.partitions, self.groups = set(), set()


def code_moved(last: str) -> bool:
    """After these the coordinator must be looked up again."""
    return last.split(":", 1)[0] in ("NOT_COORDINATOR", LEADER_NOT_AVAILABLE, "CONNECTION",
                                     "TIMEOUT")
