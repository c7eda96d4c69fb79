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
        from harness.control.docker import DockerBackend

        docker: Backend = DockerBackend()
        return docker
    if spec.backend == "ssh":
        from harness.control.ssh import SshBackend

        ssh: Backend = SshBackend()  # reads the hosts / cluster file from run.spec in up()
        return ssh
    raise SpecError(f"--backend: {spec.backend!r} is not one of {', '.join(BACKENDS)}")
