"""What our broker needs on any host: its NODE.json, command lines, readiness, admin answers.

Shared by the local and the shell-host DBs: NODE.json from the spec, the command
lines that start the broker and its offline tools, readiness (every node answers
the admin `metadata` request and sees a leader for every partition), and reading
the admin API (leaders, controller, replica dumps). The DBs differ only in where
processes run and how addresses are reached.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.protocols import ClockReading
from harness.spec import TestSpec
from systems.undertow.client import ClientError, admin_metadata, admin_request
from systems.undertow.options import UndertowOptions
from workloads.options import QueueOptions, partitions

TOPIC = "queue"
OFFSETS_PARTITIONS = 3  # of the internal offsets topic, when the run's consumers subscribe
READY_POLL_S = 0.05


def default_voter_count(nodes: int) -> int:
    """KRaft-style quorum size: 3 voters (5 from 5 nodes on), never more than the nodes,
    always odd (an even quorum tolerates no more failures than the odd one below it)."""
    n = 5 if nodes >= 5 else min(3, nodes)
    return n if n % 2 else n - 1


def controller_voters(spec: TestSpec) -> list[str]:
    """The controller quorum: --controller-voters (a list of nodes, or a count), else the
    first default_voter_count(len(nodes)) nodes."""
    voters = UndertowOptions.of(spec).controller_voters
    if isinstance(voters, int) and not isinstance(voters, bool):
        if not 1 <= voters <= len(spec.nodes):
            raise ValueError(f"--controller-voters (undertow.controller_voters): {voters} is "
                             f"not between 1 and the {len(spec.nodes)} nodes")
        return list(spec.nodes[:voters])
    if voters:
        if isinstance(voters, str) or not isinstance(voters, Sequence):
            raise ValueError(f"--controller-voters (undertow.controller_voters): expected a list "
                             f"of nodes or a count, got {voters!r}")
        bad = [v for v in voters if v not in spec.nodes]
        if bad:
            raise ValueError(f"--controller-voters (undertow.controller_voters): {bad} are not "
                             f"nodes of {spec.nodes}")
        return [str(v) for v in voters]
    return list(spec.nodes[:default_voter_count(len(spec.nodes))])


TXN_STATE_PARTITIONS = 3


def node_config(spec: TestSpec, node: str, listen: str, peers: Mapping[str, str],
                data_dir: Path | str, clock_file: Path | str | None) -> dict[str, Any]:
    """NODE.json for `node` (see the cross-part contract): keys of the history = partitions."""
    if node not in peers:
        raise ValueError(f"node_config: peers {sorted(peers)} must include the node {node!r}")
    own = UndertowOptions.of(spec)
    settings = own.to_kafka()
    settings.setdefault("flush.ms", None)
    if QueueOptions.of(spec).subscribe:  # consumer groups on (the workload's one group)
        settings["offsets.topic.num.partitions"] = OFFSETS_PARTITIONS
    if spec.workload == "txn":  # transactions need their coordinators' internal topic
        settings["transaction.state.log.num.partitions"] = TXN_STATE_PARTITIONS
    settings.update(own.broker_settings or {})
    cfg: dict[str, Any] = {
        "node_id": node,
        "listen": listen,
        "data_dir": str(data_dir),
        "peers": dict(peers),
        "process_roles": ["broker", "controller"],
        "controller_quorum_voters": controller_voters(spec),
        "topic": {"name": TOPIC, "partitions": partitions(spec),
                  "replication_factor": own.replication_factor},
        "settings": settings,
    }
    if clock_file is not None:
        cfg["clock_file"] = str(clock_file)
    return cfg


def write_node_json(path: Path, cfg: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")


def broker_command(python: str, config_path: str) -> list[str]:
    return [python, "-m", "broker", "--config", config_path]


def dump_command(python: str, data_dir: str, node: str) -> list[str]:
    return [python, "-m", "broker.tools", "dump", "--data-dir", data_dir, "--node", node]


def lose_unflushed_command(python: str, data_dir: str) -> list[str]:
    return [python, "-m", "broker.tools", "lose-unflushed", "--data-dir", data_dir]


def parse_cut(text: str, where: str) -> dict[str, int]:
    """The bytes each log file lost, from `broker.tools lose-unflushed`'s last line."""
    lines = text.strip().splitlines()
    try:
        got: Any = json.loads(lines[-1]) if lines else {}
        return {str(f): int(n) for f, n in got["cut_bytes"].items()}
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{where}: lose-unflushed printed no cut_bytes: {text[-300:]!r}") from e


def parse_dump(text: str, where: str) -> list[dict[str, Any]]:
    """replicas.jsonl rows printed by `broker.tools dump`; errors name `where` and the line."""
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{where}: line {i} is not JSON: {e}: {line[:120]!r}") from e
        if not isinstance(row, dict):
            raise ValueError(f"{where}: line {i} is not a JSON object")
        rows.append(row)
    return rows


