"""The grammar of committed offsets in history.jsonl (shared/HISTORY.md): the `commit`
and `committed` micro-ops, and the group an operation names.

The strict reader calls these for every line that holds them and the compiled
parser (`fastlines`) leaves to it; each appends rows of COMMIT_COLUMNS (line,
group code, key, offset, kind) to a flat list. The compiled parser gives the same
rows for the lines it takes, and leaves every line that names a `group` here.
"""

from __future__ import annotations

from typing import Any

from harness.runfiles.lineerror import _I64, NO_OFFSET, LineError, checked_int

# rows of HistoryScan.commit: line, group code, key, offset, kind (the kinds below)
COMMIT_COLUMNS: tuple[str, ...] = ("line", "group", "key", "offset", "kind")
COMMIT_WRITE, COMMIT_ASKED, COMMIT_ANSWERED = 0, 1, 2  # a commit; a key asked; an answer
DEFAULT_GROUP = ""  # the run's one group, when an operation names none


def _key_string(ks: str, what: str) -> int:
    """A key of a JSON object (a poll's, a commit's): a non-negative integer's digits."""
    if not (ks.isascii() and ks.isdigit()) or int(ks) >= _I64:
        raise LineError(f"{what} key must be a non-negative integer string, got {ks!r}")
    return int(ks)


def commit_micro_op(m: list[Any], line: int, group: int, out: list[int]) -> None:
    """`["commit", {"<key>": offset, ...}]`, in an invoke or a completion alike."""
    if len(m) != 2 or type(m[1]) is not dict:
        raise LineError("a commit micro-op must be [\"commit\", {key: offset}]")
    for ks, o in m[1].items():
        key = _key_string(ks, "commit")
        off = checked_int(o, f"committed offset of key {ks}", nonneg=True)
        out.extend((line, group, key, off, COMMIT_WRITE))


def committed_micro_op(m: list[Any], line: int, completion: bool, group: int,
                       out: list[int]) -> None:
    """`["committed", [key, ...]]` asks (an invoke; a completion may repeat it);
    `["committed", {"<key>": offset or null}]` answers (a completion only)."""
    arg = m[1] if len(m) == 2 else None
    if type(arg) is list:
        for k in arg:
            key = checked_int(k, "committed key", nonneg=True)
            if not completion:
                out.extend((line, group, key, NO_OFFSET, COMMIT_ASKED))
    elif type(arg) is dict and completion:
        for ks, o in arg.items():
            key = _key_string(ks, "committed")
            off = NO_OFFSET if o is None else checked_int(o, f"committed offset of key {ks}",
                                                          nonneg=True)
            out.extend((line, group, key, off, COMMIT_ANSWERED))
    elif completion:
        raise LineError("a completed committed micro-op must be [\"committed\", "
                        "{key: offset or null}]")
    else:
        raise LineError("a committed micro-op in an invoke must be [\"committed\", [key, ...]]")


def merge_commits(parts: list[tuple[Any, list[str]]]) -> tuple[Any, tuple[str, ...]]:
    """Commit rows of several chunks (each with its own group names) as one array whose
    group codes index the one tuple of names returned (in order of first appearance)."""
    import numpy as np

    names: dict[str, int] = {DEFAULT_GROUP: 0}
    out = [np.zeros((0, len(COMMIT_COLUMNS)), np.int64)]
    for rows, groups in parts:
        code = np.array([names.setdefault(g, len(names)) for g in groups], np.int64)
        if len(rows):
            rows = rows.copy()
            rows[:, 1] = code[rows[:, 1]]
            out.append(rows)
    return np.concatenate(out), tuple(names)
