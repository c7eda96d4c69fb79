"""The consumer group's committed offsets as operations (HISTORY.md's `commit` and
`committed`), with `--sub-via subscribe` on a system whose client speaks them.

`--commit processed`: a process commits what its polls handed on. Which records
were handed on is exactly what the history shows: the records of its poll
completions. So the generator, which sees every completion, keeps for each
process the group generation its last polls ran in and, per key, the offset
after the last record they returned; now and then, when that moved since the
process's last commit, the process's next operation is a `commit` of those
positions, with that `"generation"` beside the value (the client commits them in
that generation or, when its group moved on, fails without sending). Its
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

# of a subscribed process's next operation: a commit when its polls moved since its last
# one; a read of the committed offsets
COMMIT_PROBABILITY = 0.2
COMMITTED_PROBABILITY = 0.05


def enabled(spec: TestSpec, system: object) -> bool:
    """Whether the run's processes commit and read offsets as operations."""
    return (spec.sub_via == "subscribe" and spec.consumer.commit in ("processed", "off")
            and isinstance(system, SpeaksOffsets) and system.speaks_offsets(spec))


@dataclass(frozen=True, slots=True)
class OffsetOps:
    """What each process's group polls handed on, and the commits and reads it leads to.

    handed: process -> (generation, {key: next offset}) of its polls in that generation;
    moved: processes whose positions moved since their last commit."""

    commits: bool  # --commit processed
    pool: int  # the keys a `committed` operation asks for: 0 .. pool-1
    handed: Mapping[Process, tuple[int, Mapping[int, int]]] = field(default_factory=dict)
    moved: frozenset[Process] = frozenset()

    def pick(self, rng: Any, proc: Process, time_ns: int) -> tuple[Op, OffsetOps] | None:
        """A commit or committed read for `proc` now, or None (the usual mix goes on)."""
        if self.commits and proc in self.moved and rng.random() < COMMIT_PROBABILITY:
            gen, positions = self.handed[proc]
            o = Op(type="invoke", process=proc, f="commit",
                   value=[["commit", {str(k): p for k, p in sorted(positions.items())}]],
                   time=time_ns, extra={"generation": gen})
            return o, replace(self, moved=self.moved - {proc})
        if rng.random() < COMMITTED_PROBABILITY:
            o = Op(type="invoke", process=proc, f="committed",
                   value=[["committed", list(range(self.pool))]], time=time_ns)
            return o, self
        return None

    def seen(self, event: Op) -> OffsetOps:
        """A completion of a group poll: the records it handed on move the positions of its
        process in its generation (a new generation starts them afresh)."""
        gen = event.extra.get("generation")
        if (event.type == "invoke" or event.f != "poll" or not isinstance(gen, int)
                or gen < 0 or not self.commits):
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
        old_gen, old = self.handed.get(p, (gen, {}))
        positions = {**(old if old_gen == gen else {}), **read}
        return replace(self, handed={**self.handed, p: (gen, positions)},
                       moved=self.moved | {p})
