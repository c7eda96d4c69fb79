"""One replica's replication state: leader side (follower LEOs, HW, ISR, produce waiters)
and follower side (HW from the leader, truncation on becoming follower)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .config import Settings
from .log import PartitionLog, Record, Value
from .metadata import PartitionMeta
from .producers import Tag
from .protocol import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_REQUEST,
    LEADER_CHANGED_AFTER_APPEND,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER,
    OFFSET_OUT_OF_RANGE,
    REQUEST_TIMED_OUT,
    STALE_STATE,
    UNKNOWN_LEADER_EPOCH,
    ProtocolError,
)


@dataclass(slots=True)
class FollowerState:
    leo: int = -1                  # unknown until its first fetch under this leader
    caught_up_ms: int = 0          # last time it was known to be at the leader's LEO
    last_fetch_ms: int = 0
    leo_at_last_fetch: int = 0     # the leader's LEO when it last fetched
    parked_at: int | None = None   # fetch offset of its long poll waiting here, if any


# Completion callback of a produce: (offset, None) or (None, error).
Done = Callable[[int | None, ProtocolError | None], None]


@dataclass(slots=True)
class Waiter:
    """An acks=all produce waiting for the HW to pass its offset."""

    offset: int
    deadline_s: float          # event-loop time
    done: Done


@dataclass
class Partition:
    node: str
    pid: int
    log: PartitionLog
    settings: Settings
    meta: PartitionMeta | None = None
    role: str = "none"                       # leader | follower | none
    followers: dict[str, FollowerState] = field(default_factory=dict)
    waiters: deque[Waiter] = field(default_factory=deque)   # in offset order
    # queued produces: value, producer tag, transactional, completion
    pending: list[tuple[Value, Tag | None, bool, Done]] = field(default_factory=list)
    needs_epoch_truncation: bool = False
    isr_change_inflight: bool = False
    hw_checkpointed: int = -1
    # An ISR change sent to the controller whose outcome is not known yet (Kafka's pending
    # AlterPartition). Until it is, the HW counts every replica of the committed ISR and of
    # the proposed one (Kafka's "maximal ISR"): a replica the controller may be adding must
    # never be behind the HW, or once it is in the ISR it could be elected without records
    # that were acknowledged. A shrink needs no such care: the committed ISR is the larger.
    pending_isr: tuple[str, ...] | None = None
    pending_base_epoch: int = -1       # the partition epoch the proposal was made against
    pending_maybe_applied: bool = False  # a send got no answer: the controller may have it

    # -- roles -------------------------------------------------------------------
    @property
    def leader_epoch(self) -> int:
        return self.meta.leader_epoch if self.meta else -1

    @property
    def isr(self) -> tuple[str, ...]:
        return self.meta.isr if self.meta else ()

    @property
    def maximal_isr(self) -> tuple[str, ...]:
        """The committed ISR plus any replica a pending change may add: what the HW waits for."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    # -- ISR changes in flight -----------------------------------------------------
    def propose_isr(self, isr: tuple[str, ...]) -> tuple[str, ...]:
        """Record an ISR change about to be sent; returns what to send. While an earlier
        proposal may have been applied, that one is sent again (never a different one),
        so the maximal ISR always covers what the controller may hold."""
        if self.pending_isr is not None and self.pending_maybe_applied:
            return self.pending_isr
        self.pending_isr = isr
        self.pending_base_epoch = self.meta.partition_epoch if self.meta else -1
        return isr

    def isr_change_unknown(self) -> None:
        """The send got no answer (or one that settles nothing): it may have been applied;
        keep it until we know."""
        self.pending_maybe_applied = True

    def isr_change_failed(self, code: str) -> None:
        """The controller answered with an error. Only a refusal proves nothing of ours was
        applied: INVALID_REQUEST and INELIGIBLE_REPLICA were checked against our base epoch
        before anything was proposed, and so was STALE_STATE, unless an earlier send that
        got no answer may be why the epoch moved (then the metadata will say). Any other
        answer settles nothing (Kafka's leader keeps its pending AlterPartition and sends it
        again): REQUEST_TIMED_OUT means the controller's commit outlived its wait and may
        still go through, NOT_CONTROLLER sends us to the active one, an unknown error is
        unknown. Such a change stays pending, its outcome unknown, and is sent again."""
        if code not in (INVALID_REQUEST, INELIGIBLE_REPLICA, STALE_STATE):
            self.isr_change_unknown()
            return
        if self.pending_maybe_applied and code == STALE_STATE:
            return
        self._clear_pending()

    def _clear_pending(self) -> None:
        self.pending_isr, self.pending_base_epoch, self.pending_maybe_applied = None, -1, False

    def _resolve_pending(self, meta: PartitionMeta) -> None:
        """A newer partition state settles a pending change: applied or not, it is in there
        (and a proposal against an older epoch can no longer be applied)."""
        if self.pending_isr is not None and meta.partition_epoch > self.pending_base_epoch:
            self._clear_pending()

    def become_leader(self, meta: PartitionMeta, now_ms: int) -> None:
        self.meta = meta
        self._clear_pending()  # a proposal of an earlier leadership names an old leader epoch
        self.role = "leader"
        self.needs_epoch_truncation = False
        self.log.assign_epoch(meta.leader_epoch, self.log.leo)
        self.followers = {r: FollowerState(caught_up_ms=now_ms, last_fetch_ms=now_ms)
                          for r in meta.replicas if r != self.node}
        self.maybe_advance_hw()

    def become_follower(self, meta: PartitionMeta) -> list[str]:
        """Returns log lines about truncation."""
        self.meta = meta
        self.role = "follower" if meta.leader else "none"
        self._clear_pending()
        self._fail_waiters(LEADER_CHANGED_AFTER_APPEND,
                           "leadership moved before the write committed")
        self.followers = {}
        if meta.leader is None:
            return []
        if self.settings.truncation == "hw":
            dropped = self.log.truncate(self.log.hw)
            if not dropped:
                return []
            return [f"p{self.pid}: truncated to hw {self.log.hw} ({dropped} dropped)"]
        self.needs_epoch_truncation = True
        return []

    def update_meta(self, meta: PartitionMeta) -> None:
        """Same leader and epoch, new ISR (from the controller)."""
        if self.meta is None or meta.partition_epoch >= self.meta.partition_epoch:
            self.meta = meta
        self._resolve_pending(meta)
        if self.role == "leader":
            self.maybe_advance_hw()

    def _fail_waiters(self, code: str, message: str) -> None:
        waiters, self.waiters = self.waiters, deque()
        for w in waiters:
            w.done(None, ProtocolError(code, message))
        pending, self.pending = self.pending, []
        for _v, _t, _x, done in pending:
            done(None, ProtocolError(NOT_LEADER, "no longer the leader"))

    # -- leader: produce --------------------------------------------------------
    def check_produce(self, acks: str) -> None:
        if self.role != "leader":
            raise ProtocolError(NOT_LEADER, f"{self.node} does not lead partition {self.pid}")
        if acks == "all" and len(self.isr) < self.settings.min_insync_replicas:
            raise ProtocolError(NOT_ENOUGH_REPLICAS,
                                f"isr {list(self.isr)} is smaller than min.insync.replicas "
                                f"{self.settings.min_insync_replicas}")

    def append_pending(self) -> int:
        """Write every queued produce in one append (the leader's batching); returns the count
        appended. An idempotent producer's record that the log already holds is answered
        with its offset and not written again; one out of sequence is refused."""
        batch, self.pending = self.pending, []
        if not batch:
            return 0
        if self.role != "leader":
            for _v, _t, _x, done in batch:
                done(None, ProtocolError(NOT_LEADER, "no longer the leader"))
            return 0
        entries: list[tuple[int, Value]] = []
        tags: list[Tag | None] = []
        txns: list[bool] = []
        dones: list[Done] = []
        producers: set[int] = set()  # producer ids with a record in `entries`
        appended = 0

        def write() -> None:
            nonlocal appended
            first = self.log.append(entries, tags, txns)
            for i, done in enumerate(dones):
                done(first + i, None)
            appended += len(entries)
            entries.clear()
            tags.clear()
            txns.clear()
            dones.clear()
            producers.clear()

        for value, tag, txn, done in batch:
            if tag is not None:
                if tag[0] in producers:
                    write()  # its producer's earlier record of this batch goes in first
                try:
                    original = self.log.producers.check(tag)
                except ProtocolError as e:
                    done(None, e)
                    continue
                if original is not None:
                    done(original, None)
                    continue
            entries.append((self.leader_epoch, value))
            tags.append(tag)
            txns.append(txn)
            dones.append(done)
            if tag is not None:
                producers.add(tag[0])
            elif isinstance(value, str):
                write()  # a transaction marker fences older epochs for the records after it
        write()
        self.maybe_advance_hw()
        return appended

    @property
    def lso(self) -> int:
        """The last stable offset: where a read_committed fetch stops (log/txnindex.py)."""
        return self.log.txn_index.lso(self.log.hw)

    def wait_committed(self, offset: int, deadline_s: float, done: Done) -> None:
        """Call `done` once the HW passes `offset` (or with an error at the deadline)."""
        if self.log.hw > offset:
            done(offset, self._isr_after_append())
            return
        w = Waiter(offset, deadline_s, done)
        i = len(self.waiters)
        while i and self.waiters[i - 1].offset > offset:  # a resend of an older record
            i -= 1
        self.waiters.insert(i, w)

    def expire_waiters(self, now_s: float) -> None:
        if not self.waiters or all(w.deadline_s > now_s for w in self.waiters):
            return
        keep: deque[Waiter] = deque()
        for w in self.waiters:
            if w.deadline_s <= now_s:
                w.done(None, ProtocolError(REQUEST_TIMED_OUT, f"offset {w.offset} not "
                                           f"committed in time (hw {self.log.hw})"))
            else:
                keep.append(w)
        self.waiters = keep

    def _isr_after_append(self) -> ProtocolError | None:
        if len(self.isr) < self.settings.min_insync_replicas:
            return ProtocolError(NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                 f"committed with isr {list(self.isr)} below min.insync.replicas")
        return None

    def maybe_advance_hw(self) -> bool:
        if self.role != "leader":
            return False
        new_hw = self.log.leo
        for r in self.maximal_isr:
            if r != self.node:
                f = self.followers.get(r)
                new_hw = min(new_hw, f.leo if f else -1)
        if new_hw <= self.log.hw:
            return False
        self.log.hw = new_hw
        w = self.waiters
        while w and w[0].offset < new_hw:
            first = w.popleft()
            first.done(first.offset, self._isr_after_append())
        return True

    # -- leader: follower fetches ----------------------------------------------
    def check_leader_epoch(self, epoch: int) -> None:
        """A follower's request names the leader epoch it follows; refuse any other (KIP-320)."""
        if self.role != "leader":
            raise ProtocolError(NOT_LEADER, f"{self.node} does not lead partition {self.pid}")
        if epoch < self.leader_epoch:
            raise ProtocolError(FENCED_LEADER_EPOCH, f"epoch {epoch} < {self.leader_epoch}")
        if epoch > self.leader_epoch:
            raise ProtocolError(UNKNOWN_LEADER_EPOCH, f"epoch {epoch} > {self.leader_epoch}")

    def on_follower_fetch(self, follower: str, epoch: int, fetch_offset: int, now_ms: int,
                          limit: int) -> tuple[list[Record], str | None]:
        """Record the follower's LEO, move the HW; returns records from fetch_offset on."""
        self.check_leader_epoch(epoch)
        f = self.followers.get(follower)
        if f is None:
            raise ProtocolError(NOT_LEADER, f"{follower} is not a replica of {self.pid}")
        leo = self.log.leo
        if fetch_offset > leo:
            raise ProtocolError(OFFSET_OUT_OF_RANGE, f"fetch offset {fetch_offset} > leo {leo}")
        if fetch_offset >= leo:
            f.caught_up_ms = now_ms
        elif fetch_offset >= f.leo_at_last_fetch:
            f.caught_up_ms = max(f.caught_up_ms, f.last_fetch_ms)
        f.leo, f.last_fetch_ms, f.leo_at_last_fetch = fetch_offset, now_ms, leo
        self.maybe_advance_hw()
        want = None
        if (follower not in self.isr and fetch_offset >= self.log.hw
                and fetch_offset >= self._epoch_start()):
            want = "expand"
        return self.log.read(fetch_offset, limit), want

    def park(self, follower: str, fetch_offset: int | None) -> None:
        """A follower's fetch at `fetch_offset` waits here (None: it returned). While it waits
        at our LEO the follower is caught up, however long the poll (lag checks see that)."""
        f = self.followers.get(follower)
        if f is not None:
            f.parked_at = fetch_offset

    def still_caught_up(self, follower: str, fetch_offset: int, now_ms: int) -> None:
        """After a long poll that found nothing new: the follower was at our LEO all along."""
        f = self.followers.get(follower)
        if f is not None and self.role == "leader" and fetch_offset >= self.log.leo:
            f.caught_up_ms = max(f.caught_up_ms, now_ms)

    def _epoch_start(self) -> int:
        for e, s in self.log.epoch_cache:
            if e == self.leader_epoch:
                return s
        return 0

    def lagging(self, now_ms: int) -> list[str]:
        lag = self.settings.replica_lag_time_max_ms
        leo = self.log.leo
        out = []
        for r in self.isr:
            f = self.followers.get(r)
            if r == self.node or f is None or now_ms - f.caught_up_ms <= lag:
                continue
            if f.parked_at is not None and f.parked_at >= leo:
                continue  # its long poll waits at our LEO: caught up now
            out.append(r)
        return out

    # -- follower ----------------------------------------------------------------
    def apply_fetched(self, records: list[list[Any]], leader_hw: int) -> int:
        """Append a leader's records ([offset, epoch, value], then the producer tag when there
        is one, then 1 when it is transactional); follower HW = min(leader HW, LEO)."""
        if records and records[0][0] == self.log.leo:
            run: list[tuple[int, Value]] = []
            tags: list[Tag | None] = []
            txns: list[bool] = []
            for rec in records:
                off, ep, val = rec[0], rec[1], rec[2]
                if off != self.log.leo + len(run):
                    break
                if ep > self.log.latest_epoch:
                    if run:
                        self.log.append(run, tags, txns)
                        run, tags, txns = [], [], []
                    self.log.assign_epoch(ep, off)
                run.append((ep, val))
                tags.append((rec[3], rec[4], rec[5]) if len(rec) >= 6 else None)
                txns.append(len(rec) == 7 and bool(rec[6]))
            self.log.append(run, tags, txns)
        self.log.hw = min(leader_hw, self.log.leo)
        return len(records)

    def local_view(self) -> dict[str, Any]:
        view: dict[str, Any]
        view = {"hw": self.log.hw, "leo": self.log.leo, "leader_epoch": self.leader_epoch,
                "role": self.role}
        if self.role == "leader":
            view["isr"] = list(self.isr)
            if self.pending_isr is not None:
                view["pending_isr"] = list(self.pending_isr)
                view["pending_unknown"] = self.pending_maybe_applied
        return view

