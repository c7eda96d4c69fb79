"""What a run has made, on disk, so `undertow heal` can undo it after the harness dies.

Layout: $UNDERTOW_STATE_DIR (default /tmp/undertow-state)/<run_id>/
  run.json          the harness's pid and /proc start time (who owns the run)
  <item_id>.json    one thing made: {"kind": ..., **data}

`register` writes the item BEFORE the thing is created (a crash in between
leaves an item whose undo finds nothing, never a thing with no item);
`update` adds what is only known after (a pid); `release` deletes the item
once the thing is undone.

Kinds:
- "process": {"pid", "start_time"}: killed (SIGCONT, then SIGKILL) only if
  /proc/<pid> still has that start time, so a recycled pid is never killed.
  Every process the harness starts also carries UNDERTOW_RUN_ID=<run_id> in its
  environment, so heal finds and kills it even if its pid never got written.
- anything else ("container", "network", "iptables", ...): undone by a hook
  registered with `register_hook(kind, undo)`; heal imports the module that
  registers it (`undo_module` in the item's data, or the default for the kind).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_ENV = "UNDERTOW_STATE_DIR"
RUN_ENV = "UNDERTOW_RUN_ID"
DEFAULT_STATE_DIR = "/tmp/undertow-state"

# kind -> undo(data) -> a line saying what was undone; raise to keep the item for later.
Hook = Callable[[dict[str, Any]], str]
_HOOKS: dict[str, Hook] = {}
_HOOK_MODULES = {
    "container": "harness.control.docker",
    "network": "harness.control.docker",
    "iptables": "harness.control.docker",
}
_ORDER = {"process": 0, "iptables": 1, "container": 2, "network": 3}


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE_DIR)


def register_hook(kind: str, undo: Hook) -> None:
    """How heal undoes things of `kind` (the docker/ssh modules call this at import)."""
    _HOOKS[kind] = undo


def _safe(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", name) or name in {".", ".."}:
        raise ValueError(f"leftovers: {name!r} is not a usable run or item id "
                         "(letters, digits, . _ - only)")
    return name


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def proc_start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot); None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return stat[stat.rindex(")") + 2]


def same_process(pid: int, start_time: int | None) -> bool:
    """Is `pid` still the process that had `start_time` (and not a zombie)?"""
    st = proc_start_time(pid)
    return st is not None and st == start_time and _proc_state(pid) not in (None, "Z", "X")


# run_id -> its folder, fixed by the run's first register: a run's items all live in
# one place even if $UNDERTOW_STATE_DIR changes while it runs (as it does between tests).
_RUN_DIRS: dict[str, Path] = {}


def _run_dir(run_id: str) -> Path:
    return _RUN_DIRS.get(run_id) or state_dir() / _safe(run_id)


def _claim(run_id: str) -> Path:
    d = _run_dir(run_id)
    _RUN_DIRS[run_id] = d
    d.mkdir(parents=True, exist_ok=True)
    owner = d / "run.json"
    if not owner.exists():
        pid = os.getpid()
        _write_json(owner, {"pid": pid, "start_time": proc_start_time(pid),
                            "created": time.time()})
    return d


def register(run_id: str, kind: str, **data: Any) -> str:
    """Record that `kind` is about to be made; returns the item id for update/release."""
    d = _claim(run_id)
    item_id = f"{_safe(kind)}-{uuid.uuid4().hex[:12]}"
    _write_json(d / f"{item_id}.json", {"kind": kind, **data})
    return item_id


def update(run_id: str, item_id: str, **data: Any) -> None:
    """Add facts known only once the thing exists (a pid and its start time)."""
    path = _run_dir(run_id) / f"{_safe(item_id)}.json"
    old = json.loads(path.read_text())
    _write_json(path, {**old, **data})


def release(run_id: str, item_id: str) -> None:
    """The thing is undone: forget it. Unknown items are ignored."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        (_run_dir(run_id) / f"{_safe(item_id)}.json").unlink()


