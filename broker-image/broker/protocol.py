"""The wire protocol: length-prefixed JSON frames, shared by broker and native client.

A frame is a 4-byte big-endian unsigned length N, then N bytes of UTF-8 JSON
holding one object. Requests carry `id` (int, echoed in the reply) and `type`;
replies carry `id`, `error` (null or a code below) and the type's fields.
Several requests may be in flight on one connection; replies may come out of
order and are matched by `id`. A frame over the limit closes the connection; a
frame that is not a valid request gets an error reply.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

try:  # fast path; the broker image may lack it
    import orjson

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    def loads(data: bytes) -> Any:
        return orjson.loads(data)

    DECODE_ERRORS: tuple[type[Exception], ...] = (orjson.JSONDecodeError, UnicodeDecodeError)
except ImportError:  # pragma: no cover - exercised only without orjson
    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(data: bytes) -> Any:
        return json.loads(data)

    DECODE_ERRORS = (json.JSONDecodeError, UnicodeDecodeError, RecursionError)

HEADER = struct.Struct(">I")
DEFAULT_MAX_FRAME_BYTES = 1 << 20     # requests (socket.request.max.bytes)
MAX_RESPONSE_BYTES = 64 << 20         # what a reader accepts from a broker
INT64_MAX = (1 << 63) - 1

# Error codes (Kafka's names where Kafka has one).
NOT_LEADER = "NOT_LEADER"                          # definite: not written
LEADER_NOT_AVAILABLE = "LEADER_NOT_AVAILABLE"      # definite
UNKNOWN_PARTITION = "UNKNOWN_PARTITION"            # definite
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"        # definite: refused before the append
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"  # unknown: appended
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"            # unknown: appended, not yet committed
LEADER_CHANGED_AFTER_APPEND = "LEADER_CHANGED_AFTER_APPEND"  # unknown: appended, then demoted
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
INVALID_REQUEST = "INVALID_REQUEST"
UNSUPPORTED = "UNSUPPORTED"                        # unknown request type
NOT_CONTROLLER = "NOT_CONTROLLER"
STALE_STATE = "STALE_STATE"                        # alter_partition with an old epoch
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"          # alter_partition adding a fenced broker
DISABLED = "DISABLED"                              # test controls are off
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"  # definite: not the next sequence
INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"  # definite: an older producer epoch (fenced)
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"

# Codes after which the request certainly had no effect.
DEFINITE_ERRORS = frozenset({NOT_LEADER, LEADER_NOT_AVAILABLE, UNKNOWN_PARTITION,
                             NOT_ENOUGH_REPLICAS, FENCED_LEADER_EPOCH, INVALID_REQUEST,
                             UNSUPPORTED, OFFSET_OUT_OF_RANGE, DISABLED,
                             OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH})

# Request type -> required fields and their kinds; extra fields are ignored.
SCHEMAS: dict[str, dict[str, str]] = {
    # an idempotent producer adds PRODUCER_FIELDS (all three, or none)
    "produce": {"partition": "int", "value": "int", "acks": "acks", "timeout_ms": "int"},
    "init_producer_id": {},
    "fetch": {"partition": "int", "offset": "int", "max_records": "int"},
    "list_offsets": {"partition": "int"},
    "metadata": {},
    "clock": {},
    "dump": {},
    "replica_fetch": {"node": "str", "partitions": "list", "max_wait_ms": "int"},
    "offsets_for_leader_epoch": {"node": "str", "partition": "int", "epoch": "int",
                                 "leader_epoch": "int"},
    "heartbeat": {"node": "str", "incarnation": "str", "metadata_offset": "int"},
    "alter_partition": {"node": "str", "partition": "int", "leader_epoch": "int",
                        "partition_epoch": "int", "isr": "strs"},
    "test_fetcher": {"action": "str"},
    "test_checkpoint": {},
    "test_flush": {},
    "test_fence": {"node": "str"},
    "test_metadata": {"action": "str"},
    "test_alter_timeout": {"on": "bool"},
    "raft": {"from": "str", "message": "dict"},
    # consumer groups (broker/coordinator.py)
    "find_coordinator": {"group": "str"},
    "join_group": {"group": "str", "member_id": "str", "client_id": "str", "protocols": "list",
                   "session_timeout_ms": "int", "rebalance_timeout_ms": "int"},
    "sync_group": {"group": "str", "member_id": "str", "generation": "int",
                   "assignments": "dict"},
    "group_heartbeat": {"group": "str", "member_id": "str", "generation": "int"},
    "leave_group": {"group": "str", "member_id": "str"},
    "offset_commit": {"group": "str", "member_id": "str", "generation": "int",
                      "offsets": "list"},
    "offset_fetch": {"group": "str", "partitions": "list"},  # may add "require_stable"
    "txn_offset_commit": {"group": "str", "transactional_id": "str", "producer_id": "int",
                          "producer_epoch": "int", "member_id": "str", "generation": "int",
                          "offsets": "list"},
    # transactions (broker/txncoord.py); a fetch may add "isolation"
    "find_txn_coordinator": {"transactional_id": "str"},
    "init_txn_producer": {"transactional_id": "str", "timeout_ms": "int"},
    "add_txn_partitions": {"transactional_id": "str", "producer_id": "int",
                           "producer_epoch": "int", "partitions": "list"},
    "end_txn": {"transactional_id": "str", "producer_id": "int", "producer_epoch": "int",
                "commit": "bool"},
    "add_txn_offsets": {"transactional_id": "str", "producer_id": "int",
                        "producer_epoch": "int", "group": "str"},
    "write_txn_markers": {"partitions": "list", "producer_id": "int", "producer_epoch": "int",
                          "commit": "bool"},
}
ACKS = ("0", "1", "all")
PRODUCER_FIELDS = ("producer_id", "producer_epoch", "sequence")


def producer_tag(msg: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """A produce's (producer id, epoch, sequence), None without them; raises ProtocolError
    when only some are there or one is not a non-negative integer."""
    given = [f for f in PRODUCER_FIELDS if f in msg]
    if not given:
        return None
    for f in PRODUCER_FIELDS:
        v: Any = msg.get(f)
        if not _check("int", v) or v < 0:
            raise ProtocolError(INVALID_REQUEST, f"produce: {f!r} must be a non-negative "
                                f"integer beside {', '.join(given)}, got {v!r:.64}",
                                msg.get("id"))
    return (msg["producer_id"], msg["producer_epoch"], msg["sequence"])


class ProtocolError(ValueError):
    """A request that cannot be served; `code` goes into the error reply."""

    def __init__(self, code: str, message: str, request_id: int | None = None,
                 extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id
        self.extra = dict(extra or {})  # more reply fields, e.g. NOT_CONTROLLER's hint


class FrameTooLarge(ProtocolError):
    """A length prefix over the limit: the connection is closed (the stream cannot resync)."""


def encode_frame(msg: Mapping[str, Any]) -> bytes:
    body = dumps(msg)
    return HEADER.pack(len(body)) + body


class FrameDecoder:
    """Incremental splitter of a byte stream into frame bodies."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Bodies of every frame completed by `data`; raises FrameTooLarge."""
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= HEADER.size:
            (n,) = HEADER.unpack_from(self._buf)
            if n > self.max_frame_bytes:
                raise FrameTooLarge(INVALID_REQUEST,
                                    f"frame of {n} bytes exceeds {self.max_frame_bytes}")
            if len(self._buf) < HEADER.size + n:
                break
            out.append(bytes(self._buf[HEADER.size:HEADER.size + n]))
            del self._buf[:HEADER.size + n]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)


