"""The ssh backend: the system under test on real hosts, reached with paramiko.

Nodes come from `--node HOST[:PORT]` (user and key from the backend's own options,
`--ssh-user` / `--ssh-key-file`, else root and the ssh agent / default keys) or from a
ducktape-style cluster.json:

    {"nodes": [{"externally_routable_ip": "10.0.0.11",
                "ssh_config": {"host": "worker1", "hostname": "10.0.0.11", "user": "root",
                               "port": 22, "identityfile": "/path/key", "password": null}}]}

Each host gets /var/tmp/undertow/<run key>/, where the system uploads its code over SFTP
and starts itself detached (for our broker: nohup and a pid file; kill and pause are
signals to that pid); partitions are iptables rules (harness.iptables; sudo -n when the
user is not root). Host keys already
known (~/.ssh/known_hosts) are checked; unknown ones are accepted, as ducktape does for
test clusters. No password or key content is ever logged: a node prints as user@host:port.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import leftovers
from harness.control.docker import run_key
from harness.control.shell import NodeError, tar_bytes
from harness.iptables import IptablesNet
from harness.options import BackendOptions, option
from harness.protocols import Endpoints, Exec, Run, ShellHost, System
from harness.spec import SpecError, TestSpec

REMOTE_ROOT = "/var/tmp/undertow"


def _word(value: str) -> str | None:
    return None if value.strip() and not any(c.isspace() for c in value) else \
        f"expected one word, got {value!r}"


def _port(value: int) -> str | None:
    return None if 1 <= value <= 65535 else f"expected a port, 1 to 65535, got {value!r}"


@dataclass(frozen=True, slots=True)
class SshOptions(BackendOptions):
    """The ssh backend's own (the names are the `extra` keys users set before)."""

    ssh_user: str = option("root", "The user on each --node host (a cluster file names its "
                           "own); not root: iptables through sudo -n.", check=_word,
                           metavar="USER")
    ssh_key_file: str | None = option(
        None, "The private key for each --node host (default: the ssh agent and ~/.ssh's "
        "keys).", check=_word, metavar="FILE")
    broker_port: int | None = option(
        None, "The port the system listens on, on every host (default: the system's own, "
        "e.g. 9092).", flag="--ssh-broker-port", check=_port, metavar="PORT")


@dataclass(frozen=True, slots=True)
class SshNode:
    """How to reach one host; the password never appears in repr or logs."""

    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    password: str | None = field(default=None, repr=False)
    address: str | None = None  # how the other nodes reach it (default: host)

    @property
    def ip(self) -> str:
        return self.address or self.host

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def parse_host(text: str, *, user: str, key_file: str | None) -> SshNode:
    host, sep, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    if not sep:
        host = text
    if not host or (port and not port.isdigit()):
        raise SpecError(f"--node {text!r}: expected HOST or HOST:PORT")
    return SshNode(host, int(port) if port else 22, user, key_file)


