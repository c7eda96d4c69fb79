"""The report and the index in Debian's headless Chromium: no console errors, content visible.

Chromium prints every console message (errors, uncaught exceptions, failed
loads) to stderr as INFO:CONSOLE lines with --enable-logging=stderr --v=0; the
DOM after scripts ran comes from --dump-dom. Screenshots stay in tmp_path.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.report.render import render_index, render_run

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@pytest.fixture
def chromium() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.skip("chromium is not installed: run `just browser` (scripts/browser-up)")
    return path


def browse(chromium: str, url: str, tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    """(stdout, console lines) of one headless Chromium run with a new empty profile."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    r = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args, url],
                       capture_output=True, text=True, timeout=180, check=False)
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return r.stdout, console


def screenshot(chromium: str, url: str, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    browse(chromium, url, tmp_path, f"--screenshot={out}", "--window-size=1280,2400",
           "--hide-scrollbars")
    assert out.is_file() and out.stat().st_size > 10_000, "no screenshot"
    return out


def test_console_check_catches_errors(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<p>x</p><script>console.error('boom'); missingFn();</script>")
    _, console = browse(chromium, page.as_uri(), tmp_path, "--dump-dom")
    assert any("boom" in ln for ln in console)
    assert any("Uncaught ReferenceError" in ln for ln in console)


def test_report_renders_cleanly(chromium: str, tmp_path: Path, example_run: Any) -> None:
    run = example_run("truncated")
    (run / "test.json").write_text(json.dumps({"name": "kip101-loss", "seed": 42}))
    url = render_run(run).as_uri()
    dom, console = browse(chromium, url, tmp_path, "--dump-dom")
    assert console == []
    assert re.search(r'<div class="verdict invalid" id="verdict">invalid', dom)
    assert '<code id="seed">42</code>' in dom
    examples = re.findall(r'<div class="example bad-ex">\s*<pre>([^<]*)</pre>', dom)
    assert any('"offset":114' in e for e in examples), examples
    assert dom.count("<svg") >= 8  # latency, quantiles, throughput, timeline, 4 keys
    shot = screenshot(chromium, url, tmp_path, "report.png")
    print(f"screenshot: {shot}")


def test_index_renders_and_filters(chromium: str, tmp_path: Path, example_run: Any) -> None:
    results = tmp_path / "results"
    for name, test in (("truncated", "kip101-loss"), ("clean", "safe")):
        dest = results / test / "20260101T000000Z"
        dest.parent.mkdir(parents=True)
        example_run(name).rename(dest)
        render_run(dest)
    url = render_index(results).as_uri()
    dom, console = browse(chromium, url, tmp_path, "--dump-dom")
    assert console == []
    assert '<span id="shown">2</span>' in dom  # the script ran
    dom, console = browse(chromium, url + "#verdict=invalid", tmp_path, "--dump-dom")
    assert console == []
    assert '<span id="shown">1</span>' in dom
    assert re.search(r'<tr data-test="safe" data-verdict="valid" hidden="">', dom)
    assert re.search(r'<tr data-test="kip101-loss" data-verdict="invalid">', dom)
    print(f"screenshot: {screenshot(chromium, url, tmp_path, 'index.png')}")
