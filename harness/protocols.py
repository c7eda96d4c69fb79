"""The roles a test is assembled from, as small protocols (Jepsen's style).

A backend (local, docker, ssh) makes the nodes and hands the system a host
(`LocalHost` or `ShellHost`: where each node's files go, how to start processes
there, which addresses to bind and dial); the system (one package under
`systems/`) builds its `DB` on that host, with some of the optional abilities
below. The nemesis checks for an ability where it needs it
(`isinstance(db, Killable)`), so a system that cannot pause simply offers no
pause fault. `Run` carries everything explicitly: there are no globals.

A new system implements `System` (and a `DB` for the hosts it supports), a new
workload `Workload`, a new checker `Checker`; `harness.registry` finds them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harness.runfiles import Op, RunPaths

if TYPE_CHECKING:
    import subprocess

    from harness import generator as gen
    from harness.image import NodeImage
    from harness.spec import TestSpec
    from harness.test import Test

Grudge = Mapping[str, Collection[str]]  # node -> peers whose traffic it drops


def complete_grudge(components: Iterable[Collection[str]]) -> dict[str, frozenset[str]]:
    """Jepsen's complete-grudge: every node drops every node outside its component
    (a node in two components is a ValueError; a node that drops nothing is left out)."""
    comps = [frozenset(c) for c in components]
    everyone: frozenset[str] = frozenset()
    for comp in comps:
        twice = everyone & comp
        if twice:
            raise ValueError(f"complete_grudge: {', '.join(sorted(twice))} in two components")
        everyone |= comp
    return {n: everyone - comp for comp in comps if everyone - comp for n in comp}


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
    # Anything a backend wants to share with the nemesis/clients (e.g. its run id).
    extra: dict[str, Any] = field(default_factory=dict)
    # The fault kinds the run's nemesis package can inject: assembly hands them over, so a
    # backend knows, with no import of the nemesis, whether it must be able to cut links.
    fault_kinds: tuple[FaultKind, ...] = ()

    @property
    def cuts_links(self) -> bool:
        """Whether a fault of this run partitions nodes (a kind aimed at a grudge)."""
        return any(k.aims == "grudge" for k in self.fault_kinds)


# ------------------------------------------------------------------ what a backend hands a system


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Where each node's service port is bound and who dials which address to reach it."""

    listen: Mapping[str, str]               # node -> host:port the node binds
    peers: Mapping[str, Mapping[str, str]]  # node -> other node -> address node dials for it
    clients: Mapping[str, str]              # node -> address clients dial (shaped links)
    admin: Mapping[str, str]                # node -> address the harness dials (never cut)


class Launches(Protocol):
    """Starts a process on this machine that dies with the harness (harness.control.launcher)."""

    def launch(self, name: str, cmd: Sequence[str], cwd: Path, log_path: Path, *,
               pipes: bool = False) -> tuple[subprocess.Popen[bytes], str]: ...
    def release(self, item: str) -> None: ...


@dataclass(frozen=True, slots=True)
class LocalHost:
    """Nodes as folders on this machine; processes through the backend's launcher."""

    dirs: Mapping[str, Path]
    endpoints: Endpoints
    launcher: Launches
    python: str  # this venv's interpreter: a Python system runs as `python -m ...`
    # node -> the command prefix that runs a process in the node's network namespace
    # (`ip netns exec NS`), where the backend gave each node one; empty: this machine's
    prefixes: Mapping[str, Sequence[str]] = field(default_factory=dict)


class Freezer(Protocol):
    """Pausing a whole node (docker's cgroup freezer), where the backend has it."""

    def freeze(self, node: str) -> None: ...
    def thaw(self, node: str) -> None: ...
    def frozen(self, node: str) -> bool: ...
    def pids(self, node: str, pattern: str) -> list[int]: ...  # host pids whose args match


@dataclass(frozen=True, slots=True)
class ShellHost:
    """Nodes reached by shell commands (docker exec, ssh): files under base_dirs[node].

    A system's long-running process there runs with the base dir as its working
    directory and writes its pid to a `*.pid` file in it, so `undertow heal` can stop
    it after the harness died, whatever the system."""

    remote: Remote
    base_dirs: Mapping[str, str]
    endpoints: Endpoints
    python: str = "python3"
    sudo: bool = False
    freezer: Freezer | None = None
    ship_code: bool = False  # the system uploads its code to each node (a bare host)


NodeHost = LocalHost | ShellHost


# ------------------------------------------------------------------ the system under test


class DB(Protocol):
    """The system under test on its nodes."""

    def setup(self, run: Run, node: str) -> None: ...     # install, configure, start
    def teardown(self, run: Run, node: str) -> None: ...  # stop; never raises
    def wait_ready(self, run: Run, timeout_s: float) -> None: ...  # serving, or raise naming why


@runtime_checkable
class Killable(Protocol):
    def kill(self, run: Run, node: str) -> None: ...   # SIGKILL, no grace
    def start(self, run: Run, node: str) -> None: ...  # idempotent: a running node stays up


