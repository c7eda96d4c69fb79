"""python -m systems.kafka [options]: one run of the queue workload on local Apache Kafka.

Until `undertow run` chooses systems, this is how Kafka is run: the same
pipeline (store, nemesis, final reads, replica dumps, checkers, report), with
Kafka's backend and client in place of the broker's. Exit codes as undertow run's.
"""

from __future__ import annotations

import argparse
import random
import sys

from harness.spec import SpecError, build_spec
from systems.kafka.run import run_kafka


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m systems.kafka", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--nemesis", default="kill,pause", help="kill,pause or none")
    ap.add_argument("--nemesis-interval", type=float, default=10.0)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--acks", choices=("0", "1", "all"), default="all")
    ap.add_argument("--min-insync-replicas", type=int, default=2)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--unclean-leader-election", action="store_true")
    ap.add_argument("--flush", choices=("page-cache", "every-message"), default="page-cache")
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--results-dir", default="results")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    nemesis = () if args.nemesis == "none" else tuple(args.nemesis.split(","))
    layer = {
        "name": "kafka-queue-" + ("-".join(nemesis) or "none"), "backend": "local",
        "node_count": args.nodes, "nemesis": nemesis,
        "nemesis_interval_s": args.nemesis_interval, "time_limit_s": args.time_limit,
        "concurrency": args.concurrency, "keys": args.keys, "seed": seed,
        "results_dir": args.results_dir,
        "extra": {"kafka_version": args.kafka_version} if args.kafka_version else {},
        "broker": {"acks": args.acks, "min_insync_replicas": args.min_insync_replicas,
                   "replication_factor": args.replication_factor,
                   "unclean_leader_election": args.unclean_leader_election,
                   "flush": args.flush},
    }
    try:
        spec = build_spec(layer, where=("options",))
        outcome = run_kafka(spec)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"seed {seed}")
    print(outcome.summary())
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
