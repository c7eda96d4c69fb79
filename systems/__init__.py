"""Systems under test, one package each: all the harness knows of a system comes from there.

A system package holds its DB on a node (install, start, stop, kill, pause, logs,
data), its admin view (leaders, controller, replica dump), its client(s) for the
workloads it speaks, and the settings it honours or refuses. It is registered by
name in pyproject.toml's `undertow.systems` entry points (or at run time with
`harness.registry.register`), and `undertow run --system NAME` picks it.
"""
