"""The docker backend: one container per node on a network of the run's own (docker SDK).

Each container runs the system's node image (`HasNodeImage`) with NET_ADMIN; its PID 1
only keeps it alive, so the system is started, killed (SIGKILL, data kept) and restarted
inside it by exec, and
iptables rules (harness.iptables, applied from the host inside the container's network
namespace, so they work on a paused node too) survive a kill. Pause is `docker pause` (the cgroup
freezer: the whole node stops, as a VM pause would). Clients and peers reach the
containers' own IPs; the host routes to a user-defined bridge network directly.

Containers and the network are labelled `undertow.run=<run key>` and registered with
harness.leftovers before they are made, so `undertow heal` removes them after a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import ipaddress
import math
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from harness import leftovers
from harness.control.shell import NodeError, tar_bytes
from harness.image import NodeImage
from harness.iptables import IptablesNet
from harness.protocols import Endpoints, Exec, HasNodeImage, Run, ShellHost, System

LABEL = "undertow.run"
SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")  # the project's range, split in /24s
NODE_BASE = "/var/lib/undertow"


def run_key(run: Run) -> str:
    """A short id for this run, usable in docker names and as the leftovers run id."""
    given = run.extra.get("run_key")
    if isinstance(given, str) and re.fullmatch(r"[a-z0-9][a-z0-9-]{0,30}", given):
        return given
    digest = hashlib.sha1(str(run.paths.root.resolve()).encode()).hexdigest()[:10]
    return f"ut-{digest}"


class DockerRemote:
    """harness.protocols.Remote over docker exec / put_archive / get_archive."""

    def __init__(self, client: Any, containers: Mapping[str, str]) -> None:
        self.client = client
        self.containers = dict(containers)  # node -> container name

    def container(self, node: str) -> Any:
        try:
            name = self.containers[node]
        except KeyError:
            raise ValueError(f"docker: unknown node {node!r}; known: "
                             f"{', '.join(sorted(self.containers))}") from None
        return self.client.containers.get(name)

    def exec(self, node: str, cmd: Sequence[str], *, timeout_s: float | None = None) -> Exec:
        import docker.errors

        argv = list(cmd)
        if timeout_s is not None:  # exec has no timeout of its own: coreutils timeout inside
            argv = ["timeout", "-s", "KILL", str(max(1, math.ceil(timeout_s))), *argv]
        try:
            res = self.container(node).exec_run(argv, demux=True)
        except docker.errors.APIError as e:  # e.g. the container is paused
            return Exec(125, "", f"docker exec on {node}: {e.explanation or e}")
        out, err = res.output if isinstance(res.output, tuple) else (res.output, b"")
        return Exec(int(res.exit_code), (out or b"").decode(errors="replace"),
                    (err or b"").decode(errors="replace"))

    def upload(self, node: str, local: Path, remote: str) -> None:
        target = PurePosixPath(remote)
        data = tar_bytes({target.name: local if local.is_dir() else local.read_bytes()})
        if not self.container(node).put_archive(str(target.parent), data):
            raise NodeError(f"docker: upload of {local} to {node}:{remote} failed")

    def download(self, node: str, remote: str, local: Path) -> None:
        """A file to the local path, or a directory's contents into the local directory."""
        import docker.errors

        try:
            stream, stat = self.container(node).get_archive(remote)
        except docker.errors.NotFound as e:
            raise FileNotFoundError(f"docker: {node}:{remote} does not exist") from e
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf) as tf:
            is_dir = bool(int(stat.get("mode", 0)) & (1 << 31))
            if is_dir:
                local.mkdir(parents=True, exist_ok=True)
                prefix = PurePosixPath(remote).name + "/"
                for m in tf.getmembers():
                    if m.name.startswith(prefix):
                        m.name = m.name[len(prefix):]
                        tf.extract(m, local, filter="data")
            else:
                member = tf.extractfile(tf.getmembers()[0])
                assert member is not None
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(member.read())


