"""JUnit XML beside results.json, so CI systems show a run's verdict as test results.

One suite per run; one test case for the verdict, and one per anomaly type the
checkers reported: a forbidden type is a <failure> with its examples, an allowed
one passes with its examples as output. An `unknown` verdict is an <error>; a run
with no results.json is a skipped case ("not checked").
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

EXAMPLES_IN_MESSAGE = 5


def junit_tree(results: Mapping[str, Any] | None, suite: str) -> ET.ElementTree:
    """The JUnit document for one run's results (None: not checked)."""
    ts = ET.Element("testsuite", name=suite)
    cases: list[ET.Element] = []
    classname = f"undertow.{suite}"

    def case(name: str) -> ET.Element:
        el = ET.SubElement(ts, "testcase", classname=classname, name=name, time="0")
        cases.append(el)
        return el

    failures = errors = skipped = 0
    verdict = case("verdict")
    if results is None:
        ET.SubElement(verdict, "skipped", message="not checked: no results.json")
        skipped += 1
    else:
        valid = results.get("valid")
        bad = [str(t) for t in results.get("bad_anomaly_types") or []]
        if valid is False:
            ET.SubElement(verdict, "failure", type="invalid",
                          message="forbidden anomalies: " + ", ".join(bad))
            failures += 1
        elif valid is not True:
            why = str(results.get("error") or "the checkers could not decide")
            err = ET.SubElement(verdict, "error", type="unknown", message=why)
            err.text = str(results.get("error") or "")
            errors += 1
        counts = results.get("counts") or {}
        examples = results.get("anomalies") or {}
        types = dict.fromkeys([*map(str, results.get("anomaly_types") or []), *map(str, counts)])
        for t in types:
            el = case(f"anomaly {t}")
            shown = examples.get(t) or []
            text = "\n".join(orjson.dumps(ex).decode() for ex in shown[:EXAMPLES_IN_MESSAGE])
            if t in bad:
                fail = ET.SubElement(el, "failure", type=t,
                                     message=f"{counts.get(t, len(shown))} x {t}")
                fail.text = text
                failures += 1
            else:
                out = ET.SubElement(el, "system-out")
                out.text = f"allowed: {counts.get(t, len(shown))} x {t}\n{text}"
    ts.set("tests", str(len(cases)))
    ts.set("failures", str(failures))
    ts.set("errors", str(errors))
    ts.set("skipped", str(skipped))
    suites = ET.Element("testsuites", name="undertow")
    suites.append(ts)
    return ET.ElementTree(suites)


def write_junit(run_dir: Path, results: Mapping[str, Any] | None,
                test: Mapping[str, Any] | None = None) -> Path:
    """Write run_dir/junit.xml; the suite is named after the test (or the folder)."""
    name = (test or {}).get("name")
    suite = name if isinstance(name, str) and name else Path(run_dir).resolve().name
    tree = junit_tree(results, suite)
    out = Path(run_dir) / "junit.xml"
    tmp = out.with_name(out.name + ".tmp")
    ET.indent(tree)
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, out)
    return out
