"""A deterministic, seeded, in-process simulator for RaftNode: a network that drops, delays,
duplicates and reorders, partitions (one-way too), crashes and restarts (persisted state only).

After every step it checks the safety properties; a schedule is a pure function of its seed.
"""

from __future__ import annotations

import bisect
import heapq
import random
from dataclasses import dataclass, field, replace
from typing import cast

from .core import RaftConfig, RaftNode, Ready, Role
from .log import RaftLog
from .messages import Entry, Message, Snapshot
from .storage import MemoryStorage

_MOD = (1 << 61) - 1


def fold(state: tuple[int, int], e: Entry) -> tuple[int, int]:
    """The simulated state machine: (entries applied, a hash chain over their records)."""
    value = -e.epoch if e.control else int(e.record)  # type: ignore[call-overload]
    return state[0] + 1, (state[1] * 1_000_003 + value + 7) % _MOD


SIM_RAFT = RaftConfig(
    election_timeout_ms=150, fetch_interval_ms=30, begin_epoch_resend_ms=30,
    check_quorum_timeout_ms=300, max_fetch_entries=8, snapshot_threshold_entries=24,
)


@dataclass(frozen=True)
class SimConfig:
    voters: int = 3
    observers: int = 0
    duration_ms: int = 4000
    settle_ms: int = 2000
    drop_p: float = 0.05
    dup_p: float = 0.03
    delay_min_ms: int = 1
    delay_max_ms: int = 25
    fault_interval_ms: int = 250
    propose_interval_ms: int = 40
    faults: tuple[str, ...] = ("crash", "crash_leader", "restart", "partition", "isolate_leader",
                               "one_way", "heal", "loss", "pause_leader")
    raft: RaftConfig = field(default_factory=lambda: SIM_RAFT)
    unsafe_skip_log_up_to_date_check: bool = False
    check_liveness: bool = True
    check_leader_completeness: bool = True


@dataclass(frozen=True)
class SimResult:
    seed: int
    violation: str | None
    steps: int
    committed: int
    max_epoch: int
    failovers_ms: tuple[int, ...]


class Violation(Exception):
    pass


@dataclass
class _Global:
    entries: list[Entry] = field(default_factory=list)
    commit_epoch: list[int] = field(default_factory=list)  # epoch of the leader that committed it
    folds: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    leaders: dict[int, str] = field(default_factory=dict)


