"""The idempotent producer's state on one replica: each producer's epoch and last sequences.

A produce from an idempotent producer carries its producer id (handed out by the
controller, recorded in the metadata log), its producer epoch and a sequence
number per partition, 0, 1, 2, ... Every record keeps its (id, epoch, sequence)
in the log, so this state is a function of the log: it follows every append
(leader and follower alike) and is rebuilt from the log on restart and after a
truncation, hence a new leader holds what its log holds. As Kafka's leader does,
it drops a resent record it already has (answering with the original offset),
refuses a sequence that is not the next one (OUT_OF_ORDER_SEQUENCE_NUMBER) and an
epoch older than the producer's latest (INVALID_PRODUCER_EPOCH). A transaction's
control marker carries the epoch its coordinator reached, and fences every older
epoch of that producer here, as Kafka's markers do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from .protocol import INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, ProtocolError

# (producer id, producer epoch, sequence) of one record
Tag = tuple[int, int, int]
RECENT = 5  # sequences remembered per producer (Kafka: max.in.flight.requests.per.connection)


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    recent: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=RECENT))
    # (sequence, offset) of its last records in this log, oldest first

    @property
    def last_seq(self) -> int:
        return self.recent[-1][0]


class ProducerStates:
    """producer id -> its entry, for one partition replica."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, tag: Tag) -> int | None:
        """The offset already holding this record (a resend), None when it is the next one
        to append; raises ProtocolError when it must be refused."""
        pid, epoch, seq = tag
        e = self.entries.get(pid)
        if e is None:
            # Nothing of this producer in the log: new, or its records were truncated away
            # (an unsafe setting lost them); either way nothing here can be duplicated.
            return None
        if epoch < e.epoch:
            raise ProtocolError(INVALID_PRODUCER_EPOCH, f"producer {pid}: epoch {epoch} is "
                                f"older than its epoch {e.epoch}")
        if epoch > e.epoch:
            if seq != 0:
                raise ProtocolError(OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer {pid}: a new "
                                    f"epoch {epoch} must start at sequence 0, got {seq}")
            return None
        for s, offset in e.recent:
            if s == seq:
                return offset
        if not e.recent:  # a marker fenced the epochs before this one: it starts afresh
            if seq != 0:
                raise ProtocolError(OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer {pid} epoch "
                                    f"{epoch}: the first sequence must be 0, got {seq}")
            return None
        if seq != e.last_seq + 1:
            raise ProtocolError(OUT_OF_ORDER_SEQUENCE_NUMBER, f"producer {pid} epoch {epoch}: "
                                f"sequence {seq} after {e.last_seq}")
        return None

    def observe(self, tag: Tag, offset: int) -> None:
        """A record of this producer was appended at `offset`."""
        pid, epoch, seq = tag
        e = self.entries.get(pid)
        if e is None or epoch > e.epoch:
            e = self.entries[pid] = ProducerEntry(epoch)
        e.recent.append((seq, offset))

    def fence(self, pid: int, epoch: int) -> None:
        """A control marker of `epoch`: older epochs of the producer are refused from now."""
        e = self.entries.get(pid)
        if e is None or epoch > e.epoch:
            self.entries[pid] = ProducerEntry(epoch)

    def rebuild(self, tags: Iterable[tuple[int, Tag | None]]) -> None:
        """From (offset, tag) of every record of the log, in offset order."""
        self.entries = {}
        for offset, tag in tags:
            if tag is not None:
                self.observe(tag, offset)