def load_cluster_file(path: Path) -> list[SshNode]:
    """ducktape's cluster.json: nodes[].ssh_config (hostname, user, port, identityfile)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise SpecError(f"--cluster-file: no such file {path}") from e
    except ValueError as e:
        raise SpecError(f"--cluster-file {path}: not JSON: {e}") from e
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list) or not nodes:
        raise SpecError(f"--cluster-file {path}: expected {{\"nodes\": [...]}} with one or more")
    out: list[SshNode] = []
    for i, n in enumerate(nodes):
        cfg = n.get("ssh_config") if isinstance(n, dict) else None
        if not isinstance(cfg, dict):
            raise SpecError(f"--cluster-file {path}: nodes[{i}] has no ssh_config object")
        host = cfg.get("hostname") or cfg.get("host")
        if not host:
            raise SpecError(f"--cluster-file {path}: nodes[{i}].ssh_config needs hostname")
        try:
            port = int(cfg.get("port") or 22)
        except (TypeError, ValueError) as e:
            raise SpecError(f"--cluster-file {path}: nodes[{i}].ssh_config.port "
                            f"{cfg.get('port')!r} is not a number") from e
        out.append(SshNode(str(host), port, str(cfg.get("user") or "root"),
                           cfg.get("identityfile") or None, cfg.get("password") or None,
                           n.get("externally_routable_ip") or None))
    return out


def ssh_nodes(spec: TestSpec) -> dict[str, SshNode]:
    """node name (n1, n2, ...) -> how to reach it, from --node options or the cluster file."""
    if spec.cluster_file:
        hosts = load_cluster_file(Path(spec.cluster_file))
    elif spec.hosts:
        opts = SshOptions.of(spec)
        hosts = [parse_host(h, user=opts.ssh_user, key_file=opts.ssh_key_file)
                 for h in spec.hosts]
    else:
        raise SpecError("--backend ssh needs --node HOST[:PORT] (repeated) or --cluster-file")
    return {f"n{i + 1}": h for i, h in enumerate(hosts)}


class SshRemote:
    """harness.protocols.Remote over paramiko: one connection per node, opened on first use."""

    def __init__(self, nodes: Mapping[str, SshNode], *, connect_timeout_s: float = 10.0) -> None:
        self.nodes = dict(nodes)
        self.connect_timeout_s = connect_timeout_s
        self._clients: dict[str, Any] = {}
        self._locks = {n: threading.Lock() for n in self.nodes}

    def client(self, node: str) -> Any:
        import paramiko

        if node not in self.nodes:
            raise ValueError(f"ssh: unknown node {node!r}; known: {', '.join(sorted(self.nodes))}")
        with self._locks[node]:
            c = self._clients.get(node)
            if c is not None and c.get_transport() is not None and c.get_transport().is_active():
                return c
            h = self.nodes[node]
            c = paramiko.SSHClient()
            with contextlib.suppress(OSError):
                c.load_system_host_keys()
            c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
            try:
                c.connect(h.host, port=h.port, username=h.user, key_filename=h.key_file,
                          password=h.password, timeout=self.connect_timeout_s,
                          banner_timeout=self.connect_timeout_s,
                          auth_timeout=self.connect_timeout_s,
                          allow_agent=h.key_file is None and h.password is None,
                          look_for_keys=h.key_file is None and h.password is None)
            except (paramiko.SSHException, OSError) as e:
                # str(h) is user@host:port: never the password or the key's contents
                raise NodeError(f"ssh: cannot connect to {node} ({h}): "
                                f"{type(e).__name__}: {e}") from None
            self._clients[node] = c
            return c

    def exec(self, node: str, cmd: Sequence[str], *, timeout_s: float | None = None) -> Exec:
        chan = self.client(node).get_transport().open_session()
        try:
            chan.exec_command(shlex.join(cmd))
            out, err = bytearray(), bytearray()
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while True:
                got = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    got = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    got = True
                if chan.exit_status_ready() and not chan.recv_ready() \
                        and not chan.recv_stderr_ready():
                    break
                if deadline is not None and time.monotonic() > deadline:
                    return Exec(124, out.decode(errors="replace"),
                                f"ssh: timed out after {timeout_s:g} s on {node}")
                if not got:
                    time.sleep(0.002)
            return Exec(chan.recv_exit_status(), out.decode(errors="replace"),
                        err.decode(errors="replace"))
        finally:
            chan.close()

    def upload(self, node: str, local: Path, remote: str) -> None:
        parent, name = remote.rsplit("/", 1) if "/" in remote else (".", remote)
        r = self.exec(node, ["mkdir", "-p", parent or "/"], timeout_s=30)
        if not r.ok:
            raise NodeError(f"ssh: mkdir -p {parent} on {node} failed: {r.stderr.strip()}")
        with self.client(node).open_sftp() as sftp:
            if local.is_dir():  # a directory: as a tar, unpacked in place
                tmp = f"{remote}.upload.tar"
                with tempfile.NamedTemporaryFile(suffix=".tar") as f:
                    f.write(tar_bytes({name: local}))
                    f.flush()
                    sftp.put(f.name, tmp)
                r = self.exec(node, ["sh", "-c", f"mkdir -p {shlex.quote(parent)} && tar -C "
                                     f"{shlex.quote(parent)} -xf {shlex.quote(tmp)} && rm -f "
                                     f"{shlex.quote(tmp)}"], timeout_s=60)
                if not r.ok:
                    raise NodeError(f"ssh: unpacking {local} on {node} failed: {r.stderr}")
            else:
                sftp.put(str(local), remote)

    def download(self, node: str, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        with self.client(node).open_sftp() as sftp:
            sftp.get(remote, str(local))

    def client_address(self, node: str) -> str | None:
        """The harness's address as this node sees it ($SSH_CONNECTION)."""
        r = self.exec(node, ["sh", "-c", "echo $SSH_CONNECTION"], timeout_s=10)
        words = r.stdout.split()
        return words[0] if r.ok and words else None

    def close(self) -> None:
        for c in self._clients.values():
            with contextlib.suppress(Exception):
                c.close()
        self._clients.clear()


