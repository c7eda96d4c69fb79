"""An end-to-end run with enough in it to assert on, on a loaded machine too.

Why: a short run's floors (so many commits, so many transactions) say that the run
exercised what the test is about; a machine busy enough starves the clients, and a
20 s run then holds a handful of operations although nothing is wrong. Every run's
verdict is asserted; a run too thin to mean anything is run again, once, for longer,
and the caller asserts its floors on that one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import core
from harness.spec import TestSpec

Ops = list[dict[str, Any]]


def valid_run_with_enough(spec_for: Callable[[float, Path], TestSpec],
                          enough: Callable[[Ops], bool], results: Path,
                          seconds: float, longer_s: float) -> tuple[core.Outcome, Ops]:
    """`spec_for(time_limit_s, results_dir)`'s run, valid; again for `longer_s` if its
    history falls short of `enough`."""
    for i, limit in enumerate((seconds, longer_s)):
        outcome = core.run(spec_for(limit, results / f"run{i}"))
        assert outcome.valid is True, outcome.summary()
        ops = [json.loads(x) for x in (outcome.run_dir / "history.jsonl").read_text()
               .splitlines()]
        if enough(ops):
            break
    return outcome, ops
