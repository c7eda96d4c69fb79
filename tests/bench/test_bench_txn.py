"""bench/txn.py --old: a checkout without a venv is refused before any cluster starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import txn


def test_old_without_a_venv_is_refused_naming_it(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        txn.main(["--old", str(tmp_path), "--out", str(tmp_path / "out.json")])
    assert e.value.code == 2
    assert f"--old {tmp_path}: no .venv/bin/python" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
