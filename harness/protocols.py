"""The roles a test is assembled from, as small protocols (Jepsen's style).

A backend (local, docker, ssh) provides a `Remote` and a `DB` with some of the
optional abilities below; the nemesis checks for an ability where it needs it
(`isinstance(db, Killable)`), so a backend that cannot pause simply offers no
pause fault. `Run` carries everything explicitly: there are no globals.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harness.runfiles import Op

if TYPE_CHECKING:
    from harness.spec import TestSpec

Grudge = Mapping[str, Collection[str]]  # node -> peers whose traffic it drops


@dataclass(frozen=True, slots=True)
class Exec:
    """The outcome of one command on a node."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Remote(Protocol):
    """How commands and files reach a node: local, docker or ssh."""

    def exec(self, node: str, cmd: Sequence[str], *, timeout_s: float | None = None) -> Exec: ...
    def upload(self, node: str, local: Path, remote: str) -> None: ...
    def download(self, node: str, remote: str, local: Path) -> None: ...


@dataclass(frozen=True, slots=True)
class RunPaths:
    """Where one run's files go: results/<test>/<timestamp>/."""

    root: Path

    @property
    def history(self) -> Path:
        return self.root / "history.jsonl"

    @property
    def replicas(self) -> Path:
        return self.root / "replicas.jsonl"

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    @property
    def test_json(self) -> Path:
        return self.root / "test.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def harness_log(self) -> Path:
        return self.root / "harness.log"

    def node_dir(self, node: str) -> Path:
        return self.root / "nodes" / node


@dataclass(slots=True)
class Run:
    """One test in progress: the spec and the live parts, passed explicitly."""

    spec: TestSpec
    nodes: tuple[str, ...]
    paths: RunPaths
    log: logging.Logger
    remote: Remote | None = None
    db: DB | None = None
    net: Net | None = None
    # Addresses clients use to reach each node (through the link proxy locally).
    client_addrs: dict[str, str] = field(default_factory=dict)
    # Anything a backend wants to share with the nemesis/clients (e.g. admin addresses).
    extra: dict[str, Any] = field(default_factory=dict)


class DB(Protocol):
    """The system under test on one node."""

    def setup(self, run: Run, node: str) -> None: ...
    def teardown(self, run: Run, node: str) -> None: ...


@runtime_checkable
class Killable(Protocol):
    def kill(self, run: Run, node: str) -> None: ...   # SIGKILL, no grace
    def start(self, run: Run, node: str) -> None: ...  # idempotent: a running node stays up


@runtime_checkable
class Pausable(Protocol):
    def pause(self, run: Run, node: str) -> None: ...   # SIGSTOP / docker pause
    def resume(self, run: Run, node: str) -> None: ...  # SIGCONT / docker unpause; idempotent


@runtime_checkable
class HasLogs(Protocol):
    def collect(self, run: Run, node: str, dest: Path) -> None: ...  # logs and data into dest


@runtime_checkable
class HasLeaders(Protocol):
    def leader_of(self, run: Run, key: int) -> str | None: ...  # from the admin API, now
    def controller(self, run: Run) -> str | None: ...           # the active controller, now


@runtime_checkable
class HasClock(Protocol):
    def shift_clock(self, run: Run, node: str, delta_ns: int) -> None: ...  # added to the offset
    def reset_clock(self, run: Run, node: str) -> None: ...


@runtime_checkable
class LosesUnflushed(Protocol):
    def lose_unflushed(self, run: Run, node: str) -> None: ...  # node is down: cut logs back


@runtime_checkable
class DumpsReplicas(Protocol):
    def dump_replicas(self, run: Run) -> list[dict[str, Any]]: ...  # replicas.jsonl rows


class Net(Protocol):
    """Links between nodes and from clients to nodes; every change has its heal."""

    def partition(self, run: Run, grudge: Grudge) -> None: ...  # node drops traffic from peers
    def heal(self, run: Run) -> None: ...                         # all partitions end
    def slow(self, run: Run, nodes: Collection[str], delay_ms: float, jitter_ms: float) -> None: ...
    def lossy(self, run: Run, nodes: Collection[str], drop_probability: float) -> None: ...
    def fast(self, run: Run) -> None: ...                         # all shaping ends


class Client(Protocol):
    def open(self, run: Run, node: str) -> Client: ...
    def invoke(self, run: Run, op: Op) -> Op: ...  # completion: ok | fail | info, same process/f
    def close(self, run: Run) -> None: ...


class FaultKind(Protocol):
    """A fault kind as the harness reads it; the nemesis package declares each once.

    Its window runs from `start` to the completion of `stop` (None: an instant, the
    op is its window); `aims` says whether its value names `nodes` or a `grudge`.
    """

    @property
    def start(self) -> str: ...
    @property
    def stop(self) -> str | None: ...
    @property
    def colour(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def aims(self) -> str: ...


class Nemesis(Protocol):
    fs: frozenset[str]  # the verbs it handles; compose routes by them

    @property  # the fault kinds it injects (the live status line reads them)
    def kinds(self) -> Sequence[FaultKind]: ...

    def setup(self, run: Run) -> Nemesis: ...
    def invoke(self, run: Run, op: Op) -> Op: ...  # completion is always info
    def teardown(self, run: Run) -> None: ...      # always heals, even after an error


class Backend(Protocol):
    """Where the nodes live (local processes, containers, ssh hosts) and how to reach them.

    `up` starts nodes and brokers, fills run.remote/db/net/client_addrs, and returns
    once every partition has a leader; `down` stops and removes everything it made,
    is idempotent and never raises. Everything `up` creates is registered with
    harness.leftovers first, so `undertow heal` can undo it after the harness dies.
    """

    name: str

    def up(self, run: Run) -> None: ...
    def collect(self, run: Run) -> None: ...  # broker logs and data into run.paths.node_dir(n)
    def down(self, run: Run) -> None: ...