class Simulation:
    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.cfg = cfg = config or SimConfig()
        self.rng = random.Random(seed)
        self.voters = tuple(f"v{i}" for i in range(cfg.voters))
        self.ids = self.voters + tuple(f"o{i}" for i in range(cfg.observers))
        self.storage = {n: MemoryStorage() for n in self.ids}
        self.nodes: dict[str, RaftNode | None] = {n: None for n in self.ids}
        self.sm: dict[str, tuple[int, int]] = {}
        self.gen = dict.fromkeys(self.ids, 0)
        self.restarts = dict.fromkeys(self.ids, 0)
        self.blocked: set[tuple[str, str]] = set()
        self.paused_until: dict[str, int] = {}  # SIGSTOP: events wait, state is kept
        self.drop_p = cfg.drop_p
        self.dup_p = cfg.dup_p
        self.queue: list[tuple[int, int, str, object]] = []
        self.seq = 0
        self.now = 0
        self.steps = 0
        self.next_record = 1
        self.g = _Global()
        self.failover_start: tuple[int, int] | None = None  # (time, epoch of the lost leader)
        self.failovers: list[int] = []

    # ----- scheduling ------------------------------------------------------------------

    def _push(self, at_ms: int, kind: str, payload: object) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at_ms, self.seq, kind, payload))

    def _start(self, n: str) -> None:
        rng = random.Random(self.seed * 7919 + self.ids.index(n) * 104729 + self.restarts[n])
        self.restarts[n] += 1
        node = RaftNode(n, self.voters, self.storage[n].load(), config=self.cfg.raft, rng=rng,
                        now_ms=self.now,
                        unsafe_skip_log_up_to_date_check=self.cfg.unsafe_skip_log_up_to_date_check)
        self.nodes[n] = node
        self.sm[n] = (0, 0)
        self._handle(n, node.tick(self.now))

    def _crash(self, n: str) -> None:
        node = self.nodes[n]
        if node is None:
            return
        if node.role is Role.LEADER and node.epoch == max(self.g.leaders, default=0):
            self.failover_start = (self.now, node.epoch)
        self.nodes[n] = None
        self.paused_until.pop(n, None)
        self.gen[n] += 1

    def _send(self, src: str, dest: str, msg: Message) -> None:
        copies = 1 + (self.rng.random() < self.dup_p)
        for _ in range(copies):
            if (src, dest) in self.blocked or self.rng.random() < self.drop_p:
                continue
            delay = self.rng.randint(self.cfg.delay_min_ms, self.cfg.delay_max_ms)
            self._push(self.now + delay, "deliver", (src, dest, msg))

    # ----- effects and checks ----------------------------------------------------------

    def _handle(self, n: str, ready: Ready) -> None:
        node = self.nodes[n]
        assert node is not None
        self.storage[n].apply(ready.persist)
        for out in ready.messages:
            self._send(n, out.dest, out.message)
        if ready.restore is not None:
            self._check_snapshot(n, ready.restore)
            st = ready.restore.state
            assert isinstance(st, tuple)
            self.sm[n] = (int(st[0]), int(st[1]))
        for e in ready.committed:
            if e.offset != self.sm[n][0]:
                raise Violation(f"{n} applied offset {e.offset} but had applied {self.sm[n][0]}")
            self.sm[n] = fold(self.sm[n], e)
        self._check(n, node)
        if node.wants_snapshot():
            end = self.sm[n][0]
            self._handle(n, node.take_snapshot(end, self.sm[n]))
            return
        self.gen[n] += 1
        self._push(max(node.next_timer_ms(), self.now + 1), "tick", (n, self.gen[n]))

    def _check_snapshot(self, n: str, snap: Snapshot) -> None:
        if snap.end_offset > len(self.g.entries):
            raise Violation(f"{n} got a snapshot to {snap.end_offset} past the commit point")
        if snap.state != self.g.folds[snap.end_offset]:
            raise Violation(f"{n} got a snapshot to {snap.end_offset} whose state differs")

    def _check(self, n: str, node: RaftNode) -> None:
        g, log = self.g, node.log
        if node.role is Role.LEADER:
            other = g.leaders.setdefault(node.epoch, n)
            if other != n:
                raise Violation(f"two leaders in epoch {node.epoch}: {other} and {n}")
        if node.high_watermark > log.end_offset:
            raise Violation(f"{n} lost committed entries: hw {node.high_watermark} > log end "
                            f"{log.end_offset}")
        if node.role is Role.LEADER and self.cfg.check_leader_completeness:
            # leader completeness: everything committed in an earlier epoch is in its log
            need = bisect.bisect_left(g.commit_epoch, node.epoch)
            if log.end_offset < need:
                raise Violation(f"leader {n} of epoch {node.epoch} lacks committed offsets "
                                f"[{log.end_offset}, {need})")
            off = _first_difference(log, g.entries, need)
            if off is not None:
                raise Violation(f"leader {n} of epoch {node.epoch} has a different "
                                f"committed entry at offset {off}")
        if node.role is Role.LEADER:
            for off in range(len(g.entries), node.high_watermark):
                e = log.entry(off)
                g.entries.append(e)
                g.commit_epoch.append(node.epoch)
                g.folds.append(fold(g.folds[-1], e))
        if node.high_watermark > len(g.entries):
            raise Violation(f"{n} has hw {node.high_watermark} past the commit point "
                            f"{len(g.entries)}")
        # log matching: below the last offset where this log agrees with the committed log
        # (same epoch at the same offset) every entry must be identical
        top = min(log.end_offset, len(g.entries))
        last_match = -1
        for off in range(top - 1, log.start_offset - 1, -1):
            if log.entry(off).epoch == g.entries[off].epoch:
                last_match = off
                break
        last_match = max(last_match, node.high_watermark - 1)
        off = _first_difference(log, g.entries, last_match + 1)
        if off is not None:
            raise Violation(f"{n} differs from the committed log at offset {off}: "
                            f"{log.entry(off)} vs {g.entries[off]}")
        if self.failover_start is not None:
            start, lost_epoch = self.failover_start
            if node.role is Role.LEADER and node.epoch > lost_epoch and \
                    node.high_watermark > 0 and log.epoch_before(node.high_watermark) == node.epoch:
                self.failovers.append(self.now - start)
                self.failover_start = None

    # ----- faults and clients ----------------------------------------------------------

    def _leader(self) -> str | None:
        best: tuple[int, str] | None = None
        for n, node in self.nodes.items():
            if node is not None and node.role is Role.LEADER and (best is None or
                                                                  node.epoch > best[0]):
                best = (node.epoch, n)
        return None if best is None else best[1]

    def _fault(self) -> None:
        kind = self.rng.choice(self.cfg.faults)
        live = [n for n in self.ids if self.nodes[n] is not None]
        dead = [n for n in self.ids if self.nodes[n] is None]
        leader = self._leader()
        if kind == "crash" and live:
            self._crash(self.rng.choice(live))
        elif kind == "crash_leader" and leader is not None:
            self._crash(leader)
        elif kind == "pause_leader" and leader is not None:
            self.paused_until[leader] = self.now + self.rng.randint(
                1, 4 * self.cfg.raft.election_timeout_ms)
        elif kind == "failover":  # for measuring: restart everything, or else crash the leader
            if dead:
                for n in dead:
                    self._start(n)
            elif leader is not None:
                self._crash(leader)
            return
        elif kind == "restart" and dead:
            self._start(self.rng.choice(dead))
        elif kind == "partition":
            side = {n for n in self.ids if self.rng.random() < 0.5}
            self.blocked = {(a, b) for a in self.ids for b in self.ids
                            if (a in side) != (b in side)}
        elif kind == "isolate_leader" and leader is not None:
            if self.failover_start is None and self.nodes[leader] is not None:
                node = self.nodes[leader]
                assert node is not None
                self.failover_start = (self.now, node.epoch)
            self.blocked = {(a, b) for a in self.ids for b in self.ids
                            if a != b and leader in (a, b)}
        elif kind == "one_way" and len(self.ids) > 1:
            a, b = self.rng.sample(self.ids, 2)
            self.blocked.add((a, b))
        elif kind == "heal":
            self.blocked = set()
        elif kind == "loss":
            self.drop_p = self.rng.choice((0.0, self.cfg.drop_p, 0.3))
        if self.rng.random() < 0.3 and dead:  # crashed nodes come back, most of the time
            self._start(self.rng.choice(dead))

    def _propose(self) -> None:
        leader = self._leader()
        if leader is not None and self.paused_until.get(leader, 0) <= self.now:
            node = self.nodes[leader]
            assert node is not None
            _, ready = node.propose(self.now, self.next_record)
            self.next_record += 1
            self._handle(leader, ready)

    # ----- the run -----------------------------------------------------------------------

    def _step(self, kind: str, payload: object) -> None:
        self.steps += 1
        if kind in ("tick", "deliver"):
            target = cast(tuple[str, ...], payload)[0 if kind == "tick" else 1]
            until = self.paused_until.get(target, 0)
            if until > self.now:  # a paused process handles nothing until it resumes
                self._push(until, kind, payload)
                return
        if kind == "tick":
            n, gen = cast(tuple[str, int], payload)
            node = self.nodes[n]
            if node is not None and gen == self.gen[n]:
                self._handle(n, node.tick(self.now))
        elif kind == "deliver":
            src, dest, msg = cast(tuple[str, str, Message], payload)
            node = self.nodes[dest]
            if node is not None and (src, dest) not in self.blocked:
                self._handle(dest, node.receive(self.now, src, msg))
        elif kind == "fault":
            if self.now < self.cfg.duration_ms:
                self._fault()
                self._push(self.now + self.rng.randint(1, 2 * self.cfg.fault_interval_ms),
                           "fault", None)
        elif kind == "propose":
            if self.now < self.cfg.duration_ms:
                self._propose()
                self._push(self.now + self.rng.randint(1, 2 * self.cfg.propose_interval_ms),
                           "propose", None)
        elif kind == "heal_all":
            self.blocked, self.drop_p, self.dup_p = set(), 0.0, 0.0
            self.paused_until.clear()
            for n in self.ids:
                if self.nodes[n] is None:
                    self._start(n)

    def run(self) -> SimResult:
        try:
            for n in self.ids:
                self._start(n)
            self._push(self.rng.randint(0, self.cfg.fault_interval_ms), "fault", None)
            self._push(0, "propose", None)
            self._push(self.cfg.duration_ms, "heal_all", None)
            end = self.cfg.duration_ms + self.cfg.settle_ms
            while self.queue and self.queue[0][0] <= end:
                at, _, kind, payload = heapq.heappop(self.queue)
                self.now = at
                self._step(kind, payload)
            if self.cfg.check_liveness:
                self._check_converged()
        except Violation as v:
            return self._result(f"t={self.now}ms step {self.steps}: {v}")
        return self._result(None)

    def _check_converged(self) -> None:
        leader = self._leader()
        if leader is None:
            raise Violation(f"liveness: no leader {self.cfg.settle_ms} ms after healing")
        lnode = self.nodes[leader]
        assert lnode is not None
        for n, node in self.nodes.items():
            assert node is not None
            if node.leader != leader or node.high_watermark != lnode.high_watermark:
                raise Violation(f"liveness: {n} (leader {node.leader}, hw "
                                f"{node.high_watermark}) has not caught up with leader {leader} "
                                f"(hw {lnode.high_watermark})")

    def _result(self, violation: str | None) -> SimResult:
        epochs = [node.epoch for node in self.nodes.values() if node is not None]
        return SimResult(self.seed, violation, self.steps, len(self.g.entries),
                         max(epochs, default=0), tuple(self.failovers))


