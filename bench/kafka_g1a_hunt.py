"""Issue 29's G1a hunt: the suite's short ZooKeeper-era run, seeded, with librdkafka's
producer `msg` debug lines in each run's harness.log, so a refusal that follows an earlier
try of the same message shows (MSGSET ... encountered error ... actions ...).

    nice -n 19 .venv/bin/python -m bench.kafka_g1a_hunt --version 0.10.2.2 --seeds 1-10 \
        --out /tmp/findings/g1a-runs
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness import core
from harness.spec import build_spec
from systems.kafka import config
from systems.kafka.client import ERRORS, Sent


def with_debug(debug: str) -> None:
    """Every producer the run makes logs librdkafka's `debug` contexts (diagnosis only)."""
    plain = config.producer_config

    def producer_config(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**plain(*args, **kwargs), "debug": debug}

    config.producer_config = producer_config


def refused_then_read(history: Path) -> list[dict[str, Any]]:
    """Sends whose final error is a broker's refusal (ERRORS' REFUSED rows) and whose value
    a poll read anyway: what issue 29's G1a was, whatever the completion's type."""
    ops = [json.loads(x) for x in history.read_text().splitlines()]
    read = {(int(k), int(v)) for o in ops if o.get("f") == "poll" and o.get("type") == "ok"
            for m in o["value"] for k, rs in (m[1] if len(m) > 1 else {}).items()
            for _, v in rs}
    hits = []
    for o in ops:
        name = str(o.get("error", "")).split(":")[0]
        if o.get("f") == "send" and ERRORS.get(name) is Sent.REFUSED:
            for _, k, v in o["value"]:
                if (int(k), int(v)) in read:
                    hits.append({"index": o["index"], "type": o["type"], "key": k, "value": v,
                                 "error": o["error"]})
    return hits


def seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--version", default="0.10.2.2")
    p.add_argument("--seeds", default="1-10")
    p.add_argument("--out", default="/tmp/findings/g1a-runs")
    p.add_argument("--debug", default="msg")
    p.add_argument("--time-limit", type=float, default=20.0)
    a = p.parse_args()
    if a.debug:
        with_debug(a.debug)
    for seed in seeds(a.seeds):
        out = Path(a.out) / f"{a.version}-seed{seed}"
        spec = build_spec({"name": "kafka-zk" if a.version < "2" else "kafka",
                           "system": "kafka", "nemesis": ["kill", "pause", "partition"],
                           "time_limit_s": a.time_limit, "nemesis_interval_s": 5.0,
                           "seed": seed, "keys": 4, "max_writes_per_key": 15, "key_pool": 12,
                           "results_dir": str(out),
                           "producer": {"retries": 0, "enable_idempotence": False},
                           "extra": {"kafka_version": a.version}})
        o = core.run(spec)
        res = json.loads((o.run_dir / "results.json").read_text())
        print(json.dumps({"version": a.version, "seed": seed, "valid": o.valid,
                          "counts": res.get("counts"),
                          "refused_then_read": refused_then_read(o.run_dir / "history.jsonl"),
                          "run": str(o.run_dir)}), flush=True)


if __name__ == "__main__":
    main()
