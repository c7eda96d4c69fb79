"""Node faults, each with its heal: kill/start, pause/resume, clock bump/skew/reset,
and lose-unflushed (crash, cut each log to its last flushed position, restart).

An invocation names its nodes (`{"nodes": [...]}`) or a target to resolve now
(`{"target": "leader", "key": 3}`); the info completion always names the nodes
hit, so a report can shade the fault window per node. Heals take `{}` and undo
the fault everywhere. Teardown heals too, and never raises.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness import registry
from harness.faultkinds import CLOCK_BUMP, CLOCK_SKEW, KILL, LOSE_UNFLUSHED, PAUSE, FaultKind, verbs
from harness.protocols import (
    DumpsReplicas,
    HasClock,
    Killable,
    LosesUnflushed,
    Pausable,
    Run,
    Stoppable,
    WritesKeys,
)
from harness.runfiles import Op, last_acked_send, recent_send_counts, recent_send_keys
from nemesis.evidence import (
    Verb,
    clock_landing,
    combined,
    cut_landing,
    landing,
    observe,
    observe_after,
    read_clocks,
)
from nemesis.targets import LiveView, resolve


class NemesisError(RuntimeError):
    """A fault the run's backend cannot inject, or an op the nemesis does not know."""


def target_nodes(run: Run, value: Any, rng: random.Random) -> tuple[str, ...]:
    """The nodes an op aims at: explicit `nodes`, a `role` named earlier, else its
    `target` resolved now (a dict value gets the key it resolved written back); with
    `index` i, only the i-th of them (`as` still names them all)."""
    value = value if isinstance(value, Mapping) else {}
    nodes = tuple(run.nodes)
    roles = roles_of(run)
    if "nodes" in value:
        given = tuple(str(n) for n in value["nodes"])
        unknown = set(given) - set(nodes)
        if unknown:
            raise NemesisError(f"op names unknown nodes {sorted(unknown)}; nodes: {list(nodes)}")
    elif "role" in value:
        role = str(value["role"])
        if role not in roles:
            raise NemesisError(f"role {role!r} was never assigned (an earlier op's \"as\"); "
                               f"known roles: {sorted(roles)}")
        given = roles[role]
        if "await_ack_s" in value and isinstance(value, dict):
            _await_fresh_ack(run, value, rng)
    else:
        target = str(value.get("target", "one"))
        view = LiveView(run)
        key = resolve_key(run, value, rng, view)
        if isinstance(value, dict):
            value["key"] = key  # the completion says which key was meant
        if "leader_as" in value:  # remember the key's leader as it was at this moment
            leader = view.leader_of(key)
            roles[str(value["leader_as"])] = (leader,) if leader in nodes else ()
        if "leader_not" in value:  # a new leader: wait (at most wait_s) for the election
            old = set(roles.get(str(value["leader_not"]), ()))
            wait_s = float(value.get("wait_s", 10.0))
            new = _await_leader_change(view, key, old, wait_s)
            if new is None:  # none seen: hit nobody rather than the old leader again
                if isinstance(value, dict):
                    value["missed"] = (f"no leader of key {key} other than "
                                       f"{', '.join(sorted(old)) or 'none'} within {wait_s:g} s")
                given = ()
            else:
                given = (new,) if target == "leader" else resolve(target, nodes, rng, view, key)
        else:
            given = resolve(target, nodes, rng, view, key)
    if "as" in value:
        roles[str(value["as"])] = given
    if "index" in value:  # one node of those (the role named keeps them all)
        i = int(value["index"])
        given = given[i:i + 1]
    return given


LEADER_POLL_S = 0.1  # how often a wait for a new leader asks the cluster
ACK_POLL_S = 0.01  # how often a wait for an acknowledged send reads the history's tail


def _await_leader_change(view: LiveView, key: int, old: set[str], wait_s: float) -> str | None:
    """The key's leader once it is a node outside `old` (a ZooKeeper-era election takes a
    session timeout and the controller's turn, seconds on a loaded machine, more when the
    old leader was the controller); None if no such leader was seen within wait_s."""
    deadline = time.monotonic() + wait_s
    while True:
        leader = view.leader_of(key)
        if leader is not None and leader not in old and leader in view.run.nodes:
            return leader
        if time.monotonic() >= deadline:
            return None
        time.sleep(LEADER_POLL_S)


