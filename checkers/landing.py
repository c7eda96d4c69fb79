"""HISTORY.md's rule for faults that never took effect: a run in which nemesis completions
say whether their fault `landed`, and none says it did, earned no verdict. Its safety
checks may have passed, but against faults the cluster never saw: `valid` is at most
"unknown", with the reason in one line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def unlanded_reason(nemesis: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the faults asked for do not count, or None when some landed (or none claimed)."""
    claims = [r for r in nemesis if r.get("type") != "invoke" and "landed" in r]
    if not claims or any(r.get("landed") is True for r in claims):
        return None
    first = claims[0]
    at = int(first.get("time", 0)) / 1e9
    return (f"{len(claims)} fault completion(s) said whether the fault landed, and none did: "
            f"the first, {first.get('f')} at {at:.1f} s: {first.get('evidence', 'no evidence')}")


def apply(results: dict[str, Any], nemesis: Sequence[Mapping[str, Any]]) -> None:
    """Lower a `true` verdict to "unknown" when no fault landed (never touches `false`)."""
    reason = unlanded_reason(nemesis)
    if reason is None:
        return
    results.setdefault("stats", {})["faults_unlanded"] = reason
    if results.get("valid") is True:
        results["valid"] = "unknown"
        results["unknown_reason"] = reason
