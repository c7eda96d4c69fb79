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

from harness.protocols import FaultKind, HasLeaders, Nemesis, Run
from harness.runfiles import Op
from nemesis.faults import NemesisError

log = logging.getLogger(__name__)


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
        if isinstance(op.value, Mapping) and op.value.get("target") == "controller":
            done = note_controller_change(run, done)
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


def note_controller_change(run: Run, done: Op, *, wait_s: float = 5.0) -> Op:
    """A fault aimed at the active controller: write the controller it hit and the one the
    quorum elected after it into the completion, so controller changes show in the history.

    Waits (bounded by wait_s) for a different controller to appear; `new_controller` is
    null when none did in that time (e.g. the quorum lost its majority).
    """
    value = dict(done.value) if isinstance(done.value, Mapping) else {}
    nodes = value.get("nodes") or []
    if not isinstance(run.db, HasLeaders) or not nodes:
        return done
    old = str(nodes[0])
    new: str | None = None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            current = run.db.controller(run)
        except Exception:
            current = None
        if current is not None and current != old:
            new = current
            break
        time.sleep(0.1)
    value.update(controller=old, new_controller=new)
    return done.with_(value=value)


def compose(*parts: Nemesis) -> Composed:
    return Composed(parts)