def _await_fresh_ack(run: Run, value: dict[str, Any], rng: random.Random) -> None:
    """Hold a step (at most `await_ack_s`) until the history shows an acknowledged send on
    its key (`key` or `key_of`) newer than every one there when the step began, so the
    fault lands right after a write on that key was acknowledged (a follower learns of
    it a fetch round later). Writes into value the key, `acked` (whether one came) and
    `ack_wait_s`; the step goes ahead either way."""
    key = resolve_key(run, value, rng)
    value["key"] = key
    t0 = time.monotonic()
    deadline = t0 + float(value["await_ack_s"])
    history = run.paths.history
    before = last_acked_send(history, key)
    acked = False
    while True:
        now = last_acked_send(history, key)
        if now is not None and (before is None or now > before):
            acked = True
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(ACK_POLL_S)
    value["acked"] = acked
    value["ack_wait_s"] = round(time.monotonic() - t0, 3)


def key_counts(run: Run) -> tuple[int, int]:
    """(keys written at once, the key pool) of the run's workload, which owns both
    (harness.protocols.WritesKeys, found through harness.registry)."""
    workload = registry.get("workload", run.spec.workload)
    if not isinstance(workload, WritesKeys):
        raise NemesisError(f"--workload {run.spec.workload} writes no keys to aim a fault at")
    return workload.keys(run.spec), workload.partitions(run.spec)


def live_keys(run: Run) -> list[int]:
    """The keys being written now (the workload rotates them): those of the latest sends in
    the history, at most --keys of them, most recent first; [] before any send."""
    return recent_send_keys(run.paths.history)[: key_counts(run)[0]]


def resolve_key(run: Run, value: Mapping[str, Any], rng: random.Random,
                view: LiveView | None = None) -> int:
    """The key an op is about: an integer, `"live"` (one of the keys being written now),
    `"fresh"` (of those, the one that entered last: the fewest sends so far, so the most
    left before the workload retires it), `"auto"` (a live key whose replicas avoid the
    controller, so a sequence never takes the controller down with it), or
    `{"key_of": ROLE}` (the key chosen by the step that named ROLE). Before any send, a
    live key is one of the first --keys. With `"full_isr": true` a live or fresh key is
    one whose in-sync replicas are all its replicas, when the cluster names any such
    (a key whose ISR an earlier fault left short can elect no clean new leader)."""
    keys = run.extra.setdefault("nemesis_keys", {})
    raw = value.get("key", 0)
    if "key_of" in value:
        role = str(value["key_of"])
        if role not in keys:
            raise NemesisError(f"key_of {role!r}: no earlier step chose a key as {role!r}")
        return int(keys[role])
    if raw in ("live", "auto", "fresh"):
        live = live_keys(run) or list(range(key_counts(run)[0]))
        if value.get("full_isr") is True:
            view = view or LiveView(run)
            live = [k for k in live if _full_isr(view, k)] or live
        if raw == "fresh":
            counts = recent_send_counts(run.paths.history)
            least = min(counts.get(k, 0) for k in live)
            live = [k for k in live if counts.get(k, 0) == least]
        key = rng.choice(live)
        if raw == "auto":
            view = view or LiveView(run)
            controller = view.controller()
            spare = [k for k in live if controller not in (view.replicas_of(k) or (controller,))]
            if not spare:  # no live key avoids it: any key of the pool that does
                spare = [k for k in range(key_counts(run)[1])
                         if controller not in (view.replicas_of(k) or (controller,))]
            key = rng.choice(spare) if spare else key
    else:
        key = int(raw)
    if "as" in value:
        keys[str(value["as"])] = key
    return key


def _full_isr(view: LiveView, key: int) -> bool:
    isr, replicas = view.isr_of(key), view.replicas_of(key)
    return bool(replicas) and isr is not None and set(isr) == set(replicas or ())


def heal_nodes(run: Run, value: Mapping[str, Any], rng: random.Random) -> tuple[str, ...]:
    """A heal's nodes: the ones it names (nodes, role or target), else every node."""
    if any(k in value for k in ("nodes", "role", "target")):
        return target_nodes(run, value, rng)
    return tuple(run.nodes)


