"""Group-level delivery: did the consumer group as a whole read everything it committed past?

With `subscribe`, a rebalance may make one member skip or re-read records, and the
checkers allow `poll-skip` and `nonmonotonic-poll` then (HISTORY.md). What must still
hold, for at-least-once delivery, is that the group as a whole handed on every record
below the position it finally committed: a member that commits records before it
hands them on, then dies, leaves offsets that no member ever returns. This module
states that per key, from history.jsonl alone. It is a report section, not an
anomaly type: the contract names no such anomaly, and `--commit auto` makes it
possible by design; so it lives in the report, which imports nothing of the checkers.

Read from the history:
- *subscribed polls*: polls (any completion) of a process between its `subscribe` and
  its next `assign`; what they returned is what the group read;
- the *final committed positions*: the `committed` map ({"key": offset}) of the last
  completion that carries one (the queue workload's final reads ask the group after
  every member left);
- the *known offsets* of a key: offsets any poll returned (the final reads included)
  and offsets of sends that did not fail (of a transaction, only one that committed:
  an `info` transaction may have been aborted, its records never readable). An offset
  nobody saw is not listed.

With transactions (the txn workload with `subscribe`, whose transactions send the
consumer's positions into themselves: consume, transform, produce), `exactly_once`
says more: per key, every known offset below the final committed position was read
by exactly one committed (`ok`) transaction of the group. An offset read by none
is lost to the exactly-once pipeline (unless a transaction whose commit is unknown
read it: listed apart, as it may have committed); one read by two or more was
processed twice. Also a report section, not an anomaly type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class KeyDelivery:
    key: int
    committed: int             # the group's final committed position
    known_below: int           # known offsets below it
    read_below: int            # of those, read by some subscribed poll
    missing: tuple[int, ...]   # known offsets below it that no member returned


@dataclass(frozen=True, slots=True)
class GroupDelivery:
    committed_index: int | None  # the history line of the final committed positions
    keys: tuple[KeyDelivery, ...]

    @property
    def complete(self) -> bool:
        return self.committed_index is not None and not any(k.missing for k in self.keys)

    @property
    def missing(self) -> int:
        return sum(len(k.missing) for k in self.keys)


def _records(value: Any) -> Iterable[tuple[int, int]]:
    """(key, offset) of every record a poll micro-op returned."""
    for micro in value or ():
        if isinstance(micro, list) and len(micro) > 1 and micro[0] == "poll" \
                and isinstance(micro[1], Mapping):
            for k, rs in micro[1].items():
                for r in rs:
                    yield int(k), int(r[0])


def _sent(value: Any) -> Iterable[tuple[int, int]]:
    for micro in value or ():
        if isinstance(micro, list) and len(micro) == 3 and micro[0] == "send" \
                and isinstance(micro[2], list) and micro[2][0] is not None:
            yield int(micro[1]), int(micro[2][0])


@dataclass(frozen=True, slots=True)
class KeyOnce:
    key: int
    committed: int                          # the group's final committed position
    known_below: int                        # known offsets below it
    once: int                               # of those, read by exactly one committed txn
    unread: tuple[int, ...]                 # read by no committed nor unknown transaction
    uncertain: tuple[int, ...]              # read only by transactions of unknown outcome
    repeated: tuple[tuple[int, int], ...]   # (offset, committed transactions that read it)


@dataclass(frozen=True, slots=True)
class ExactlyOnce:
    committed_index: int | None  # the history line of the final committed positions
    transactions: int            # committed transactions of the group that read records
    keys: tuple[KeyOnce, ...]

    @property
    def holds(self) -> bool:
        return self.committed_index is not None and not any(
            k.unread or k.repeated for k in self.keys)

    @property
    def unread(self) -> int:
        return sum(len(k.unread) for k in self.keys)

    @property
    def repeated(self) -> int:
        return sum(len(k.repeated) for k in self.keys)

    @property
    def uncertain(self) -> int:
        return sum(len(k.uncertain) for k in self.keys)


@dataclass(frozen=True, slots=True)
class Held:
    """A stretch of time over which one process held one assignment of the group."""

    process: int
    start_ns: int
    end_ns: int
    generation: int | None  # None where the system does not say (librdkafka)
    keys: tuple[int, ...]


class _Members:
    """Each subscribed process's stretches of one assignment (see `membership`), one
    operation at a time."""

    __slots__ = ("done", "open")

    def __init__(self) -> None:
        self.done: list[Held] = []
        # process -> start, generation, keys, time of its last operation
        self.open: dict[Any, tuple[int, int | None, tuple[int, ...], int]] = {}

    def _close(self, p: Any, end: int) -> None:
        cur = self.open.pop(p, None)
        if cur is not None and isinstance(p, int):
            self.done.append(Held(p, cur[0], max(end, cur[3]), cur[1], cur[2]))

    def add(self, o: Mapping[str, Any]) -> None:
        """A client operation (never a nemesis one)."""
        p, t = o.get("process"), int(o.get("time") or 0)
        if o.get("type") == "invoke":
            if o.get("f") in ("assign", "subscribe"):
                self._close(p, t)
            return
        if "assignment" not in o:
            if p in self.open:
                start, gen, keys, _ = self.open[p]
                self.open[p] = (start, gen, keys, t)
            return
        g = o.get("generation")
        gen = int(g) if isinstance(g, int) and g >= 0 else None
        keys = tuple(int(k) for k in o.get("assignment") or ())
        cur = self.open.get(p)
        if cur is not None and (cur[1], cur[2]) == (gen, keys):
            self.open[p] = (cur[0], gen, keys, t)
            return
        self._close(p, t)
        if keys:
            self.open[p] = (t, gen, keys, t)

    def held(self) -> list[Held]:
        """The stretches so far; one still open lasts until its process's last operation."""
        out = self.done + [Held(p, start, last, gen, keys)
                           for p, (start, gen, keys, last) in self.open.items()
                           if isinstance(p, int)]
        return sorted(out, key=lambda h: (h.process, h.start_ns))