class NetnsRemote:
    """Commands in a container's network namespace, run from the host (nsenter).

    iptables and tc act on the namespace, not on the container's processes, so this works
    while a container is paused (docker refuses exec into a frozen container). Used for the
    network faults when the harness is root; otherwise commands go through docker exec.
    """

    def __init__(self, docker: DockerRemote) -> None:
        self.docker = docker
        self.direct = os.geteuid() == 0 and shutil.which("nsenter") is not None \
            and shutil.which("iptables") is not None
        self._pids: dict[str, int] = {}

    def _netns(self, node: str) -> str:
        pid = self._pids.get(node)
        if pid is None or not Path(f"/proc/{pid}/ns/net").exists():
            c = self.docker.container(node)
            c.reload()
            pid = int(c.attrs["State"]["Pid"])
            if pid <= 0:
                raise NodeError(f"docker: container of {node} is not running")
            self._pids[node] = pid
        return f"/proc/{pid}/ns/net"

    def exec(self, node: str, cmd: Sequence[str], *, timeout_s: float | None = None) -> Exec:
        if not self.direct:
            return self.docker.exec(node, cmd, timeout_s=timeout_s)
        try:
            r = subprocess.run(["nsenter", f"--net={self._netns(node)}", *cmd],
                               capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return Exec(124, "", f"nsenter on {node}: timed out after {timeout_s} s")
        return Exec(r.returncode, r.stdout, r.stderr)

    def upload(self, node: str, local: Path, remote: str) -> None:
        self.docker.upload(node, local, remote)

    def download(self, node: str, remote: str, local: Path) -> None:
        self.docker.download(node, remote, local)

    def spawn(self, node: str, argv: Sequence[str]) -> subprocess.Popen[str]:
        """A host process in the node's network namespace (the slow-link delayer)."""
        if not self.direct:
            raise NodeError("docker: a process in a container's network namespace needs root "
                            "and nsenter on the host")
        return subprocess.Popen(["nsenter", f"--net={self._netns(node)}", *argv],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                cwd=str(Path(__file__).resolve().parents[2]))


class DockerFreezer:
    """Freezer: `docker pause` (the cgroup freezer) stops the whole node, as a VM pause would."""

    def __init__(self, remote: DockerRemote) -> None:
        self.docker = remote

    def freeze(self, node: str) -> None:
        c = self.docker.container(node)
        c.reload()
        if c.status == "running":
            c.pause()

    def thaw(self, node: str) -> None:
        c = self.docker.container(node)
        c.reload()
        if c.status == "paused":
            c.unpause()

    def frozen(self, node: str) -> bool:
        c = self.docker.container(node)
        c.reload()
        return bool(c.status == "paused")

    def pids(self, node: str, pattern: str) -> list[int]:
        """Host pids of live processes whose args hold pattern (docker top works when frozen)."""
        top = self.docker.container(node).top(ps_args="-o pid,stat,args")
        return [int(pid) for pid, stat, args in top.get("Processes") or []
                if pattern in args and not stat.startswith("Z")]


def _used_networks(client: Any) -> list[ipaddress.IPv4Network]:
    used: list[ipaddress.IPv4Network] = []
    for net in client.networks.list():
        for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                n = ipaddress.ip_network(cfg["Subnet"], strict=False)
                if isinstance(n, ipaddress.IPv4Network):
                    used.append(n)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True,
                             timeout=5).stdout
        for line in out.splitlines():
            with contextlib.suppress(ValueError):
                dest = line.split()[0]
                if dest != "default":
                    used.append(ipaddress.IPv4Network(dest, strict=False))
    return used


def free_subnets(client: Any) -> list[ipaddress.IPv4Network]:
    """/24s of the project's range that no docker network or host route overlaps."""
    used = _used_networks(client)
    return [s for s in SUBNET_POOL.subnets(new_prefix=24)
            if not any(s.overlaps(u) for u in used)]