def not_ready_reason(meta: Mapping[str, Any], partitions: int | None) -> str | None:
    """Why this metadata answer is not ready (None: every partition has a leader)."""
    parts = meta.get("partitions")
    if not isinstance(parts, Mapping):
        return "no partitions in metadata"
    if partitions is not None and len(parts) < partitions:
        return f"{len(parts)} of {partitions} partitions known"
    leaderless = sorted((k for k, p in parts.items() if not (p or {}).get("leader")), key=str)
    if leaderless:
        return f"no leader for partition(s) {', '.join(map(str, leaderless[:8]))}"
    return None


def metadata(addr: str, timeout_s: float = 1.0) -> dict[str, Any]:
    return admin_metadata(addr, timeout_s=timeout_s)


def broker_source() -> Path:
    """The broker package's folder (broker-image/broker in this repo), to ship or bake in."""
    spec = importlib.util.find_spec("broker")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("cannot find the `broker` package; install undertow with pip -e .")
    return Path(next(iter(spec.submodule_search_locations)))


def wait_ready(addrs: Mapping[str, str], timeout_s: float, *, partitions: int | None = None,
               check: Callable[[], None] | None = None) -> dict[str, dict[str, Any]]:
    """Poll admin metadata until every node answers and sees a leader for every partition.

    `check` is called between polls and may raise (e.g. a broker process died).
    Raises TimeoutError naming each node that is not ready and why.
    """
    deadline = time.monotonic() + timeout_s
    why: dict[str, str] = {n: "not asked yet" for n in addrs}
    metas: dict[str, dict[str, Any]] = {}
    while True:
        for node, addr in addrs.items():
            if node in metas:
                continue
            try:
                meta = metadata(addr, timeout_s=min(1.0, max(0.1, deadline - time.monotonic())))
            except Exception as e:
                why[node] = f"{type(e).__name__}: {e}"
                continue
            reason = not_ready_reason(meta, partitions)
            if reason is None:
                metas[node] = meta
                why.pop(node, None)
            else:
                why[node] = reason
        if len(metas) == len(addrs):
            return metas
        if check is not None:
            check()
        if time.monotonic() >= deadline:
            detail = "; ".join(f"{n} ({addrs[n]}): {r}" for n, r in sorted(why.items()))
            raise TimeoutError(f"cluster not ready after {timeout_s:g} s: {detail}")
        time.sleep(READY_POLL_S)


def answer_rank(answer: Any) -> tuple[int, int, int]:
    """How current a metadata answer is: knows a controller, its quorum epoch, its metadata
    offset. A deposed or cut-off controller answers with an older epoch (or none)."""
    if not isinstance(answer, Mapping):
        return (0, -1, -1)
    quorum = answer.get("quorum")
    epoch = quorum.get("epoch") if isinstance(quorum, Mapping) else None
    offset = answer.get("metadata_offset")
    return (1 if answer.get("controller") else 0,
            epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else -1,
            offset if isinstance(offset, int) and not isinstance(offset, bool) else -1)


def first_answer(addrs: Iterable[tuple[str, str]], ask: Callable[[str], Any]) -> Any:
    """The most current answer (answer_rank) among the nodes that answer (None if none).

    With a controller quorum any single node may be stale (an isolated old controller still
    calls itself one until check-quorum deposes it), so every node is asked and the answer
    with the highest quorum epoch that names a controller wins."""
    best: Any = None
    for _node, addr in addrs:
        try:
            answer = ask(addr)
        except Exception:
            continue
        if best is None or answer_rank(answer) > answer_rank(best):
            best = answer
    return best


def leader_from(meta: Mapping[str, Any] | None, key: int) -> str | None:
    if not meta:
        return None
    p = (meta.get("partitions") or {}).get(str(key)) or {}
    leader = p.get("leader")
    return str(leader) if leader else None


def coordinator(addrs: Iterable[tuple[str, str]], group: str) -> str | None:
    """The group's coordinator (its offsets partition's leader) as the most current node
    sees it (answer_rank), or None when no node can say (groups off, no leader)."""
    def ask(addr: str) -> dict[str, Any]:
        meta = metadata(addr)
        found = admin_request(addr, {"type": "find_coordinator", "group": group}, timeout_s=1.0)
        return {**meta, "coordinator": found.get("node")}

    best = first_answer(addrs, ask)
    c = best.get("coordinator") if isinstance(best, Mapping) else None
    return str(c) if c else None


def controller_from(meta: Mapping[str, Any] | None) -> str | None:
    if not meta:
        return None
    c = meta.get("controller")
    return str(c) if c else None


def tail(path: Path, lines: int = 20) -> str:
    """The end of a log file, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def read_clock(addr: str, timeout_s: float = 0.5) -> ClockReading | None:
    """The node's clock (the admin `clock` request) against this process's; None when the
    node does not answer (down, paused, cut off)."""
    t0 = time.time_ns()
    try:
        reply = admin_request(addr, {"type": "clock"}, timeout_s=timeout_s)
    except ClientError:
        return None
    t1 = time.time_ns()
    return ClockReading(offset_ns=int(reply["offset_ns"]),
                        ahead_ns=int(reply["now_ns"]) - (t0 + t1) // 2, rtt_ns=t1 - t0)
