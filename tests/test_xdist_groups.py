"""The suite's xdist groups hold: run on two workers, the tests of a group all run on one
worker (tests/xdist_groups.py), those of a module sharing a module-scoped fixture too. An
inner pytest session on two real xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = '''
import json, os, time
import pytest
from tests.xdist_groups import mark_groups

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    mark_groups(items)

@pytest.fixture
def kafka_cluster():
    return None

@pytest.fixture(autouse=True)
def where(request):
    time.sleep(0.05)  # long enough for both workers to take tests
    line = json.dumps([request.node.name, os.environ.get("PYTEST_XDIST_WORKER")])
    with open(os.environ["WHERE_OUT"], "a") as f:
        f.write(line + "\\n")
'''

TESTS = '''
import pytest
''' + "".join(f'''
def test_on_kafka_{i}(kafka_cluster):
    pass

@pytest.mark.docker
def test_on_docker_{i}():
    pass

@pytest.mark.ssh
def test_on_ssh_{i}():
    pass

def test_light_{i}():
    pass
''' for i in range(8))

MODULE = '''
import pytest

@pytest.fixture(scope="module")
def started_once():
    return object()

@pytest.fixture
def through(started_once):
    return started_once
''' + "".join(f'''
def test_shared_{i}(through):
    pass

def test_alone_{i}():
    pass
''' for i in range(8))


def test_each_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(TESTS)
    (tmp_path / "test_module.py").write_text(MODULE)
    out = tmp_path / "where.jsonl"
    env = {**os.environ, "WHERE_OUT": str(out),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers: dict[str, set[str]] = {}
    for line in out.read_text().splitlines():
        name, worker = json.loads(line)
        workers.setdefault(name.rsplit("_", 1)[0], set()).add(worker)
    assert len(workers["test_on_kafka"]) == 1, workers
    assert workers["test_on_docker"] == workers["test_on_ssh"], workers  # one group
    assert len(workers["test_on_docker"]) == 1, workers
    assert len(workers["test_shared"]) == 1, workers  # their module fixture, started once
    assert set().union(*workers.values()) == {"gw0", "gw1"}, workers  # two workers ran