def end_run(run_id: str, run_dir: Path | None = None) -> None:
    """The run is over: remove its folder if nothing is left in it."""
    d = run_dir or _run_dir(run_id)
    if not d.is_dir():
        return
    if any(p.name != "run.json" and p.suffix == ".json" for p in d.iterdir()):
        return
    for p in d.iterdir():
        with contextlib.suppress(OSError):
            p.unlink()
    with contextlib.suppress(OSError):
        d.rmdir()
    if _RUN_DIRS.get(run_id) == d:
        del _RUN_DIRS[run_id]


def kill_process(pid: int, start_time: int | None, *, wait_s: float = 5.0) -> bool:
    """SIGCONT then SIGKILL `pid` if it is still the same process; True if it was killed."""
    if not same_process(pid, start_time):
        return False
    for sig in (signal.SIGCONT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + wait_s
    while same_process(pid, start_time) and time.monotonic() < deadline:
        time.sleep(0.01)  # a zombie counts as gone: its parent (or init) reaps it
    return True


def _marked_pids(run_id: str) -> list[int]:
    """Processes whose environment carries UNDERTOW_RUN_ID=<run_id>."""
    mark = f"{RUN_ENV}={run_id}".encode()
    me = os.getpid()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if mark in env.split(b"\0"):
            out.append(int(entry.name))
    return out


def _undo(run_id: str, item: dict[str, Any]) -> str:
    kind = str(item.get("kind"))
    if kind == "process":
        pid = item.get("pid")
        if pid is None:
            return f"{run_id}: process {item.get('name', '?')} never started"
        killed = kill_process(int(pid), item.get("start_time"))
        what = f"process {item.get('name', '')} pid {pid}".replace("  ", " ")
        return f"{run_id}: killed {what}" if killed else f"{run_id}: {what} already gone"
    hook = _HOOKS.get(kind)
    module = item.get("undo_module") or _HOOK_MODULES.get(kind)
    if hook is None and module:
        importlib.import_module(str(module))
        hook = _HOOKS.get(kind)
    if hook is None:
        raise LookupError(f"no way to undo kind {kind!r} (no hook registered)")
    return f"{run_id}: {hook(item)}"


def _owner_alive(run_dir: Path) -> bool:
    try:
        owner = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return same_process(int(owner["pid"]), owner.get("start_time"))


def heal_run(run_id: str, run_dir: Path | None = None) -> list[str]:
    """Undo everything recorded for one run, whoever owns it; a line per thing.

    Processes go first (they may hold the other things), then the hooks' kinds.
    """
    d = run_dir or _run_dir(run_id)
    done = _heal_processes(run_id, d)
    items: list[tuple[Path, dict[str, Any]]] = []
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        if p.name == "run.json":
            continue
        try:
            items.append((p, json.loads(p.read_text())))
        except (OSError, ValueError):
            done.append(f"{run_id}: unreadable state file {p} (left in place)")
    items.sort(key=lambda it: _ORDER.get(str(it[1].get("kind")), 9))
    for path, item in items:
        if item.get("kind") == "process":
            continue
        try:
            done.append(_undo(run_id, item))
        except Exception as e:
            done.append(f"{run_id}: could not undo {item.get('kind')} {item}: {e}")
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return done


def heal_all(*, force: bool = False) -> list[str]:
    """Undo what dead runs left behind (all runs with force=True); safe to run twice.

    Returns one line per thing undone or found impossible to undo.
    """
    root = state_dir()
    if not root.is_dir():
        return []
    done: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        run_id = d.name
        if not force and _owner_alive(d):
            continue
        done.extend(heal_run(run_id, d))
        end_run(run_id, d)
    return done


def _heal_processes(run_id: str, d: Path) -> list[str]:
    done: list[str] = []
    for p in sorted(d.glob("*.json")):
        if p.name == "run.json":
            continue
        try:
            item = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if item.get("kind") != "process":
            continue
        done.append(_undo(run_id, item))
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    for pid in _marked_pids(run_id):
        if kill_process(pid, proc_start_time(pid)):
            done.append(f"{run_id}: killed unrecorded process pid {pid} (marked with {RUN_ENV})")
    return done
