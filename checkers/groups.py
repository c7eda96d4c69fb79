"""Group-level delivery: did the consumer group as a whole read everything it committed past?

With `subscribe`, a rebalance may make one member skip or re-read records, and the
checkers allow `poll-skip` and `nonmonotonic-poll` then (HISTORY.md). What must still
hold, for at-least-once delivery, is that the group as a whole handed on every record
below the position it finally committed: a member that commits records before it
hands them on, then dies, leaves offsets that no member ever returns. This module
states that per key, from history.jsonl alone. It is a report section, not an
anomaly type: the contract names no such anomaly, and `--commit auto` makes it
possible by design.

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
from dataclasses import dataclass, field
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


@dataclass(slots=True)
class _GroupWalk:
    """One pass over a history's client operations, as both views read it: which process is
    in the group at each completion, what it read, the known offsets of each key, and the
    group's final committed positions."""

    known: dict[int, set[int]] = field(default_factory=dict)
    committed: Mapping[str, Any] | None = None
    committed_index: int | None = None
    any_subscribe: bool = False

    def completions(self, ops: Iterable[Mapping[str, Any]]
                    ) -> Iterator[tuple[Mapping[str, Any], bool, set[tuple[int, int]]]]:
        """Each client completion, whether its process was subscribed, and the (key,
        offset) records it read; `known` and `committed` follow as the walk goes."""
        subscribed: set[Any] = set()
        for o in ops:
            p, f, typ = o.get("process"), o.get("f"), o.get("type")
            if p == "nemesis":
                continue
            if typ == "invoke":
                if f == "subscribe":
                    subscribed.add(p)
                    self.any_subscribe = True
                elif f == "assign":
                    subscribed.discard(p)
                continue
            c = o.get("committed")
            if isinstance(c, Mapping):
                self.committed, self.committed_index = c, o.get("index")
            value = o.get("value")
            read = set(_records(value))
            # an `info` transaction may have been aborted: its sends are not known offsets
            sent = _sent(value) if typ == "ok" or (typ == "info" and f != "txn") else ()
            for k, off in (*sent, *read):
                self.known.setdefault(k, set()).add(off)
            yield o, p in subscribed, read

    def positions(self) -> Iterator[tuple[int, int, list[int]]]:
        """Per key of the final committed positions, in key order: the key, its position
        and the known offsets below it, sorted."""
        for ks, pos in sorted((self.committed or {}).items(), key=lambda kv: int(kv[0])):
            k, pos = int(ks), int(pos)
            yield k, pos, sorted(x for x in self.known.get(k, ()) if x < pos)


def group_delivery(ops: Iterable[Mapping[str, Any]]) -> GroupDelivery | None:
    """Per key, what the group read below its final committed position; None when the
    history holds no `subscribe`."""
    walk = _GroupWalk()
    group_read: dict[int, set[int]] = {}
    for _o, in_group, read in walk.completions(ops):
        if in_group:
            for k, off in read:
                group_read.setdefault(k, set()).add(off)
    if not walk.any_subscribe:
        return None
    rows = []
    for k, pos, below in walk.positions():
        if pos <= 0:
            continue  # nothing below it to have read
        got = group_read.get(k, set())
        missing = tuple(x for x in below if x not in got)
        rows.append(KeyDelivery(k, pos, len(below), len(below) - len(missing), missing))
    return GroupDelivery(walk.committed_index, tuple(rows))


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


def exactly_once(ops: Iterable[Mapping[str, Any]]) -> ExactlyOnce | None:
    """Per key, how many committed transactions of the group read each known offset below
    the group's final committed position; None when no subscribed process ran a `txn`."""
    walk = _GroupWalk()
    any_txn = False
    by_ok: dict[tuple[int, int], int] = {}  # (key, offset) -> committed txns that read it
    by_info: set[tuple[int, int]] = set()
    transactions = 0
    for o, in_group, read in walk.completions(ops):
        if o.get("f") != "txn" or not in_group:
            continue
        any_txn = True
        if o.get("type") == "ok":
            transactions += bool(read)
            for kv in read:
                by_ok[kv] = by_ok.get(kv, 0) + 1
        elif o.get("type") == "info":
            by_info |= read
    if not any_txn:
        return None
    rows = []
    for k, pos, below in walk.positions():
        if not below:
            continue
        unread = tuple(x for x in below if (k, x) not in by_ok and (k, x) not in by_info)
        uncertain = tuple(x for x in below if (k, x) not in by_ok and (k, x) in by_info)
        repeated = tuple((x, by_ok[(k, x)]) for x in below if by_ok.get((k, x), 0) > 1)
        once = sum(1 for x in below if by_ok.get((k, x)) == 1)
        rows.append(KeyOnce(k, pos, len(below), once, unread, uncertain, repeated))
    return ExactlyOnce(walk.committed_index, transactions, tuple(rows))


@dataclass(frozen=True, slots=True)
class Held:
    """A stretch of time over which one process held one assignment of the group."""

    process: int
    start_ns: int
    end_ns: int
    generation: int | None  # None where the system does not say (librdkafka)
    keys: tuple[int, ...]


def membership(ops: Iterable[Mapping[str, Any]]) -> list[Held]:
    """Each subscribed process's group generation and assigned keys over time, from the
    `generation` and `assignment` its polls' completions carry: a stretch starts at the
    first poll that reports it and lasts until the process reports another, leaves the
    group (an `assign`), or its last operation."""
    out: list[Held] = []
    open_: dict[Any, tuple[int, int | None, tuple[int, ...], int]] = {}  # start, gen, keys, last

    def close(p: Any, end: int) -> None:
        cur = open_.pop(p, None)
        if cur is not None and isinstance(p, int):
            out.append(Held(p, cur[0], max(end, cur[3]), cur[1], cur[2]))

    for o in ops:
        p, t = o.get("process"), int(o.get("time") or 0)
        if p == "nemesis":
            continue
        if o.get("type") == "invoke":
            if o.get("f") in ("assign", "subscribe"):
                close(p, t)
            continue
        if "assignment" not in o:
            if p in open_:
                start, gen, keys, _ = open_[p]
                open_[p] = (start, gen, keys, t)
            continue
        gen = o.get("generation")
        gen = int(gen) if isinstance(gen, int) and gen >= 0 else None
        keys = tuple(int(k) for k in o.get("assignment") or ())
        cur = open_.get(p)
        if cur is not None and (cur[1], cur[2]) == (gen, keys):
            open_[p] = (cur[0], gen, keys, t)
            continue
        close(p, t)
        if keys:
            open_[p] = (t, gen, keys, t)
    for p in list(open_):
        close(p, open_[p][3])
    return sorted(out, key=lambda h: (h.process, h.start_ns))
