"""The dependency rules of the architecture, checked on the import lines themselves.

- the generic harness (runner, backends, network shaping, report) imports no system,
  no workload and not the broker: parts are found through harness.registry;
- nemesis and workloads never import each other;
- systems import nothing of the nemesis: a system declares its fault sequences as data
  (harness.faultplan, kinds from harness.faultkinds) and the nemesis reads them through
  harness.registry; the options both systems share (systems/settings.py) import no system;
- the report (harness/report/) imports nothing of the checkers: it reads what they wrote
  (results.json) and, for a folder they never measured, asks the default workload
  through harness.registry;
- the backends (harness/backends.py, harness/control/) import nothing of the nemesis: the
  fault kinds of a run reach them on the Run, handed over by assembly;
- the nemesis imports nothing of the backends or the network modules (proxy, net, netns,
  iptables, ...): it reaches them through the protocols of harness/protocols.py;
- the broker imports nothing of the harness (it runs alone in its image);
- a package imports no private (`_name`) name of another package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "nemesis", "workloads", "checkers", "systems")


def _imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in the file, wherever it stands."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [a.name for a in node.names]


def _files(package: str) -> list[Path]:
    root = ROOT / ("broker-image/broker" if package == "broker" else package)
    return sorted(root.rglob("*.py"))


def _violations(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{line}: imports {module}"
            for p in _files(package) for line, module, _ in _imports(p)
            if module.split(".")[0] in forbidden]


def test_the_harness_names_no_system_no_workload_and_not_the_broker() -> None:
    assert _violations("harness", ("systems", "workloads", "broker")) == []


def test_nemesis_and_workloads_never_import_each_other() -> None:
    assert _violations("nemesis", ("workloads", "systems", "broker")) == []
    assert _violations("workloads", ("nemesis", "systems", "broker")) == []


# the modules that shape or cut the network, and the backends that own them
NETWORK = ("harness.net", "harness.netns", "harness.iptables", "harness.proxy",
           "harness.proxy_process", "harness.nfqdelay", "harness.linkprobe")
BACKENDS = ("harness.backends", "harness.control")


def _names_imported(paths: list[Path]) -> Iterator[tuple[Path, int, str]]:
    """(file, line, dotted name) of every module imported, `from a import b` as a.b too."""
    for p in paths:
        for line, module, names in _imports(p):
            yield p, line, module
            for name in names:
                yield p, line, f"{module}.{name}"


def _reaching(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return sorted({f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}:{line}: "
                   f"imports {name}"
                   for p, line, name in _names_imported(paths)
                   if any(name == f or name.startswith(f + ".") for f in forbidden)})


def test_the_backends_import_nothing_of_the_nemesis() -> None:
    backends = [ROOT / "harness" / "backends.py", *sorted((ROOT / "harness" / "control")
                                                         .rglob("*.py"))]
    assert _reaching(backends, ("nemesis",)) == []


def test_the_nemesis_imports_no_backend_and_no_network_module() -> None:
    assert _reaching(_files("nemesis"), (*BACKENDS, *NETWORK)) == []


def test_systems_import_nothing_of_the_nemesis() -> None:
    assert _violations("systems", ("nemesis",)) == []


def test_the_settings_both_systems_share_import_no_system() -> None:
    """systems/settings.py (the options both systems extend) names neither system."""
    shared = ROOT / "systems" / "settings.py"
    assert [m for _, m, _ in _imports(shared) if m.startswith("systems")] == []


def test_the_report_imports_nothing_of_the_checkers() -> None:
    assert _reaching(sorted((ROOT / "harness" / "report").rglob("*.py")), ("checkers",)) == []


def test_the_broker_imports_nothing_of_the_harness() -> None:
    assert _violations("broker", PACKAGES) == []


def test_no_package_imports_a_private_name_of_another() -> None:
    bad = [f"{p.relative_to(ROOT)}:{line}: {module}.{name}"
           for package in PACKAGES for p in _files(package)
           for line, module, names in _imports(p) for name in names
           if module.split(".")[0] in PACKAGES and module.split(".")[0] != package
           and name.startswith("_") and not name.startswith("__")]
    assert bad == []


def test_the_rules_see_a_violation(tmp_path: Path) -> None:
    """The check reads real import lines: a planted one is found."""
    planted = tmp_path / "m.py"
    planted.write_text("def f():\n    from systems.undertow import admin\n"
                       "from harness import netns\n"
                       "from checkers.groups import Held\n")
    assert {m for _, m, _ in _imports(planted)} == {"systems.undertow", "harness",
                                                     "checkers.groups"}
    assert _reaching([planted], NETWORK) == [f"{planted}:3: imports harness.netns"]
    assert _reaching([planted], ("checkers",)) == [
        f"{planted}:4: imports checkers.groups", f"{planted}:4: imports checkers.groups.Held"]
