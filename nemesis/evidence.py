"""Did a node fault take effect? Each is judged by what its nodes' hosts show before and
after it acted (HISTORY.md: a nemesis completion's `landed` and `evidence`).

- kill: a process ran before, none runs after;
- start: none ran (or it was another pid) before, a live one serves after;
- pause: a live process, every thread of it stopped (or its cgroup frozen) after;
- resume: it was stopped before, and is live and running after;
- a clock fault: the node's clock, read back from the node, runs the offset asked for
  off the harness's (and, at reset, runs true again);
- lose-unflushed: its kill and start as above, and the bytes each file lost, as the
  node's DB cut them.

A fault on several nodes landed if it landed on any of them (it took effect); the
evidence names each node, those it missed included. A heal whose nodes were not
faulted makes no claim (no `landed` key): there was nothing for it to undo, and a run's
final heal must not pass for a fault that landed. A DB that cannot observe its processes
makes no claim either: an unobserved fault is not called a missed one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from harness.protocols import ClockReading, ObservesProcesses, ProcState, ReadsClock, Run

log = logging.getLogger("undertow.nemesis")
Verb = Literal["kill", "start", "pause", "resume"]
States = Mapping[str, ProcState]


def observe(run: Run, nodes: Sequence[str]) -> dict[str, ProcState] | None:
    """Each node's process state now, or None when the run's DB cannot tell."""
    db = run.db
    if not isinstance(db, ObservesProcesses):
        return None
    return {n: db.process_state(run, n) for n in nodes}


SETTLE_S = 2.0  # a signal is delivered to every thread soon, not at once


def observe_after(run: Run, verb: Verb, nodes: Sequence[str], before: States | None,
                  settle_s: float = SETTLE_S) -> dict[str, ProcState] | None:
    """The states after the fault acted, read again (for up to settle_s) while some node
    does not show it yet: a SIGSTOP reaches a JVM's threads one by one."""
    if before is None:
        return None
    deadline = time.monotonic() + settle_s
    while True:
        after = observe(run, nodes)
        if after is None or time.monotonic() >= deadline or not any(
                _settling(verb, before[n], after[n]) for n in nodes if n in before):
            return after
        time.sleep(0.05)


def _settling(verb: Verb, before: ProcState, after: ProcState) -> bool:
    """Whether a node may still show the fault soon: a live process whose threads are not
    all stopped (pause) or not all running (resume) yet, or one dying of its SIGKILL. A miss
    that cannot change (nothing to kill, already running) is not waited for: the nemesis
    must keep its plan's times."""
    if after.pid is None:
        return False
    if verb == "pause":
        return not after.stopped
    if verb == "resume":
        return after.stopped
    return verb == "kill" and before.pid is not None


def judge(verb: Verb, before: ProcState, after: ProcState) -> tuple[bool, str]:
    """Whether one node's fault landed, and the observation that says so."""
    if verb == "kill":
        if before.pid is None:
            return False, f"nothing to kill: {before.seen}"
        if after.pid is None:
            return True, f"pid {before.pid} gone"
        return False, f"still alive after SIGKILL: {after.seen}"
    if verb == "start":
        if after.pid is None:
            return False, f"did not start: {after.seen}"
        if before.pid == after.pid:
            return False, f"already running, nothing started: {after.seen}"
        return True, f"new pid {after.pid} serves"
    if verb == "pause":
        if after.pid is None:
            return False, f"no process to pause: {after.seen}"
        if not after.stopped:
            return False, f"not stopped: {after.seen}"
        return True, after.seen
    if before.pid is not None and not before.stopped:
        return False, f"was not paused: {before.seen}"
    if after.pid is None:
        return False, f"no process to resume: {after.seen}"
    if after.stopped:
        return False, f"still stopped: {after.seen}"
    return True, f"pid {after.pid} running again"


def landing(verb: Verb, nodes: Collection[str], before: States | None,
            after: States | None) -> dict[str, Any]:
    """The completion's `landed` and `evidence` for a fault on nodes ({} when no claim)."""
    if before is None or after is None or not nodes:
        return {}
    verdicts = [(n, *judge(verb, before[n], after[n])) for n in nodes
                if n in before and n in after]
    if not verdicts:
        return {}
    landed = any(ok for _, ok, _ in verdicts)
    evidence = "; ".join(f"{n}: {why}" for n, _, why in verdicts)
    if not all(ok for _, ok, _ in verdicts):
        log.warning("%s did not land everywhere: %s", verb, evidence)
    return {"landed": landed, "evidence": evidence}