class SshBackend:
    """harness.protocols.Backend on hosts reached over ssh."""

    name = "ssh"
    options = SshOptions

    def __init__(self, *, ready_timeout_s: float = 60.0) -> None:
        self.ready_timeout_s = ready_timeout_s
        self.remote: SshRemote | None = None
        self.key = ""
        self.nodes: dict[str, SshNode] = {}
        self._items: dict[str, str] = {}

    def base_dir(self) -> str:
        return f"{REMOTE_ROOT}/{self.key}"

    def up(self, run: Run, system: System) -> ShellHost:
        """Connect to every host, check its Python, make the run's folder; the system
        installs and starts itself there."""
        self.nodes = ssh_nodes(run.spec)
        if tuple(self.nodes) != run.nodes:
            raise SpecError(f"ssh: {len(self.nodes)} hosts but the run has nodes {run.nodes}")
        self.key = run_key(run)
        port = SshOptions.of(run.spec).broker_port or system.port
        remote = self.remote = SshRemote(self.nodes)
        base = self.base_dir()
        sudo = {n: h.user != "root" for n, h in self.nodes.items()}
        for node, h in self.nodes.items():
            self._items[node] = leftovers.register(
                self.key, "ssh-node", undo_module=__name__, node=node, host=h.host,
                port=h.port, user=h.user, key_file=h.key_file, base_dir=base, tag=self.key,
                sudo=sudo[node])
            run.log.info("ssh: %s is %s", node, h)
            check = remote.exec(node, ["sh", "-c", "mkdir -p " + shlex.quote(base) +
                                       " && python3 -c 'import sys; assert sys.version_info "
                                       ">= (3, 11), sys.version'"], timeout_s=30)
            if not check.ok:
                raise NodeError(f"ssh: {node} ({h}) needs python3 >= 3.11 and a writable "
                                f"{REMOTE_ROOT}: {check.stderr.strip()[-300:]}")
        addrs = {n: f"{h.ip}:{port}" for n, h in self.nodes.items()}
        client_addr = remote.client_address(run.nodes[0])
        run.remote = remote
        run.net = IptablesNet(remote, {n: h.ip for n, h in self.nodes.items()}, tag=self.key,
                              broker_port=port, client_addr=client_addr,
                              sudo=any(sudo.values()))
        run.client_addrs = dict(addrs)
        run.extra.update({"run_key": self.key})
        peers = {n: {m: a for m, a in addrs.items() if m != n} for n in run.nodes}
        endpoints = Endpoints(listen=addrs, peers=peers, clients=addrs, admin=addrs)
        return ShellHost(remote=remote, base_dirs={n: base for n in run.nodes},
                         endpoints=endpoints, ship_code=True)

    def connect(self, run: Run) -> None:
        """Hosts reach each other directly: nothing more to wire."""

    def down(self, run: Run) -> None:
        """Kill the brokers, remove our rules and files on every host; never raises."""
        if self.remote is None:
            return
        for node in self.nodes:
            try:
                undo_node(self.remote, node, self.base_dir(), self.key,
                          sudo=self.nodes[node].user != "root")
                leftovers.release(self.key, self._items.pop(node, ""))
            except Exception as e:
                run.log.warning("ssh: could not clean up %s: %s", node, e)
        self.remote.close()
        leftovers.end_run(self.key)


def undo_node(remote: SshRemote, node: str, base_dir: str, tag: str, *, sudo: bool) -> str:
    """Kill the run's processes (SIGCONT first), delete its tagged rules and its files.

    The shell-host contract (harness.protocols.ShellHost): a system's process on a host
    runs in the node's base dir and leaves its pid in a `*.pid` file there; a pid whose
    working directory is elsewhere (a recycled pid) is left alone."""
    q = shlex.quote
    kill = (f"for f in {q(base_dir)}/*.pid; do p=$(cat \"$f\" 2>/dev/null) && "
            f"[ -n \"$p\" ] && case $(readlink /proc/$p/cwd 2>/dev/null) in "
            f"{q(base_dir)}*) kill -CONT $p; kill -KILL $p;; esac; done; true")
    r = remote.exec(node, ["sh", "-c", kill], timeout_s=20)
    if not r.ok:
        raise NodeError(f"ssh: killing the run's processes on {node} failed: "
                        f"{r.stderr.strip()}")
    net = IptablesNet(remote, {node: "0.0.0.0"}, tag=tag, broker_port=0, sudo=sudo)
    net.heal(None)
    net.fast(None)
    remote.exec(node, ["rm", "-rf", base_dir], timeout_s=30)
    return f"stopped the run's processes and removed rules and {base_dir} on {node}"


def _undo_ssh_node(item: dict[str, Any]) -> str:
    node = str(item["node"])
    h = SshNode(str(item["host"]), int(item["port"]), str(item["user"]), item.get("key_file"))
    remote = SshRemote({node: h})
    try:
        return undo_node(remote, node, str(item["base_dir"]), str(item["tag"]),
                         sudo=bool(item.get("sudo")))
    finally:
        remote.close()


leftovers.register_hook("ssh-node", _undo_ssh_node)
