"""The verdict box, first on the page: which system and client ran, under which safety
settings and faults, how much was lost, how available it stayed, and what a scenario
expected. Everything comes from the run folder: test.json (`system_info`, written by the
system's `describe`), nodes/<node>/ files, results.json and the history's nemesis ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report.faults import fault_nodes
from harness.report.glossary import define
from harness.report.sections import plain


@dataclass(frozen=True, slots=True)
class Setting:
    group: str  # where it comes from: "server.properties", "producer", "broker", ...
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class Anomaly:
    name: str
    count: int
    bad: bool
    definition: str


@dataclass(frozen=True, slots=True)
class Box:
    system: str
    version: str
    client: str
    settings: list[Setting]
    links: list[tuple[str, str]]  # (label, relative href) of the files settings came from
    faults: str
    anomalies: list[Anomaly]
    scenario: str  # "" when the run is no scenario


def _info(test: Mapping[str, Any]) -> Mapping[str, Any]:
    info = test.get("system_info")
    return info if isinstance(info, Mapping) else {}


def system_words(test: Mapping[str, Any] | None) -> tuple[str, str]:
    """(system, version) as test.json recorded them."""
    test = test or {}
    info = _info(test)
    name = str(info.get("name") or test.get("system") or "not recorded")
    version = str(info.get("version") or "version not recorded")
    if isinstance(info.get("metadata"), str):  # a Kafka release's metadata mode
        version += f" ({info['metadata']})"
    return name, version


def client_words(test: Mapping[str, Any] | None) -> str:
    c = _info(test or {}).get("client")
    if not isinstance(c, Mapping):
        return "not recorded"
    extra = [f"{k} {v}" for k, v in c.items() if k not in ("library", "version")]
    return " ".join(str(c[k]) for k in ("library", "version") if c.get(k)) + \
        (f" ({', '.join(extra)})" if extra else "")


def read_properties(path: Path) -> dict[str, str]:
    """key=value lines of a Java properties file (comments and blanks skipped)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _from_files(run_dir: Path, name: str, keys: Sequence[str]) -> tuple[list[Setting],
                                                                        list[tuple[str, str]]]:
    """Each key's effective value across every node's written `name` file."""
    files = sorted((run_dir / "nodes").glob(f"*/{name}"))
    props = {f.parent.name: read_properties(f) for f in files}
    links = [(f"{f.parent.name}/{name}", f.relative_to(run_dir).as_posix()) for f in files]
    if not props:
        return [Setting(name, "", "no node's file was collected")], links
    rows = []
    for k in keys:
        vals: dict[str, list[str]] = {}
        for node, p in props.items():
            vals.setdefault(p.get(k, "not set (default)"), []).append(node)
        if len(vals) == 1:
            rows.append(Setting(name, k, next(iter(vals))))
        else:
            rows.append(Setting(name, k, "; ".join(f"{v} on {', '.join(ns)}"
                                                   for v, ns in vals.items())))
    return rows, links


def safety_settings(test: Mapping[str, Any] | None,
                    run_dir: Path) -> tuple[list[Setting], list[tuple[str, str]]]:
    """The settings that decide safety for this run's system only, as its describe() named
    them; an old run folder without them shows our broker's knobs only if it ran ours."""
    test = test or {}
    info = _info(test)
    rows: list[Setting] = []
    links: list[tuple[str, str]] = []
    files = info.get("safety_files")
    for name, keys in (files.items() if isinstance(files, Mapping) else ()):
        if isinstance(keys, list):
            r, ln = _from_files(run_dir, str(name), [str(k) for k in keys])
            rows += r
            links += ln
    safety = info.get("safety")
    for group, values in (safety.items() if isinstance(safety, Mapping) else ()):
        for k, v in (values.items() if isinstance(values, Mapping) else ()):
            rows.append(Setting(str(group), str(k), plain(v)))
    if "safety" in info or "safety_files" in info:
        return rows, links
    if system_words(test)[0] in ("undertow", "not recorded") and \
            isinstance(test.get("broker"), Mapping):
        rows = [Setting("broker", str(k), plain(v)) for k, v in test["broker"].items()]
    for name in ("server.properties",):  # another system: at least its files, linked
        links += [(f"{f.parent.name}/{name}", f.relative_to(run_dir).as_posix())
                  for f in sorted((run_dir / "nodes").glob(f"*/{name}"))]
    return rows, links


