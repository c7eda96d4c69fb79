"""The consumer group's committed offsets as operations (HISTORY.md's `commit` and
`committed`), with `--sub-via subscribe` on a system whose client speaks them.

`--commit processed`: a process commits what its polls handed on. Which records
were handed on is exactly what the history shows: the records of its poll
completions. So the generator, which sees every completion, keeps for each
process the group generation its last polls ran in and, per key, the offset
after the last record they returned; now and then, when that moved since the
process's last commit, the process's next operation is a `commit` of those
positions, with that `"generation"` beside the value (the client commits them in
that generation or, when its group moved on, fails without sending). A client
whose polls name no generation (librdkafka does not tell it) names the keys it
held instead (their `"assignment"`): the commit then carries them as `"held"`, and
a new assignment starts the positions afresh as a new generation does. Its
client commits nothing else (no commit before a rebalance or a leave), so every
write of the group's offsets is an operation of the history. `--commit off`
commits nothing. `--commit auto` is left out: its commits are the client's own,
not operations, so no history could judge what a committed read returns.

With `processed` or `off`, processes also read the group's committed offsets of
every key of the pool now and then (`committed` operations), which
checkers/offsets.py judges as one register per key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harness.protocols import SpeaksOffsets
from harness.runfiles import Op, Process
from harness.spec import TestSpec
from workloads.options import QueueOptions

# of a subscribed process's next operation: a commit when its polls moved since its last
# one; a read of the committed offsets
COMMIT_PROBABILITY = 0.2
COMMITTED_PROBABILITY = 0.05


def enabled(spec: TestSpec, system: object) -> bool:
    """Whether the run's processes commit and read offsets as operations."""
    opts = QueueOptions.of(spec)
    return (opts.subscribe and opts.commit in ("processed", "off")
            and isinstance(system, SpeaksOffsets) and system.speaks_offsets(spec))


@dataclass(frozen=True, slots=True)
class OffsetOps:
    """What each process's group polls handed on, and the commits and reads it leads to.

    handed: process -> (stretch, {key: next offset}) of its polls in that stretch, a
    stretch being a generation, else an assignment (`_stretch`);
    moved: processes whose positions moved since their last commit."""

    commits: bool  # --commit processed
    pool: int  # the keys a `committed` operation asks for: 0 .. pool-1
    handed: Mapping[Process, tuple[Stretch, Mapping[int, int]]] = field(default_factory=dict)
    moved: frozenset[Process] = frozenset()

    def pick(self, rng: Any, proc: Process, time_ns: int) -> tuple[Op, OffsetOps] | None:
        """A commit or committed read for `proc` now, or None (the usual mix goes on)."""
        if self.commits and proc in self.moved and rng.random() < COMMIT_PROBABILITY:
            stretch, positions = self.handed[proc]
            o = Op(type="invoke", process=proc, f="commit",
                   value=[["commit", {str(k): p for k, p in sorted(positions.items())}]],
                   time=time_ns, extra={"generation": stretch} if isinstance(stretch, int)
                   else {"held": list(stretch)})
            return o, replace(self, moved=self.moved - {proc})
        if rng.random() < COMMITTED_PROBABILITY:
            o = Op(type="invoke", process=proc, f="committed",
                   value=[["committed", list(range(self.pool))]], time=time_ns)
            return o, self
        return None

    def seen(self, event: Op) -> OffsetOps:
        """A completion of a group poll: the records it handed on move the positions of its
        process in its generation (a new generation starts them afresh)."""
        stretch = _stretch(event.extra)
        if event.type == "invoke" or event.f != "poll" or stretch is None or not self.commits:
            return self
        read: dict[int, int] = {}
        for m in event.value or ():
            if m and m[0] == "poll" and len(m) > 1:
                for k, records in m[1].items():
                    if records:
                        read[int(k)] = int(records[-1][0]) + 1
        if not read:
            return self
        p = event.process
        old_stretch, old = self.handed.get(p, (stretch, {}))
        positions = {**(old if old_stretch == stretch else {}), **read}
        return replace(self, handed={**self.handed, p: (stretch, positions)},
                       moved=self.moved | {p})


Stretch = int | tuple[int, ...]  # a group generation, or the keys a process held


def _stretch(extra: Mapping[str, Any]) -> Stretch | None:
    """What a group poll's records were read under: its generation when the client names
    one, else its assignment; None: not a group poll (or no generation: a rebalance)."""
    gen = extra.get("generation")
    if isinstance(gen, int) and not isinstance(gen, bool):
        return gen if gen >= 0 else None
    keys = extra.get("assignment")
    if isinstance(keys, list) and keys:
        return tuple(sorted(int(k) for k in keys))
    return None


# -- the clients' side: what a `commit` or `committed` operation asks, read in one place -----


def commit_offsets(op: Op) -> dict[int, int]:
    """key -> offset: what a `commit` operation's micro-ops ask to commit."""
    return {int(k): int(o) for m in op.value if m[0] == "commit" for k, o in m[1].items()}


def committed_keys(op: Op) -> list[int]:
    """The keys a `committed` operation asks the group's committed offsets of."""
    return [int(k) for m in op.value if m[0] == "committed" for k in m[1]]


def committed_value(keys: list[int], got: Mapping[int, int]) -> list[list[Any]]:
    """A `committed` operation's `ok` value: each key's committed offset, or None."""
    return [["committed", {str(k): got.get(k) for k in keys}]]


def moved_on(op: Op, now: list[int]) -> str | None:
    """Why a `commit` named by the keys its process held (`"held"`: a client whose group
    names no generation) is refused unsent: the consumer holds other keys `now`."""
    held = sorted(int(k) for k in op.extra.get("held") or ())
    return None if held == now else f"the group moved on from keys {held} (now {now}): nothing sent"
