"""Where the harness finds systems, workloads and nemesis packages: one registry, by name.

Built-in parts are entry points of the installed `undertow` distribution
(pyproject.toml, groups `undertow.systems`, `undertow.workloads`,
`undertow.nemesis`), so the harness has no import line naming any of them. A fault of
one's own for the standard nemesis package (a `--nemesis` name, kind `fault`: an object
with its `name`, the nemeses it `needs`, its `plan` and the `kinds` it injects; see
nemesis/packages.py `Fault`) is registered the same ways (group `undertow.faults`). A part
of one's own (a system under test written for a project, a toy in a test) is
registered at run time with `register`, or named in $UNDERTOW_PLUGINS (modules,
comma-separated, imported before the first look-up; each calls `register`).
"""

from __future__ import annotations

import functools
import importlib
import os
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

from harness.spec import SpecError

Kind = Literal["system", "workload", "nemesis", "fault"]
GROUPS: dict[Kind, str] = {"system": "undertow.systems", "workload": "undertow.workloads",
                           "nemesis": "undertow.nemesis", "fault": "undertow.faults"}
OPTIONS: dict[Kind, str] = {"system": "--system", "workload": "--workload",
                            "nemesis": "--nemesis-package", "fault": "--nemesis"}
PLUGINS_ENV = "UNDERTOW_PLUGINS"

_registered: dict[Kind, dict[str, Any]] = {k: {} for k in GROUPS}
_plugins_loaded: set[str] = set()


def register(kind: Kind, name: str, part: Any) -> None:
    """Make `part` known as `name` (a later registration of the same name wins)."""
    _registered[kind][name] = part


def unregister(kind: Kind, name: str) -> None:
    _registered[kind].pop(name, None)


def _load_plugins() -> None:
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        if module in _plugins_loaded:
            continue
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise SpecError(f"${PLUGINS_ENV}: cannot import {module!r}: {e}") from e
        _plugins_loaded.add(module)


@functools.cache
def _installed(kind: Kind) -> tuple[EntryPoint, ...]:
    """The installed entry points of that kind, read once (reading them takes ~10 ms)."""
    return tuple(entry_points(group=GROUPS[kind]))


def names(kind: Kind) -> list[str]:
    """Every name of that kind: installed entry points and run-time registrations."""
    _load_plugins()
    return sorted({ep.name for ep in _installed(kind)} | set(_registered[kind]))


def get(kind: Kind, name: str) -> Any:
    """The part registered as name; SpecError naming the option and the known names."""
    _load_plugins()
    if name in _registered[kind]:
        return _registered[kind][name]
    for ep in _installed(kind):
        if ep.name == name:
            return ep.load()
    raise SpecError(f"{OPTIONS[kind]}: {name!r} is not known (known: {', '.join(names(kind))})")
