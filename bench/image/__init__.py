"""Benchmarks of the images and the container backends (python -m bench.image)."""