def faults_words(nemesis_ops: Sequence[Mapping[str, Any]], starts: set[str]) -> str:
    """The faults that landed (nemesis completions with `landed`), else those that ran;
    only the verbs that start a fault count (the harness's final heal only heals)."""
    seen: dict[str, tuple[int, set[str], int, int]] = {}
    any_landed = False
    for op in nemesis_ops:
        f = str(op.get("f"))
        if f not in starts:
            continue
        n, nodes, landed, missed = seen.get(f, (0, set(), 0, 0))
        lv = op.get("landed")
        any_landed |= isinstance(lv, bool)
        seen[f] = (n + 1, nodes | set(fault_nodes(op.get("value"))),
                   landed + (lv is True), missed + (lv is False))
    if not seen:
        return "no fault ran"
    parts = []
    for f, (n, nodes, landed, missed) in seen.items():
        where = f" on {', '.join(sorted(nodes))}" if nodes else ""
        said = f"{f} {n} time{'s' if n != 1 else ''}{where}"
        if any_landed:
            said += f" ({landed} landed" + (f", {missed} did not" if missed else "") + ")"
        parts.append(said)
    head = "faults that landed: " if any_landed else "faults that ran (landing not recorded): "
    return head + "; ".join(parts)


def anomaly_list(results: Mapping[str, Any] | None) -> list[Anomaly]:
    counts = (results or {}).get("counts") or {}
    bad = set((results or {}).get("bad_anomaly_types") or [])
    rows = [Anomaly(str(n), int(c), n in bad, define(str(n)))
            for n, c in counts.items() if isinstance(c, int) and c]
    rows.sort(key=lambda a: (not a.bad, -a.count, a.name))
    return rows


def scenario_words(test: Mapping[str, Any] | None, results: Mapping[str, Any] | None) -> str:
    """"kip101-loss expects lost-write: found" (or "missing: ..."); "" for no scenario."""
    name = (test or {}).get("scenario")
    if not isinstance(name, str) or not name:
        return ""
    from harness.scenarios import scenario  # the systems' declarations; only when asked

    try:
        expected = scenario(name).expected
    except Exception:  # an unknown or unloadable scenario: say so
        return f"{name}: its expectations are not known here"
    found = set((results or {}).get("anomaly_types") or [])
    if results is None:
        return f"{name} expects {', '.join(expected) or 'no anomaly'}: not checked"
    if not expected:
        ok = (results or {}).get("valid") is True
        return f"{name} expects no forbidden anomaly: {'none found' if ok else 'found some'}"
    missing = [e for e in expected if e not in found]
    return f"{name} expects {', '.join(expected)}: " + \
        ("found" if not missing else f"missing {', '.join(missing)}")


def verdict_box(test: Mapping[str, Any] | None, results: Mapping[str, Any] | None,
                run_dir: Path, nemesis_ops: Sequence[Mapping[str, Any]],
                starts: set[str]) -> Box:
    system, version = system_words(test)
    settings, links = safety_settings(test, run_dir)
    return Box(system=system, version=version, client=client_words(test), settings=settings,
               links=links, faults=faults_words(nemesis_ops, starts),
               anomalies=anomaly_list(results), scenario=scenario_words(test, results))


def amount_words(results: Mapping[str, Any] | None) -> str:
    """How much was lost, from results.json alone (the index reads no history): the
    checkers' counts of replica-lost-write, else lost-write, against the ok sends."""
    if results is None:
        return "not checked"
    counts = results.get("counts") or {}
    stats = results.get("stats") or {}
    acked = stats.get("sends_ok") if isinstance(stats, Mapping) else None
    of = f" of {acked:,}" if isinstance(acked, int) and not isinstance(acked, bool) else ""
    for name, words in (("replica-lost-write", "on no replica"),
                        ("lost-write", "never read although reads went past them")):
        n = counts.get(name) if isinstance(counts, Mapping) else None
        if isinstance(n, int) and n:
            return f"{n:,}{of} acknowledged writes {words}"
    return "no acknowledged write lost"


def headline(test: Mapping[str, Any] | None, results: Mapping[str, Any] | None,
             verdict: str) -> str:
    """The one line a run is known by, in the report's title and in the results index."""
    system, version = system_words(test)
    return f"{system} {version} · {verdict} · {amount_words(results)}"
