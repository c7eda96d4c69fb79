"""Checker benchmark: `python -m bench.checker` (see __main__)."""
