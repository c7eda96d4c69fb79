"""The queue and txn workloads' own options (workloads/options.py, issue 34): the same flags
as when they were TestSpec fields, under their part's --help heading, a `[queue]`/`[txn]`
TOML table, `options.<workload>` in test.json; old files' top-level keys and `[consumer]`
table, scenarios and old test.json files still set them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness import registry
from harness.checking import run_checkers
from harness.cli import main
from harness.runfiles import RunPaths
from harness.spec import SpecError, build_spec, load_test_json
from harness.store import write_test_json
from tests.harness.test_core import help_sections, spec_of
from workloads.options import ConsumerSettings, QueueOptions, TxnOptions, partitions

DEFAULTS = dataclasses.asdict(QueueOptions())
TXN_DEFAULTS = dataclasses.asdict(TxnOptions())  # the queue options and --txn-sends
FORMER = ("keys", "max_writes_per_key", "key_pool", "max_poll_records", "isolation",
          "sub_via", "consumer", "crash_client_interval_s", "final_read_timeout_s")


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, ["run", "--print-spec", *args])


def test_the_flags_are_the_workload_s_under_its_heading() -> None:
    s = spec_of("--keys", "4", "--sub-via", "subscribe", "--commit", "processed",
                "--group-session-timeout-ms", "7000", "--assignor", "roundrobin")
    assert s["options"]["queue"] == {**DEFAULTS, "keys": 4, "sub_via": "subscribe",
                                     "commit": "processed", "group_session_timeout_ms": 7000,
                                     "assignor": "roundrobin"}
    assert not set(FORMER) & set(s)  # no longer TestSpec fields
    assert "txn" not in s["options"]
    t = spec_of("--workload", "txn", "--isolation", "read-uncommitted", "--key-pool", "20")
    assert t["options"]["txn"] == {**TXN_DEFAULTS, "isolation": "read-uncommitted", "key_pool": 20}
    assert "queue" not in t["options"]
    assert spec_of()["options"]["queue"] == DEFAULTS  # the defaults as before
    main_section, own = help_sections("--workload queue, txn")
    for flag in ("--keys", "--max-writes-per-key", "--key-pool", "--max-poll-records",
                 "--isolation", "--sub-via", "--commit", "--auto-commit-interval-ms",
                 "--group-session-timeout-ms", "--assignor", "--crash-client-interval"):
        assert flag in own and f"  {flag} " not in main_section, flag


def test_a_toml_file_sets_them_in_the_workload_s_table_or_where_they_were(
        tmp_path: Path) -> None:
    new = tmp_path / "new.toml"
    new.write_text('workload = "txn"\n[txn]\nkeys = 5\nsub_via = "subscribe"\ncommit = "off"\n')
    assert spec_of("--config", str(new))["options"]["txn"] == {
        **TXN_DEFAULTS, "keys": 5, "sub_via": "subscribe", "commit": "off"}
    old = tmp_path / "old.toml"  # a file written when they were TestSpec fields
    old.write_text('keys = 3\nisolation = "read-uncommitted"\nsub_via = "subscribe"\n'
                   'max_writes_per_key = 50\nkey_pool = 30\n'
                   '[consumer]\ncommit = "processed"\nsession_timeout_ms = 9000\n'
                   'assignor = "sticky"\n')
    want = {**DEFAULTS, "keys": 3, "isolation": "read-uncommitted", "sub_via": "subscribe",
            "max_writes_per_key": 50, "key_pool": 30, "commit": "processed",
            "group_session_timeout_ms": 9000, "assignor": "sticky"}
    assert spec_of("--config", str(old))["options"]["queue"] == want
    # the command line over the file, the table over a former key in one file
    assert spec_of("--config", str(old), "--keys", "6")["options"]["queue"]["keys"] == 6
    both = tmp_path / "both.toml"
    both.write_text("keys = 3\n[queue]\nkeys = 7\n")
    assert spec_of("--config", str(both))["options"]["queue"]["keys"] == 7
    spec = build_spec(json.loads(json.dumps({"keys": 2, "consumer": {"commit": "off"}})))
    assert QueueOptions.of(spec).consumer == ConsumerSettings(commit="off")


def test_scenarios_set_them_as_before() -> None:
    s = spec_of("--scenario", "isr-shrink-2013")
    assert s["options"]["queue"]["keys"] == 16
    t = spec_of("--scenario", "read-uncommitted")
    assert t["workload"] == "txn" and t["options"]["txn"]["isolation"] == "read-uncommitted"
    g = spec_of("--scenario", "offsets-commit-acks-1")
    assert (g["options"]["queue"]["sub_via"], g["options"]["queue"]["commit"]) == \
        ("subscribe", "processed")
    # the fixing option over the scenario's
    assert spec_of("--scenario", "read-uncommitted", "--isolation", "read-committed")[
        "options"]["txn"]["isolation"] == "read-committed"


@pytest.mark.parametrize("args,needle", [
    (["--keys", "0"], "--keys (queue.keys): must be at least 1, got 0"),
    (["--keys", "3", "--key-pool", "2"], "--key-pool 2: must be at least --keys (3)"),
    (["--isolation", "dirty"], "--isolation"),
    (["--workload", "txn", "--auto-commit-interval-ms", "0"],
     "--auto-commit-interval-ms (txn.auto_commit_interval_ms): must be at least 1"),
])
def test_a_wrong_value_exits_2_naming_the_option(args: list[str], needle: str) -> None:
    r = _run(*args)
    assert r.exit_code == 2 and needle in r.output, r.output


@pytest.mark.parametrize("toml,needle", [
    ('[queue]\nsub_via = "both"\n', "--sub-via (queue.sub_via): 'both' is not one of"),
    ('sub_via = "both"\n', "--sub-via (queue.sub_via): 'both' is not one of"),
    ('[consumer]\ncommit = "never"\n', "--commit (queue.commit): 'never' is not one of"),
    ('[consumer]\ncomit = "off"\n', "unknown key 'consumer.comit'"),
    ('[queue]\nkys = 3\n', "[queue]: unknown key 'kys'"),
    ('workload = "txn"\n[queue]\nkeys = 3\n', "--keys: only --workload queue has them, not txn"),
    ('keys = "many"\n', "--keys (queue.keys): expected an integer"),
])
def test_a_wrong_file_exits_2_naming_the_option(tmp_path: Path, toml: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    r = _run("--config", str(path))
    assert r.exit_code == 2 and needle in r.output, r.output


def test_test_json_records_them_under_the_workload_and_reads_them_back(
        tmp_path: Path) -> None:
    spec = build_spec({"workload": "txn", "seed": 1},
                      {"txn": {"keys": 3, "sub_via": "subscribe"}, "key_pool": 12})
    write_test_json(RunPaths(tmp_path), spec)
    saved = json.loads((tmp_path / "test.json").read_text())
    assert saved["options"]["txn"] == {**TXN_DEFAULTS, "keys": 3, "sub_via": "subscribe",
                                       "key_pool": 12}
    assert not set(FORMER) & set(saved) and saved["extra"] == {}  # never extra knobs
    back = load_test_json(tmp_path / "test.json")
    assert back.options == spec.options
    assert dataclasses.replace(back, name=spec.name) == spec  # the name is the derived one
    assert partitions(back) == 12


def test_an_old_test_json_s_top_level_keys_are_the_workload_s(tmp_path: Path) -> None:
    """A run folder written when they were TestSpec fields: `undertow check`, shrink, the
    report and replay read its test.json through load_test_json."""
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    write_test_json(RunPaths(run_dir), build_spec({"seed": 5}))
    data = json.loads((run_dir / "test.json").read_text())
    data.pop("options")
    data.update({"keys": 4, "max_writes_per_key": 30, "key_pool": None,
                 "max_poll_records": 50, "isolation": "read-committed",
                 "sub_via": "subscribe", "consumer": {
                     "commit": "processed", "auto_commit_interval_ms": 1000,
                     "session_timeout_ms": 6000, "assignor": "range"},
                 "extra": {"controller_voters": 3}})
    (run_dir / "test.json").write_text(json.dumps(data))
    got = run_checkers(run_dir)
    assert got is not None
    spec, checkers = got
    assert checkers and spec.seed == 5
    assert spec.options["queue"] == {**DEFAULTS, "keys": 4, "max_writes_per_key": 30,
                                     "max_poll_records": 50, "sub_via": "subscribe",
                                     "commit": "processed"}
    assert spec.options["undertow"]["controller_voters"] == 3
    assert partitions(spec) == QueueOptions.of(spec).partitions(spec.time_limit_s)


class _Bare:
    """A workload with no options of its own (the keys are not its business)."""

    name = "bare"


def test_a_workload_without_them_refuses_them_or_drops_an_old_run_s(tmp_path: Path) -> None:
    registry.register("workload", "bare", _Bare())
    try:
        with pytest.raises(SpecError, match="--keys: only --workload queue or --workload txn "
                           "has it, not bare"):
            build_spec({"workload": "bare", "keys": 3})
        with pytest.raises(SpecError, match=r"extra keys: only --workload queue or "
                           r"--workload txn has it, not bare \(--keys\)"):
            build_spec({"workload": "bare", "extra": {"keys": 3}})
        r = _run("--workload", "bare", "--keys", "3")
        assert r.exit_code == 2 and "only --workload queue or --workload txn has it" in \
            r.output, r.output
        path = tmp_path / "test.json"
        path.write_text(json.dumps({"workload": "bare", "seed": 2, "keys": 3,
                                    "consumer": {"commit": "off"}}))
        spec = load_test_json(path)  # recorded: the knobs no part takes are dropped
        assert spec.workload == "bare" and "bare" not in spec.options
    finally:
        registry.unregister("workload", "bare")


def test_the_nemesis_reads_the_keys_through_the_workload() -> None:
    """A sequence aimed at a live key asks the run's workload (harness.protocols.WritesKeys,
    through the registry): the nemesis imports no workload."""
    from types import SimpleNamespace

    from nemesis.faults import NemesisError, key_counts

    def run(spec: Any) -> Any:  # the part of a Run the nemesis reads here
        return SimpleNamespace(spec=spec)

    assert key_counts(run(build_spec({"keys": 4, "key_pool": 10}))) == (4, 10)
    txn = build_spec({"workload": "txn", "time_limit_s": 30}, {"txn": {"keys": 2}})
    assert key_counts(run(txn)) == (2, partitions(txn))
    registry.register("workload", "bare", _Bare())
    try:
        with pytest.raises(NemesisError, match="--workload bare writes no keys"):
            key_counts(run(build_spec({"workload": "bare"})))
    finally:
        registry.unregister("workload", "bare")


def test_client_crashes_and_the_final_reads_time_limit_are_the_workload_s(
        tmp_path: Path) -> None:
    """--crash-client-interval and the final reads' time limit (no flag) were TestSpec
    fields: now the queue workload's options, set as before by flag, old key or table."""
    s = spec_of("--crash-client-interval", "2.5")
    assert s["options"]["queue"] == {**DEFAULTS, "crash_client_interval_s": 2.5}
    assert DEFAULTS["crash_client_interval_s"] is None
    assert DEFAULTS["final_read_timeout_s"] == 30.0
    assert "--final-read-timeout" not in CliRunner().invoke(main, ["run", "--help"]).output
    old = tmp_path / "old.toml"  # top-level keys, as when they were TestSpec fields
    old.write_text("crash_client_interval_s = 4.0\nfinal_read_timeout_s = 12\n")
    assert spec_of("--config", str(old))["options"]["queue"] == {
        **DEFAULTS, "crash_client_interval_s": 4.0, "final_read_timeout_s": 12.0}
    new = tmp_path / "new.toml"
    new.write_text("[queue]\ncrash_client_interval_s = 1\nfinal_read_timeout_s = 5.0\n")
    got = spec_of("--config", str(new), "--crash-client-interval", "3")["options"]["queue"]
    assert (got["crash_client_interval_s"], got["final_read_timeout_s"]) == (3.0, 5.0)
    assert spec_of("--extra", "final_read_timeout_s=7")["options"]["queue"][
        "final_read_timeout_s"] == 7.0
    spec = build_spec({"crash_client_interval_s": 1.0, "final_read_timeout_s": 9})
    opts = QueueOptions.of(spec)
    assert (opts.crash_client_interval_s, opts.final_read_timeout_s) == (1.0, 9.0)


