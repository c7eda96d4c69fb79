"""The controller quorum: Raft over the metadata log, shaped like KRaft (see README.md)."""

from .core import NotLeaderError, Outbound, RaftConfig, RaftNode, Ready, Role
from .messages import Entry, Message, OffsetAndEpoch, Snapshot, from_dict, to_dict
from .storage import FileStorage, MemoryStorage, Persisted, Storage

__all__ = [
    "Entry", "FileStorage", "MemoryStorage", "Message", "NotLeaderError", "OffsetAndEpoch",
    "Outbound", "Persisted", "RaftConfig", "RaftNode", "Ready", "Role", "Snapshot", "Storage",
    "from_dict", "to_dict",
]