class GroupFeed:
    """The group views of one history (delivery, exactly-once, membership) fed one line at a
    time, in history order, so that whoever already walks the history (the report's scan)
    drives them from its own pass. Lines before the first `subscribe` are only kept, and
    replayed at it: a history with none (most) costs one append per line."""

    def __init__(self) -> None:
        self._early: list[Mapping[str, Any]] | None = []  # None once a subscribe came
        self._subscribed: set[Any] = set()  # processes in the group now
        self._known: dict[int, set[int]] = {}
        self._committed: Mapping[str, Any] | None = None
        self._committed_index: int | None = None
        self._group_read: dict[int, set[int]] = {}  # key -> offsets a subscribed poll read
        self._any_txn = False
        self._by_ok: dict[tuple[int, int], int] = {}  # (key, offset) -> committed txns
        self._by_info: set[tuple[int, int]] = set()  # read by txns of unknown outcome
        self._transactions = 0  # committed group transactions that read records
        self._members = _Members()

    def add(self, o: Mapping[str, Any]) -> None:
        early = self._early
        if early is None:
            self._step(o)
        elif o.get("f") == "subscribe" and o.get("type") == "invoke" \
                and o.get("process") != "nemesis":
            self._early = None
            for e in early:
                self._step(e)
            self._step(o)
        else:
            early.append(o)

    def _step(self, o: Mapping[str, Any]) -> None:
        """Which process is in the group, what it read, the known offsets of each key and
        the group's final committed positions, as of this line."""
        p, f, typ = o.get("process"), o.get("f"), o.get("type")
        if p == "nemesis":
            return
        self._members.add(o)
        if typ == "invoke":
            if f == "subscribe":
                self._subscribed.add(p)
            elif f == "assign":
                self._subscribed.discard(p)
            return
        c = o.get("committed")
        if isinstance(c, Mapping):
            self._committed, self._committed_index = c, o.get("index")
        value = o.get("value")
        read = set(_records(value))
        # an `info` transaction may have been aborted: its sends are not known offsets
        sent = _sent(value) if typ == "ok" or (typ == "info" and f != "txn") else ()
        known = self._known
        for k, off in (*sent, *read):
            known.setdefault(k, set()).add(off)
        if p not in self._subscribed:
            return
        for k, off in read:
            self._group_read.setdefault(k, set()).add(off)
        if f != "txn":
            return
        self._any_txn = True
        if typ == "ok":
            self._transactions += bool(read)
            for kv in read:
                self._by_ok[kv] = self._by_ok.get(kv, 0) + 1
        elif typ == "info":
            self._by_info |= read

    def _positions(self) -> Iterator[tuple[int, int, list[int]]]:
        """Per key of the final committed positions, in key order: the key, its position
        and the known offsets below it, sorted."""
        for ks, pos in sorted((self._committed or {}).items(), key=lambda kv: int(kv[0])):
            k, pos = int(ks), int(pos)
            yield k, pos, sorted(x for x in self._known.get(k, ()) if x < pos)

    def delivery(self) -> GroupDelivery | None:
        """Per key, what the group read below its final committed position; None when the
        history holds no `subscribe`."""
        if self._early is not None:
            return None
        rows = []
        for k, pos, below in self._positions():
            if pos <= 0:
                continue  # nothing below it to have read
            got = self._group_read.get(k, set())
            missing = tuple(x for x in below if x not in got)
            rows.append(KeyDelivery(k, pos, len(below), len(below) - len(missing), missing))
        return GroupDelivery(self._committed_index, tuple(rows))

    def exactly_once(self) -> ExactlyOnce | None:
        """Per key, how many committed transactions of the group read each known offset
        below the group's final committed position; None when no subscribed process ran a
        `txn`."""
        if not self._any_txn:
            return None
        by_ok, by_info = self._by_ok, self._by_info
        rows = []
        for k, pos, below in self._positions():
            if not below:
                continue
            unread = tuple(x for x in below if (k, x) not in by_ok and (k, x) not in by_info)
            uncertain = tuple(x for x in below if (k, x) not in by_ok and (k, x) in by_info)
            repeated = tuple((x, by_ok[(k, x)]) for x in below if by_ok.get((k, x), 0) > 1)
            once = sum(1 for x in below if by_ok.get((k, x)) == 1)
            rows.append(KeyOnce(k, pos, len(below), once, unread, uncertain, repeated))
        return ExactlyOnce(self._committed_index, self._transactions, tuple(rows))

    def membership(self) -> list[Held]:
        """Each subscribed process's group generation and assigned keys over time (see
        `membership`)."""
        if self._early is None:
            return self._members.held()
        m = _Members()  # no subscribe: the lines kept are read for their assignments alone
        for o in self._early:
            if o.get("process") != "nemesis":
                m.add(o)
        return m.held()


def fed(ops: Iterable[Mapping[str, Any]]) -> GroupFeed:
    """A GroupFeed given every line of `ops`."""
    feed = GroupFeed()
    for o in ops:
        feed.add(o)
    return feed


def group_delivery(ops: Iterable[Mapping[str, Any]]) -> GroupDelivery | None:
    """Per key, what the group read below its final committed position; None when the
    history holds no `subscribe`."""
    return fed(ops).delivery()


def exactly_once(ops: Iterable[Mapping[str, Any]]) -> ExactlyOnce | None:
    """Per key, how many committed transactions of the group read each known offset below
    the group's final committed position; None when no subscribed process ran a `txn`."""
    return fed(ops).exactly_once()


def membership(ops: Iterable[Mapping[str, Any]]) -> list[Held]:
    """Each subscribed process's group generation and assigned keys over time, from the
    `generation` and `assignment` its polls' completions carry: a stretch starts at the
    first poll that reports it and lasts until the process reports another, leaves the
    group (an `assign`), or its last operation."""
    return fed(ops).membership()
