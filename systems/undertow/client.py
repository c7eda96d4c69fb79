"""The broker's native client: synchronous, blocking sockets, one thread at a time.

Outcomes follow the history's rules: a ClientError with `definite=True` means
the operation certainly did not happen (history: fail); `definite=False` means
it may have (history: info). Only definite failures are retried, within the
timeout, after refreshing metadata (leader changes, refused connections).
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Mapping
from typing import Any

from broker.protocol import (
    DEFINITE_ERRORS,
    LEADER_NOT_AVAILABLE,
    MAX_RESPONSE_BYTES,
    NOT_LEADER,
    UNKNOWN_LEADER_EPOCH,
    FrameDecoder,
    ProtocolError,
    decode_response,
    encode_frame,
)

RETRIABLE = frozenset({NOT_LEADER, LEADER_NOT_AVAILABLE, UNKNOWN_LEADER_EPOCH, "CONNECTION"})
BACKOFF_S = 0.05


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
            while self.ready:
                reply = decode_response(self.ready.pop(0))
                if reply["id"] == rid or reply["id"] is None:
                    return reply
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
    def __init__(self, addrs: Mapping[str, str], *, timeout_s: float = 5.0) -> None:
        if not addrs:
            raise ValueError("BrokerClient: addrs must name at least one node")
        self.addrs = dict(addrs)
        self.timeout_s = timeout_s
        self._conns: dict[str, _Conn] = {}
        self._leaders: dict[int, str] = {}
        self._meta: dict[str, Any] = {}

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
                 expect_reply: bool = True) -> dict[str, Any]:
        """Send to the partition's leader, retrying while the outcome is definitely nothing."""
        deadline = time.monotonic() + self.timeout_s
        last = "no attempt"
        while True:
            try:
                leader = self._leader(key, deadline)
                if writes and "timeout_ms" in msg:
                    msg["timeout_ms"] = max(1, int((deadline - time.monotonic()) * 1000) - 100)
                reply = self._call(leader, msg, deadline, expect_reply)
                code = reply.get("error")
                if code is None:
                    return reply
                last = f"{code}: {reply.get('message')}"
                if code not in DEFINITE_ERRORS and code != UNKNOWN_LEADER_EPOCH:
                    raise ClientError(code, f"{leader}: {reply.get('message')}",
                                      definite=False)
                if code not in RETRIABLE:
                    raise ClientError(code, f"{leader}: {reply.get('message')}", definite=True)
                self._leaders.pop(key, None)
            except _Unsent as e:
                last = f"CONNECTION: {e}"
                self._leaders.pop(key, None)
            except ClientError as e:
                if writes or e.code not in RETRIABLE | {"TIMEOUT"}:
                    raise
                last = str(e)  # reads are idempotent: retry on any connection trouble
                self._leaders.pop(key, None)
            if time.monotonic() + BACKOFF_S >= deadline:
                code = last.split(":", 1)[0] if ":" in last else "TIMEOUT"
                raise ClientError(code, f"partition {key}: gave up after {self.timeout_s}s: "
                                  f"{last}", definite=True)
            time.sleep(BACKOFF_S)

    def produce(self, key: int, value: int, *, acks: str = "all") -> int | None:
        """The record's offset (None with acks="0"); raises ClientError."""
        msg = {"type": "produce", "partition": key, "value": value, "acks": acks,
               "timeout_ms": int(self.timeout_s * 1000)}
        reply = self._request(key, msg, writes=True, expect_reply=acks != "0")
        return None if acks == "0" else int(reply["offset"])

    def fetch(self, key: int, offset: int, *, max_records: int = 500) -> list[tuple[int, int]]:
        """(offset, value) records from `offset`, below the HW; [] when none."""
        reply = self._request(key, {"type": "fetch", "partition": key, "offset": offset,
                                    "max_records": max_records}, writes=False)
        return [(int(o), int(v)) for o, v in reply["records"]]

    def end_offset(self, key: int) -> int:
        """The partition's HW at its leader."""
        reply = self._request(key, {"type": "list_offsets", "partition": key}, writes=False)
        return int(reply["hw"])

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
