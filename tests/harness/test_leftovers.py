"""leftovers: state files, and heal_all against real processes of a harness killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness import leftovers

pytestmark = pytest.mark.usefixtures("state")

HARNESS = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from harness import leftovers
    rid = sys.argv[1]
    env = dict(os.environ, UNDERTOW_RUN_ID=rid)
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    item = leftovers.register(rid, "process", name="recorded")
    p = subprocess.Popen(sleeper, env=env, start_new_session=True)
    leftovers.update(rid, item, pid=p.pid, start_time=leftovers.proc_start_time(p.pid))
    q = subprocess.Popen(sleeper, env=env, start_new_session=True)  # pid never recorded
    os.kill(q.pid, signal.SIGSTOP)  # and paused
    leftovers.register(rid, "process", name="never-started")
    print(p.pid, q.pid, flush=True)
    time.sleep(120)
""")


def sleeper(**env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            env={**os.environ, **env})


def test_register_update_release(state: Path) -> None:
    item = leftovers.register("run-1", "process", name="n1")
    path = state / "run-1" / f"{item}.json"
    assert json.loads(path.read_text()) == {"kind": "process", "name": "n1"}
    owner = json.loads((state / "run-1" / "run.json").read_text())
    assert owner["pid"] == os.getpid()
    assert owner["start_time"] == leftovers.proc_start_time(os.getpid())
    leftovers.update("run-1", item, pid=123)
    assert json.loads(path.read_text())["pid"] == 123
    leftovers.release("run-1", item)
    leftovers.release("run-1", item)  # twice is fine
    assert not path.exists()
    leftovers.end_run("run-1")
    assert not (state / "run-1").exists()


def test_a_run_keeps_its_folder_when_the_state_dir_changes(
        state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = leftovers.register("run-m", "process", name="a")
    monkeypatch.setenv(leftovers.STATE_ENV, str(tmp_path / "other"))
    second = leftovers.register("run-m", "process", name="b")
    assert {p.stem for p in (state / "run-m").glob("process-*.json")} == {first, second}
    assert leftovers.heal_all(force=True) == []  # the other dir has nothing of it
    leftovers.release("run-m", first)
    leftovers.release("run-m", second)
    leftovers.end_run("run-m")
    assert not (state / "run-m").exists()


def test_bad_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="not a usable run"):
        leftovers.register("../etc", "process")


def test_heal_kills_what_a_killed_harness_left(state: Path) -> None:
    env = {**os.environ, leftovers.STATE_ENV: str(state)}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, "run-dead"], env=env,
                               stdout=subprocess.PIPE, text=True)
    assert harness.stdout is not None
    line = harness.stdout.readline()
    p, q = (int(x) for x in line.split())
    starts = {pid: leftovers.proc_start_time(pid) for pid in (p, q)}
    assert all(leftovers.same_process(pid, st) for pid, st in starts.items())
    assert leftovers.heal_all() == []  # its harness is alive: not touched
    harness.kill()
    harness.wait()
    done = leftovers.heal_all()
    assert any(f"pid {p}" in x and "killed" in x for x in done), done
    assert any(f"pid {q}" in x and "unrecorded" in x for x in done), done
    assert any("never started" in x for x in done), done
    for pid, st in starts.items():
        assert not leftovers.same_process(pid, st)
    assert not (state / "run-dead").exists()
    assert leftovers.heal_all() == []  # safe to run twice


def test_a_recycled_pid_is_never_killed() -> None:
    victim = sleeper()
    try:
        st = leftovers.proc_start_time(victim.pid)
        assert st is not None
        item = leftovers.register("run-r", "process", name="x")
        leftovers.update("run-r", item, pid=victim.pid, start_time=st - 1)
        done = leftovers.heal_all(force=True)
        assert any("already gone" in x for x in done), done
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_live_runs_are_skipped_unless_forced(state: Path) -> None:
    victim = sleeper(**{leftovers.RUN_ENV: "run-live"})
    item = leftovers.register("run-live", "process", name="x")
    leftovers.update("run-live", item, pid=victim.pid,
                     start_time=leftovers.proc_start_time(victim.pid))
    assert leftovers.heal_all() == []
    assert victim.poll() is None
    done = leftovers.heal_all(force=True)
    assert victim.wait(timeout=5) == -signal.SIGKILL
    assert len(done) == 1  # recorded and marked: killed once, not reported twice


def test_hooks_undo_other_kinds_and_failures_keep_the_item(state: Path) -> None:
    undone: list[dict[str, Any]] = []

    def undo(item: dict[str, Any]) -> str:
        undone.append(item)
        return f"removed container {item['name']}"

    leftovers.register_hook("test-container", undo)
    leftovers.register("run-h", "test-container", name="c1")
    leftovers.register("run-h", "no-such-kind", name="x")
    done = leftovers.heal_all(force=True)
    assert "run-h: removed container c1" in done
    assert undone == [{"kind": "test-container", "name": "c1"}]
    assert any("could not undo no-such-kind" in x for x in done), done
    left = [p for p in (state / "run-h").iterdir() if p.name != "run.json"]
    assert len(left) == 1 and "no-such-kind" in left[0].name


def test_killing_a_stopped_process(state: Path) -> None:
    victim = sleeper()
    os.kill(victim.pid, signal.SIGSTOP)
    time.sleep(0.05)
    assert leftovers.kill_process(victim.pid, leftovers.proc_start_time(victim.pid))
    assert victim.wait(timeout=5) == -signal.SIGKILL