FILES_NAMED = 4  # a cut's evidence names this many files, the most cut first


def cut_landing(cuts: Mapping[str, Mapping[str, int] | None]) -> dict[str, Any]:
    """The claim of a lose-unflushed cut: each node's bytes lost, per file (a node whose
    DB did not say makes no claim). A cut that found nothing unflushed still took
    effect: the node lost what an OS crash would have, nothing."""
    said = {n: c for n, c in cuts.items() if c is not None}
    if not said:
        return {}
    parts = []
    for n, files in sorted(said.items()):
        if not files:
            parts.append(f"{n}: nothing unflushed, no byte cut")
            continue
        top = sorted(files.items(), key=lambda kv: (-kv[1], kv[0]))
        named = ", ".join(f"{f} {b:,} B" for f, b in top[:FILES_NAMED])
        more = f", {len(top) - FILES_NAMED} more" if len(top) > FILES_NAMED else ""
        parts.append(f"{n}: {sum(files.values()):,} B cut from {len(files)} "
                     f"file{'s' if len(files) != 1 else ''} ({named}{more})")
    return {"landed": True, "evidence": "; ".join(parts)}


def combined(*parts: Mapping[str, Any]) -> dict[str, Any]:
    """One claim from the claims of a fault's steps (lose-unflushed: kill, cut, start):
    it landed if every step that made a claim landed."""
    claims = [p for p in parts if "landed" in p]
    if not claims:
        return {}
    return {"landed": all(bool(p["landed"]) for p in claims),
            "evidence": "; ".join(str(p["evidence"]) for p in claims)}


CLOCK_SETTLE_S = 0.5        # the broker re-reads its clock file at most every 100 ms
CLOCK_SLACK_NS = 50_000_000  # beyond half the request's round trip


def read_clocks(run: Run, nodes: Sequence[str]) -> dict[str, ClockReading | None] | None:
    """Each node's clock now, all at once; None when the run's DB cannot read clocks."""
    db = run.db
    if not isinstance(db, ReadsClock) or not nodes:
        return None
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        return dict(zip(nodes, pool.map(lambda n: db.read_clock(run, n), nodes), strict=True))


def _clock_shows(r: ClockReading, want_ns: int) -> bool:
    return r.offset_ns == want_ns and abs(r.ahead_ns - want_ns) <= r.rtt_ns // 2 + CLOCK_SLACK_NS


def clock_landing(run: Run, want_ns: Mapping[str, int],
                  settle_s: float = CLOCK_SETTLE_S) -> dict[str, Any]:
    """Whether each node's clock, read back, runs `want_ns` off the harness's (re-read for
    up to settle_s while some node does not show it yet). Landed if every node that
    answered shows it; a node that does not answer (down, paused) makes no claim."""
    nodes = sorted(want_ns)
    seen = read_clocks(run, nodes)
    if seen is None:
        return {}
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline and any(
            r is not None and not _clock_shows(r, want_ns[n]) for n, r in seen.items()):
        time.sleep(0.05)
        late = [n for n, r in seen.items() if r is not None and not _clock_shows(r, want_ns[n])]
        seen.update(read_clocks(run, late) or {})
    verdicts: dict[str, tuple[bool, str]] = {}
    for n, r in seen.items():
        if r is not None:
            verdicts[n] = (_clock_shows(r, want_ns[n]),
                           f"clock reads {r.ahead_ns / 1e9:+.3f} s against the harness's "
                           f"(±{r.rtt_ns / 2e9:.3f} s), offset {r.offset_ns / 1e9:+.3f} s in "
                           f"force, {want_ns[n] / 1e9:+.3f} s asked")
    if not verdicts:
        return {}
    landed = all(ok for ok, _ in verdicts.values())
    evidence = "; ".join(f"{n}: {why}" for n, (_, why) in sorted(verdicts.items()))
    if not landed:
        log.warning("clock fault did not land everywhere: %s", evidence)
    return {"landed": landed, "evidence": evidence}