@runtime_checkable
class Stoppable(Protocol):
    """A node asked to shut itself down (SIGTERM, SIGKILL after a grace): a rolling
    restart, or a crash after the server's own shutdown wrote its checkpoints."""

    def stop(self, run: Run, node: str) -> None: ...


@runtime_checkable
class Pausable(Protocol):
    def pause(self, run: Run, node: str) -> None: ...   # SIGSTOP / docker pause
    def resume(self, run: Run, node: str) -> None: ...  # SIGCONT / docker unpause; idempotent


@dataclass(frozen=True, slots=True)
class ProcState:
    """A node's process as its host sees it now: the evidence a fault's landing rests on."""

    pid: int | None = None  # None: no live process of the node
    stopped: bool = False   # every thread stopped (SIGSTOP), or the node's cgroup frozen
    seen: str = ""          # how it was seen, for the history's `evidence`


@runtime_checkable
class ObservesProcesses(Protocol):
    def process_state(self, run: Run, node: str) -> ProcState: ...  # read now, never raises


@dataclass(frozen=True, slots=True)
class LinkSeen:
    """What a probe between a node and a peer saw: "dropped", "flowing", "partial" (some
    of the pair's links cut, others not) or "unknown"; `how`: the observation, in words."""

    seen: str
    how: str = ""


@runtime_checkable
class ProbesLinks(Protocol):
    """A Net that can see whether traffic from a node to a peer is dropped now
    (harness.linkprobe from inside the node, harness.proxyprobe through the link proxy):
    a partition's evidence. Never raises."""

    def probe(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], LinkSeen]: ...


@runtime_checkable
class TimesLinks(Protocol):
    """A Net that can time round trips through every link of a node now
    (harness.proxyprobe): a slow or lossy link's evidence. Node -> each round trip's
    time in ms, its links pooled (empty when none got through), pinging for about
    budget_s; never raises."""

    def round_trips(self, nodes: Sequence[str], budget_s: float) -> dict[str, list[float]]: ...


@runtime_checkable
class HasLogs(Protocol):
    def collect(self, run: Run, node: str, dest: Path) -> None: ...  # logs and data into dest


@runtime_checkable
class HasLeaders(Protocol):
    def leader_of(self, run: Run, key: int) -> str | None: ...  # from the admin API, now
    def controller(self, run: Run) -> str | None: ...           # the active controller, now


@runtime_checkable
class HasCoordinator(Protocol):
    def coordinator(self, run: Run) -> str | None: ...  # the run's consumer group's, now


@dataclass(frozen=True, slots=True)
class ClockReading:
    """A node's clock as it answered: a clock fault's evidence."""

    offset_ns: int  # the offset the node applies now
    ahead_ns: int   # the node's time minus the harness's, at the middle of the request
    rtt_ns: int     # the request's round trip: ahead_ns is known to within half of it


@runtime_checkable
class ReadsClock(Protocol):
    def read_clock(self, run: Run, node: str) -> ClockReading | None: ...  # None: no answer


@runtime_checkable
class HasClock(Protocol):
    def shift_clock(self, run: Run, node: str, delta_ns: int) -> None: ...  # added to the offset
    def reset_clock(self, run: Run, node: str) -> None: ...


@runtime_checkable
class HasMetadata(Protocol):
    """A DB that answers the admin `metadata` request (leaders, ISR, replicas) of some live
    node, None when none answers: target resolution reads replicas and ISRs from it."""

    def metadata(self) -> Mapping[str, Any] | None: ...


@runtime_checkable
class HasReleases(Protocol):
    """A system that runs several releases (`undertow matrix` rows): its option release_key
    names the one to run."""

    release_key: str

    def resolve_release(self, release: str) -> str: ...  # the release run; SpecError if none


@runtime_checkable
class LosesUnflushed(Protocol):
    """The node is down: cut its logs back to what reached the disk; the bytes each file
    lost (relative to the node's data dir), the fault's evidence."""

    def lose_unflushed(self, run: Run, node: str) -> Mapping[str, int]: ...


@runtime_checkable
class DumpsReplicas(Protocol):
    def dump_replicas(self, run: Run) -> list[dict[str, Any]]: ...  # replicas.jsonl rows
    def dump_node(self, run: Run, node: str) -> list[dict[str, Any]]: ...  # one node's rows


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


class System(Protocol):
    """One system under test: all the harness learns about it comes through here."""

    name: str
    port: int  # its service port on a node of its own (docker, ssh); local runs pick free ones

    def check(self, spec: TestSpec) -> None: ...  # SpecError for a setting it cannot honour
    def db(self, test: Test, host: NodeHost) -> DB: ...  # with the optional abilities it has
    def client(self, test: Test) -> Client: ...          # speaks the workload's operations
    def describe(self, spec: TestSpec) -> Mapping[str, Any]: ...  # for test.json: name, version


@runtime_checkable
class DirectLinks(Protocol):
    """A system whose nodes announce one address to peers and clients alike (Kafka's
    advertised listeners): no per-link proxy can sit between them, so the local backend
    lets them dial each other directly (and cannot partition them without namespaces)."""

    def direct_links(self) -> bool: ...


