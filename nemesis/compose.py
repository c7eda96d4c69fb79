"""compose(...): one nemesis made of several, routing each op by its `f`.

Setup is all-or-nothing (a part that fails to set up tears down the ones before);
teardown runs every part's teardown even when some raise, so every fault is undone.
An op no part knows, or a part that raises, still completes `info` with the error:
the history never holds a nemesis invoke without its completion.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from harness.protocols import FaultKind, HasCoordinator, HasLeaders, Nemesis, Run
from harness.runfiles import Op
from nemesis.faults import NemesisError

log = logging.getLogger(__name__)
ROLE_WAIT_S = 5.0  # how long a fault on the controller or coordinator waits to see the role move


class Composed:
    """Several nemeses behind one; `fs` is the union of theirs, which must not overlap,
    and `kinds` all their fault kinds."""

    def __init__(self, parts: Sequence[Nemesis]) -> None:
        self.parts = tuple(parts)
        self.routes: dict[str, Nemesis] = {}
        for p in self.parts:
            for f in p.fs:
                if f in self.routes:
                    raise NemesisError(f"two nemeses handle {f!r}: {type(self.routes[f]).__name__}"
                                       f" and {type(p).__name__}")
                self.routes[f] = p
        self.fs = frozenset(self.routes)
        self.kinds: tuple[FaultKind, ...] = tuple(dict.fromkeys(k for p in self.parts
                                                               for k in p.kinds))

    def setup(self, run: Run) -> Composed:
        done: list[Nemesis] = []
        try:
            for p in self.parts:
                p.setup(run)
                done.append(p)
        except BaseException:
            for p in reversed(done):
                try:
                    p.teardown(run)
                except Exception:
                    log.exception("teardown of %s after a failed setup", type(p).__name__)
            raise
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        part = self.routes.get(op.f)
        if part is None:
            return op.complete("info", error=f"no nemesis handles {op.f!r}; known: "
                               f"{', '.join(sorted(self.fs))}")
        try:
            done = part.invoke(run, op)
        except Exception as e:
            log.exception("nemesis %s failed", op.f)
            return op.complete("info", error=f"{type(e).__name__}: {e}")
        target = op.value.get("target") if isinstance(op.value, Mapping) else None
        if target in ("controller", "coordinator"):
            wait_s = float(op.value.get("role_wait_s", ROLE_WAIT_S))
            done = note_role_change(run, done, str(target), wait_s=wait_s)
        return done

    def teardown(self, run: Run) -> None:
        errors: list[Exception] = []
        for p in reversed(self.parts):
            try:
                p.teardown(run)
            except Exception as e:
                log.exception("teardown of %s", type(p).__name__)
                errors.append(e)
        if errors:  # logged, not raised: the run's own cleanup must go on
            log.error("%d nemesis teardowns failed; first: %r", len(errors), errors[0])


def note_role_change(run: Run, done: Op, role: str, *, wait_s: float = ROLE_WAIT_S) -> Op:
    """A fault aimed at the active controller or the group coordinator (`role`): write the
    node it hit and the one that took the role after it into the completion (`controller`
    and `new_controller`, or `coordinator` and `new_coordinator`), so the moves show in the
    history.

    Waits (bounded by wait_s) for a different node to take the role; the new one is null
    when none did in that time (e.g. the quorum lost its majority). The wait holds up the
    nemesis's next step, so a timed plan whose steps must land at their times (a pause
    to be healed after a drawn 1 s) asks for `role_wait_s` 0 in the fault's value: the
    holder is then looked up once.
    """
    value = dict(done.value) if isinstance(done.value, Mapping) else {}
    nodes = value.get("nodes") or []
    able = HasLeaders if role == "controller" else HasCoordinator
    if not isinstance(run.db, able) or not nodes:
        return done
    old = str(nodes[0])
    new: str | None = None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            current = _holder(run, role)
        except Exception:
            current = None
        if current is not None and current != old:
            new = current
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    value.update({role: old, f"new_{role}": new})
    return done.with_(value=value)


def _holder(run: Run, role: str) -> str | None:
    db = run.db
    if role == "controller" and isinstance(db, HasLeaders):
        return db.controller(run)
    if role == "coordinator" and isinstance(db, HasCoordinator):
        return db.coordinator(run)
    return None


def compose(*parts: Nemesis) -> Composed:
    return Composed(parts)
