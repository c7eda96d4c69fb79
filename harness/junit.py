"""JUnit XML, the one writer: a run's verdict beside results.json, and the nightly's summary.

CI systems show these as test results. For a run: one suite, one test case for
the verdict, and one per anomaly type the checkers reported: a forbidden type is
a <failure> with its examples, an allowed one passes with its examples as
output. An `unknown` verdict is an <error>; a run with no results.json is a
skipped case ("not checked"). The nightly writes one case per scenario run.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

EXAMPLES_IN_MESSAGE = 5


@dataclass(frozen=True, slots=True)
class Case:
    """One <testcase>: passed (`text` is its output, if any), failed, errored or skipped."""

    name: str
    outcome: Literal["passed", "failure", "error", "skipped"] = "passed"
    message: str = ""
    text: str = ""
    type: str = ""
    time_s: float = 0.0


def suite_tree(suite: str, classname: str, cases: Sequence[Case], *, suites: str = "undertow",
               properties: Mapping[str, str] | None = None) -> ET.ElementTree:
    """<testsuites name=suites><testsuite name=suite> with the properties, the cases and
    their counts."""
    ts = ET.Element("testsuite", name=suite)
    if properties:
        props = ET.SubElement(ts, "properties")
        for k, v in properties.items():
            ET.SubElement(props, "property", name=k, value=v)
    for c in cases:
        el = ET.SubElement(ts, "testcase", classname=classname, name=c.name, time=f"{c.time_s:g}")
        if c.outcome == "passed":
            if c.text:
                ET.SubElement(el, "system-out").text = c.text
            continue
        attrs = {"message": c.message, **({"type": c.type} if c.type else {})}
        ET.SubElement(el, c.outcome, attrs).text = c.text or None
    ts.set("tests", str(len(cases)))
    for outcome, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        ts.set(attr, str(sum(c.outcome == outcome for c in cases)))
    root = ET.Element("testsuites", name=suites)
    root.append(ts)
    return ET.ElementTree(root)


def write_tree(tree: ET.ElementTree, path: Path) -> Path:
    """Write the document indented, whole (a temporary file renamed over the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    ET.indent(tree)
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
    return path


def run_cases(results: Mapping[str, Any] | None) -> list[Case]:
    """The test cases of one run's results (None: not checked)."""
    if results is None:
        return [Case("verdict", "skipped", "not checked: no results.json")]
    valid = results.get("valid")
    bad = [str(t) for t in results.get("bad_anomaly_types") or []]
    if valid is False:
        cases = [Case("verdict", "failure", "forbidden anomalies: " + ", ".join(bad),
                      type="invalid")]
    elif valid is not True:
        why = str(results.get("error") or "the checkers could not decide")
        cases = [Case("verdict", "error", why, str(results.get("error") or ""), "unknown")]
    else:
        cases = [Case("verdict")]
    counts = results.get("counts") or {}
    examples = results.get("anomalies") or {}
    types = dict.fromkeys([*map(str, results.get("anomaly_types") or []), *map(str, counts)])
    for t in types:
        shown = examples.get(t) or []
        text = "\n".join(orjson.dumps(ex).decode() for ex in shown[:EXAMPLES_IN_MESSAGE])
        n = counts.get(t, len(shown))
        if t in bad:
            cases.append(Case(f"anomaly {t}", "failure", f"{n} x {t}", text, t))
        else:
            cases.append(Case(f"anomaly {t}", text=f"allowed: {n} x {t}\n{text}"))
    return cases


def write_junit(run_dir: Path, results: Mapping[str, Any] | None,
                test: Mapping[str, Any] | None = None) -> Path:
    """Write run_dir/junit.xml; the suite is named after the test (or the folder)."""
    name = (test or {}).get("name")
    suite = name if isinstance(name, str) and name else Path(run_dir).resolve().name
    return write_tree(suite_tree(suite, f"undertow.{suite}", run_cases(results)),
                      Path(run_dir) / "junit.xml")
