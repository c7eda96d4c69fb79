"""Key rotation for the queue workload, as elle's append generator does it for Jepsen's Kafka test.

`keys` keys are written at once. Each takes at most `max_writes` sends; a key that has
had them is retired and the next fresh key of the pool takes its place. Every key's
log therefore stays short whatever the run's length, so a read from its beginning
(a fresh assign, a seek, the final reads) costs a bounded number of records and the
history's bytes per line do not grow with the run.

The first keys get staggered budgets (max_writes * (i + 1) / keys) so that they do not
all retire together; every later key gets max_writes. Keys are partitions of one topic,
created at setup (`QueueOptions.partitions`, workloads/options.py); a run that uses
the whole pool starts over at its lowest key that is not active, whose log then grows
by up to max_writes more.
The ring is an immutable value and takes its randomness from the caller, so the
generators that hold it stay pure and replayable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class KeyRing:
    """The active keys, the writes each may still take, and the next fresh key."""

    active: tuple[int, ...]
    left: tuple[int, ...]  # writes each active key may still take
    pool: int              # keys 0..pool-1 exist
    max_writes: int
    fresh: int             # how many keys have entered so far (the next one is fresh % pool)

    @staticmethod
    def start(keys: int, pool: int, max_writes: int) -> KeyRing:
        if not 1 <= keys <= pool:
            raise ValueError(f"KeyRing: need 1 <= keys ({keys}) <= pool ({pool})")
        if max_writes < 1:
            raise ValueError(f"KeyRing: max_writes must be positive, got {max_writes}")
        left = tuple(max(1, max_writes * (i + 1) // keys) for i in range(keys))
        return KeyRing(tuple(range(keys)), left, pool, max_writes, keys)

    def send_key(self, rng: random.Random) -> tuple[int, KeyRing]:
        """A key for the next send (uniform over the active ones), and the ring after it."""
        i = rng.randrange(len(self.active))
        ring = self if self.left[i] > 0 else self._retire(i)
        left = (*ring.left[:i], ring.left[i] - 1, *ring.left[i + 1:])
        return ring.active[i], replace(ring, left=left)

    def pick(self, rng: random.Random, n: int) -> list[int]:
        """n distinct active keys (fewer if fewer are active), sorted."""
        return sorted(rng.sample(self.active, min(n, len(self.active))))

    def _retire(self, i: int) -> KeyRing:
        """Active key i replaced by the next pool key that is not active (itself, at worst)."""
        others = set(self.active) - {self.active[i]}
        fresh = self.fresh
        while fresh % self.pool in others:
            fresh += 1
        active = (*self.active[:i], fresh % self.pool, *self.active[i + 1:])
        left = (*self.left[:i], self.max_writes, *self.left[i + 1:])
        return replace(self, active=active, left=left, fresh=fresh + 1)