def roles_of(run: Run) -> dict[str, tuple[str, ...]]:
    """Names that scenario steps give to resolved nodes (`"as": "B"`, then `"role": "B"`),
    shared by every nemesis of the run, so a sequence can hit the same node again."""
    roles = run.extra.setdefault("nemesis_roles", {})
    assert isinstance(roles, dict)
    return roles


def _value(op: Op) -> dict[str, Any]:
    return dict(op.value) if isinstance(op.value, Mapping) else {}


def _each(nodes: Sequence[str], act: Callable[[str], None]) -> list[str]:
    """Apply act to every node even if some fail; the errors, as text."""
    errors: list[str] = []
    for n in nodes:
        try:
            act(n)
        except Exception as e:
            errors.append(f"{n}: {type(e).__name__}: {e}")
    return errors


def _done(op: Op, value: dict[str, Any], errors: list[str],
          landed: Mapping[str, Any] | None = None) -> Op:
    """The info completion; `landed` adds the fault's `landed` and `evidence`."""
    return op.complete("info", value, error="; ".join(errors) if errors else None,
                       **(landed or {}))


def _acted(run: Run, verb: Verb, nodes: Sequence[str], act: Callable[[str], None],
           judged: Sequence[str] | None = None) -> tuple[list[str], dict[str, Any]]:
    """Apply act to every node; the errors, and whether it landed on the `judged` nodes
    (default: all of them) as their hosts show it (nemesis.evidence)."""
    judged = list(nodes) if judged is None else list(judged)
    before = observe(run, judged) if judged else None
    errors = _each(nodes, act)
    return errors, landing(verb, judged, before, observe_after(run, verb, judged, before))


class _NodeFault:
    """Shared plumbing: a seeded rng, a lock, and the set of nodes currently faulted."""

    kinds: tuple[FaultKind, ...] = ()
    fs: frozenset[str] = frozenset()
    name = "fault"

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.RLock()
        self.faulted: set[str] = set()

    def _heal_value(self, run: Run) -> tuple[str, ...]:
        """Nodes a heal names: the ones faulted, else all (the heal is applied to all)."""
        return tuple(n for n in run.nodes if n in self.faulted) or tuple(run.nodes)


def _killer(run: Run, value: Mapping[str, Any]) -> Callable[[str], None]:
    """SIGKILL; with `"graceful": true` the node's own shutdown (SIGTERM), which writes
    what a crash would not (e.g. a ZooKeeper-era Kafka broker's high-watermark checkpoint)."""
    db = run.db
    if not value.get("graceful"):
        assert isinstance(db, Killable)
        return lambda n: db.kill(run, n)
    if not isinstance(db, Stoppable):
        raise NemesisError(f"kill graceful: {run.spec.system} on the {run.spec.backend} "
                           "backend cannot ask a node to shut down")
    return lambda n: db.stop(run, n)


