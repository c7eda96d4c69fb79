"""Raft's durable state on disk and its messages on the wire."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from broker.raft.messages import (
    Entry,
    FetchResponse,
    FetchSnapshotResponse,
    MessageError,
    OffsetAndEpoch,
    Snapshot,
    VoteRequest,
    from_dict,
    to_dict,
)
from broker.raft.storage import (
    AppendEntries,
    FileStorage,
    MemoryStorage,
    Persisted,
    PersistOp,
    SaveQuorumState,
    SaveSnapshot,
    StorageError,
    TruncateLog,
)

OPS: tuple[PersistOp, ...] = (
    SaveQuorumState(3, "b", None),
    AppendEntries((Entry(0, 1, {"a": 1}, True), Entry(1, 2, [1, 2]), Entry(2, 2, "x"))),
    TruncateLog(2),
    AppendEntries((Entry(2, 3, None),)),
    SaveSnapshot(Snapshot(1, 1, {"state": [1]})),
    SaveQuorumState(3, "b", "b"),
)
EXPECTED = Persisted(3, "b", "b", Snapshot(1, 1, {"state": [1]}),
                     (Entry(1, 2, [1, 2]), Entry(2, 3, None)))


def test_file_storage_survives_reopen_and_agrees_with_memory(tmp_path: Path) -> None:
    fs = FileStorage(tmp_path / "raft")
    fs.load()
    fs.apply(OPS)
    mem = MemoryStorage()
    mem.apply(OPS)
    assert mem.load() == EXPECTED
    assert FileStorage(tmp_path / "raft").load() == EXPECTED


def test_a_torn_last_log_line_is_dropped(tmp_path: Path) -> None:
    fs = FileStorage(tmp_path)
    fs.apply((AppendEntries((Entry(0, 1, "a"), Entry(1, 1, "b"))),))
    with open(fs.log_path, "ab") as f:
        f.write(b'{"offset": 2, "epo')
    loaded = FileStorage(tmp_path).load()
    assert [e.offset for e in loaded.entries] == [0, 1]
    FileStorage(tmp_path).apply((AppendEntries((Entry(2, 1, "c"),)),))
    assert [e.record for e in FileStorage(tmp_path).load().entries] == ["a", "b", "c"]


def test_corrupt_state_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "quorum-state.json").write_text("{not json")
    with pytest.raises(StorageError, match=r"quorum-state\.json"):
        FileStorage(tmp_path).load()


def test_messages_round_trip_through_json() -> None:
    for msg in (
        VoteRequest(4, "n1", 3, 17),
        FetchResponse(4, "n1", None, 10, 3, 9, (Entry(10, 4, {"x": [1]}),),
                      OffsetAndEpoch(8, 2), None),
        FetchSnapshotResponse(4, "n1", None, Snapshot(5, 2, {"s": 1})),
    ):
        assert from_dict(json.loads(json.dumps(to_dict(msg)))) == msg


@pytest.mark.parametrize(("bad", "needle"), [
    ({"type": "Vote", "epoch": "1", "candidate": "a", "last_epoch": 0, "log_end": 0}, "'epoch'"),
    ({"type": "Nope"}, "unknown type"),
    ([], "expected an object"),
    ({"type": "FetchResponse", "epoch": 1, "leader": None, "error": None, "fetch_offset": 0,
      "last_fetched_epoch": 0, "high_watermark": 0, "entries": [{"offset": 0}]}, "entry 0"),
])
def test_bad_messages_get_a_clear_error(bad: object, needle: str) -> None:
    with pytest.raises(MessageError, match=needle):
        from_dict(bad)
