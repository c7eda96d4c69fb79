"""Our broker on a shell host (docker exec or ssh): the same code drives a container and a host.

Everything is a shell command on the node. The broker process is a
harness.control.shellproc.ShellProcess (detached, its pid in broker.pid; a kill
is SIGKILL of that pid, the node, its data and its iptables rules stay; a pause
is the host's freezer or SIGSTOP); the clock offset is a file the broker re-reads.
On a bare host (ssh) the broker's package is uploaded first; the node image
(broker-image/Dockerfile) already holds it under IMAGE_PYTHONPATH.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.control.shell import NodeError
from harness.control.shell import check_exec as _check
from harness.control.shellproc import ShellProcess
from harness.protocols import ClockReading, Exec, ProcState, Run, ShellHost
from systems.undertow import admin as db
from systems.undertow.client import admin_dump
from workloads.options import GROUP_ID, partitions

BROKER_PORT = 9092
IMAGE_PYTHONPATH = "/opt/undertow"  # where broker-image/Dockerfile puts the package
BROKER_ARGS = " -m broker --config"  # how a broker process is told from others on a node


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the broker's files live on one node."""

    base_dir: str            # e.g. /var/lib/undertow (container) or /var/tmp/undertow/<run>
    pythonpath: str          # the directory holding the `broker` package
    python: str = "python3"

    @property
    def data_dir(self) -> str:
        return f"{self.base_dir}/data"

    @property
    def config(self) -> str:
        return f"{self.base_dir}/NODE.json"

    @property
    def clock_file(self) -> str:
        return f"{self.base_dir}/clock_offset_ns"


def layouts_for(host: ShellHost) -> dict[str, Layout]:
    """Each node's files: under its base dir; the package shipped beside them or in the image."""
    return {n: Layout(base, f"{base}/lib" if host.ship_code else IMAGE_PYTHONPATH, host.python)
            for n, base in host.base_dirs.items()}


