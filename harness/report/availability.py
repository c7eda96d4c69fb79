"""The verdict box's availability line, from results.json's free-form `availability`.

Its shape is not fixed (shared/HISTORY.md: "free-form"), so this reads whatever numbers
it holds and says them in words: shares as percentages, durations in seconds; a list
(one entry per fault window, say) is summed up by its worst value. Without it, the
line falls back to the recovery after heals that the liveness section measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.report.liveness import Liveness

MAX_PARTS = 6
_SHARE = ("share", "ratio", "frac", "pct", "percent", "rate")
_TIME = ("_s", "_sec", "seconds", "longest", "time_to", "first_ok", "gap", "stall")
_FIRST = ("fault", "longest", "first", "heal")  # what a reader asks first


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _leaves(x: Any, path: tuple[str, ...], out: dict[tuple[str, ...], list[float]]) -> None:
    if _number(x):
        out.setdefault(path, []).append(float(x))
    elif isinstance(x, Mapping):
        for k, v in x.items():
            _leaves(v, (*path, str(k)), out)
    elif isinstance(x, list | tuple):
        for v in x:  # entries of a list share their names: summed up below
            _leaves(v, path, out)


def _is_share(name: str, values: list[float]) -> bool:
    return any(s in name for s in _SHARE) or ("ok" in name and all(0 <= v <= 1 for v in values)
                                              and not any(t in name for t in _TIME))


def _say(path: tuple[str, ...], values: list[float]) -> str:
    name = "_".join(path).lower()
    words = " ".join(p.replace("_", " ") for p in path)
    for unit in (" s", " sec", " pct", " percent", " ms"):
        words = words.removesuffix(unit)
    share = _is_share(name, values)
    # several values (one per window): the worst, lowest share or longest time
    v = min(values) if share else max(values)
    worst = f"worst of {len(values)}: " if len(values) > 1 else ""
    if share:
        pct = v if ("pct" in name or "percent" in name) else 100 * v
        return f"{words}: {worst}{pct:.1f} %"
    if name.endswith("_ms"):
        return f"{words}: {worst}{v / 1000:.1f} s"
    if any(t in name for t in _TIME):
        return f"{words}: {worst}{v:.1f} s"
    return f"{words}: {worst}{v:g}"


def availability_line(av: Any, live: Liveness | None) -> str:
    """One line: what results.json's `availability` measured, else recovery after heals."""
    leaves: dict[tuple[str, ...], list[float]] = {}
    if isinstance(av, Mapping):
        _leaves(av, (), leaves)
    if leaves:
        ranked = sorted(leaves.items(), key=lambda kv: (
            not any(f in "_".join(kv[0]).lower() for f in _FIRST)))
        parts = [_say(p, vs) for p, vs in ranked[:MAX_PARTS]]
        more = len(ranked) - MAX_PARTS
        return "; ".join(parts) + (f"; {more} more figure(s) below" if more > 0 else "")
    if live is None:
        return "No fault was healed, so no recovery was measured."
    line = (f"{live.recovered} of {live.heals} heals were followed by a successful "
            "client operation")
    if live.max_recovery_s is not None and live.median_recovery_s is not None:
        line += (f" (median {live.median_recovery_s:.1f} s, worst "
                 f"{live.max_recovery_s:.1f} s)")
    if not live.ok:
        line += f"; stalled: no success for {live.stall_s:g} s or more after a heal"
    return line + "."
