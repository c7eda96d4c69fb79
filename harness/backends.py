"""make_backend: the spec's backend name -> a Backend (heavy modules imported only when chosen)."""

from __future__ import annotations

from harness.protocols import Backend
from harness.spec import BACKENDS, SpecError, TestSpec


def make_backend(spec: TestSpec) -> Backend:
    """The Backend that runs `spec`'s nodes; SpecError for an unknown backend name."""
    if spec.backend == "local":
        from harness.control.local import LocalBackend

        return LocalBackend()
    if spec.backend == "docker":
        from harness.control.docker import DockerBackend  # type: ignore[import-not-found]

        docker: Backend = DockerBackend()
        return docker
    if spec.backend == "ssh":
        from harness.control.ssh import SshBackend  # type: ignore[import-not-found]

        ssh: Backend = SshBackend(spec)  # it needs the hosts or the cluster file
        return ssh
    raise SpecError(f"--backend: {spec.backend!r} is not one of {', '.join(BACKENDS)}")
