"""Small run folders with planted losses, checked by the real checker, and the losses
recomputed from their history.jsonl and replicas.jsonl with plain JSON (no report code)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.api import check_local
from checkers.testing import HistoryBuilder, replica_rows
from harness.spec import build_spec
from workloads.options import partitions

BIG_KEY = 0  # its log starts again at offset 0 after a kill: 45 acknowledged writes lost
BIG_LOSS = 45
SMALL_KEY = 7  # one lost write, far down the examples' order
QUIET_KEYS = (1, 2, 3)


def _nemesis(h: HistoryBuilder, f: str, value: dict[str, Any], **extra: Any) -> None:
    h.line("invoke", "nemesis", f, value)
    h.line("info", "nemesis", f, value, **extra)


def kip101_like(run_dir: Path, *, lose: bool = True) -> Path:
    """Key 0 acknowledges 45 writes, then n2 is killed and key 0's log starts again at
    offset 0 with other values (the replicas hold only those); key 7 loses one write
    in the middle of its log; keys 1-3 lose nothing. lose=False: nothing is lost."""
    h = HistoryBuilder()
    value = 1000
    p = 0
    logs: dict[int, list[int]] = {}
    for k in (BIG_KEY, SMALL_KEY, *QUIET_KEYS):
        vals = []
        for o in range(BIG_LOSS if k == BIG_KEY else 10):
            h.send(p % 10, k, value, o)
            vals.append(value)
            value += 1
            p += 1
        logs[k] = vals
    _nemesis(h, "kill", {"nodes": ["n2"]}, landed=True, evidence="process gone")
    _nemesis(h, "start", {"nodes": ["n2"]}, landed=True, evidence="process running")
    if lose:  # key 0 again from offset 0: what was acknowledged there is gone everywhere
        logs[BIG_KEY] = []
        for o in range(BIG_LOSS + 5):
            h.send(p % 10, BIG_KEY, value, o)
            logs[BIG_KEY].append(value)
            value += 1
            p += 1
        lost_small = logs[SMALL_KEY].pop(4)  # offset 4 of key 7 is on no replica
        kept = logs[SMALL_KEY]
        h.poll(11, {SMALL_KEY: [(o if o < 4 else o + 1, v)
                                for o, v in enumerate(kept)]})
        assert lost_small not in kept
    h.poll(12, {BIG_KEY: list(enumerate(logs[BIG_KEY]))})
    for k in QUIET_KEYS:
        h.poll(13, {k: list(enumerate(logs[k]))})
    if not lose:
        h.poll(14, {SMALL_KEY: list(enumerate(logs[SMALL_KEY]))})
    replicas: list[dict[str, Any]] = []
    for node in ("n1", "n2", "n3"):
        for k, vals in logs.items():
            if k == SMALL_KEY and lose:  # the hole at offset 4
                rows = replica_rows(node, k, len(vals) + 1, [])
                rows += [{"node": node, "key": k, "offset": o if o < 4 else o + 1,
                          "value": v, "epoch": 1} for o, v in enumerate(vals)]
                rows[0]["leo"] = len(vals) + 1
                replicas += rows
            else:
                replicas += replica_rows(node, k, len(vals), vals)
    run = h.write(run_dir, replicas)
    check_local(run, write=True)
    return run


def save_test(run: Path, system: str, **settings: Any) -> dict[str, Any]:
    """test.json as `undertow run` writes it: the spec, nodes, plan, and system_info from
    the system's own describe()."""
    spec = build_spec({"system": system, "seed": 5, "time_limit_s": 30, **settings})
    if system == "kafka":
        from systems.kafka.system import system as sysobj
    else:
        from systems.undertow.system import system as sysobj  # type: ignore[assignment]
    info = dict(sysobj.describe(spec))
    if system == "kafka":
        info["version"] = "4.4.0"  # what the running broker said (KafkaDB.wait_ready)
    spec.save(run / "test.json", nodes=list(spec.nodes), system_info=info,
              nemesis_plan=[{"at_s": 0.0, "f": "kill", "value": {"role": "A"}},
                            {"at_s": 0.0, "f": "start", "value": {"role": "A"}},
                            {"at_s": 99.0, "f": "kill", "value": {"role": "A"}}])
    if system == "kafka":
        from systems.kafka import config
        from systems.kafka.options import KafkaOptions

        nodes = config.make_nodes(tuple(spec.nodes), "127.0.0.1", iter(range(9000, 9100)).__next__)
        for name, node in nodes.items():
            d = run / "nodes" / name
            d.mkdir(parents=True, exist_ok=True)
            props = config.server_properties(node, nodes, d / "data", KafkaOptions.of(spec),
                                             partitions=partitions(spec))
            (d / "server.properties").write_text(config.render_properties(props))
            (d / "kafka.log").write_text("[kafka] started\n")
    saved: dict[str, Any] = json.loads((run / "test.json").read_text())
    return saved


@dataclass(frozen=True)
class Recount:
    acked: int
    lost: int
    per_key: dict[int, tuple[int, int, int]]  # key -> (lost, lowest offset, highest offset)


def recount(run: Path) -> Recount:
    """Acknowledged sends on no replica, from the files, with nothing but json."""
    acked: dict[int, tuple[int, int]] = {}  # value -> (key, offset)
    for line in (run / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        if op["type"] == "ok" and isinstance(op["process"], int):
            for mop in op["value"]:
                if mop[0] == "send":
                    acked[mop[2][1]] = (mop[1], mop[2][0])
    held = {json.loads(ln)["value"] for ln in (run / "replicas.jsonl").read_text().splitlines()
            if "offset" in json.loads(ln)}
    per: dict[int, list[int]] = {}
    for v, (k, o) in acked.items():
        if v not in held:
            per.setdefault(k, []).append(o)
    return Recount(len(acked), sum(len(x) for x in per.values()),
                   {k: (len(o), min(o), max(o)) for k, o in per.items()})
