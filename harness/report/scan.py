"""What the report's figures and tables draw: the tolerant walk of the history
(harness.runfiles.walk) with the nemesis operations turned into fault windows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.faultkinds import KINDS as FAULT_KINDS
from harness.faultkinds import FaultKind
from harness.report.faults import FaultWindow, fault_nodes, fault_windows
from harness.runfiles.walk import Acked, Completions, KeyLog, Pairs, Txns, walk_history


@dataclass(frozen=True, slots=True)
class Scan:
    completions: Completions
    faults: list[FaultWindow]
    nodes: list[str]
    end_ns: int
    keys: dict[int, KeyLog]
    involved: list[int]  # history indices of operations the anomaly examples touch
    by_value: dict[int, list[int]]  # anomaly value -> indices of ops that sent or read it
    processes: list[int]
    op_count: int
    client_ops: int
    nemesis_ops: list[dict[str, Any]] = field(default_factory=list)
    txns: Txns = field(default_factory=lambda: Txns.of([], [], [], set()))
    acked: Acked | None = None
    pairs: Pairs | None = None  # each client operation's invoke and completion indices


def scan(ops: list[dict[str, Any]], anomalies: Mapping[str, Any] | None = None,
         fault_kinds: Sequence[FaultKind] = FAULT_KINDS,
         each: Callable[[dict[str, Any]], object] | None = None) -> Scan:
    """Walk the history once (tolerant of shapes it does not know), handing each line to
    `each` on the way if given; add the fault windows, read in the vocabulary of
    `fault_kinds` (see report.faults.run_kinds)."""
    w = walk_history(ops, anomalies, each)
    windows = fault_windows(w.nemesis, w.end_ns, fault_kinds)
    nodes: set[str] = set()
    for row in w.nemesis_ops:
        nodes.update(fault_nodes(row.get("value")))
    nodes.update(win.node for win in windows)
    return Scan(completions=w.completions, faults=windows, nodes=sorted(nodes), end_ns=w.end_ns,
                keys=w.keys, involved=w.involved, by_value=w.by_value, processes=w.processes,
                op_count=w.op_count, client_ops=w.client_ops, nemesis_ops=w.nemesis_ops,
                txns=w.txns, acked=w.acked, pairs=w.pairs)
