"""The exit codes of the contract, for `undertow run`, `undertow check` and the nightly.

0 valid, 1 invalid, 3 unknown, 2 bad usage or an unreadable input, 130
interrupted; several runs exit with the worst of theirs, in the order 130, 2, 1, 3, 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3
EXIT_INTERRUPTED = 130
WORST_FIRST: tuple[int, ...] = (EXIT_INTERRUPTED, EXIT_USAGE, EXIT_INVALID, EXIT_UNKNOWN,
                                EXIT_VALID)
EXIT_MEANING: dict[int, str] = {
    EXIT_VALID: "valid", EXIT_INVALID: "invalid", EXIT_USAGE: "bad usage or unreadable input",
    EXIT_UNKNOWN: "unknown", EXIT_INTERRUPTED: "interrupted"}


def exit_code(valid: Any) -> int:
    """The exit code of results.json's `valid`: True 0, False 1, anything else 3."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN


def worst_exit_code(codes: Iterable[int]) -> int:
    """The exit code of several runs: the worst in the order 130, 2, 1, 3, 0.

    A code outside the contract (a crash) counts as worse than all of them; no code
    at all is bad usage, since nothing was checked.
    """
    rank = {c: i for i, c in enumerate(WORST_FIRST)}
    return min(codes, key=lambda c: rank.get(c, -1), default=EXIT_USAGE)