class RemoteBroker:
    """DB with Killable, Pausable, HasLogs, HasLeaders, HasClock, LosesUnflushed,
    DumpsReplicas, over a ShellHost (its endpoints: node -> "ip:port" as peers dial it)."""

    def __init__(self, host: ShellHost, *, timeout_s: float = 30.0) -> None:
        self.host = host
        self.remote = host.remote
        self.freezer = host.freezer
        self.layouts = layouts_for(host)
        self.addrs = dict(host.endpoints.admin)
        # broker.pid and broker.log in each node's base dir
        self.proc = ShellProcess(host, name="broker", marker=BROKER_ARGS, timeout_s=timeout_s)
        self.sh = self.proc.sh

    # -- DB ------------------------------------------------------------------------

    def setup(self, run: Run, node: str) -> None:
        lay = self.layouts[node]
        listen = self.host.endpoints.listen[node]
        peers = {**self.host.endpoints.peers[node], node: listen}
        cfg = db.node_config(run.spec, node, listen, peers, lay.data_dir, lay.clock_file)
        _check(self.sh(node, f"mkdir -p {shlex.quote(lay.data_dir)}"), node, "mkdir")
        if self.host.ship_code:
            self.remote.upload(node, db.broker_source(), f"{lay.pythonpath}/broker")
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "NODE.json"
            p.write_text(json.dumps(cfg, indent=1))
            self.remote.upload(node, p, lay.config)
        self.start(run, node)

    def teardown(self, run: Run, node: str) -> None:
        self.resume(run, node)
        self.kill(run, node)

    # -- Killable ---------------------------------------------------------------------

    def frozen(self, node: str) -> bool:
        return self.proc.frozen(node)

    def running(self, node: str) -> bool:
        """The broker's pid is alive, not a zombie, and is the broker."""
        return self.proc.running(node)

    def start(self, run: Run, node: str) -> None:
        lay = self.layouts[node]
        self.proc.start(node, db.broker_command(lay.python, lay.config),
                        env={"PYTHONPATH": lay.pythonpath, "PYTHONUNBUFFERED": "1"})

    def kill(self, run: Run, node: str) -> None:
        self.proc.kill(node)

    def stop(self, run: Run, node: str) -> None:
        self.proc.stop(node)

    # -- Pausable (the host's freezer, else signals) ------------------------------------------

    def pause(self, run: Run, node: str) -> None:
        self.proc.pause(node)

    def resume(self, run: Run, node: str) -> None:
        self.proc.resume(node)

    def process_state(self, run: Run, node: str) -> ProcState:
        return self.proc.state(node)

    # -- HasLogs ----------------------------------------------------------------------------

    def collect(self, run: Run, node: str, dest: Path) -> None:
        """The broker's log, NODE.json and data dir, into dest (tar on the node, then copy)."""
        self.proc.fetch(node, self.layouts[node].base_dir,
                        ["broker.log", "NODE.json", "data", "clock_offset_ns"], dest)

    # -- HasLeaders -----------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any] | None:
        """harness.protocols.HasMetadata: any node's answer (None when none answers)."""
        meta: dict[str, Any] | None = db.first_answer(sorted(self.addrs.items()), db.metadata)
        return meta

    def leader_of(self, run: Run, key: int) -> str | None:
        return db.leader_from(self.metadata(), key)

    def controller(self, run: Run) -> str | None:
        return db.controller_from(self.metadata())

    def coordinator(self, run: Run | None) -> str | None:
        return db.coordinator(sorted(self.addrs.items()), GROUP_ID)

    def wait_ready(self, run: Run, timeout_s: float = 60.0) -> None:
        """Every node answers and sees a leader for every partition; raise naming the laggards."""
        def check() -> None:
            down = [n for n in sorted(self.layouts) if not self.running(n)]
            if down:
                raise NodeError(f"the broker exited on {', '.join(down)} while starting "
                                "(see nodes/<node>/broker.log)")

        db.wait_ready(self.addrs, timeout_s, partitions=partitions(run.spec), check=check)

    # -- HasClock --------------------------------------------------------------------------------

    def shift_clock(self, run: Run, node: str, delta_ns: int) -> None:
        f = shlex.quote(self.layouts[node].clock_file)
        script = (f"v=$(cat {f} 2>/dev/null || echo 0); echo $((v + {int(delta_ns)})) > {f}.tmp "
                  f"&& mv {f}.tmp {f}")
        _check(self.sh(node, script), node, "shifting the clock")

    def reset_clock(self, run: Run, node: str) -> None:
        f = shlex.quote(self.layouts[node].clock_file)
        _check(self.sh(node, f"echo 0 > {f}.tmp && mv {f}.tmp {f}"), node, "resetting the clock")

    def read_clock(self, run: Run, node: str) -> ClockReading | None:
        return db.read_clock(self.addrs[node])

    # -- LosesUnflushed / DumpsReplicas ------------------------------------------------------------

    def _tool(self, node: str, *args: str) -> Exec:
        lay = self.layouts[node]
        q = shlex.quote
        return self.sh(node, f"PYTHONPATH={q(lay.pythonpath)} " + shlex.join(args),
                       timeout_s=120)

    def lose_unflushed(self, run: Run, node: str) -> dict[str, int]:
        if self.running(node):
            raise NodeError(f"lose_unflushed: the broker on {node} is running; kill it first")
        lay = self.layouts[node]
        done = _check(self._tool(node, *db.lose_unflushed_command(lay.python, lay.data_dir)),
                      node, "broker.tools lose-unflushed")
        return db.parse_cut(done.stdout, f"lose_unflushed on {node}")

    def dump_node(self, run: Run | None, node: str) -> list[dict[str, Any]]:
        """A node's replicas.jsonl rows: live over the admin API, else offline from disk."""
        if not self.frozen(node):
            try:
                rows: list[dict[str, Any]] = admin_dump(self.addrs[node], timeout_s=10.0)
                return rows
            except Exception:
                pass
        lay = self.layouts[node]
        r = _check(self._tool(node, *db.dump_command(lay.python, lay.data_dir, node)),
                   node, "broker.tools dump")
        return db.parse_dump(r.stdout, f"broker.tools dump on {node}")

    def dump_replicas(self, run: Run) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for node in sorted(self.layouts):
            rows.extend(self.dump_node(run, node))
        return rows
