"""Faults (kill, pause, partition, links, clocks, lost flushes), their targets and schedules."""
