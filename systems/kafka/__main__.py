"""python -m systems.kafka [--scenario NAME [--control]] [options]: a run on local Apache Kafka.

Until `undertow run` chooses systems, this is how Kafka is run: the same
pipeline (store, nemesis, final reads, replica dumps, checkers, report), with
Kafka's backend and client in place of the broker's. Settings: defaults <
the scenario's < options; `--control` adds the options that fix the
scenario's bug. `--list` names the scenarios. Exit codes as undertow run's.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

from harness.spec import SpecError, build_spec
from systems.kafka.run import run_kafka
from systems.kafka.scenarios import SCENARIOS, scenario

_SPEC = {"time_limit": "time_limit_s", "nemesis_interval": "nemesis_interval_s",
         "nodes": "node_count", "concurrency": "concurrency", "keys": "keys",
         "seed": "seed", "results_dir": "results_dir"}
_BROKER = ("acks", "min_insync_replicas", "replication_factor", "unclean_leader_election",
           "flush")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m systems.kafka", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", choices=sorted(SCENARIOS))
    ap.add_argument("--control", action="store_true",
                    help="with the options that fix the scenario's bug (must be valid)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--time-limit", type=float)
    ap.add_argument("--nemesis", help="kill,pause or none (default kill,pause)")
    ap.add_argument("--nemesis-interval", type=float)
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--concurrency", type=int)
    ap.add_argument("--keys", type=int)
    ap.add_argument("--acks", choices=("0", "1", "all"))
    ap.add_argument("--min-insync-replicas", type=int)
    ap.add_argument("--replication-factor", type=int)
    ap.add_argument("--unclean-leader-election", action=argparse.BooleanOptionalAction)
    ap.add_argument("--flush", choices=("page-cache", "every-message"))
    ap.add_argument("--kafka-version")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--results-dir")
    return ap


def layers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The scenario's settings, then what the options say."""
    out: list[dict[str, Any]] = []
    if args.scenario:
        out.append(dict(scenario(args.scenario).settings))
    else:
        out.append({"name": "kafka-queue", "nemesis": ("kill", "pause")})
    opts: dict[str, Any] = {_SPEC[k]: v for k, v in vars(args).items()
                            if k in _SPEC and v is not None}
    if args.nemesis is not None:
        opts["nemesis"] = () if args.nemesis == "none" else tuple(args.nemesis.split(","))
    broker = {k: getattr(args, k) for k in _BROKER if getattr(args, k) is not None}
    if broker:
        opts["broker"] = broker
    if args.kafka_version:
        opts["extra"] = {**out[0].get("extra", {}), "kafka_version": args.kafka_version}
    out.append(opts)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.list:
        for s in SCENARIOS.values():
            fix = f" (fixed by {' '.join(s.fixed_by)})" if s.fixed_by else ""
            print(f"{s.name}: expects {', '.join(s.expected) or 'valid'}{fix}\n  {s.description}")
        return 0
    if args.control:
        if not args.scenario or not scenario(args.scenario).fixed_by:
            ap.error("--control needs a --scenario that names the options fixing it")
        args = ap.parse_args([*(argv if argv is not None else sys.argv[1:]),
                              *scenario(args.scenario).fixed_by])
    if args.seed is None:
        args.seed = random.randrange(1 << 31)
    try:
        spec = build_spec(*layers(args), where=("scenario", "options"))
        outcome = run_kafka(spec)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"seed {args.seed}")
    print(outcome.summary())
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
