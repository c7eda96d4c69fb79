"""The first screen of three reports in Chromium at 1400x900: a valid run, an invalid
kip101-loss-like run and a Kafka run. The verdict box is first and on screen with the
system, version, client, safety line and availability line; the loss figures equal a
recount from the run files; the page's visible text holds no JSON object."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest

from harness.report.render import render_run
from tests.report.planted import kip101_like, recount, save_test
from tests.report.test_browser import browse

pytestmark = pytest.mark.browser

PROBE = """<script>
var r = function (id) { var e = document.getElementById(id);
  return e ? Math.round(e.getBoundingClientRect().bottom) : -1; };
document.body.setAttribute("data-probe", JSON.stringify({
  box_top: Math.round(document.getElementById("verdict-box").getBoundingClientRect().top),
  first: document.querySelector("h1").nextElementSibling.id,
  safety: r("box-safety"), availability: r("box-availability"), system: r("box-system"),
  height: document.documentElement.scrollHeight,
  text: document.body.innerText,
  screen: document.getElementById("verdict-box").innerText}));
</script>"""
JSON_OBJECT = re.compile(r"\{\s*\"[^\"]*\"\s*:|\[\s*\{")


def first_screen(chromium: str, run: Path, tmp_path: Path,
                 script: str = PROBE) -> dict[str, object]:
    """A probe script's findings on run's report at 1400x900 (a copy beside it, so links
    hold): the script leaves them as JSON in the body's data-probe attribute."""
    report = render_run(run)
    probe = report.with_name("probe.html")
    probe.write_text(report.read_text().replace("</body>", script + "</body>"))
    dom, console = browse(chromium, probe.as_uri(), tmp_path, "--window-size=1400,900",
                          "--dump-dom")
    assert console == []
    m = re.search(r'data-probe="([^"]*)"', dom)
    assert m, "the probe did not run"
    found: dict[str, object] = json.loads(htmllib.unescape(m.group(1)))
    return found


def check_screen(found: dict[str, object]) -> str:
    assert found["first"] == "verdict-box"
    for line in ("system", "safety", "availability"):
        assert 0 < int(str(found[line])) <= 900, (line, found[line])
    text = str(found["text"])
    assert not JSON_OBJECT.search(text), JSON_OBJECT.search(text)
    return str(found["screen"])


def test_first_screen_of_an_invalid_run(chromium: str, tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "kip")
    save_test(run, "undertow", scenario="kip101-loss")
    screen = check_screen(first_screen(chromium, run, tmp_path))
    want = recount(run)
    assert f"{want.lost:,} of {want.acked:,} acknowledged writes " \
           f"({100 * want.lost / want.acked:.1f} %) are on no replica, on " \
           f"{len(want.per_key)} keys" in screen, screen
    assert "undertow 0.1.0" in screen and "client: undertow's Python client" in screen
    assert "Availability:" in screen
    assert "kip101-loss expects lost-write, replica-lost-write: found" in screen


def test_first_screen_of_a_valid_run(chromium: str, tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "ok", lose=False)
    save_test(run, "undertow")
    screen = check_screen(first_screen(chromium, run, tmp_path))
    assert f"None of {recount(run).acked:,} acknowledged writes was lost" in screen
    assert screen.startswith("valid")


def test_first_screen_of_a_kafka_run(chromium: str, tmp_path: Path) -> None:
    run = kip101_like(tmp_path / "kafka")
    save_test(run, "kafka")
    results = json.loads((run / "results.json").read_text())
    results["availability"] = {"sends": {"during_faults": {"ok_share": 0.25},
                                         "longest_without_ok_s": 4.5}}
    (run / "results.json").write_text(json.dumps(results))
    screen = check_screen(first_screen(chromium, run, tmp_path))
    assert "System: kafka 4.4.0" in screen and "confluent-kafka (librdkafka)" in screen
    assert "min.insync.replicas = 2" in screen and "truncation" not in screen
    assert "sends during faults ok share: 25.0 %" in screen
    assert "sends longest without ok: 4.5 s" in screen
    want = recount(run)
    assert f"{want.lost:,} of {want.acked:,} acknowledged writes" in screen