class DockerBackend:
    """harness.protocols.Backend: containers on a user-defined bridge network."""

    name = "docker"

    def __init__(self, image: str | None = None, *, ready_timeout_s: float = 60.0) -> None:
        self.image = image
        self.ready_timeout_s = ready_timeout_s
        self.client: Any = None
        self.key = ""
        self.network_name = ""
        self.containers: dict[str, str] = {}
        self.ips: dict[str, str] = {}
        self.gateway = ""
        self._items: dict[str, str] = {}  # docker name -> leftovers item id
        self._auto_image = False
        self._node_image: NodeImage | None = None

    # -- up --------------------------------------------------------------------------

    def up(self, run: Run, system: System) -> ShellHost:
        """The network and one container per node; the system starts itself in them."""
        if self.image is None:
            if not isinstance(system, HasNodeImage):
                raise NodeError(f"docker: the system {system.name!r} declares no node image")
            self._auto_image = True
            self._node_image = system.node_image()
            self.image = self._ensure_image(run)
        return self.provision(run, system.port)

    def provision(self, run: Run, port: int) -> ShellHost:
        """The network and the containers, nothing started in them; fills run's parts."""
        from harness.image import docker_client

        if self.image is None:
            raise NodeError("docker: no image to start the nodes from: up() takes the "
                            "system's node image; provision() needs DockerBackend(image=...)")
        self.client = docker_client()
        self.key = run_key(run)
        self._create_network(run)
        for i, node in enumerate(run.nodes):
            self._create_container(run, node, i)
        remote = DockerRemote(self.client, self.containers)
        addrs = {n: f"{self.ips[n]}:{port}" for n in run.nodes}
        run.remote = remote
        netns = NetnsRemote(remote)
        run.net = IptablesNet(netns, self.ips, tag=self.key, broker_port=port,
                              client_addr=self.gateway,
                              delayers=netns if netns.direct else None)
        run.client_addrs = dict(addrs)
        run.extra.update({"docker_network": self.network_name, "run_key": self.key,
                          "containers": dict(self.containers)})
        peers = {n: {m: a for m, a in addrs.items() if m != n} for n in run.nodes}
        endpoints = Endpoints(listen=addrs, peers=peers, clients=addrs, admin=addrs)
        return ShellHost(remote=remote, base_dirs={n: NODE_BASE for n in run.nodes},
                         endpoints=endpoints, freezer=DockerFreezer(remote))

    def connect(self, run: Run) -> None:
        """Containers reach each other on the bridge: nothing more to wire."""

    def _ensure_image(self, run: Run) -> str:
        from harness.image import ensure_images

        built = ensure_images(self._node_image, progress=lambda m: run.log.info("image: %s", m))
        assert built.node is not None
        return built.node.tag

    def _create_network(self, run: Run) -> None:
        import docker.errors
        import docker.types

        self.network_name = f"{self.key}-net"
        self._items[self.network_name] = leftovers.register(
            self.key, "network", name=self.network_name, label=self.key)
        last: Exception | None = None
        for subnet in free_subnets(self.client)[:20]:
            hosts = list(subnet.hosts())
            ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                subnet=str(subnet), gateway=str(hosts[0]))])
            try:
                self.client.networks.create(self.network_name, driver="bridge", ipam=ipam,
                                            labels={LABEL: self.key}, check_duplicate=True)
            except docker.errors.APIError as e:  # another run took it first: the next one
                last = e
                continue
            self.gateway = str(hosts[0])
            self.ips = {n: str(hosts[10 + i]) for i, n in enumerate(run.nodes)}
            run.log.info("docker: network %s on %s", self.network_name, subnet)
            return
        raise NodeError(f"docker: no free /24 in {SUBNET_POOL} for the run's network ({last})")

    def _create_container(self, run: Run, node: str, index: int) -> None:
        import docker.errors

        name = f"{self.key}-{node}"
        self._items[name] = leftovers.register(self.key, "container", name=name, label=self.key)
        endpoint = self.client.api.create_endpoint_config(ipv4_address=self.ips[node])
        networking = self.client.api.create_networking_config({self.network_name: endpoint})
        def create() -> str:
            return str(self.client.api.create_container(
                self.image, name=name, hostname=node,
                labels={LABEL: self.key, "undertow.node": node},
                host_config=self.client.api.create_host_config(
                    cap_add=["NET_ADMIN"], init=True, network_mode=self.network_name),
                networking_config=networking)["Id"])

        try:
            cid = create()
        except docker.errors.ImageNotFound:
            if not self._auto_image:
                raise
            # another run rebuilt the image (its sources changed) and pruned this tag
            self.image = self._ensure_image(run)
            cid = create()
        self.client.api.start(cid)
        self.containers[node] = name

    # -- collect / down --------------------------------------------------------------------

    def down(self, run: Run) -> None:
        """Remove the containers (rules and data go with them) and the network; never raises."""
        if self.client is None:
            return
        for name in list(self.containers.values()):
            try:
                _remove_container(self.client, name)
                leftovers.release(self.key, self._items.pop(name, ""))
            except Exception as e:
                run.log.warning("docker: could not remove container %s: %s", name, e)
        self.containers.clear()
        if self.network_name:
            try:
                _remove_network(self.client, self.network_name)
                leftovers.release(self.key, self._items.pop(self.network_name, ""))
            except Exception as e:
                run.log.warning("docker: could not remove network %s: %s", self.network_name, e)
        leftovers.end_run(self.key)


def _remove_container(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.containers.get(name).remove(force=True)
    except docker.errors.NotFound:
        return False
    return True


def _remove_network(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.networks.get(name).remove()
    except docker.errors.NotFound:
        return False
    return True


def _undo_container(item: dict[str, Any]) -> str:
    from harness.image import docker_client

    name = str(item["name"])
    gone = _remove_container(docker_client(), name)
    return f"removed container {name}" if gone else f"container {name} already gone"


def _undo_network(item: dict[str, Any]) -> str:
    from harness.image import docker_client

    name = str(item["name"])
    gone = _remove_network(docker_client(), name)
    return f"removed network {name}" if gone else f"network {name} already gone"


leftovers.register_hook("container", _undo_container)
leftovers.register_hook("network", _undo_network)
