"""Benchmark: how tall a run's report is, and its first screen, in headless Chromium.

Issue 36 asks that the invalid 120 s kip101-loss report be at most a third of its old
height (36,124 px at 7e4584d) and that its first screen answer the first questions. This
loads each run's report.html in Debian's Chromium at 1400x900 (as the browser tests do),
reads document.body.scrollHeight and the first explanation, and saves a screenshot of
the first screen. --render renders the report again with this checkout's code first.

    python -m bench.report_height RUN_DIR [RUN_DIR ...] [--render] [--shots DIR]
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1400, 900
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"]
PROBE = """<script>
var first = document.querySelector("#explanation-list > li");
document.body.setAttribute("data-height", JSON.stringify({
  body: document.body.scrollHeight, document: document.documentElement.scrollHeight,
  first_explanation: first ? first.innerText : null}));
</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        raise SystemExit("bench.report_height: chromium is not installed: run "
                         "scripts/browser-up")
    return path


def _run(args: list[str], profile: Path) -> str:
    r = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
                       capture_output=True, text=True, timeout=300, check=False)
    return r.stdout


def measure(run: Path, shot: Path | None) -> dict[str, Any]:
    """scrollHeight of run's report.html (a probe copy beside it, so its styles hold)."""
    report = run / "report.html"
    if not report.is_file():
        raise SystemExit(f"bench.report_height: no report.html in {run}")
    probe = run / ".height-probe.html"
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    with tempfile.TemporaryDirectory(prefix="report-height-") as tmp:
        try:
            dom = _run(["--dump-dom", probe.as_uri()], Path(tmp) / "a")
        finally:
            probe.unlink()
        m = re.search(r'data-height="([^"]*)"', dom)
        if not m:
            raise SystemExit(f"bench.report_height: the probe did not run on {report}")
        found: dict[str, Any] = json.loads(html.unescape(m.group(1)))
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            _run([f"--screenshot={shot}", report.as_uri()], Path(tmp) / "b")
            found["screenshot"] = str(shot)
    found["run"] = str(run)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--render", action="store_true", help="render report.html again first")
    ap.add_argument("--shots", type=Path, help="save each first screen here as NAME.png")
    args = ap.parse_args()
    for run in args.runs:
        if args.render:
            from harness.report.render import render_run

            render_run(run)
        name = f"{run.parent.name}-{run.name}" if run.parent.name else run.name
        got = measure(run, args.shots / f"{name}.png" if args.shots else None)
        print(json.dumps(got))


if __name__ == "__main__":
    main()
