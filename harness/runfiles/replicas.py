"""The strict reader of replicas.jsonl: summaries as rows, records as columns.

Each line is a record (`offset`, `value`) or a replica's summary (`hw`, `leo`);
anything else, or records without their summary, raises HistoryError naming
file, line and problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.runfiles.ops import HistoryError
from harness.runfiles.strict import LineError, checked_int


@dataclass(frozen=True, slots=True)
class ReplicaSummary:
    node: str
    key: int
    hw: int
    leo: int


@dataclass
class Replicas:
    """replicas.jsonl: summaries, and records as columns (node code, key, offset, value)."""

    nodes: list[str]
    summaries: list[ReplicaSummary]
    rec_node: Any  # numpy int64: index into nodes
    rec_key: Any
    rec_offset: Any
    rec_value: Any


def read_replicas(path: Path | str) -> Replicas:
    """Read and check replicas.jsonl; raise HistoryError naming file, line and problem."""
    import numpy as np

    path = str(path)
    nodes: dict[str, int] = {}
    summaries: dict[tuple[str, int], ReplicaSummary] = {}
    first_rec: dict[tuple[str, int], int] = {}
    recs: list[tuple[int, int, int, int]] = []
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise HistoryError(path, None, f"cannot read: {e.strerror or e}") from e
    with fh:
        for n, raw in enumerate(fh, 1):
            try:
                try:
                    o = orjson.loads(raw)
                except orjson.JSONDecodeError as e:
                    raise LineError(f"invalid JSON (truncated line?): {e}") from None
                if type(o) is not dict:
                    raise LineError("not a JSON object")
                for name in ("node", "key"):
                    if name not in o:
                        raise LineError(f"missing field {name!r}")
                node = o["node"]
                if type(node) is not str:
                    raise LineError("node must be a string")
                key = checked_int(o["key"], "key", nonneg=True)
                if "offset" in o:
                    if "value" not in o:
                        raise LineError("missing field 'value'")
                    off = checked_int(o["offset"], "offset", nonneg=True)
                    val = checked_int(o["value"], "value")
                    first_rec.setdefault((node, key), n)
                    recs.append((nodes.setdefault(node, len(nodes)), key, off, val))
                elif "hw" in o and "leo" in o:
                    hw = checked_int(o["hw"], "hw", nonneg=True)
                    leo = checked_int(o["leo"], "leo", nonneg=True)
                    if hw > leo:
                        raise LineError(f"hw {hw} > leo {leo}")
                    if (node, key) in summaries:
                        raise LineError(f"second summary line for node {node} key {key}")
                    nodes.setdefault(node, len(nodes))
                    summaries[(node, key)] = ReplicaSummary(node, key, hw, leo)
                else:
                    raise LineError("neither a record (offset, value) nor a summary (hw, leo)")
            except LineError as e:
                raise HistoryError(path, n, e.problem) from None
    for (node, key), line in first_rec.items():
        if (node, key) not in summaries:
            raise HistoryError(path, line, f"records of node {node} key {key} have no summary line")
    arr = np.array(recs, dtype=np.int64).reshape(-1, 4)
    return Replicas(list(nodes), list(summaries.values()), arr[:, 0], arr[:, 1], arr[:, 2],
                    arr[:, 3])
