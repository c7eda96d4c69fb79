"""The in-memory replicated log: a snapshot prefix plus contiguous entries, with epoch lookups."""

from __future__ import annotations

from .messages import Entry, OffsetAndEpoch, Snapshot


class RaftLog:
    """Entries [start_offset, end_offset); everything before start_offset is in `snapshot`."""

    def __init__(
        self, snapshot: Snapshot | None = None, entries: list[Entry] | None = None
    ) -> None:
        self.snapshot = snapshot
        self.entries: list[Entry] = list(entries or [])
        if self.entries and self.entries[0].offset != self.start_offset:
            raise ValueError(
                f"log entries start at {self.entries[0].offset}, expected {self.start_offset}"
            )
        for prev, cur in zip(self.entries, self.entries[1:], strict=False):
            if cur.offset != prev.offset + 1 or cur.epoch < prev.epoch:
                raise ValueError(f"log entries not contiguous/ordered at offset {cur.offset}")

    @property
    def start_offset(self) -> int:
        return 0 if self.snapshot is None else self.snapshot.end_offset

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.epoch_before(self.end_offset)

    def epoch_before(self, offset: int) -> int:
        """Epoch of the entry at offset-1 (0 before the first entry); offset in [start, end]."""
        if offset == self.start_offset:
            return 0 if self.snapshot is None else self.snapshot.epoch
        return self.entries[offset - 1 - self.start_offset].epoch

    def entry(self, offset: int) -> Entry:
        return self.entries[offset - self.start_offset]

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        i = offset - self.start_offset
        return tuple(self.entries[i : i + max_entries])

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch E <= `epoch` in this log and the end of E's entries (KRaft's lookup).

        Epoch -1 with the log's start offset when no entry (nor the snapshot) has an epoch <= epoch.
        """
        for i in range(len(self.entries) - 1, -1, -1):
            e = self.entries[i]
            if e.epoch <= epoch:
                return OffsetAndEpoch(e.offset + 1, e.epoch)
        if self.snapshot is not None and self.snapshot.epoch <= epoch:
            return OffsetAndEpoch(self.snapshot.end_offset, self.snapshot.epoch)
        return OffsetAndEpoch(self.start_offset, 0 if self.snapshot is None else -1)

    def append(self, entries: tuple[Entry, ...] | list[Entry]) -> None:
        for e in entries:
            if e.offset != self.end_offset:
                raise ValueError(f"append at offset {e.offset}, log ends at {self.end_offset}")
            self.entries.append(e)

    def truncate(self, end_offset: int) -> None:
        """Drop entries at and after end_offset (never into the snapshot)."""
        end_offset = max(end_offset, self.start_offset)
        del self.entries[end_offset - self.start_offset :]

    def compact(self, snapshot: Snapshot) -> None:
        """Replace the prefix [0, snapshot.end_offset) by the snapshot; keep a matching suffix."""
        keep: list[Entry] = []
        end = snapshot.end_offset
        if self.start_offset < end <= self.end_offset and self.epoch_before(end) == snapshot.epoch:
            keep = self.entries[end - self.start_offset :]
        elif end <= self.start_offset:
            return
        self.snapshot = snapshot
        self.entries = keep
