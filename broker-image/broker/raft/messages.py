"""Raft (KRaft-shaped) data and messages, and their plain-dict (JSON-able) encoding.

Offsets start at 0; an epoch is KRaft's name for a Raft term. Records are opaque
JSON-able values: the quorum never looks inside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One record of the metadata log; `control` marks the quorum's own LeaderChange records."""

    offset: int
    epoch: int
    record: object
    control: bool = False


@dataclass(frozen=True)
class OffsetAndEpoch:
    """A log position: `offset` is exclusive (an end offset), `epoch` that of the entry before."""

    offset: int
    epoch: int


@dataclass(frozen=True)
class Snapshot:
    """The state after applying offsets [0, end_offset); `epoch` is that of entry end_offset-1."""

    end_offset: int
    epoch: int
    state: object


@dataclass(frozen=True)
class VoteRequest:
    """`pre_vote` (KIP-996): would you vote for me at `epoch`? Nobody's state changes."""

    epoch: int
    candidate: str
    last_epoch: int
    log_end: int
    pre_vote: bool = False


@dataclass(frozen=True)
class VoteResponse:
    epoch: int
    granted: bool
    leader: str | None = None
    pre_vote: bool = False


@dataclass(frozen=True)
class BeginQuorumEpoch:
    """Sent by a new leader to every voter until it fetches: who leads this epoch."""

    epoch: int
    leader: str


@dataclass(frozen=True)
class FetchRequest:
    """A follower (or observer) pulls from `fetch_offset`; the offset also acknowledges its log."""

    epoch: int
    replica: str
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class FetchResponse:
    """Records, or a diverging-epoch hint to truncate to, or the snapshot to fetch instead.

    `error` is None or one of NOT_LEADER / FENCED_EPOCH (then `leader` is a hint). The
    request's fetch position is echoed so that a late or duplicated response is recognised.
    """

    epoch: int
    leader: str | None
    error: str | None
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    entries: tuple[Entry, ...] = ()
    diverging: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None


@dataclass(frozen=True)
class FetchSnapshotRequest:
    epoch: int
    replica: str
    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True)
class FetchSnapshotResponse:
    epoch: int
    leader: str | None
    error: str | None
    snapshot: Snapshot | None


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpoch
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)

_TYPES: dict[str, type] = {
    "Vote": VoteRequest,
    "VoteResponse": VoteResponse,
    "BeginQuorumEpoch": BeginQuorumEpoch,
    "Fetch": FetchRequest,
    "FetchResponse": FetchResponse,
    "FetchSnapshot": FetchSnapshotRequest,
    "FetchSnapshotResponse": FetchSnapshotResponse,
}
_NAMES: dict[type, str] = {cls: name for name, cls in _TYPES.items()}


class MessageError(ValueError):
    """A Raft message dict that cannot be decoded; the text names the field."""


def entry_to_dict(e: Entry) -> dict[str, Any]:
    return {"offset": e.offset, "epoch": e.epoch, "record": e.record, "control": e.control}


def snapshot_to_dict(s: Snapshot) -> dict[str, Any]:
    return {"end_offset": s.end_offset, "epoch": s.epoch, "state": s.state}


def _oe(v: OffsetAndEpoch | None) -> dict[str, int] | None:
    return None if v is None else {"offset": v.offset, "epoch": v.epoch}


def to_dict(msg: Message) -> dict[str, Any]:
    """Encode a message as a JSON-able dict with a "type" key."""
    out: dict[str, Any] = {"type": _NAMES[type(msg)]}
    for key, value in vars(msg).items():
        if isinstance(value, OffsetAndEpoch):
            out[key] = _oe(value)
        elif isinstance(value, Snapshot):
            out[key] = snapshot_to_dict(value)
        elif key == "entries":
            out[key] = [entry_to_dict(e) for e in value]
        else:
            out[key] = value
    return out


def _int(d: dict[str, Any], key: str, where: str) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise MessageError(f"{where}: field {key!r} must be an integer, got {v!r}")
    return v


def _str(d: dict[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    v = d.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise MessageError(f"{where}: field {key!r} must be a string, got {v!r}")
    return v


def _bool(d: dict[str, Any], key: str, where: str, *, default: bool | None = None) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise MessageError(f"{where}: field {key!r} must be a boolean, got {v!r}")
    return v


def _dict(v: object, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise MessageError(f"{where}: expected an object, got {v!r}")
    return v


def entry_from_dict(d: object, where: str = "entry") -> Entry:
    m = _dict(d, where)
    control = m.get("control", False)
    if not isinstance(control, bool):
        raise MessageError(f"{where}: field 'control' must be a boolean")
    return Entry(_int(m, "offset", where), _int(m, "epoch", where), m.get("record"), control)


def snapshot_from_dict(d: object, where: str = "snapshot") -> Snapshot:
    m = _dict(d, where)
    return Snapshot(_int(m, "end_offset", where), _int(m, "epoch", where), m.get("state"))


def _oe_from(d: object, where: str) -> OffsetAndEpoch | None:
    if d is None:
        return None
    m = _dict(d, where)
    return OffsetAndEpoch(_int(m, "offset", where), _int(m, "epoch", where))


def from_dict(d: object) -> Message:
    """Decode what to_dict produced; raises MessageError naming the bad field."""
    m = _dict(d, "raft message")
    kind = m.get("type")
    w = f"raft message {kind!r}"
    if kind == "Vote":
        return VoteRequest(_int(m, "epoch", w), _str(m, "candidate", w),
                           _int(m, "last_epoch", w), _int(m, "log_end", w),
                           _bool(m, "pre_vote", w, default=False))
    if kind == "VoteResponse":
        return VoteResponse(_int(m, "epoch", w), _bool(m, "granted", w),
                            _str(m, "leader", w, optional=True),
                            _bool(m, "pre_vote", w, default=False))
    if kind == "BeginQuorumEpoch":
        return BeginQuorumEpoch(_int(m, "epoch", w), _str(m, "leader", w))
    if kind == "Fetch":
        return FetchRequest(_int(m, "epoch", w), _str(m, "replica", w),
                            _int(m, "fetch_offset", w), _int(m, "last_fetched_epoch", w))
    if kind == "FetchResponse":
        raw = m.get("entries", [])
        if not isinstance(raw, list):
            raise MessageError(f"{w}: field 'entries' must be a list")
        return FetchResponse(
            _int(m, "epoch", w), _str(m, "leader", w, optional=True),
            _str(m, "error", w, optional=True), _int(m, "fetch_offset", w),
            _int(m, "last_fetched_epoch", w), _int(m, "high_watermark", w),
            tuple(entry_from_dict(e, f"{w} entry {i}") for i, e in enumerate(raw)),
            _oe_from(m.get("diverging"), f"{w} diverging"),
            _oe_from(m.get("snapshot_id"), f"{w} snapshot_id"),
        )
    if kind == "FetchSnapshot":
        sid = _oe_from(m.get("snapshot_id"), f"{w} snapshot_id")
        if sid is None:
            raise MessageError(f"{w}: field 'snapshot_id' is required")
        return FetchSnapshotRequest(_int(m, "epoch", w), _str(m, "replica", w), sid)
    if kind == "FetchSnapshotResponse":
        snap = m.get("snapshot")
        return FetchSnapshotResponse(
            _int(m, "epoch", w), _str(m, "leader", w, optional=True),
            _str(m, "error", w, optional=True),
            None if snap is None else snapshot_from_dict(snap, f"{w} snapshot"),
        )
    raise MessageError(f"raft message: unknown type {kind!r} (expected one of {sorted(_TYPES)})")
