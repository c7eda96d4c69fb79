"""test.json, the run's own description (spec, seed, nodes, plan, system info): read,
written and amended here only.

It is written once when the run starts and amended while it runs (a system records
the version it found running), each time whole under a temporary name and renamed,
so a reader sees the old file or the new one. The format stays what it always was
(JSON indented by one, anything not JSON as its string), so runs compare as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.runfiles.tolerant import read_json
from harness.runfiles.writer import replace_durably


def read_test_json(path: Path) -> dict[str, Any] | None:
    """The test.json at path (`RunPaths.test_json`, or a folder's TEST_JSON) as a dict;
    None when there is none; HistoryError (naming the file) when it cannot be read or is
    not a JSON object."""
    return read_json(path)


def save_test_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write test.json whole at path (durably: temporary name, then rename)."""
    replace_durably(path, (json.dumps(dict(data), indent=1, default=str) + "\n").encode())


def amend_test_json(path: Path, more: Mapping[str, Any], *, merge: bool = False) -> None:
    """Set keys of the test.json at path; with merge, a table's keys join those already
    there. Best effort: a missing or unreadable file is left as it is (a run's record is
    not worth failing the run for)."""
    try:
        data = read_json(path)
    except ValueError:
        return
    if data is None:
        return
    if merge:
        more = {k: {**data[k], **v} if isinstance(data.get(k), dict) and isinstance(v, dict)
                else v for k, v in more.items()}
    try:
        save_test_json(path, {**data, **more})
    except OSError:
        return