class Kill(_NodeFault):
    """SIGKILL brokers (`kill`; `"graceful": true`: SIGTERM, the node's own shutdown) and
    start them again (`start`, `{}` = every node)."""

    kinds = (KILL,)
    fs = verbs(kinds)
    name = KILL.start

    def setup(self, run: Run) -> Kill:
        if not isinstance(run.db, Killable):
            raise NemesisError(f"--nemesis kill: the {run.spec.backend} backend cannot kill nodes")
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        db = run.db
        assert isinstance(db, Killable)
        with self.lock:
            v = _value(op)
            if op.f == KILL.start:
                act = _killer(run, v)  # refused before any wait for a target
                nodes = target_nodes(run, v, self.rng)
                if not nodes and "missed" in v:  # a target that never came: nothing killed
                    return _done(op, {**v, "nodes": []}, [],
                                 {"landed": False, "evidence": str(v["missed"])})
                self.faulted |= set(nodes)
                return _done(op, {**v, "nodes": list(nodes)},
                             *_acted(run, "kill", nodes, act))
            if op.f == KILL.stop:
                nodes = self._shorter(run, v) if "shorter_of" in v else heal_nodes(run, v, self.rng)
                faulted = [n for n in nodes if n in self.faulted]
                errors, landed = _acted(run, "start", nodes, lambda n: db.start(run, n), faulted)
                self.faulted -= set(nodes)
                return _done(op, {**v, "nodes": faulted or list(nodes)}, errors, landed)
        raise NemesisError(f"kill nemesis cannot {op.f!r}")

    def _shorter(self, run: Run, v: dict[str, Any]) -> tuple[str, ...]:
        """Of the roles in `shorter_of`, the node whose replica of the key holds the
        lowest HW checkpoint (the log it will truncate to on restart), read from disk."""
        roles = roles_of(run)
        cands = [n for r in v["shorter_of"] for n in roles.get(str(r), ())]
        if not cands:
            raise NemesisError(f"shorter_of {v['shorter_of']}: no such roles assigned")
        key = resolve_key(run, v, self.rng)
        hws: dict[str, int] = {}
        rows: list[Any] = []
        if isinstance(run.db, DumpsReplicas):
            for n in cands:
                try:
                    rows += run.db.dump_node(run, n)
                except Exception as e:
                    v.setdefault("errors", []).append(f"dump of {n}: {e}")
        for row in rows:
            if row.get("key") == key and "hw" in row and row.get("node") in cands:
                hws[str(row["node"])] = int(row["hw"])
        v["hw"] = hws
        chosen = min(cands, key=lambda n: (hws.get(n, 1 << 62), cands.index(n)))
        return (chosen,)

    def teardown(self, run: Run) -> None:
        db = run.db
        if isinstance(db, Killable):
            with self.lock:
                _each(run.nodes, lambda n: db.start(run, n))
                self.faulted.clear()


class Pause(_NodeFault):
    """SIGSTOP brokers (`pause`) and SIGCONT them (`resume`, `{}` = every node)."""

    kinds = (PAUSE,)
    fs = verbs(kinds)
    name = PAUSE.start

    def setup(self, run: Run) -> Pause:
        if not isinstance(run.db, Pausable):
            raise NemesisError(f"--nemesis pause: the {run.spec.backend} backend cannot pause")
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        db = run.db
        assert isinstance(db, Pausable)
        with self.lock:
            v = _value(op)
            if op.f == PAUSE.start:
                nodes = target_nodes(run, v, self.rng)
                self.faulted |= set(nodes)
                return _done(op, {**v, "nodes": list(nodes)},
                             *_acted(run, "pause", nodes, lambda n: db.pause(run, n)))
            if op.f == PAUSE.stop:
                nodes = heal_nodes(run, v, self.rng)
                faulted = [n for n in nodes if n in self.faulted]
                errors, landed = _acted(run, "resume", nodes, lambda n: db.resume(run, n),
                                        faulted)
                self.faulted -= set(nodes)
                return _done(op, {**v, "nodes": faulted or list(nodes)}, errors, landed)
        raise NemesisError(f"pause nemesis cannot {op.f!r}")

    def teardown(self, run: Run) -> None:
        db = run.db
        if isinstance(db, Pausable):
            with self.lock:
                _each(run.nodes, lambda n: db.resume(run, n))
                self.faulted.clear()


MAX_SKEW_MS = 5000.0  # a clock step's largest shift when it names none (--clock-skew-max-ms)


