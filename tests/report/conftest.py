"""Fixtures of the report tests: copies of the shared examples, and hand-made run folders."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "examples"
if not EXAMPLES.is_dir():  # CI: shared/ sits beside the clone
    EXAMPLES = Path("/work/shared/examples")


def copy_example(name: str, dest: Path) -> Path:
    """A writable copy of shared/examples/<name> (never write into shared/)."""
    out = dest / name
    shutil.copytree(EXAMPLES / name, out)
    for p in [out, *out.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return out


def write_run(run_dir: Path, ops: list[dict[str, Any]], *, results: dict[str, Any] | None = None,
              test: dict[str, Any] | None = None,
              replicas: list[dict[str, Any]] | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    for i, op in enumerate(ops):
        op.setdefault("index", i)
    (run_dir / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    if results is not None:
        (run_dir / "results.json").write_text(json.dumps(results))
    if test is not None:
        (run_dir / "test.json").write_text(json.dumps(test))
    if replicas is not None:
        (run_dir / "replicas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replicas))
    return run_dir


@pytest.fixture
def chromium() -> str:
    """Debian's headless Chromium (the browser tests), or a skip saying how to get it."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.skip("chromium is not installed: run `just browser` (scripts/browser-up)")
    return path


@pytest.fixture
def example_run(tmp_path: Path) -> Any:
    return lambda name: copy_example(name, tmp_path)


@pytest.fixture
def make_run(tmp_path: Path) -> Any:
    return lambda name, ops, **kw: write_run(tmp_path / name, ops, **kw)
