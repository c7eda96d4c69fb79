"""The checkers' own options (checkers/options.py, issue 34): --spark, --spark-master and
--spark-remote, the same flags as when they were TestSpec fields, under `Options of the
checkers` in --help, a `[checkers]` TOML table, `options.checkers` in test.json; old files'
top-level keys, a scenario's settings and old test.json files still set them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from checkers.options import SparkOptions
from checkers.suite import RunFileChecker, _target
from harness import options as o
from harness.checking import run_checkers
from harness.cli import main
from harness.report.trends import settings_digest
from harness.runfiles import RunPaths
from harness.spec import build_spec, load_test_json
from harness.store import write_test_json
from tests.harness.test_core import help_sections, spec_of

DEFAULTS = dataclasses.asdict(SparkOptions())
FORMER = ("spark", "spark_master", "spark_remote")


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, ["run", "--print-spec", *args])


def test_the_checkers_are_a_part_with_their_own_options() -> None:
    assert "checkers" in o.KINDS and o.names("checkers") == [o.CHECKERS] == ["checkers"]
    assert o.part("checkers", "checkers") is RunFileChecker
    assert RunFileChecker.options is SparkOptions
    assert DEFAULTS == {"spark": "auto", "spark_master": "local[2]", "spark_remote": None}
    assert [d.flag for d in o.declared("checkers", "checkers", RunFileChecker)] == [
        "--spark", "--spark-master", "--spark-remote"]
    assert o.label("checkers", "checkers") == "the checkers"


def test_the_flags_are_the_checkers_under_their_heading() -> None:
    s = spec_of("--spark", "cold", "--spark-master", "local[1]")
    assert s["options"]["checkers"] == {**DEFAULTS, "spark": "cold", "spark_master": "local[1]"}
    assert not set(FORMER) & set(s) and s["extra"] == {}  # no longer TestSpec fields
    assert spec_of()["options"]["checkers"] == DEFAULTS  # the defaults as before
    assert spec_of("--spark-remote", "sc://h:15002")["options"]["checkers"][
        "spark_remote"] == "sc://h:15002"
    assert spec_of("--extra", "spark=warm")["options"]["checkers"]["spark"] == "warm"
    main_section, own = help_sections("the checkers")
    for flag in ("--spark ", "--spark-master", "--spark-remote"):
        assert flag in own and f"  {flag}" not in main_section, flag


def test_a_toml_file_or_a_scenario_sets_them_in_the_table_or_where_they_were(
        tmp_path: Path) -> None:
    new = tmp_path / "new.toml"
    new.write_text('[checkers]\nspark = "cold"\nspark_master = "local[3]"\n')
    assert spec_of("--config", str(new))["options"]["checkers"] == {
        **DEFAULTS, "spark": "cold", "spark_master": "local[3]"}
    old = tmp_path / "old.toml"  # a file written when they were TestSpec fields
    old.write_text('spark = "cold"\nspark_master = "local[1]"\n')
    want = {**DEFAULTS, "spark": "cold", "spark_master": "local[1]"}
    assert spec_of("--config", str(old))["options"]["checkers"] == want
    # the command line over the file, the table over a former key in one file
    assert spec_of("--config", str(old), "--spark", "auto")["options"]["checkers"][
        "spark"] == "auto"
    both = tmp_path / "both.toml"
    both.write_text('spark = "cold"\n[checkers]\nspark = "warm"\n')
    assert spec_of("--config", str(both))["options"]["checkers"]["spark"] == "warm"
    # a scenario's settings are a layer like these (harness/scenarios.py)
    spec = build_spec({"spark": "cold", "spark_remote": None, "time_limit_s": 5})
    assert SparkOptions.of(spec) == SparkOptions(spark="cold")
    assert _target(spec).label == "cold local[2]"  # the suite checks on what they name
    assert _target(build_spec({"checkers": {"spark": "cold", "spark_master": "local[1]"}})
                   ).label == "cold local[1]"


@pytest.mark.parametrize("args,needle", [
    (["--spark", "hot"], "'hot' is not one of 'auto', 'cold', 'warm'"),
    (["--extra", "spark=hot"], "--spark (checkers.spark): 'hot' is not one of auto, cold"),
])
def test_a_wrong_value_exits_2_naming_the_option(args: list[str], needle: str) -> None:
    r = _run(*args)
    assert r.exit_code == 2 and needle in r.output, r.output


@pytest.mark.parametrize("args,needle", [
    (["--spark", "cold", "--spark-remote", "sc://127.0.0.1:1"],
     "--spark cold and --spark-remote exclude each other"),
    (["--spark-remote", "nonsense"], "--spark-remote: 'nonsense' is not sc://HOST:PORT"),
])
def test_a_spark_that_cannot_be_had_exits_2_before_anything_starts(
        tmp_path: Path, args: list[str], needle: str) -> None:
    results = tmp_path / "results"
    r = CliRunner().invoke(main, ["run", "--nemesis", "none", "--time-limit", "1",
                                  "--results-dir", str(results), *args])
    assert r.exit_code == 2 and needle in r.output, r.output
    assert not results.exists()  # no run folder: nothing started


@pytest.mark.parametrize("toml,needle", [
    ('[checkers]\nspark = "hot"\n', "--spark (checkers.spark): 'hot' is not one of"),
    ('spark = "hot"\n', "--spark (checkers.spark): 'hot' is not one of"),
    ('[checkers]\nsparc = "cold"\n', "[checkers]: unknown key 'sparc'"),
    ('spark_master = true\n', "--spark-master (checkers.spark_master): expected a string"),
    ('checkers = "cold"\n', "[checkers] must be a table"),
])
def test_a_wrong_file_exits_2_naming_the_option(tmp_path: Path, toml: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    r = _run("--config", str(path))
    assert r.exit_code == 2 and needle in r.output, r.output


def test_test_json_records_them_under_checkers_and_reads_them_back(tmp_path: Path) -> None:
    spec = build_spec({"seed": 1}, {"checkers": {"spark": "cold"}, "spark_master": "local[1]"})
    write_test_json(RunPaths(tmp_path), spec)
    saved = json.loads((tmp_path / "test.json").read_text())
    assert saved["options"]["checkers"] == {**DEFAULTS, "spark": "cold",
                                            "spark_master": "local[1]"}
    assert not set(FORMER) & set(saved) and saved["extra"] == {}  # never extra knobs
    back = load_test_json(tmp_path / "test.json")
    assert back.options == spec.options
    assert dataclasses.replace(back, name=spec.name) == spec


def test_an_old_test_json_s_top_level_keys_are_the_checkers(tmp_path: Path) -> None:
    """A run folder written when they were TestSpec fields: `undertow check`, shrink, the
    report and replay read its test.json through load_test_json."""
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    write_test_json(RunPaths(run_dir), build_spec({"seed": 5}))
    data = json.loads((run_dir / "test.json").read_text())
    data.pop("options")
    data.update({"spark": "cold", "spark_master": "local[1]", "spark_remote": None})
    (run_dir / "test.json").write_text(json.dumps(data))
    got = run_checkers(run_dir)
    assert got is not None
    spec, checkers = got
    assert checkers and spec.seed == 5
    assert spec.options["checkers"] == {**DEFAULTS, "spark": "cold", "spark_master": "local[1]"}


def test_which_spark_checked_is_no_setting_of_the_run_in_trends() -> None:
    """The trends page compares runs' settings apart from the seed: which Spark checked them
    is not one (it was not when they were top-level keys either)."""
    a = {"seed": 1, "time_limit_s": 5, "options": {"queue": {"keys": 8},
                                                    "checkers": {"spark": "cold"}}}
    b = {**a, "seed": 2, "options": {"queue": {"keys": 8}, "checkers": {"spark": "warm"}}}
    assert settings_digest(a) == settings_digest(b)
    c = {**a, "options": {"queue": {"keys": 9}, "checkers": {"spark": "cold"}}}
    assert settings_digest(a) != settings_digest(c)
