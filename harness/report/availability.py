"""The verdict box's availability line, from results.json's free-form `availability`.

The block Undertow's checker writes (`ops`, `windows`, `longest_without_ok`,
`poll_by_key_worst`, `recovery`) is said in its own words: the share of sends and polls
that succeeded, in fault windows and overall, the longest stretch with none, the longest
a key with a consumer and records to read waited for a poll returning one (an ok poll
that returned nothing served no key), and how soon they succeeded after the fault heals. Another
tool's block has no fixed shape (shared/HISTORY.md: "free-form"), so then this reads
whatever numbers it holds: shares as percentages, durations in seconds, a list summed up
by its worst value. Without any, the line falls back to the recovery after heals that
the liveness section measures.
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


SERVICE = ("send", "poll", "txn")


def _share(counts: Any) -> tuple[int, int] | None:
    """(ok, all) of one kind's counts, None when it has none."""
    if not isinstance(counts, Mapping):
        return None
    n = sum(int(counts.get(t) or 0) for t in ("ok", "fail", "info"))
    return (int(counts.get("ok") or 0), n) if n else None


def _ours(av: Mapping[str, Any]) -> str:
    """Undertow's own block in words."""
    ops: Mapping[str, Any] = av["ops"] if isinstance(av.get("ops"), Mapping) else {}
    windows = [w for w in av.get("windows") or [] if isinstance(w, Mapping)]
    parts = []
    for c in SERVICE:
        whole = _share(ops.get(c))
        if whole is None:
            continue
        ok, n = whole
        text = f"{c}s {100 * ok / n:.1f} % ok"
        during = [x for w in windows if (x := _share((w.get("ops") or {}).get(c)))]
        if during:
            d_ok, d_n = sum(x[0] for x in during), sum(x[1] for x in during)
            text += f" ({100 * d_ok / d_n:.1f} % in fault windows)"
        parts.append(text)
    longest = av.get("longest_without_ok") or {}
    for c in SERVICE:
        g = longest.get(c) if isinstance(longest, Mapping) else None
        if isinstance(g, Mapping) and _number(g.get("s")):
            parts.append(f"longest with no ok {c} {g['s']:.1f} s "
                         f"({g.get('from_s', 0):.1f}-{g.get('to_s', 0):.1f} s)")
    w = av.get("poll_by_key_worst")
    if isinstance(w, Mapping) and _number(w.get("s")):  # an empty poll served no key
        parts.append(f"longest a key waited for a poll to return its records: key "
                     f"{w.get('key')}, {w['s']:.1f} s "
                     f"({w.get('from_s', 0):.1f}-{w.get('to_s', 0):.1f} s)")
    rec: Mapping[str, Any] = av["recovery"] if isinstance(av.get("recovery"), Mapping) else {}
    heals = int(rec.get("heals") or 0)
    worst = [f"{c}s within {rec[f'worst_{c}_s']:.1f} s" for c in SERVICE
             if _number(rec.get(f"worst_{c}_s"))]
    if heals and worst:
        parts.append(f"after {heals} fault heal(s), {' and '.join(worst)} at worst")
    never = rec.get("never") or []
    if never:
        parts.append(f"{len(never)} heal(s) never followed by success")
    return "; ".join(parts) + "." if parts else "No send, poll or transaction was done."


def availability_line(av: Any, live: Liveness | None) -> str:
    """One line: what results.json's `availability` measured, else recovery after heals."""
    if isinstance(av, Mapping) and isinstance(av.get("ops"), Mapping) \
            and "longest_without_ok" in av:
        return _ours(av)
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
    line = (f"{live.recovered} of {live.heals} fault heals were followed by a successful "
            f"{' and '.join(live.kinds) or 'send or poll'}")
    worst = [f"{c} {v:.1f} s" for c, v in live.worst.items() if v is not None]
    if worst:
        line += f" (worst: {', '.join(worst)})"
    if not live.ok:
        line += f"; stalled: no success for {live.stall_s:g} s or more after a heal"
    return line + "."
