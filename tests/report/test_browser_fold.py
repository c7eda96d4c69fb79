"""A link to an example folded away (past the third of its type, inside a closed
`<details>`) opens the fold and brings the example on screen, in Chromium at 1400x900.

The explanations link each episode's own examples, so the second episode of a key that
lost writes twice links examples 6 to 8 of each type, which the anomaly list folds. The
probe clicks the first such link as a reader would and reads where the example landed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.report.test_browser_box import first_screen
from tests.report.test_causes import two_kills

pytestmark = pytest.mark.browser

PROBE = """<script>
var folded = Array.prototype.filter.call(
  document.querySelectorAll('#explanation-list a[href^="#ex-"]'), function (a) {
    var t = document.getElementById(a.getAttribute("href").slice(1));
    return t && t.closest("details") && !t.closest("details").open; });
var out = {folded: folded.length};
if (folded.length) {
  var a = folded[0], t = document.getElementById(a.getAttribute("href").slice(1));
  out.href = a.getAttribute("href");
  out.before = {open: t.closest("details").open, visible: t.checkVisibility()};
  a.click();
  var r = t.getBoundingClientRect();
  out.after = {open: t.closest("details").open, visible: t.checkVisibility(), top: r.top,
               bottom: r.bottom, height: r.height, hash: location.hash,
               scrolled: window.scrollY};
}
document.body.setAttribute("data-probe", JSON.stringify(out));
</script>"""


def test_a_link_to_a_folded_example_opens_it_on_screen(chromium: str, tmp_path: Path) -> None:
    got: dict[str, Any] = first_screen(chromium, two_kills(tmp_path / "run"), tmp_path, PROBE)
    assert got["folded"] >= 1, got  # some explanation links into a fold
    assert re.fullmatch(r"#ex-[a-z-]+-([4-9]|\d\d+)", got["href"]), got  # past the third
    assert got["before"] == {"open": False, "visible": False}, got
    after = got["after"]
    assert after["hash"] == got["href"] and after["open"] is True, got
    assert after["visible"] is True and after["height"] > 0 and after["scrolled"] > 0, got
    assert 0 <= after["top"] < 900 and after["bottom"] > 0, got  # on the first screen
