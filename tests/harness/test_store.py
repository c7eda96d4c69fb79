"""Run folders, the latest links, test.json and harness.log."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness import store
from harness.spec import build_spec
from harness.store import create_run, link_atomically, write_test_json


def test_run_folder_layout_links_and_log(tmp_path: Path) -> None:
    spec = build_spec({"results_dir": str(tmp_path / "results"), "seed": 7})
    run = create_run(spec, now_s=0)
    root = run.paths.root
    assert root == tmp_path / "results" / "queue-kill-partition" / "19700101T000000Z"
    assert sorted(p.name for p in (root / "nodes").iterdir()) == ["n1", "n2", "n3"]
    assert os.readlink(tmp_path / "results" / "latest") == "queue-kill-partition/19700101T000000Z"
    assert (tmp_path / "results" / "latest" / "nodes").is_dir()
    run.log.info("hello %s", "log")
    write_test_json(run.paths, spec, nemesis_plan=[{"f": "kill"}])
    run.close()
    assert "hello log" in run.paths.harness_log.read_text()
    data = json.loads(run.paths.test_json.read_text())
    assert data["seed"] == 7 and data["nodes"] == ["n1", "n2", "n3"]
    assert data["nemesis_plan"] == [{"f": "kill"}] and "python" in data["versions"]


def test_two_runs_in_the_same_second_get_distinct_folders(tmp_path: Path) -> None:
    spec = build_spec({"results_dir": str(tmp_path), "scenario": "kip101-loss"})
    a, b, c = (create_run(spec, now_s=100) for _ in range(3))
    for r in (a, b, c):
        r.close()
    names = [r.paths.root.name for r in (a, b, c)]
    assert names == ["19700101T000140Z", "19700101T000140Z-2", "19700101T000140Z-3"]
    assert os.readlink(tmp_path / "kip101-loss" / "latest") == names[-1]
    assert os.readlink(tmp_path / "latest") == f"kip101-loss/{names[-1]}"


def test_names_and_atomic_link_replacement(tmp_path: Path) -> None:
    assert store.test_name(build_spec({"nemesis": ["pause"]})) == "queue-pause"
    assert store.test_name(build_spec({"nemesis": []})) == "queue-none"
    assert store.test_name(build_spec({"name": "my test/1"})) == "my-test-1"
    link = tmp_path / "latest"
    link_atomically(link, "a")
    link_atomically(link, "b")
    assert os.readlink(link) == "b"
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]  # no temp link left behind
