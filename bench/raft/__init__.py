"""Raft benchmarks: simulator schedules per second, the broken variant's detection, failover."""
