"""The backends by name: `--backend` -> its class, imported only when chosen or asked about.

One table, so the run (make_backend) and the options (harness/options.py reads a backend
class's `options`, as a system's) find the same class.
"""

from __future__ import annotations

import importlib
from typing import Any

from harness.protocols import Backend
from harness.spec import BACKENDS, SpecError, TestSpec

CLASSES: dict[str, tuple[str, str]] = {
    "local": ("harness.control.local", "LocalBackend"),
    "docker": ("harness.control.docker", "DockerBackend"),
    "ssh": ("harness.control.ssh", "SshBackend"),  # reads the hosts from run.spec in up()
}
assert tuple(CLASSES) == BACKENDS


def backend_class(name: str) -> Any:
    """The class of the backend named; SpecError for an unknown name."""
    if name not in CLASSES:
        raise SpecError(f"--backend: {name!r} is not one of {', '.join(BACKENDS)}")
    module, cls = CLASSES[name]
    return getattr(importlib.import_module(module), cls)


def make_backend(spec: TestSpec) -> Backend:
    """The Backend that runs `spec`'s nodes; SpecError for an unknown backend name."""
    backend: Backend = backend_class(spec.backend)()
    return backend