@runtime_checkable
class SpeaksOffsets(Protocol):
    """A system whose client performs the `commit` and `committed` operations (HISTORY.md)
    for that spec: the workload may then emit them (workloads/offsets.py)."""

    def speaks_offsets(self, spec: TestSpec) -> bool: ...


@runtime_checkable
class SetsAcks(Protocol):
    """A system whose producers wait for the acks its options set (`--acks`, one of "0",
    "1", "all"): a workload's rule about them (txn: all) asks it, as workloads import no
    system and the setting is the system's own option (systems/settings.py)."""

    def acks(self, spec: TestSpec) -> str: ...


@runtime_checkable
class HasNodeImage(Protocol):
    """A system that runs in containers: the image its nodes start from (docker backend)."""

    def node_image(self) -> NodeImage: ...


class Checker(Protocol):
    """Judges a run folder; never raises: "unknown" is an answer (HISTORY.md's results)."""

    name: str

    def check(self, run_dir: Path, spec: TestSpec | None) -> dict[str, Any]: ...


@runtime_checkable
class Prepares(Protocol):
    """A checker with slow parts to start (a Spark JVM): the run calls prepare as the
    workload begins, so they start meanwhile, and release once at the end, whatever
    happened (interrupted, failed or checked). Neither raises; a preparation that failed
    leaves check to do things the ordinary way."""

    def prepare(self, spec: TestSpec) -> None: ...
    def release(self) -> None: ...


@runtime_checkable
class WatchesHistory(Protocol):
    """A checker that learns what it needs from each op as the run writes it, so that
    its check need not read history.jsonl again. The run calls `watch` once, before the
    first op, with the file about to be written; the callback it returns sees every op
    of that file in file order (cheap, never raises). A check of any other folder reads
    the file as usual."""

    def watch(self, history: Path) -> Callable[[Op], None]: ...


@runtime_checkable
class ReadsHistoryEarly(Protocol):
    """A checker that starts reading history.jsonl as soon as the run has written its
    last op, while replicas are dumped and the cluster goes down; its check then takes
    what was read. Never raises (a read that failed is the check's to report)."""

    def history_written(self, history: Path) -> None: ...


class Workload(Protocol):
    """What the clients do and how the outcome is judged."""

    name: str

    def generator(self, test: Test) -> gen.Gen: ...
    def final_generator(self, test: Test, history: Path) -> gen.Gen | None: ...
    def checkers(self, test: Test) -> Sequence[Checker]: ...


@runtime_checkable
class ChecksSpec(Protocol):
    """A workload with rules of its own about the rest of the run (txn: no client crashes,
    acks all): assembly asks it before anything starts, after the system's own check, so
    a rule every system shares is written once, in the workload."""

    def check(self, spec: TestSpec) -> None: ...  # SpecError naming the option


@runtime_checkable
class WritesKeys(Protocol):
    """A workload whose clients write integer keys, the partitions of one topic: `keys` at
    once, rotating through the `partitions` the system creates at setup. The nemesis asks
    it through harness.registry (a sequence aimed at a live key), as it imports no workload;
    both numbers are the workload's own options."""

    def keys(self, spec: TestSpec) -> int: ...
    def partitions(self, spec: TestSpec) -> int: ...


@runtime_checkable
class MeasuresAvailability(Protocol):
    """A workload whose checkers measure results.json's `availability` from any history in
    HISTORY.md's format: the report asks the default workload for a folder whose
    results.json lacks one, so it reads the measurement without importing the checkers."""

    def availability(self, run_dir: Path) -> dict[str, Any]: ...


class FaultKind(Protocol):
    """A fault kind as the harness reads it; harness/faultkinds.py declares each once.

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


class NemesisPackage(Protocol):
    """The faults of a run: a nemesis, its generators and the plan they follow."""

    nemesis: Nemesis

    @property
    def generator(self) -> gen.Gen: ...
    @property
    def final_generator(self) -> gen.Gen: ...
    @property
    def kinds(self) -> Sequence[FaultKind]: ...           # what it can inject
    def plan_json(self) -> list[dict[str, Any]]: ...      # test.json's nemesis_plan
    def kinds_json(self) -> list[dict[str, Any]]: ...     # test.json's fault_kinds
    def phases(self) -> list[dict[str, Any]] | None: ...  # the phases schedule, if any
    def checkers(self) -> Sequence[Checker]: ...           # e.g. liveness after heals


class Backend(Protocol):
    """Where the nodes live (local processes, containers, ssh hosts) and how to reach them.

    `up` makes the nodes (folders, containers, connections) and returns the host the
    system starts itself on; `connect` runs once the system's processes are started and
    fills run.net and run.client_addrs (the link proxy locally); `down` removes
    everything it made, is idempotent and never raises. Everything `up` creates is
    registered with harness.leftovers first, so `undertow heal` can undo it after the
    harness dies.
    """

    name: str

    def up(self, run: Run, system: System) -> NodeHost: ...
    def connect(self, run: Run) -> None: ...
    def down(self, run: Run) -> None: ...
