"""One replica's view of the transactions in its log: open ones and aborted ranges.

Pure, and a function of the log: it follows every append (leader and follower
alike) and is rebuilt from the log on load and after a truncation, so a new
leader knows what its log holds.

A transactional producer's records carry a flag in the log. Its first record in
this partition opens its transaction here; the control marker the coordinator
writes at commit or abort (a record whose value is `marker_value(...)`) closes
it. The last stable offset (LSO) is the first offset of the oldest open
transaction, or the HW if it is lower: a read_committed fetch stops there. An
abort marker leaves the range [first record, marker] of that producer aborted
(Kafka's aborted-transaction index), so a read_committed fetch skips its records.
Markers are never records to a consumer: their offsets are gaps.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

MARKER = "marker"


def marker_value(producer_id: int, producer_epoch: int, commit: bool) -> str:
    """A control marker as a log value (one line of JSON)."""
    return json.dumps({MARKER: "commit" if commit else "abort", "producer_id": producer_id,
                       "producer_epoch": producer_epoch}, separators=(",", ":"))


def parse_marker(value: Any) -> tuple[int, int, bool] | None:
    """(producer id, producer epoch, commit) of a marker value; None for anything else."""
    if not isinstance(value, str) or f'"{MARKER}"' not in value:
        return None
    try:
        rec = json.loads(value)
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get(MARKER) not in ("commit", "abort"):
        return None
    return int(rec["producer_id"]), int(rec["producer_epoch"]), rec[MARKER] == "commit"


@dataclass
class TxnIndex:
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset here
    # aborted transactions as (marker offset, producer id, first offset), by marker offset
    aborted: list[tuple[int, int, int]] = field(default_factory=list)

    def observe(self, offset: int, value: Any, producer_id: int | None, txn: bool) -> None:
        """The record at `offset` was appended."""
        if txn and producer_id is not None:
            self.open.setdefault(producer_id, offset)
            return
        m = parse_marker(value)
        if m is None:
            return
        pid, _epoch, commit = m
        first = self.open.pop(pid, None)
        if first is not None and not commit:
            self.aborted.append((offset, pid, first))

    def rebuild(self, records: Iterable[tuple[int, Any, int | None, bool]]) -> None:
        """From (offset, value, producer id, transactional) of every record, in order."""
        self.open, self.aborted = {}, []
        for offset, value, pid, txn in records:
            self.observe(offset, value, pid, txn)

    def lso(self, hw: int) -> int:
        """The last stable offset: nothing at or after it is known committed or aborted."""
        return min([hw, *self.open.values()])

    def aborted_from(self, start: int) -> dict[int, list[tuple[int, int]]]:
        """producer id -> its aborted [first, marker] ranges that end at or after `start`."""
        i = bisect.bisect_left(self.aborted, (start, -1, -1))
        out: dict[int, list[tuple[int, int]]] = {}
        for end, pid, first in self.aborted[i:]:
            out.setdefault(pid, []).append((first, end))
        return out


def is_aborted(ranges: dict[int, list[tuple[int, int]]], producer_id: int, offset: int) -> bool:
    return any(a <= offset <= b for a, b in ranges.get(producer_id, ()))