def _first_difference(log: RaftLog, committed: list[Entry], end: int) -> int | None:
    """The first offset in [log start, end) where `log` differs from `committed`, or None."""
    start = log.start_offset
    if end <= start:
        return None
    if log.entries[: end - start] == committed[start:end]:  # C-speed, identity shortcut
        return None
    return next(off for off in range(start, end) if log.entry(off) != committed[off])


def config_for_seed(seed: int, base: SimConfig | None = None) -> SimConfig:
    """Vary the cluster shape with the seed: 1, 3 or 5 voters, sometimes an observer."""
    base = base or SimConfig()
    r = random.Random(seed ^ 0x5EED)
    voters = r.choice((1, 3, 3, 3, 3, 5, 5))
    return replace(base, voters=voters, observers=int(r.random() < 0.25),
                   drop_p=r.choice((0.0, 0.05, 0.1)), dup_p=r.choice((0.0, 0.03, 0.1)))


def run_seed(seed: int, config: SimConfig | None = None, *, vary: bool = True) -> SimResult:
    """One seeded schedule; `vary` derives the cluster shape from the seed too."""
    return Simulation(seed, config_for_seed(seed, config) if vary else config).run()


@dataclass(frozen=True)
class Summary:
    schedules: int
    violations: tuple[SimResult, ...]
    committed: int
    failovers_ms: tuple[int, ...]
    elapsed_s: float


def _run_chunk(args: tuple[int, int, SimConfig | None]) -> list[SimResult]:
    start, count, config = args
    return [run_seed(s, config) for s in range(start, start + count)]


def run_seeds(start: int, count: int, config: SimConfig | None = None, *,
              workers: int = 1) -> Summary:
    """Run seeds [start, start+count), in `workers` processes; results do not depend on it."""
    import time
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.monotonic()
    if workers <= 1:
        results = _run_chunk((start, count, config))
    else:
        chunk = max(1, count // (workers * 8))
        jobs = [(s, min(chunk, start + count - s), config)
                for s in range(start, start + count, chunk)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = [r for part in pool.map(_run_chunk, jobs) for r in part]
    return Summary(
        len(results), tuple(r for r in results if r.violation is not None),
        sum(r.committed for r in results),
        tuple(ms for r in results for ms in r.failovers_ms), time.monotonic() - t0,
    )
