"""The nightly workflow is linted: GitHub's workflow schema (check-jsonschema's vendored copy)
plus the rules the nightly needs; a broken workflow must fail both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "nightly.yml"


def schema_errors(path: Path) -> str | None:
    """None when the file validates against the GitHub workflow schema, else the output."""
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                        "vendor.github-workflows", str(path)],
                       capture_output=True, text=True, timeout=120, check=False)
    return None if r.returncode == 0 else r.stdout + r.stderr


def rule_errors(doc: dict[str, Any]) -> list[str]:
    """What the nightly needs beyond the schema."""
    errors = []
    on = doc.get("on") or {}
    if "schedule" not in on or "workflow_dispatch" not in on:
        errors.append("needs both schedule and workflow_dispatch triggers")
    steps = [s for job in (doc.get("jobs") or {}).values() for s in job.get("steps") or []]
    runs = " ".join(str(s.get("run", "")) for s in steps)
    for needed in ("image build", "nightly", "--backend docker"):
        if needed not in runs:
            errors.append(f"no step runs {needed!r}")
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    if not uploads or any(s.get("if") != "always()" or s.get("with", {}).get("path") != "results/"
                          for s in uploads):
        errors.append("results/ must be uploaded with if: always()")
    trends = [i for i, s in enumerate(steps) if "undertow trends" in str(s.get("run", ""))
              and s.get("if") == "always()"]
    first_upload = min((i for i, s in enumerate(steps) if s in uploads), default=-1)
    if not trends or min(trends) > first_upload:
        errors.append("`undertow trends` must run with if: always() before the upload")
    heals = [s for s in steps if "undertow heal" in str(s.get("run", ""))]
    if not heals or any(s.get("if") != "always()" for s in heals):
        errors.append("`undertow heal` must run with if: always()")
    return errors


def _load(path: Path) -> dict[str, Any]:
    doc = YAML(typ="safe").load(path.read_text())
    assert isinstance(doc, dict)
    return doc


def test_nightly_workflow_is_valid() -> None:
    assert schema_errors(WORKFLOW) is None
    assert rule_errors(_load(WORKFLOW)) == []


@pytest.mark.parametrize(("old", "new"), [
    ("    runs-on: ubuntu-latest\n", ""),
    ("      - uses: actions/checkout@v4\n",
     "      - uses: actions/checkout@v4\n        bogus: 1\n"),
    ("      - name: Install\n", "      - name: Install\n        uses: actions/cache@v4\n"),
    ("    timeout-minutes: 180\n", "    timeout-minutes: [180]\n"),
])
def test_schema_rejects_a_broken_workflow(tmp_path: Path, old: str, new: str) -> None:
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / "nightly.yml"
    broken.write_text(text.replace(old, new, 1))
    assert schema_errors(broken) is not None


@pytest.mark.parametrize(("old", "new", "rule"), [
    ("  schedule:\n    - cron: \"17 2 * * *\"\n", "", "schedule"),
    ("      - name: Upload results\n        if: always()\n", "      - name: Upload results\n",
     "uploaded"),
    ("      - name: Tear down\n        if: always()\n", "      - name: Tear down\n", "heal"),
    ("      - name: Trends\n        if: always()\n", "      - name: Trends\n", "trends"),
])
def test_rules_reject_a_weakened_workflow(tmp_path: Path, old: str, new: str, rule: str) -> None:
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / "nightly.yml"
    broken.write_text(text.replace(old, new, 1))
    assert any(rule in e for e in rule_errors(_load(broken)))
