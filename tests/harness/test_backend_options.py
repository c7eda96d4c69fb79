"""A backend's own options: the ssh backend declares its user, key and port as a system does.

Shown under `Options of --backend ssh` by --help, set by a TOML `[ssh]` table (the command
line winning), recorded in test.json under `options.ssh`, refused with exit 2 when wrong;
the `extra` keys users set before (ssh_user, ssh_key_file, broker_port) and old test.json
files still work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.control.ssh import SshOptions, ssh_nodes
from harness.spec import SpecError, build_spec, load_test_json
from tests.harness.test_core import spec_of

SSH = ["--backend", "ssh", "--node", "h1", "--node", "h2:2222", "--node", "h3"]


def _run(*args: str) -> Any:
    return CliRunner().invoke(main, ["run", *args])


def test_help_shows_the_ssh_backend_s_options_under_its_heading() -> None:
    r = _run("--help")
    assert r.exit_code == 0, r.output
    text = r.output
    own = text.index("Options of --backend ssh:")
    assert text.index("Options of --system undertow:") < own  # the systems' first
    for flag in ("--ssh-user USER", "--ssh-key-file FILE", "--ssh-broker-port PORT"):
        assert text.index(flag) > own, flag  # not among the harness's own


def test_the_ssh_table_and_the_command_line_set_them(tmp_path: Path) -> None:
    toml = tmp_path / "ssh.toml"
    toml.write_text('backend = "ssh"\nhosts = ["h1", "h2:2222", "h3"]\n'
                    '[ssh]\nssh_user = "ubuntu"\nssh_key_file = "/keys/id"\nbroker_port = 9000\n')
    s = spec_of("--config", str(toml))
    assert s["options"]["ssh"] == {"ssh_user": "ubuntu", "ssh_key_file": "/keys/id",
                                   "broker_port": 9000}
    s = spec_of("--config", str(toml), "--ssh-user", "admin", "--ssh-broker-port", "9100")
    assert s["options"]["ssh"] == {"ssh_user": "admin", "ssh_key_file": "/keys/id",
                                   "broker_port": 9100}  # the command line over the file
    assert s["extra"] == {"ssh_user": "admin", "ssh_key_file": "/keys/id", "broker_port": 9100}
    assert spec_of(*SSH)["options"]["ssh"] == {"ssh_user": "root", "ssh_key_file": None,
                                               "broker_port": None}
    assert "ssh" not in spec_of()["options"]  # a local run has none


def test_test_json_records_them_and_the_nodes_use_them(tmp_path: Path) -> None:
    spec = build_spec({"backend": "ssh", "hosts": ["h1", "h2:2222", "h3"],
                       "ssh": {"ssh_user": "ubuntu", "ssh_key_file": "/keys/id"}})
    assert [str(n) for n in ssh_nodes(spec).values()] == ["ubuntu@h1:22", "ubuntu@h2:2222",
                                                         "ubuntu@h3:22"]
    assert {n.key_file for n in ssh_nodes(spec).values()} == {"/keys/id"}
    spec.save(tmp_path / "test.json")
    saved = json.loads((tmp_path / "test.json").read_text())
    assert saved["options"]["ssh"]["ssh_user"] == "ubuntu"
    again = load_test_json(tmp_path / "test.json")
    assert again.options == spec.options and SshOptions.of(again).ssh_key_file == "/keys/id"


def test_old_extra_keys_and_old_test_json_still_work(tmp_path: Path) -> None:
    s = spec_of(*SSH, "--extra", "ssh_user=ubuntu", "--extra", "broker_port=9000")
    assert s["options"]["ssh"] == {"ssh_user": "ubuntu", "ssh_key_file": None,
                                   "broker_port": 9000}
    toml = tmp_path / "old.toml"
    toml.write_text('[extra]\nssh_key_file = "/keys/id"\n')
    assert spec_of(*SSH, "--config", str(toml))["options"]["ssh"]["ssh_key_file"] == "/keys/id"
    # a test.json written before the backend had options: its knobs in `extra`, and one
    # key nothing declares any more (dropped, not refused: the run still loads)
    old = {"backend": "ssh", "hosts": ["h1", "h2", "h3"], "seed": 4,
           "extra": {"ssh_user": "ubuntu", "broker_port": 9000, "gone_knob": 1}}
    (tmp_path / "test.json").write_text(json.dumps(old))
    spec = load_test_json(tmp_path / "test.json")
    assert spec.options["ssh"] == {"ssh_user": "ubuntu", "ssh_key_file": None,
                                   "broker_port": 9000}
    assert SshOptions.of(spec).broker_port == 9000


@pytest.mark.parametrize("args,says", [
    (["--ssh-broker-port", "70000"],
     "--ssh-broker-port (ssh.broker_port): expected a port, 1 to 65535, got 70000"),
    (["--ssh-broker-port", "soon"], "'soon' is not a valid integer"),
    (["--ssh-user", "two words"], "--ssh-user (ssh.ssh_user): expected one word"),
    (["--extra", "broker_port=x"], "--ssh-broker-port (ssh.broker_port): expected an integer"),
    (["--extra", "ssh_usr=bob"], "extra 'ssh_usr': no system, workload or backend declares it"),
])
def test_a_wrong_value_exits_2_naming_the_option(tmp_path: Path, args: list[str],
                                                 says: str) -> None:
    r = _run(*SSH, *args, "--results-dir", str(tmp_path / "r"))
    assert r.exit_code == 2, r.output
    assert says in r.output.strip().splitlines()[-1], r.output  # one line says why
    assert not (tmp_path / "r").exists()  # before anything starts


@pytest.mark.parametrize("table,says", [
    ('[ssh]\nbroker_port = "x"\n', "(ssh.broker_port): expected an integer, got 'x'"),
    ("[ssh]\nuser = \"u\"\n", "[ssh]: unknown key 'user'; known: broker_port, ssh_key_file, "
                              "ssh_user"),
    ('backend = "local"\n[ssh]\nssh_user = "u"\n',
     "--ssh-user: only --backend ssh has them, not local"),
])
def test_a_wrong_table_exits_2_naming_the_key(tmp_path: Path, table: str, says: str) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text(table)
    args = SSH if "backend" not in table else []
    r = _run(*args, "--config", str(toml), "--results-dir", str(tmp_path / "r"))
    assert r.exit_code == 2 and says in r.output, r.output
    assert not (tmp_path / "r").exists()


def test_a_local_run_refuses_the_ssh_backend_s_options() -> None:
    r = _run("--ssh-user", "bob")
    assert r.exit_code == 2 and "--ssh-user: only --backend ssh has them, not local" in r.output
    r = _run("--extra", "ssh_user=bob")
    assert r.exit_code == 2 and "extra ssh_user: only --backend ssh has it, not local" in \
        r.output
    with pytest.raises(SpecError, match="only --backend ssh has it"):
        build_spec({"extra": {"broker_port": 9000}})