@pytest.mark.parametrize("args,needle", [
    (["--crash-client-interval", "0"],
     "--crash-client-interval (queue.crash_client_interval_s): must be positive, got 0"),
    (["--crash-client-interval", "nan"], "--crash-client-interval (queue."),
    (["--extra", "final_read_timeout_s=0"], "queue.final_read_timeout_s: must be positive"),
    (["--workload", "txn", "--crash-client-interval", "2"],
     "--crash-client-interval: only the queue workload has it, not txn"),
])
def test_a_wrong_crash_interval_or_final_read_limit_exits_2(args: list[str],
                                                            needle: str) -> None:
    """Before anything starts: the txn workload's refusal comes from assembly (the
    workload's own check), run here by `undertow run` before a folder or process exists."""
    r = CliRunner().invoke(main, ["run", "--nemesis", "none", *args])
    assert r.exit_code == 2 and needle in r.output, r.output


def test_an_old_test_json_s_crash_interval_and_final_read_limit_load(tmp_path: Path) -> None:
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    write_test_json(RunPaths(run_dir), build_spec({"seed": 5}))
    data = json.loads((run_dir / "test.json").read_text())
    data.pop("options")
    data.update({"crash_client_interval_s": 2.0, "final_read_timeout_s": 20.0})
    (run_dir / "test.json").write_text(json.dumps(data))
    spec = load_test_json(run_dir / "test.json")
    assert spec.options["queue"] == {**DEFAULTS, "crash_client_interval_s": 2.0,
                                     "final_read_timeout_s": 20.0}
    write_test_json(RunPaths(tmp_path), spec)  # saved again: under options.queue
    saved = json.loads((tmp_path / "test.json").read_text())
    assert saved["options"]["queue"]["crash_client_interval_s"] == 2.0
    assert not {"crash_client_interval_s", "final_read_timeout_s"} & set(saved)
    assert load_test_json(tmp_path / "test.json").options == spec.options


@pytest.mark.parametrize("system", ["undertow", "kafka"])
def test_the_txn_workload_s_own_rules_hold_on_every_system(system: str) -> None:
    """No client crashes, acks all: the txn workload's rules (harness.protocols.ChecksSpec),
    written once, asked by assembly whatever the system; the queue workload has neither."""
    from harness.protocols import ChecksSpec
    from harness.test import assemble
    from workloads.txn import workload as txn

    assert isinstance(txn, ChecksSpec)
    base = {"system": system, "workload": "txn", "nemesis": ["kill"]}
    with pytest.raises(SpecError, match="only the queue workload has it, not txn"):
        assemble(build_spec({**base, "crash_client_interval_s": 2.0}))
    with pytest.raises(SpecError, match="--workload txn needs --acks all, not 1"):
        assemble(build_spec({**base, "broker": {"acks": "1", "min_insync_replicas": 1}}))
    assemble(build_spec({**base, "workload": "queue", "crash_client_interval_s": 2.0}))
