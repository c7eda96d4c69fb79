"""Recorded fault plans: test.json's `nemesis_plan` <-> Steps <-> a TOML experiment file.

Every run records the plan it used (each step's offset, verb and value as planned,
before injection). Values keep what they were: a pure target resolved when the
plan was drawn names its nodes, and a role ("the leader of key 3", "the
controller", a sequence's `"role": "B"`) stays a role, resolved again when the
replay injects it. A spec whose `nemesis_plan` is set runs that plan as it is
(nemesis.packages); `experiment_toml` writes such a spec as a file that
`undertow run --config FILE` replays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import tomli_w

from harness.faultplan import Step
from harness.spec import SpecError, TestSpec

PLAN_KEY = "nemesis_plan"  # in test.json, in TOML experiment files, and the TestSpec field
# spec fields an experiment file leaves to the command line that replays it
NOT_SAVED = ("results_dir", "test_count", "nemesis_plan")


def steps_from_json(raw: Any, where: str) -> tuple[Step, ...]:
    """Recorded steps as Steps, in time order; a SpecError names `where` and the step."""
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise SpecError(f"{where}: {PLAN_KEY} must be a list of steps, got {type(raw).__name__}")
    out: list[Step] = []
    for i, item in enumerate(raw):
        here = f"{where}: {PLAN_KEY}[{i}]"
        if not isinstance(item, Mapping):
            raise SpecError(f"{here}: a step is a table with at_s, f and value")
        unknown = set(item) - {"at_s", "f", "value"}
        if unknown:
            raise SpecError(f"{here}: unknown key(s) {sorted(unknown)}; known: at_s, f, value")
        at_s, f, value = item.get("at_s"), item.get("f"), item.get("value", {})
        if isinstance(at_s, bool) or not isinstance(at_s, int | float) or at_s < 0:
            raise SpecError(f"{here}: at_s must be a number of seconds >= 0, got {at_s!r}")
        if not isinstance(f, str) or not f:
            raise SpecError(f"{here}: f must name a nemesis verb (kill, start, ...), got {f!r}")
        if not isinstance(value, Mapping):
            raise SpecError(f"{here}: value must be a table, got {value!r}")
        out.append(Step(float(at_s), f, dict(value)))
    return tuple(sorted(out, key=lambda s: s.at_s))


def steps_to_json(steps: Iterable[Step]) -> list[dict[str, Any]]:
    return [s.to_json() for s in steps]


def check_verbs(steps: Sequence[Step], fs: frozenset[str], nemesis: Sequence[str]) -> None:
    """Every step's verb must be one the composed nemesis handles (else it cannot replay)."""
    for i, s in enumerate(steps):
        if s.f not in fs:
            raise SpecError(f"{PLAN_KEY}[{i}]: {s.f!r} is not a verb of --nemesis "
                            f"{','.join(nemesis) or 'none'} (verbs: {', '.join(sorted(fs))}); "
                            f"add the fault that injects it to `nemesis`")


def replaying(spec: TestSpec, steps: Sequence[Step], time_limit_s: float | None = None,
              **changes: Any) -> TestSpec:
    """spec set to replay steps (and, when given, a new time limit)."""
    tl = spec.time_limit_s if time_limit_s is None else time_limit_s
    return replace(spec, nemesis_plan=tuple(steps_to_json(steps)), time_limit_s=tl,
                   **changes).validate()


def _plain(v: Any) -> Any:
    """JSON-ish data as TOML can hold it: no None (dropped), tuples as lists, str keys."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v if x is not None]
    return v


def experiment_toml(spec: TestSpec, steps: Sequence[Step], header: str = "") -> str:
    """A TOML experiment file of spec that replays steps (`undertow run --config FILE`)."""
    data = {k: v for k, v in spec.to_json().items() if k not in NOT_SAVED}
    data[PLAN_KEY] = steps_to_json(steps)
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    return ("\n".join(lines) + "\n\n" if lines else "") + tomli_w.dumps(_plain(data))
