"""Run folders: results/<test>/<YYYYMMDDTHHMMSSZ>/ and the `latest` links.

Two runs that start in the same second get distinct folders (`...Z-2`, `...Z-3`).
The `latest` links are replaced atomically (a new link renamed over the old), so
a reader never sees a missing or half-made link.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.runfiles import RunPaths
from harness.spec import TestSpec

LOG_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-5s %(name)s %(threadName)s: %(message)s"


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run folder made for one test, with its logger (writing harness.log)."""

    test_name: str
    run_id: str  # "<test>/<timestamp>"
    paths: RunPaths
    log: logging.Logger
    handler: logging.Handler

    def close(self) -> None:
        """Detach and close harness.log's handler (idempotent)."""
        self.log.removeHandler(self.handler)
        self.handler.close()


def test_name(spec: TestSpec) -> str:
    """The scenario's name, else the spec's name (derived from workload and faults)."""
    name = spec.scenario or spec.name
    if not spec.scenario and spec.name == TestSpec().name:
        faults = "-".join(spec.nemesis) if spec.nemesis else "none"
        name = f"{spec.workload}-{faults}"
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "test"


def make_unique_dir(parent: Path, stamp: str) -> Path:
    """parent/stamp, or parent/stamp-2, -3, ... when taken; made here, so never shared."""
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(1, 1000):
        d = parent / (stamp if i == 1 else f"{stamp}-{i}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise RuntimeError(f"{parent}: could not make a unique run folder for {stamp}")


def link_atomically(link: Path, target: str) -> None:
    """Point `link` at `target` (relative), replacing any old link in one rename."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, link)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("undertow", "pyspark"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def create_run(spec: TestSpec, *, now_s: float | None = None) -> StoredRun:
    """Make the run folder, nodes/<node>/, harness.log and the latest links."""
    results = Path(spec.results_dir).absolute()
    name = test_name(spec)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now_s is None else now_s))
    root = make_unique_dir(results / name, stamp)
    paths = RunPaths(root)
    for node in spec.nodes:
        paths.node_dir(node).mkdir(parents=True, exist_ok=True)
    run_id = f"{name}/{root.name}"
    log = logging.getLogger(f"undertow.run.{run_id}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    handler = logging.FileHandler(paths.harness_log)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%Y-%m-%dT%H:%M:%S"))
    log.addHandler(handler)
    link_atomically(results / name / "latest", root.name)
    link_atomically(results / "latest", f"{name}/{root.name}")
    log.info("run folder %s (argv: %s)", root, " ".join(sys.argv))
    return StoredRun(name, run_id, paths, log, handler)


def write_test_json(paths: RunPaths, spec: TestSpec, **more: Any) -> None:
    """test.json: the spec plus seed, nodes, versions and whatever else is given. Its name is
    the run's (derived from workload and faults unless given), as the folder's is."""
    named = dataclasses.replace(spec, name=test_name(spec))
    named.save(paths.test_json, nodes=list(spec.nodes), versions=versions(), **more)
