"""Controller failover time on a real 3-voter local cluster (python -m bench.failover)."""
