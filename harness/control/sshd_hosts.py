"""Three sshd containers with a fresh key, as stand-in ssh hosts: the ssh backend's tests,
its bench, and a way to try `--backend ssh` on one machine (`python -m harness.control.sshd_hosts`).

    with sshd_hosts(workdir) as (cluster_json, hosts): ...   # hosts: the DockerBackend
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.control.docker import DockerBackend
from harness.image import IMAGE_DIR, SSHD_REPO, NodeImage, ensure_images, packages_slug
from harness.protocols import Run
from harness.runfiles import RunPaths
from harness.spec import build_spec

SSHD_DOCKERFILE = IMAGE_DIR / "base" / "sshd" / "Dockerfile"


@contextlib.contextmanager
def sshd_hosts(workdir: Path, count: int = 3, *, ready_timeout_s: float = 120.0,
               packages: tuple[str, ...] = ()) -> Iterator[tuple[Path, Any]]:
    """packages: Debian packages the hosts need beyond the base's (Kafka's hosts: a JRE)."""
    import paramiko

    if packages:  # the sshd variant FROM the base that holds them
        node = NodeImage(f"{SSHD_REPO}-{packages_slug(packages)}", SSHD_DOCKERFILE, {},
                         packages)
        host_image = ensure_images(node).node
    else:
        host_image = ensure_images(sshd=True).sshd
    assert host_image is not None
    workdir.mkdir(parents=True, exist_ok=True)
    key = paramiko.RSAKey.generate(2048)
    key_file = workdir / "id_rsa"
    key.write_private_key_file(str(key_file))
    pub = workdir / "authorized_keys"
    pub.write_text(f"{key.get_name()} {key.get_base64()} undertow-sshd-hosts\n")
    spec = build_spec({"backend": "docker", "node_count": count,
                       "broker": {"replication_factor": min(3, count)}})
    (workdir / "hosts").mkdir(exist_ok=True)
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(workdir / "hosts"),
              log=logging.getLogger("sshd-hosts"))
    hosts = DockerBackend(image=host_image.tag)
    try:
        hosts.provision(run, port=22)
        assert run.remote is not None
        for n in run.nodes:
            run.remote.upload(n, pub, "/root/.ssh/authorized_keys")
        deadline = time.monotonic() + ready_timeout_s
        for ip in hosts.ips.values():
            while True:
                try:
                    socket.create_connection((ip, 22), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"sshd on {ip} did not come up") from None
                    time.sleep(0.1)
        cluster = workdir / "cluster.json"
        cluster.write_text(json.dumps({"nodes": [
            {"externally_routable_ip": ip,
             "ssh_config": {"host": n, "hostname": ip, "user": "root", "port": 22,
                            "identityfile": str(key_file)}}
            for n, ip in sorted(hosts.ips.items())]}, indent=1))
        yield cluster, hosts
    finally:
        hosts.down(run)


def main() -> None:
    """Bring the hosts up, print the cluster file, and keep them until Enter."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="undertow-sshd.") as tmp, \
            sshd_hosts(Path(tmp)) as (cluster, _hosts):
        print(cluster, flush=True)
        print("undertow run --backend ssh --cluster-file", cluster, flush=True)
        input("press Enter to remove the hosts ")


if __name__ == "__main__":
    main()
