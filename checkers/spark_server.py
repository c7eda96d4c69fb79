"""Long-lived Spark on this machine, and which Spark a check uses.

Two kinds, both from the scripts in pyspark's own package, bound to 127.0.0.1:
- the warm server (`undertow spark start|status|stop`): a Spark Connect server
  whose Python workers run this interpreter, recorded in a state file so that
  later checks find it;
- a standalone cluster (`StandaloneCluster`): a master and N workers, for
  `undertow check --spark-master spark://127.0.0.1:PORT` (tests, bench).

Every daemon starts in a new process group and carries UNDERTOW_SPARK_TAG in its
environment, which the executors and Python workers it forks inherit: stopping
kills the group, then anything that still carries the tag, so nothing is left.

Which Spark a check uses (`resolve`), the one rule for check, run and nightly:
- `--spark-remote sc://HOST:PORT`: that Connect server (it must answer);
- `--spark cold`: a new in-process session on `--spark-master`, never the warm server;
- `--spark warm`: the warm server of this interpreter; an error if it is not up;
- `--spark auto` (the default): a non-local `--spark-master` as given; else the warm
  server if it is up; else a cold local session. Nothing ever starts a server by
  itself, so without `undertow spark start` every check is cold.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.spec import SPARK_CHOICES as CHOICES

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
TAG_ENV = "UNDERTOW_SPARK_TAG"
DIR_ENV = "UNDERTOW_SPARK_DIR"
DEFAULT_PORT = 15002  # Spark Connect's own default
HOST = "127.0.0.1"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
DAEMON_MODULE = "checkers.spark_daemon"  # Python workers forked with the checks imported


def log4j2_properties(level: str, *quiet: str) -> str:
    """Spark's JVM logging: `level` and above to stderr, one short line each; the loggers
    named in `quiet` only at error. One place for the cold session's and the server's."""
    lines = ["status = error", f"rootLogger.level = {level}",
             "rootLogger.appenderRef.stderr.ref = console",
             "appender.console.type = Console", "appender.console.name = console",
             "appender.console.target = SYSTEM_ERR", "appender.console.layout.type = PatternLayout",
             "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n"]
    for i, name in enumerate(quiet):
        lines += [f"logger.q{i}.name = {name}", f"logger.q{i}.level = error"]
    return "\n".join(lines) + "\n"


LOG4J2 = log4j2_properties("warn")


class SparkError(RuntimeError):
    """A Spark that cannot be had: says which, where, and what to do."""


# -- which Spark a check uses ------------------------------------------------------------


@dataclass(frozen=True)
class SparkTarget:
    """Where a check's jobs run. shares_files: the Spark sees this machine's files (then
    the job's input goes through a local Parquet file instead of the wire)."""

    master: str
    remote: str | None
    shares_files: bool
    label: str


def resolve(choice: str = "auto", master: str | None = None,
            remote: str | None = None) -> SparkTarget:
    """The Spark a check uses, by the rule in this module's docstring; SparkError if the
    named one cannot be reached (said before anything starts)."""
    if choice not in CHOICES:
        raise SparkError(f"--spark: {choice!r} is not one of {', '.join(CHOICES)}")
    master = master or "local[*]"
    if remote is not None:
        if choice == "cold":
            raise SparkError("--spark cold and --spark-remote exclude each other")
        host, port = parse_remote(remote)
        if not listening(host, port):
            raise SparkError(f"--spark-remote {remote}: nothing answers on {host}:{port}")
        warm = read_state()
        if warm is not None and warm.get("address") == remote and alive(warm):
            return SparkTarget(master, shared_session(warm), True, f"connect {remote}")
        return SparkTarget(master, remote, False, f"connect {remote}")
    if choice == "cold" or (choice == "auto" and not master.startswith("local")):
        return SparkTarget(master, None, master.startswith("local"), f"cold {master}")
    state = read_state()
    if state is not None and alive(state):
        return SparkTarget(master, shared_session(state), True, f"warm {state['address']}")
    if choice == "warm":
        raise SparkError(f"--spark warm: no warm Spark is up for {sys.executable} "
                         f"(state in {spark_dir()}); start one with `undertow spark start`")
    return SparkTarget(master, None, master.startswith("local"), f"cold {master}")


def shared_session(state: dict[str, Any]) -> str:
    """The warm server's address with its one long-lived session: checks attach to it and
    leave it open, so its Python workers stay up with the checkers imported (a new session
    would start its own workers, seconds per check)."""
    return f"{state['address']}/;session_id={state['session']}"


def parse_remote(remote: str) -> tuple[str, int]:
    """(host, port) of an sc://HOST:PORT address; SparkError naming it otherwise."""
    rest = remote.removeprefix("sc://")
    host, _, port = rest.partition("/")[0].partition(";")[0].rpartition(":")
    if not remote.startswith("sc://") or not host or not port.isdigit():
        raise SparkError(f"--spark-remote: {remote!r} is not sc://HOST:PORT")
    return host.strip("[]"), int(port)


# -- the warm server ---------------------------------------------------------------------


def spark_dir() -> Path:
    """This interpreter's warm-server folder: $UNDERTOW_SPARK_DIR, else one per venv."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    digest = hashlib.sha1(sys.executable.encode()).hexdigest()[:10]
    return Path.home() / ".cache" / "undertow" / "spark" / digest


def read_state(folder: Path | None = None) -> dict[str, Any] | None:
    """The recorded warm server of this interpreter, if any (alive or not), in its folder
    (default: spark_dir())."""
    try:
        state = json.loads(((folder or spark_dir()) / "state.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("python") != sys.executable:
        return None  # another interpreter's server runs other code: never ours
    return state


def alive(state: dict[str, Any]) -> bool:
    """The recorded server still runs (same pid and start time) and answers on its port."""
    return (_start_time(int(state["pid"])) == state.get("start_time")
            and listening(HOST, int(state["port"])))


def start_server(port: int = DEFAULT_PORT, master: str = "local[*]",
                 driver_memory: str = "3g", *, warm: bool = True) -> dict[str, Any]:
    """Start the warm server (port 0: a free one) and wait until it answers; its state.
    Already up: that one. Any failure or Ctrl-C on the way stops what was started.
    `warm=False` leaves out the first job (`warm_workers`), which opens a Connect session
    in this process: a caller starting the server beside other work runs it after."""
    state = read_state()
    if state is not None and alive(state):
        return state
    if state is not None:  # a dead record: end whatever of it is left (a stray worker)
        kill_tagged(str(state["tag"]))
    port = port or free_port()
    if listening(HOST, port):
        raise SparkError(f"--port {port}: {HOST}:{port} is already in use; choose another")
    d = spark_dir()
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").unlink(missing_ok=True)
    tag = f"warm-{uuid.uuid4().hex[:12]}"
    env = spark_env(d, tag)
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
           "--name", "undertow-warm-spark", "--master", master,
           "--driver-memory", driver_memory,
           "--conf", f"spark.connect.grpc.binding.address={HOST}",
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.python.daemon.module={DAEMON_MODULE}",
           "--conf", "spark.connect.session.manager.defaultSessionTimeout=3650d",
           "--conf", f"spark.local.dir={d / 'local'}",
           "--conf", f"spark.sql.warehouse.dir={d / 'warehouse'}",
           "--conf", f"spark.driver.extraJavaOptions=-Dlog4j.configurationFile="
                     f"file:{d / 'conf' / 'log4j2.properties'}"]
    proc = spawn(cmd, env, d / "server.log")
    state = {"pid": proc.pid, "start_time": _start_time(proc.pid), "port": port,
             "address": f"sc://{HOST}:{port}", "session": str(uuid.uuid4()),
             "master": master, "python": sys.executable,
             "tag": tag, "log": str(d / "server.log"), "started": time.time()}
    try:
        (d / "state.json").write_text(json.dumps(state, indent=1) + "\n")
        wait_listening(proc, port, d / "server.log", "the warm Spark")
        if warm:
            warm_workers(state)
    except BaseException:
        stop_group(proc.pid, tag)
        (d / "state.json").unlink(missing_ok=True)
        raise
    return state


def warm_workers(state: dict[str, Any]) -> None:
    """One tiny job of the real kind, so the server's JIT and first Python workers are up."""
    from checkers.spark import SessionStarter

    starter = SessionStarter("local[*]", shared_session(state))
    try:
        starter.get()
    finally:
        starter.close()


def stop_server() -> dict[str, Any] | None:
    """Stop the recorded warm server and everything it forked; its state, or None."""
    path = spark_dir() / "state.json"
    state = read_state()
    if state is None:
        return None
    if _start_time(int(state["pid"])) == state.get("start_time"):
        stop_group(int(state["pid"]), str(state["tag"]))
    else:
        kill_tagged(str(state["tag"]))
    deadline = time.monotonic() + STOP_TIMEOUT_S  # the port is free once the JVM is gone
    while listening(HOST, int(state["port"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    path.unlink(missing_ok=True)
    return state


# -- a standalone cluster ------------------------------------------------------------------


class StandaloneCluster:
    """A master and `workers` workers on 127.0.0.1, started with pyspark's spark-class; a
    context manager that stops them all (and their executors) on exit, error or Ctrl-C."""

    def __init__(self, work: Path, *, workers: int = 2, cores: int = 1,
                 memory: str = "2g") -> None:
        self.work, self.n, self.cores, self.memory = work, workers, cores, memory
        self.tag = f"cluster-{uuid.uuid4().hex[:12]}"
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://{HOST}:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> StandaloneCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        env = spark_env(self.work, self.tag)
        spark_class = str(spark_home() / "bin" / "spark-class")
        master = spawn([spark_class, MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                        "--webui-port", str(self.ui_port)], env, self.work / "master.log")
        self.procs.append(master)
        wait_listening(master, self.port, self.work / "master.log", "the Spark master")
        for i in range(self.n):
            wdir = self.work / f"worker-{i + 1}"
            wdir.mkdir(exist_ok=True)
            self.procs.append(spawn(
                [spark_class, WORKER_CLASS, "--host", HOST, "--cores", str(self.cores),
                 "--memory", self.memory, "--work-dir", str(wdir), "--webui-port", "0",
                 self.url], {**env, "SPARK_LOCAL_DIRS": str(wdir / "local")},
                self.work / f"worker-{i + 1}.log"))
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.alive_workers() < self.n:
            for p, log in zip(self.procs, self.logs(), strict=True):
                if p.poll() is not None:
                    raise SparkError(f"{log.name}: exited {p.returncode}:\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise SparkError(f"{self.alive_workers()} of {self.n} workers registered "
                                 f"after {START_TIMEOUT_S:.0f} s; see {self.work}")
            time.sleep(0.5)

    def logs(self) -> list[Path]:
        return [self.work / "master.log",
                *(self.work / f"worker-{i + 1}.log" for i in range(len(self.procs) - 1))]

    def alive_workers(self) -> int:
        """Workers the master counts as alive (its JSON page, on loopback)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/",
                                        timeout=2.0) as r:
                return int(json.loads(r.read()).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def stop(self) -> None:
        """Workers first (they end their executors), then the master, then any straggler."""
        for p in reversed(self.procs):
            stop_group(p.pid, self.tag, sweep=False)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5.0)
        kill_tagged(self.tag)


# -- processes -------------------------------------------------------------------------------


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env(work: Path, tag: str) -> dict[str, str]:
    """The daemons' environment: loopback only, this interpreter for Python, logs in work."""
    conf = work / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "log4j2.properties").write_text(LOG4J2)
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
           "SPARK_CONF_DIR": str(conf), "SPARK_LOG_DIR": str(work), "SPARK_PID_DIR": str(work),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           TAG_ENV: tag}
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "MASTER"):
        env.pop(name, None)
    return env


def spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A daemon in its own process group (its children follow it), output to log."""
    with log.open("ab") as out:
        return subprocess.Popen(cmd, env=env, cwd=log.parent, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not listening(HOST, port):
        if proc.poll() is not None:
            raise SparkError(f"{what} exited {proc.returncode} before listening on "
                             f"{HOST}:{port}; {log}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise SparkError(f"{what} not listening on {HOST}:{port} after "
                             f"{START_TIMEOUT_S:.0f} s; see {log}")
        time.sleep(0.25)


def stop_group(pgid: int, tag: str, *, sweep: bool = True) -> None:
    """SIGTERM the group (the JVM's hooks end its children), SIGKILL what lingers; then, if
    sweep, SIGKILL anything still carrying the tag (a child that left the group)."""
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while _group_alive(pgid) and time.monotonic() < deadline:
            _reap(pgid)
            time.sleep(0.1)
        if not _group_alive(pgid):
            break
    _reap(pgid)
    if sweep:
        kill_tagged(tag)


def tagged(tag: str) -> list[int]:
    """Pids of live processes whose environment carries UNDERTOW_SPARK_TAG=tag."""
    needle = f"{TAG_ENV}={tag}".encode()
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0") and _state(int(d)) not in ("Z", None):
            pids.append(int(d))
    return pids


def kill_tagged(tag: str) -> None:
    for _ in range(50):
        pids = tagged(tag)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
        time.sleep(0.1)


def _reap(pid: int) -> None:
    """Collect a child of ours that exited, so it is not left a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return any(_state(p) not in ("Z", None) for p in _group_members(pgid))


def _group_members(pgid: int) -> Iterator[int]:
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[2]) == pgid:
                yield int(d)


def _state(pid: int) -> str | None:
    """The process's state letter; a leader shown as a zombie whose other threads still run
    (a JVM part way through exiting, its sockets still open) counts as running ("R")."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state != "Z":
            return state
        for task in Path(f"/proc/{pid}/task").iterdir():
            if task.name != str(pid) and \
                    (task / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                return "R"
        return state
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (tells a recycled pid apart)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def listening(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _tail(log: Path, n: int = 3000) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return ""
