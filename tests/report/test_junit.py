"""junit.xml beside results.json."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.junit import write_junit


def _suite(path: Path) -> ET.Element:
    s = ET.parse(path).getroot().find("testsuite")
    assert s is not None
    return s


def test_invalid_run_fails_per_forbidden_type(tmp_path: Path) -> None:
    res = {"valid": False, "anomaly_types": ["int-send-skip", "lost-write"],
           "bad_anomaly_types": ["lost-write"], "counts": {"int-send-skip": 2, "lost-write": 3},
           "anomalies": {"lost-write": [{"key": 1, "value": 5}]}}
    s = _suite(write_junit(tmp_path, res, {"name": "kip101-loss"}))
    assert s.get("name") == "kip101-loss"
    assert (s.get("tests"), s.get("failures"), s.get("errors")) == ("3", "2", "0")
    lost = s.find("testcase[@name='anomaly lost-write']/failure")
    assert lost is not None and '"value":5' in (lost.text or "")
    assert s.find("testcase[@name='anomaly int-send-skip']/failure") is None


def test_valid_unknown_and_unchecked(tmp_path: Path) -> None:
    ok = _suite(write_junit(tmp_path, {"valid": True, "anomaly_types": []}))
    assert (ok.get("failures"), ok.get("errors")) == ("0", "0")
    unk = _suite(write_junit(tmp_path, {"valid": "unknown", "error": "out of time"}))
    err = unk.find("testcase/error")
    assert err is not None and err.get("message") == "out of time"
    none = _suite(write_junit(tmp_path, None))
    assert none.get("skipped") == "1"
