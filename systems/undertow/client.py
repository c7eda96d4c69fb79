"""The broker's native client: synchronous, blocking sockets, one thread at a time.

Outcomes follow the history's rules: a ClientError with `definite=True` means
the operation certainly did not happen (history: fail); `definite=False` means
it may have (history: info). A refusal that certainly wrote nothing (leader
changes, refused connections) is retried within the timeout after refreshing
metadata. A send whose attempt may have been written (no reply in time, the
connection lost, REQUEST_TIMED_OUT, ...) is sent again only `retries` times, as
Kafka's producer does: each resend may append the record once more, so without
idempotence an acknowledged send may sit at two offsets, and a send that gives
up after such an attempt is never definite. With `enable_idempotence` every
send carries a producer id (from the controller), its epoch and a sequence
number per partition; the leader writes a resend once and answers it with the
first attempt's offset. After an unknown outcome the next sequence is unknown
too, so the client takes a new producer id (Kafka bumps the epoch instead).
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Mapping
from typing import Any

from broker.protocol import (
    DEFINITE_ERRORS,
    INVALID_PRODUCER_EPOCH,
    LEADER_CHANGED_AFTER_APPEND,
    LEADER_NOT_AVAILABLE,
    MAX_RESPONSE_BYTES,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
    FrameDecoder,
    ProtocolError,
    decode_response,
    encode_frame,
)

RETRIABLE = frozenset({NOT_LEADER, LEADER_NOT_AVAILABLE, UNKNOWN_LEADER_EPOCH, "CONNECTION"})
# Outcomes that leave a send unknown yet are worth sending again (Kafka's retriable errors).
RESENDABLE = frozenset({"TIMEOUT", "CONNECTION", REQUEST_TIMED_OUT,
                        NOT_ENOUGH_REPLICAS_AFTER_APPEND, LEADER_CHANGED_AFTER_APPEND})
BACKOFF_S = 0.05
# a group's coordinator is elsewhere now (or not yet elected): find it again
COORDINATOR_MOVED = frozenset({"NOT_COORDINATOR", LEADER_NOT_AVAILABLE})


class ClientError(Exception):
    """code: e.g. NOT_LEADER, NOT_ENOUGH_REPLICAS, TIMEOUT, CONNECTION; definite: see module doc."""

    def __init__(self, code: str, message: str, *, definite: bool) -> None:
        super().__init__(message)
        self.code = code
        self.definite = definite


class _Unsent(Exception):
    """The request never left this host (connect failed): certainly not executed."""


class _Conn:
    """One blocking connection; one request at a time."""

    def __init__(self, addr: str, timeout_s: float) -> None:
        host, _, port = addr.rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        except OSError as e:
            raise _Unsent(f"connect {addr}: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.dec = FrameDecoder(MAX_RESPONSE_BYTES)
        self.next_id = 1
        self.ready: list[bytes] = []
        self.early: dict[int, dict[str, Any]] = {}  # replies read while awaiting another

    def stale(self) -> bool:
        """The broker closed this idle connection (e.g. it restarted): nothing was sent on it."""
        try:
            readable, _w, _x = select.select([self.sock], [], [], 0)
            if not readable:
                return False
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def send(self, msg: dict[str, Any]) -> int:
        rid = self.next_id
        self.next_id += 1
        self.sock.sendall(encode_frame({**msg, "id": rid}))
        return rid

    def recv(self, rid: int, deadline: float) -> dict[str, Any]:
        while True:
            if rid in self.early:
                return self.early.pop(rid)
            while self.ready:
                reply = decode_response(self.ready.pop(0))
                if reply["id"] == rid or reply["id"] is None:
                    return reply
                self.early[reply["id"]] = reply
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply in time")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("connection closed by the broker")
            self.ready.extend(self.dec.feed(data))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class BrokerClient:
    """timeout_s bounds each operation, its retries included (a send's delivery.timeout.ms);
    request_timeout_s bounds one attempt of a send (request.timeout.ms; default: timeout_s);
    retries: how many times a send whose attempt may have been written is sent again;
    enable_idempotence: the idempotent producer (acks="all" only); max_in_flight: requests
    of one produce_many unanswered on a connection (systems/undertow/pipeline.py)."""

    def __init__(self, addrs: Mapping[str, str], *, timeout_s: float = 5.0, retries: int = 0,
                 request_timeout_s: float | None = None,
                 enable_idempotence: bool = False, max_in_flight: int = 1) -> None:
        if not addrs:
            raise ValueError("BrokerClient: addrs must name at least one node")
        if retries < 0:
            raise ValueError(f"BrokerClient: retries must be >= 0, got {retries}")
        self.addrs = dict(addrs)
        self.timeout_s = timeout_s
        self.retries = retries
        self.request_timeout_s = timeout_s if request_timeout_s is None else request_timeout_s
        self.idempotent = enable_idempotence
        self.transactional = False  # set by systems/undertow/txn_producer.py
        self.max_in_flight = max_in_flight
        self.producer: tuple[int, int] | None = None  # (producer id, epoch) once given one
        self._seqs: dict[int, int] = {}  # partition -> its next sequence number
        self._conns: dict[str, _Conn] = {}
        self._leaders: dict[int, str] = {}
        self._meta: dict[str, Any] = {}
        self._coordinators: dict[str, str] = {}  # group -> its coordinator, as last found

    # -- connections -------------------------------------------------------------
    def _conn(self, node: str, deadline: float) -> _Conn:
        c = self._conns.get(node)
        if c is not None and c.stale():
            self._drop(node)
            c = None
        if c is None:
            left = max(0.05, min(deadline - time.monotonic(), self.timeout_s))
            c = self._conns[node] = _Conn(self.addrs[node], left)
        return c

    def _drop(self, node: str) -> None:
        c = self._conns.pop(node, None)
        if c is not None:
            c.close()

    def _call(self, node: str, msg: dict[str, Any], deadline: float,
              expect_reply: bool = True) -> dict[str, Any]:
        """One request; raises _Unsent (never sent) or ClientError(definite=False) (no reply)."""
        c = self._conn(node, deadline)
        try:
            rid = c.send(msg)
        except OSError as e:
            self._drop(node)  # part of the request may have been sent
            raise ClientError("CONNECTION", f"{node}: send failed: {e}", definite=False) from None
        if not expect_reply:
            return {}
        try:
            return c.recv(rid, deadline)
        except TimeoutError:
            self._drop(node)
            raise ClientError("TIMEOUT", f"{node}: no reply to {msg['type']}",
                              definite=False) from None
        except (OSError, ProtocolError) as e:
            self._drop(node)
            raise ClientError("CONNECTION", f"{node}: {e}", definite=False) from None

    # -- metadata ---------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        last = "no node answered"
        while True:
            for node in self.addrs:
                try:
                    reply = self._call(node, {"type": "metadata"},
                                       min(deadline, time.monotonic() + 1.0))
                except (_Unsent, ClientError) as e:
                    last = str(e)
                    continue
                if reply.get("error"):
                    last = f"{reply['error']}: {reply.get('message')}"
                    continue
                self._learn(reply)
                return reply
            if time.monotonic() + BACKOFF_S >= deadline:
                raise ClientError("CONNECTION", f"metadata: {last}", definite=True)
            time.sleep(BACKOFF_S)

    def _learn(self, meta: dict[str, Any]) -> None:
        """Adopt leaders from a metadata reply."""
        self._meta = meta
        for p, info in meta.get("partitions", {}).items():
            if info.get("leader") in self.addrs:
                self._leaders[int(p)] = info["leader"]
            else:
                self._leaders.pop(int(p), None)

    def _refresh_leaders(self, deadline: float) -> None:
        """Ask every node; per partition, trust the answer with the highest leader epoch
        (a node cut off from the controller serves stale metadata)."""
        best: dict[int, tuple[int, str | None]] = {}
        for node in self.addrs:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                reply = self._call(node, {"type": "metadata"},
                                   time.monotonic() + min(left, 0.5))
            except (_Unsent, ClientError):
                continue
            if reply.get("error"):
                continue
            self._meta = reply
            for p, info in reply.get("partitions", {}).items():
                epoch = int(info.get("leader_epoch", -1))
                if int(p) not in best or epoch > best[int(p)][0]:
                    best[int(p)] = (epoch, info.get("leader"))
        for p, (_e, leader) in best.items():
            if leader in self.addrs:
                self._leaders[p] = leader
            else:
                self._leaders.pop(p, None)

    def _leader(self, key: int, deadline: float) -> str:
        if key not in self._leaders:
            self._refresh_leaders(deadline)
        leader = self._leaders.get(key)
        if leader is None:
            raise _Unsent(f"partition {key} has no leader")
        return leader

    # -- operations ---------------------------------------------------------------------
    def _request(self, key: int, msg: dict[str, Any], *, writes: bool,
                 expect_reply: bool = True, maybe_written: bool = False) -> dict[str, Any]:
        """Send to the partition's leader, retrying while the outcome is definitely nothing,
        and (writes) up to `retries` times after an attempt that may have been written
        (`maybe_written`: an earlier attempt, made elsewhere, may have been; this is then
        its first resend)."""
        deadline = time.monotonic() + self.timeout_s
        last = "no attempt"
        resends = 1 if maybe_written else 0
        # some attempt may have been appended: never definite again
        while True:
            try:
                leader = self._leader(key, deadline)
                until = deadline
                if writes:
                    until = min(deadline, time.monotonic() + self.request_timeout_s)
                    if "timeout_ms" in msg:
                        msg["timeout_ms"] = max(1, int((until - time.monotonic()) * 1000) - 100)
                reply = self._call(leader, msg, until, expect_reply)
                code = reply.get("error")
                if code is None:
                    return reply
                last = f"{code}: {reply.get('message')}"
                if code not in DEFINITE_ERRORS and code != UNKNOWN_LEADER_EPOCH:
                    raise ClientError(code, f"{leader}: {reply.get('message')}",
                                      definite=False)
                if code not in RETRIABLE:
                    raise ClientError(code, f"{leader}: {reply.get('message')}",
                                      definite=not maybe_written)
                self._leaders.pop(key, None)
            except _Unsent as e:
                last = f"CONNECTION: {e}"
                self._leaders.pop(key, None)
            except ClientError as e:
                if e.definite:
                    raise
                if not writes:
                    if e.code not in RETRIABLE | {"TIMEOUT"}:
                        raise
                elif e.code not in RESENDABLE or resends >= self.retries:
                    raise
                else:
                    resends += 1
                    maybe_written = True
                last = str(e)  # reads are idempotent: retry on any connection trouble
                self._leaders.pop(key, None)
            if time.monotonic() + BACKOFF_S >= deadline:
                code = last.split(":", 1)[0] if ":" in last else "TIMEOUT"
                raise ClientError(code, f"partition {key}: gave up after {self.timeout_s}s: "
                                  f"{last}", definite=not maybe_written)
            time.sleep(BACKOFF_S)

    def produce(self, key: int, value: int, *, acks: str = "all") -> int | None:
        """The record's offset (None with acks="0"); raises ClientError."""
        seq = self.next_sequences([key], acks)[0] if self.idempotent else None
        try:
            return self.produce_attempt(key, value, acks, seq)
        except ClientError as e:
            if seq is not None and e.definite and self._seqs.get(key) == seq + 1 and \
                    e.code not in (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH):
                self._seqs[key] = seq  # certainly not written: the number is free again
            raise

    def next_sequences(self, keys: list[int], acks: str) -> list[int]:
        """The idempotent producer's next sequence number for each of `keys`, in order (a
        new producer id first when it has none); raises ClientError."""
        if acks != "all":
            raise ValueError(f"the idempotent producer needs acks='all', not {acks!r}")
        if self.producer is None:
            self.producer = self.init_producer(time.monotonic() + self.timeout_s)
            self._seqs = {}
        out = []
        for k in keys:
            out.append(self._seqs.get(k, 0))
            self._seqs[k] = out[-1] + 1
        return out

    def produce_msg(self, key: int, value: int, acks: str, seq: int | None) -> dict[str, Any]:
        msg: dict[str, Any] = {"type": "produce", "partition": key, "value": value,
                               "acks": acks, "timeout_ms": int(self.timeout_s * 1000)}
        if seq is not None:
            assert self.producer is not None, "next_sequences() first"
            msg.update(producer_id=self.producer[0], producer_epoch=self.producer[1],
                       sequence=seq)
            if self.transactional:
                msg["transactional"] = True
        return msg

    def produce_attempt(self, key: int, value: int, acks: str, seq: int | None, *,
                        maybe_written: bool = False) -> int | None:
        """One record with its retries (`seq`: its sequence number, idempotent); after an
        unknown outcome or a refused sequence the producer takes a new id."""
        if seq is not None and self.producer is None:  # an earlier failure reset it
            raise ClientError("PRODUCER_RESET", f"partition {key}: the producer was reset "
                              "by an earlier failure", definite=not maybe_written)
        try:
            reply = self._request(key, self.produce_msg(key, value, acks, seq), writes=True,
                                  expect_reply=acks != "0", maybe_written=maybe_written)
        except ClientError as e:
            if seq is not None and (not e.definite or e.code in (
                    OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH)):
                self.producer = None  # whether `seq` was used is unknown: start afresh
            raise
        return None if acks == "0" else int(reply["offset"])

    def init_producer(self, deadline: float) -> tuple[int, int]:
        """(producer id, epoch) from the active controller; any node names it. Definite on
        failure: no record was sent (an id handed out but never learnt is just skipped)."""
        nodes = list(self.addrs)
        last = "no node answered"
        hint: str | None = None
        for attempt in range(1_000_000):
            node = hint if hint in self.addrs else nodes[attempt % len(nodes)]
            hint = None
            try:
                reply = self._call(node, {"type": "init_producer_id"},
                                   min(deadline, time.monotonic() + 1.0))
            except (_Unsent, ClientError) as e:
                last = str(e)
            else:
                if reply.get("error") is None:
                    return int(reply["producer_id"]), int(reply["producer_epoch"])
                last = f"{reply['error']}: {reply.get('message')}"
                hint = reply.get("controller") if isinstance(reply.get("controller"),
                                                             str) else None
            if time.monotonic() + BACKOFF_S >= deadline:
                break
            time.sleep(BACKOFF_S / 2)
        raise ClientError("CONNECTION", f"init_producer_id: {last}", definite=True)

    def fetch(self, key: int, offset: int, *, max_records: int = 500) -> list[tuple[int, int]]:
        """(offset, value) records from `offset`, below the HW; [] when none."""
        return self.fetch_next(key, offset, max_records=max_records)[0]

    def fetch_next(self, key: int, offset: int, *, max_records: int = 500,
                   isolation: str | None = None) -> tuple[list[tuple[int, int]], int]:
        """(offset, value) records from `offset` and the offset to fetch next (past any
        transaction markers and aborted records skipped); isolation "read_committed" stops
        at the last stable offset, else the HW."""
        msg: dict[str, Any] = {"type": "fetch", "partition": key, "offset": offset,
                               "max_records": max_records}
        if isolation is not None:
            msg["isolation"] = isolation
        reply = self._request(key, msg, writes=False)
        records = [(int(o), int(v)) for o, v in reply["records"]]
        nxt = int(reply.get("next", records[-1][0] + 1 if records else offset))
        return records, nxt

    def end_offset(self, key: int) -> int:
        """The partition's HW at its leader."""
        reply = self._request(key, {"type": "list_offsets", "partition": key}, writes=False)
        return int(reply["hw"])

    # -- consumer groups ---------------------------------------------------------------
    def _find_coordinator(self, group: str, deadline: float) -> str:
        last = "no node answered"
        for node in self.addrs:
            try:
                reply = self._call(node, {"type": "find_coordinator", "group": group},
                                   min(deadline, time.monotonic() + 1.0))
            except (_Unsent, ClientError) as e:
                last = str(e)
                continue
            if reply.get("error") or reply.get("node") not in self.addrs:
                last = f"{reply.get('error')}: {reply.get('message')}"
                continue
            return str(reply["node"])
        raise _Unsent(f"no coordinator for group {group!r}: {last}")

    def group_request(self, msg: Mapping[str, Any], *, timeout_s: float | None = None,
                      delivered: list[str] | None = None) -> dict[str, Any]:
        """A request to the coordinator of msg["group"], found again while it moves (within
        timeout_s, default the client's). The group's own answers (rebalance, fencing) come
        back as the reply's `error`; only a coordinator never reached raises ClientError.
        `delivered` collects why each earlier attempt that a broker may have acted on was
        tried again (a coordinator that moved after it took the request, an answer lost):
        whoever needs a certain outcome (a commit) must not call a later refusal certain."""
        group = str(msg["group"])
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        last = "no attempt"
        while True:
            sent = False
            try:
                node = self._coordinators.get(group) or self._find_coordinator(group, deadline)
                self._coordinators[group] = node
                sent = True
                reply = self._call(node, dict(msg), deadline)
                if reply.get("error") not in COORDINATOR_MOVED:
                    return reply
                last = f"{reply['error']}: {reply.get('message')}"
                if delivered is not None:
                    delivered.append(last)
            except (_Unsent, ClientError) as e:
                last = str(e)
                if delivered is not None and sent and isinstance(e, ClientError):
                    delivered.append(last)
            self._coordinators.pop(group, None)
            if time.monotonic() + BACKOFF_S >= deadline:
                raise ClientError("COORDINATOR", f"group {group}: {last}", definite=False)
            time.sleep(BACKOFF_S)

    def close(self) -> None:
        for node in list(self._conns):
            self._drop(node)


def _admin(addr: str, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    try:
        c = _Conn(addr, timeout_s)
    except _Unsent as e:
        raise ClientError("CONNECTION", str(e), definite=True) from None
    try:
        reply = c.recv(c.send(msg), deadline)
    except (OSError, ProtocolError) as e:
        raise ClientError("CONNECTION", f"{addr}: {e}", definite=True) from None
    finally:
        c.close()
    if reply.get("error"):
        raise ClientError(str(reply["error"]), f"{addr}: {reply.get('message')}", definite=True)
    return reply


def admin_metadata(addr: str, *, timeout_s: float = 2.0) -> dict[str, Any]:
    """The node's metadata: controller's view of partitions, brokers, and its own replicas."""
    reply = _admin(addr, {"type": "metadata"}, timeout_s)
    reply.pop("id", None)
    reply.pop("error", None)
    return reply


def admin_dump(addr: str, *, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """That node's replicas as replicas.jsonl rows."""
    rows: list[dict[str, Any]] = _admin(addr, {"type": "dump"}, timeout_s)["rows"]
    return rows


def admin_request(addr: str, msg: dict[str, Any], *, timeout_s: float = 10.0) -> dict[str, Any]:
    """Any request (e.g. the test controls); raises ClientError on an error reply."""
    return _admin(addr, msg, timeout_s)
