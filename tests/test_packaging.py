"""A non-editable install works: `pip install .` into a new virtualenv ships every module and
data file of the tree, and its `undertow check` gives the shared examples' results.

The editable install of `scripts/bootstrap` reads the source tree, so a package missing
from pyproject.toml goes unnoticed there; this test installs a copy of the tree the way a
user would (uv when the project's venv has it, else pip) and runs the installed command
from outside the tree. A cold Spark and the history parser compiled afresh make it the
slowest check there is (a minute of CPU), hence `slow`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = Path("/work/shared/examples")
if not EXAMPLES.exists():
    EXAMPLES = ROOT.parents[1] / "shared" / "examples"
SKIP = shutil.ignore_patterns(".venv", ".git", "results", "build", "*.egg-info", "__pycache__",
                              ".pytest_cache", ".mypy_cache", ".ruff_cache", "*.pyc")


def _expected_files() -> set[str]:
    """Every module of the packages pyproject.toml finds, and the data its globs name, as
    paths inside site-packages."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    find = conf["packages"]["find"]
    out: set[str] = set()
    for where in find["where"]:
        base = ROOT / where
        for top in find["include"]:
            for d in base.glob(top) if "*" not in top else ():
                out |= {str(p.relative_to(base)) for p in d.rglob("*.py")
                        if "__pycache__" not in p.parts}
    for package, globs in conf["package-data"].items():
        folder = Path(*package.split("."))
        src = ROOT / ("broker-image" if package.startswith("broker") else "") / folder
        out |= {str(folder / p.name) for g in globs for p in src.glob(g)}
    return out


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a cold Spark on a loaded machine took 7 min (NOTES, 2026-11-28)
@pytest.mark.skipif(not (EXAMPLES / "clean").exists(), reason="shared examples not found")
def test_pip_install_then_check_the_examples(tmp_path: Path) -> None:
    src, venv = tmp_path / "src", tmp_path / "venv"
    shutil.copytree(ROOT, src, ignore=SKIP, symlinks=True)
    # the package itself is built and installed as a user's `pip install .` does; its
    # dependencies are this venv's (a .pth line: their files are not copied again, which
    # takes minutes), behind the new venv's own site-packages
    uv = Path(sys.executable).with_name("uv")
    if uv.exists():
        made = _run(uv, "venv", "-q", "--python", sys.executable, venv, cwd=tmp_path)
        install: list[str | Path] = [uv, "pip", "install", "-q", "--no-deps", "--python",
                                     venv / "bin" / "python", src]
    else:
        made = _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
        install = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", src]
    assert made.returncode == 0, made.stderr
    done = _run(*install, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    site = _run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path("
                "'purelib'))", cwd=tmp_path).stdout.strip()
    ours = sysconfig.get_path("purelib")
    (Path(site) / "zz-undertow-deps.pth").write_text(ours + "\n")
    where = _run(venv / "bin" / "python", "-c", "import harness; print(harness.__file__)",
                 cwd=tmp_path)
    assert where.stdout.startswith(site), where.stdout + where.stderr  # not the tree's

    listed = _run(venv / "bin" / "python", "-c",
                  "import importlib.metadata as m\n"
                  "for f in m.files('undertow'): print(f)", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    installed = set(listed.stdout.split())
    assert _expected_files() - installed == set()
    assert "harness/runfiles/strict.py" in installed  # the package the hand list missed

    for name in ("clean", "truncated"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
        (tmp_path / name / "results.json").unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = _run(venv / "bin" / "undertow", "check", "--spark", "cold", "--spark-master",
             "local[2]", tmp_path / "clean", tmp_path / "truncated", cwd=tmp_path, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    for name in ("clean", "truncated"):
        got = orjson.loads((tmp_path / name / "results.json").read_bytes())
        want = orjson.loads((EXAMPLES / name / "results.json").read_bytes())
        for field in ("valid", "anomaly_types", "counts"):
            assert got[field] == want[field], (name, field)
