"""test.json read, written and amended in one place; history lines streamed by one iterator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.runfiles import (
    TEST_JSON,
    HistoryError,
    RunPaths,
    amend_test_json,
    iter_history,
    read_test_json,
    save_test_json,
)


def test_amend_sets_and_merges_keys(tmp_path: Path) -> None:
    path = RunPaths(tmp_path).test_json
    assert path == tmp_path / TEST_JSON and read_test_json(path) is None
    save_test_json(path, {"seed": 7, "system_info": {"name": "kafka", "client": "librdkafka"}})
    amend_test_json(path, {"system_info": {"version": "4.1.0"}}, merge=True)
    amend_test_json(path, {"seed": 8})
    assert read_test_json(path) == {"seed": 8, "system_info": {
        "name": "kafka", "client": "librdkafka", "version": "4.1.0"}}
    assert path.read_text() == json.dumps(read_test_json(path), indent=1) + "\n"
    assert not path.with_name(TEST_JSON + ".tmp").exists()
    amend_test_json(path, {"system_info": {"x": 1}})  # without merge: replaced
    assert (read_test_json(path) or {})["system_info"] == {"x": 1}


def test_amend_leaves_a_missing_or_broken_file_alone(tmp_path: Path) -> None:
    amend_test_json(tmp_path / TEST_JSON, {"a": 1})
    assert not (tmp_path / TEST_JSON).exists()
    (tmp_path / TEST_JSON).write_text("{not json")
    amend_test_json(tmp_path / TEST_JSON, {"a": 1})
    assert (tmp_path / TEST_JSON).read_text() == "{not json"
    with pytest.raises(HistoryError, match=r"test\.json: not valid JSON"):
        read_test_json(tmp_path / TEST_JSON)


def test_iter_history_filters_and_skips_a_torn_line(tmp_path: Path) -> None:
    h = tmp_path / "history.jsonl"
    h.write_bytes(b'{"f": "send", "i": 0}\n\n{"f": "poll", "i": 1}\n[1]\n{"f": "send", "i"')
    with pytest.raises(HistoryError, match=r"history.jsonl:4: expected a JSON object"):
        list(iter_history(h))
    assert [r["i"] for r in iter_history(h, skip_torn=True)] == [0, 1]
    assert [r["i"] for r in iter_history(h, having=b'"send"', skip_torn=True)] == [0]
    with pytest.raises(HistoryError, match="cannot read"):
        list(iter_history(tmp_path / "nowhere.jsonl"))
