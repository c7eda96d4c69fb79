"""results/index.html, `undertow report` and `undertow serve`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from harness.report.cli import report
from harness.report.render import render_index, render_run


def _results(tmp_path: Path, example_run: Any) -> Path:
    results = tmp_path / "results"
    for name, test, stamp in (("truncated", "kip101-loss", "20260101T010203Z"),
                              ("clean", "safe", "20260102T010203Z")):
        src = example_run(name)
        dest = results / test / stamp
        dest.parent.mkdir(parents=True, exist_ok=True)
        src.rename(dest)
        (dest / "test.json").write_text(json.dumps({"name": test, "seed": 3}))
        render_run(dest)
    (results / "safe" / "latest").symlink_to("20260102T010203Z")
    unchecked = results / "other" / "20260103T000000Z"
    unchecked.mkdir(parents=True)
    (unchecked / "history.jsonl").write_text("")
    return results


def test_index_lists_runs_with_verdicts_and_filters(tmp_path: Path, example_run: Any) -> None:
    results = _results(tmp_path, example_run)
    html = render_index(results).read_text()
    rows = re.findall(r'<tr data-test="([^"]+)" data-verdict="([^"]+)">', html)
    assert rows == [("other", "not checked"), ("safe", "valid"), ("kip101-loss", "invalid")]
    assert 'href="./kip101-loss/20260101T010203Z/report.html"' in html
    assert 'href="./other/20260103T000000Z/"' in html  # no report: the folder
    assert '<span class="bad">lost-write: 1</span>' in html
    assert 'id="f-test"' in html and 'id="f-verdict"' in html and "<script>" in html
    assert "2026-01-02 01:02:03" in html


def test_report_command_on_a_foreign_history(example_run: Any) -> None:
    run = example_run("truncated")
    res = CliRunner().invoke(report, [str(run)])
    assert res.exit_code == 0, res.output
    assert res.output.strip().endswith("report.html")
    assert (run / "report.html").is_file() and (run / "junit.xml").is_file()


def test_report_command_names_a_bad_line(make_run: Any) -> None:
    run = make_run("bad", [])
    (run / "history.jsonl").write_text('{"index": 0}\nnot json\n')
    res = CliRunner().invoke(report, [str(run)])
    assert res.exit_code == 2
    assert "history.jsonl:2: not valid JSON" in res.output


def test_serve_binds_localhost_and_serves_the_index(tmp_path: Path, example_run: Any) -> None:
    results = _results(tmp_path, example_run)
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "serve", "--results-dir",
                             str(results), "--port", "0"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "serving" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "serve exited"
        m = re.search(r"http://([\d.]+):(\d+)/", line)
        assert m, line
        assert m.group(1) == "127.0.0.1"
        base = f"http://127.0.0.1:{m.group(2)}"
        with urllib.request.urlopen(f"{base}/index.html", timeout=10) as r:
            assert b"kip101-loss" in r.read()
        with urllib.request.urlopen(f"{base}/kip101-loss/20260101T010203Z/report.html",
                                    timeout=10) as r:
            assert b'id="verdict"' in r.read()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
