"""toyfault: a fault of one's own, loaded as a plug-in through $UNDERTOW_PLUGINS.

`--nemesis toy-mark` marks nodes: a file per marked node in the run's folder
(`toy-marks/<node>`), and `toy-unmark` takes the marks away (`{}`: every one). Each
completion says whether it landed from the marks read back. It harms nothing, so it
works on every system and backend: what it shows is the seam. Nothing outside this
file names it: the standard nemesis package plans it on the run's schedule, the final
heal undoes it, test.json records its kind, liveness counts its heals, the report draws
its lane. Nothing here is imported by the tests: they run `undertow` in a subprocess
that loads it.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

from harness import registry
from harness.faultkinds import FaultKind, verbs
from harness.faultplan import Step
from harness.protocols import Run
from harness.runfiles import Op
from harness.spec import TestSpec
from nemesis.packages import Fault
from nemesis.schedule import schedule_of

TOY_MARK = FaultKind("toy-mark", "toy-unmark", "#2ca02c", "toy mark")


class ToyMark:
    """Marks nodes and takes the marks away; teardown takes every mark away."""

    kinds = (TOY_MARK,)
    fs = verbs(kinds)

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def _marks(self, run: Run) -> Path:
        return run.paths.root / "toy-marks"

    def _marked(self, run: Run) -> set[str]:
        d = self._marks(run)
        return {p.name for p in d.iterdir()} if d.is_dir() else set()

    def setup(self, run: Run) -> ToyMark:
        return self

    def invoke(self, run: Run, op: Op) -> Op:
        value: dict[str, Any] = dict(op.value) if isinstance(op.value, dict) else {}
        with self.lock:
            d = self._marks(run)
            if op.f == TOY_MARK.start:
                nodes = [str(n) for n in value.get("nodes", ())] or [self.rng.choice(run.nodes)]
                d.mkdir(exist_ok=True)
                for n in nodes:
                    (d / n).touch()
                seen = self._marked(run)
                return op.complete("info", {**value, "nodes": nodes},
                                   landed=set(nodes) <= seen,
                                   evidence=f"marks read back: {', '.join(sorted(seen))}")
            if op.f == TOY_MARK.heal:
                was = sorted(self._marked(run))
                for n in was:
                    (d / n).unlink()
                left = self._marked(run)
                return op.complete("info", {**value, "nodes": was or list(run.nodes)},
                                   landed=not left,
                                   evidence=f"{len(was)} marks taken away, {len(left)} left")
        raise ValueError(f"toy-mark nemesis cannot {op.f!r}")

    def teardown(self, run: Run) -> None:
        with self.lock:
            for n in self._marked(run):
                (self._marks(run) / n).unlink()


def plan(spec: TestSpec, rng: random.Random) -> list[Step]:
    """A mark of one node in each of the schedule's windows, taken away at its end."""
    out: list[Step] = []
    for start, end in schedule_of(spec).windows(rng):
        out += [Step(start, TOY_MARK.start, {"nodes": [rng.choice(spec.nodes)]}),
                Step(end, TOY_MARK.heal, {})]
    return out


registry.register("fault", "toy-mark", Fault("toy-mark", (ToyMark,), plan))
