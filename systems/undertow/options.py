"""Our broker's own options: its controller quorum, shared transactional ids, raw settings.

Declared here once (harness/options.py): `undertow run --help` lists them under the
undertow system, a TOML file sets them in its `[undertow]` table (or, as before, in
`[extra]`), and test.json records them under `options.undertow`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.options import SystemOptions, option


def _voters(text: str) -> int | list[str]:
    """`2` (the first two nodes) or `n1,n3` (those nodes)."""
    text = text.strip()
    return int(text) if text.isdigit() else [v.strip() for v in text.split(",") if v.strip()]


def _voters_shape(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return None  # its range against the nodes: admin.controller_voters
    if isinstance(value, Sequence) and not isinstance(value, str) \
            and all(isinstance(v, str) for v in value):
        return None
    return f"expected a list of nodes or a count, got {value!r}"


def _positive(value: int) -> str | None:
    return None if value >= 1 else f"expected an integer >= 1, got {value!r}"


def _table(value: Any) -> str | None:
    return None if isinstance(value, Mapping) else f"expected a table, got {value!r}"


@dataclass(frozen=True, slots=True)
class UndertowOptions(SystemOptions):
    """What only our broker takes."""

    controller_voters: int | list[str] | None = option(
        None, "The controller quorum: a count (the first N nodes) or a comma list of nodes, "
        "voters among the brokers (default: 3 of 3 or 4 nodes, 5 from 5).",
        parse=_voters, check=_voters_shape, metavar="N|NODES")
    shared_transactional_ids: int | None = option(
        None, "--workload txn: the producers share this many transactional ids (zombie "
        "producers; default: one each).", check=_positive, metavar="N")
    broker_settings: Mapping[str, Any] | None = option(
        None, "Raw broker settings (JSON object), over the ones the harness derives.",
        check=_table, metavar="JSON")