class Clock(_NodeFault):
    """Shift brokers' clocks: `clock-bump` (one delta on the nodes), `clock-skew`
    (a different seeded offset per node), `clock-reset` (`{}`: every clock true again)."""

    kinds = (CLOCK_BUMP, CLOCK_SKEW)
    fs = verbs(kinds)
    name = "clock"

    def __init__(self, seed: int = 0, max_skew_ms: float = MAX_SKEW_MS) -> None:
        super().__init__(seed)
        self.max_skew_ns = int(max_skew_ms * 1e6)

    def setup(self, run: Run) -> Clock:
        if not isinstance(run.db, HasClock):
            raise NemesisError(f"--nemesis clock: the {run.spec.backend} backend "
                               "cannot shift clocks")
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        db = run.db
        assert isinstance(db, HasClock)
        with self.lock:
            v = _value(op)
            if op.f == CLOCK_BUMP.start:
                nodes = target_nodes(run, v, self.rng)
                delta = int(v.get("delta_ns", self.rng.choice((-1, 1)) * self.max_skew_ns))
                self.faulted |= set(nodes)
                return self._shifted(run, op, {**v, "nodes": list(nodes), "delta_ns": delta},
                                     dict.fromkeys(nodes, delta))
            if op.f == CLOCK_SKEW.start:
                nodes = target_nodes(run, {"target": "all", **v}, self.rng)
                given = v.get("offsets_ns")
                offsets = ({str(k): int(x) for k, x in given.items()} if isinstance(given, Mapping)
                           else {n: self.rng.randint(-self.max_skew_ns, self.max_skew_ns)
                                 for n in nodes})
                self.faulted |= set(offsets)
                return self._shifted(run, op, {**v, "nodes": sorted(offsets),
                                               "offsets_ns": offsets}, offsets)
            if op.f in (CLOCK_BUMP.stop, CLOCK_SKEW.stop):
                named = list(self._heal_value(run))
                faulted = sorted(self.faulted)
                errors = _each(run.nodes, lambda n: db.reset_clock(run, n))
                self.faulted.clear()
                return _done(op, {**v, "nodes": named}, errors,
                             clock_landing(run, dict.fromkeys(faulted, 0)) if faulted else {})
        raise NemesisError(f"clock nemesis cannot {op.f!r}")

    def _shifted(self, run: Run, op: Op, value: dict[str, Any], deltas: Mapping[str, int]) -> Op:
        """Shift each node's clock by its delta; landed when each node's clock, read back,
        runs its old offset plus the delta off the harness's (nemesis.evidence)."""
        db = run.db
        assert isinstance(db, HasClock)
        before = read_clocks(run, sorted(deltas)) or {}
        errors = _each(sorted(deltas), lambda n: db.shift_clock(run, n, deltas[n]))
        want = {n: r.offset_ns + deltas[n] for n, r in before.items() if r is not None}
        return _done(op, value, errors, clock_landing(run, want) if want else {})

    def teardown(self, run: Run) -> None:
        db = run.db
        if isinstance(db, HasClock):
            with self.lock:
                _each(run.nodes, lambda n: db.reset_clock(run, n))
                self.faulted.clear()


class LoseUnflushed(_NodeFault):
    """`lose-unflushed`: crash nodes as an OS crash would: SIGKILL, cut every log back
    to its last flushed position, start again. The op is its own window (the node is
    back when it completes); teardown starts any node left down by an error."""

    kinds = (LOSE_UNFLUSHED,)
    fs = verbs(kinds)
    name = LOSE_UNFLUSHED.start

    def setup(self, run: Run) -> LoseUnflushed:
        if not (isinstance(run.db, LosesUnflushed) and isinstance(run.db, Killable)):
            raise NemesisError(f"--nemesis lose-unflushed: the {run.spec.backend} backend "
                               "cannot crash a node and drop its unflushed writes")
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        db = run.db
        assert isinstance(db, LosesUnflushed) and isinstance(db, Killable)
        if op.f != LOSE_UNFLUSHED.start:
            raise NemesisError(f"lose-unflushed nemesis cannot {op.f!r}")
        with self.lock:
            v = _value(op)
            nodes = target_nodes(run, v, self.rng)
            self.faulted |= set(nodes)
            errors, killed = _acted(run, "kill", nodes, lambda n: db.kill(run, n))
            cut: dict[str, Mapping[str, int] | None] = {}

            def cut_one(n: str) -> None:
                got = db.lose_unflushed(run, n)
                cut[n] = got if isinstance(got, Mapping) else None  # a DB that does not say

            errors += _each(nodes, cut_one)
            started: dict[str, Any] = {}
            if not v.get("stay_down"):
                more, started = _acted(run, "start", nodes, lambda n: db.start(run, n))
                errors += more
                self.faulted -= set(nodes)
            return _done(op, {**v, "nodes": list(nodes)}, errors,
                         combined(killed, cut_landing(cut), started))

    def teardown(self, run: Run) -> None:
        db = run.db
        if isinstance(db, Killable):
            with self.lock:
                _each(sorted(self.faulted), lambda n: db.start(run, n))
                self.faulted.clear()