def _check(kind: str, v: Any) -> bool:
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool) and -INT64_MAX <= v <= INT64_MAX
    if kind == "str":
        return isinstance(v, str)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "list":
        return isinstance(v, list)
    if kind == "dict":
        return isinstance(v, dict)
    if kind == "strs":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if kind == "acks":
        return v in ACKS
    raise AssertionError(kind)  # pragma: no cover


def decode_request(body: bytes) -> dict[str, Any]:
    """One frame body -> a validated request dict; raises ProtocolError naming the problem."""
    try:
        msg = loads(body)
    except DECODE_ERRORS as e:
        raise ProtocolError(INVALID_REQUEST, f"not JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(INVALID_REQUEST, "a request must be a JSON object")
    rid = msg.get("id")
    if not _check("int", rid):
        raise ProtocolError(INVALID_REQUEST, "request field 'id' must be an integer")
    rtype = msg.get("type")
    if not isinstance(rtype, str):
        raise ProtocolError(INVALID_REQUEST, "request field 'type' must be a string", rid)
    schema = SCHEMAS.get(rtype)
    if schema is None:
        raise ProtocolError(UNSUPPORTED, f"unknown request type {rtype[:64]!r}", rid)
    for name, kind in schema.items():
        if name not in msg:
            raise ProtocolError(INVALID_REQUEST, f"{rtype}: missing field {name!r}", rid)
        if not _check(kind, msg[name]):
            raise ProtocolError(INVALID_REQUEST,
                                f"{rtype}: field {name!r} must be {kind}, got {msg[name]!r:.64}",
                                rid)
    return msg


def decode_response(body: bytes) -> dict[str, Any]:
    """A broker's reply; raises ProtocolError when it is not a JSON object with an id."""
    try:
        msg = loads(body)
    except DECODE_ERRORS as e:
        raise ProtocolError(INVALID_REQUEST, f"reply is not JSON: {e}") from None
    if not isinstance(msg, dict) or not (msg.get("id") is None or _check("int", msg["id"])):
        raise ProtocolError(INVALID_REQUEST, "reply must be a JSON object with an integer id")
    if msg.get("id") is None and not msg.get("error"):
        raise ProtocolError(INVALID_REQUEST, "only an error reply may have a null id")
    return msg


def error_reply(request_id: int | None, code: str, message: str) -> dict[str, Any]:
    return {"id": request_id, "error": code, "message": message}
