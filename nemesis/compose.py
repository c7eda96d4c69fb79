"""compose(...): one nemesis made of several, routing each op by its `f`.

Setup is all-or-nothing (a part that fails to set up tears down the ones before);
teardown runs every part's teardown even when some raise, so every fault is undone.
An op no part knows, or a part that raises, still completes `info` with the error:
the history never holds a nemesis invoke without its completion.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from harness.history import Op
from harness.protocols import Nemesis, Run
from nemesis.faults import NemesisError

log = logging.getLogger(__name__)


class Composed:
    """Several nemeses behind one; `fs` is the union of theirs, which must not overlap."""

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
            return part.invoke(run, op)
        except Exception as e:
            log.exception("nemesis %s failed", op.f)
            return op.complete("info", error=f"{type(e).__name__}: {e}")

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


def compose(*parts: Nemesis) -> Composed:
    return Composed(parts)
