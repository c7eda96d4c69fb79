"""One line per anomaly name, as shared/HISTORY.md defines it: the verdict box's hover
titles and the report's glossary read them from here, so a name is explained once."""

from __future__ import annotations

DEFINITIONS: dict[str, str] = {
    "lost-write": "an acknowledged send whose value was never read, although a later "
                  "successful poll read past its offset",
    "replica-lost-write": "an acknowledged send whose value is on no replica after the "
                          "final heal",
    "unseen": "an acknowledged send whose value was never read and that nothing read past "
              "(late or lost: no one can tell)",
    "inconsistent-offsets": "one offset of a key holding two or more different values",
    "duplicate": "one value at two or more offsets of a key",
    "poll-skip": "a consumer's next poll skipped records after its last one",
    "nonmonotonic-poll": "a consumer's next poll started at or before its last record",
    "int-poll-skip": "records of one key skipped inside one poll",
    "int-nonmonotonic-poll": "records of one key going backwards inside one poll",
    "nonmonotonic-send": "a process's later send to a key landed at a lower offset",
    "int-send-skip": "two sends of one operation to a key with other records between them",
    "int-nonmonotonic-send": "two sends of one operation to a key landed in reverse order",
    "G1a": "a poll returned a value whose send failed (an aborted read)",
    "precommitted-read": "a transaction read its own send before it committed",
    "G0": "a cycle of write-write dependencies between operations",
    "G1c": "a cycle of dependencies with at least one write-read edge",
    "replica-divergence": "replicas hold different committed values at one offset, or one "
                          "committed log is not a prefix of another",
    "stale-committed-offset": "a committed-offset read that no order of the group's commits "
                              "allows",
}
SUFFIXES = {"-process": " (with process order)", "-realtime": " (with real-time order)"}


def define(name: str) -> str:
    """The one-line definition of an anomaly name; cycle variants say their edges."""
    if name in DEFINITIONS:
        return DEFINITIONS[name]
    for suffix, words in SUFFIXES.items():
        if name.endswith(suffix) and name[: -len(suffix)] in DEFINITIONS:
            return DEFINITIONS[name[: -len(suffix)]] + words
    return "an anomaly type this report has no definition of"
