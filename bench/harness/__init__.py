"""Harness benchmarks: `python -m bench.harness` (see __main__)."""
