"""TestSpec: the whole test as data, built from defaults < scenario < TOML file < CLI options.

Saved as test.json in the run folder, and loadable from it, so a run can be
repeated exactly (`--seed` included).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

BACKENDS = ("local", "docker", "ssh")
# which Spark checks (checkers.spark_server says what each means): the checkers' option
# (checkers/options.py), `undertow check`'s and `undertow nightly`'s --spark
SPARK_CHOICES = ("auto", "cold", "warm")
READERS = ("auto", "spark", "driver")  # who reads history.jsonl: checkers.sparkread says
DEFAULT_WORKLOAD = "queue"  # a run without --workload; the report measures availability by it
# TestSpec's tables before the systems took their settings over (systems/settings.py):
# test.json still writes them, from the run's system's options, so its readers (an old
# run's verdict box, scripts) find the settings where they always were
FORMER_TABLES = ("broker", "producer")


class SpecError(ValueError):
    """A spec that cannot run: says which option or file key is wrong and why."""


@dataclass(frozen=True, slots=True)
class TestSpec:
    """Everything a run needs to know; only the CLI builds it from options. Its fields are
    the harness's own; each part's own options sit in `options`, read back typed by the
    part (`QueueOptions.of(spec)`; the replication and producer settings are the system's:
    `KafkaOptions.of(spec).acks`)."""

    name: str = "queue-kill-partition"
    system: str = "undertow"  # the system under test: a name in harness.registry
    backend: str = "local"
    node_count: int = 3
    hosts: tuple[str, ...] = ()  # ssh backend: HOST[:PORT] per node
    cluster_file: str | None = None  # ssh backend: ducktape-style cluster.json
    workload: str = DEFAULT_WORKLOAD
    # the faults (names the nemesis package knows); how they are scheduled and aimed is the
    # package's own options (nemesis/options.py: --nemesis-interval, --nemesis-targets, ...)
    nemesis: tuple[str, ...] = ("kill", "partition")
    time_limit_s: float = 60.0
    concurrency: int = 10
    seed: int = 0
    scenario: str | None = None
    results_dir: str = "results"
    test_count: int = 1
    # the system's, workload's, backend's, nemesis package's and checkers' own options, by
    # part name (harness/options.py; which Spark checks is the checkers': checkers/options.py);
    # an `extra` key in a layer is one of these, moved here
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # a recorded fault plan to replay as it is (nemesis/replay.py), instead of one drawn
    # from the seed; test.json always records the plan a run used under this key
    nemesis_plan: tuple[Mapping[str, Any], ...] | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        if self.hosts:
            return tuple(f"n{i + 1}" for i in range(len(self.hosts)))
        return tuple(f"n{i + 1}" for i in range(self.node_count))

    def validate(self) -> TestSpec:
        """Raise SpecError naming the first thing that cannot work."""
        if self.backend not in BACKENDS:
            raise SpecError(f"--backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")
        if self.node_count < 1:
            raise SpecError(f"--nodes: must be at least 1, got {self.node_count}")
        if self.backend == "ssh" and not self.hosts and not self.cluster_file:
            raise SpecError("--backend ssh needs --node HOST[:PORT] (repeated) or --cluster-file")
        for option, value in (("--time-limit", self.time_limit_s),
                              ("--concurrency", self.concurrency)):
            if value <= 0:
                raise SpecError(f"{option}: must be positive, got {value:g}")
        return self

    def to_json(self) -> dict[str, Any]:
        """The spec as test.json holds it; `extra` also shows the parts' options that differ
        from their defaults, as it did when they were extra knobs (readers of test.json
        find them where they always were), and the `broker` and `producer` tables hold the
        system's settings that were TestSpec's (`FORMER_TABLES`), for the same readers."""
        return {**dataclasses.asdict(self), **_former_tables(self),
                "extra": _options_as_extra(self)}

    def save(self, path: Path, **more: Any) -> None:
        """test.json at path: the spec, and `more` beside it (harness.runfiles writes it)."""
        from harness.runfiles import save_test_json

        save_test_json(path, {**self.to_json(), **more})


def _coerce(cls: type[Any], data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check keys against cls's fields and turn lists into tuples; errors name `where`."""
    names = {f.name: f for f in fields(cls)}
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = k.replace("-", "_")
        if key not in names:
            raise SpecError(f"{where}: unknown key {k!r}; known: {', '.join(sorted(names))}")
        out[key] = tuple(v) if isinstance(v, list) else v
    return out


def build_spec(*layers: Mapping[str, Any], where: tuple[str, ...] = (),
               recorded: bool = False) -> TestSpec:
    """Merge layers (later wins): each a flat mapping of TestSpec fields, the run's
    system's, workload's, backend's, nemesis package's and checkers' own option tables
    (under their names, or in an `options` table), `extra` keys of those options, and the
    keys that were TestSpec fields before a part took them over (`keys`, a `[consumer]`
    table, `spark`, the `broker` and `producer` tables: `_formerly`). An `extra` or former
    key no part of the run declares is refused, unless `recorded` (an old test.json's knobs
    are dropped, so old runs still load)."""
    merged: dict[str, Any] = {}
    defaults = {f.name: f.default for f in fields(TestSpec)}
    chosen = {"system": str(defaults["system"]), "workload": str(defaults["workload"]),
              "backend": str(defaults["backend"])}
    for layer in layers:
        chosen.update({k: str(layer[k]) for k in chosen if k in layer})
    # a layer's `nemesis` is its faults, not the part; the checkers' part is always the one
    chosen.update(nemesis=_part_name("nemesis"), checkers=_part_name("checkers"))
    parts: list[tuple[str, Mapping[str, Any], dict[str, Mapping[str, Any]]]] = []
    for i, layer in enumerate(layers):
        label = where[i] if i < len(where) else f"layer {i}"
        layer = dict(layer)
        if isinstance(layer.get("nemesis"), Mapping):  # `nemesis` is the faults' list
            raise SpecError(f"{label}: [nemesis] must be the list of faults, e.g. [\"kill\"]; "
                            f"the nemesis package's options go in [{chosen['nemesis']}]")
        own = _part_tables(layer, chosen, label)
        extra = layer.pop("extra", None) or {}
        if not isinstance(extra, Mapping):
            raise SpecError(f"{label}: [extra] must be a table, got {extra!r}")
        for name, t in _formerly(layer, chosen, label, recorded).items():
            own[name] = {**t, **own.get(name, {})}  # the part's own table wins
        parts.append((label, extra, own))
        merged.update(_coerce(TestSpec, layer, label))
    options, claimed = _resolve_options(chosen, parts)
    if not recorded:
        for label, extra, _ in parts:
            for k in extra:
                if k not in claimed:
                    raise SpecError(_unclaimed(label, str(k), chosen))
    try:
        spec = TestSpec(**merged, options=options)
    except TypeError as e:  # pragma: no cover - _coerce already checked the names
        raise SpecError(str(e)) from e
    return spec.validate()


_FIELDS = frozenset(f.name for f in fields(TestSpec))


def _part_name(kind: Any) -> str:
    """The nemesis package's or the checkers' part: one, whatever the spec says."""
    from harness.options import part_name

    return part_name(kind, None)


def _part_tables(layer: dict[str, Any], chosen: Mapping[str, str],
                 label: str) -> dict[str, Mapping[str, Any]]:
    """Pop the layer's part tables (`[kafka]`, or `options.kafka`) and return them by part
    name; a table of a part the run does not use is refused, naming its options."""
    from harness import options as o

    own: dict[str, Mapping[str, Any]] = {}
    for name, t in dict(layer.pop("options", None) or {}).items():
        own[str(name)] = {**own.get(str(name), {}), **dict(t)}
    for kind in o.KINDS:
        for name in o.names(kind):
            if name in layer and name not in _FIELDS:
                t = layer.pop(name)
                if not isinstance(t, Mapping):
                    raise SpecError(f"{label}: [{name}] must be a table, got {t!r}")
                own[name] = {**own.get(name, {}), **t}
    for name, t in own.items():
        if name in chosen.values():
            continue
        kinds = [k for k in o.KINDS if name in o.names(k)]
        if not kinds:
            raise SpecError(f"{label}: options of {name!r}, which is no system, workload or "
                            "backend (nor nemesis package, nor the checkers)")
        kind = kinds[0]
        flags = {d.name: d.flag or d.name for d in o.declared(kind, name, o.part(kind, name))}
        given = ", ".join(flags.get(k.replace("-", "_"), k) for k in t)
        raise SpecError(f"{label}: {given}: only {o.label(kind, name)} has them, not "
                        f"{chosen[kind]}")
    return own


def _formerly(layer: dict[str, Any], chosen: Mapping[str, str], label: str,
              recorded: bool) -> dict[str, dict[str, Any]]:
    """Pop the layer's keys that were TestSpec fields before a part of the run took them
    over (each option says where it was: `keys`, or `consumer.commit` for a key of the
    old `[consumer]` table) and return them as that part's options, by part name. Old TOML
    files, scenarios, build_spec callers and test.json files keep working. A former key
    the run's parts do not take is refused naming the part that has it (dropped when
    `recorded`); other keys are left to TestSpec's own check."""
    from harness import options as o

    if all(k in _FIELDS for k in layer):
        return {}
    taken: dict[str, tuple[str, str]] = {}  # former name -> (part name, option)
    fixed: dict[str, Any] = {}  # former name -> the value a part of the run always has
    for kind in o.KINDS:
        try:
            part = o.part(kind, chosen[kind])
        except SpecError:  # an unknown part: assembly says so, with the known names
            continue
        for d in o.declared(kind, chosen[kind], part):
            if d.meta.formerly:
                taken[d.meta.formerly] = (chosen[kind], d.name)
        fixed.update(getattr(getattr(part, "options", None), "formerly_fixed", {}))
    known = set(taken)
    tables = {n.partition(".")[0] for n in known if "." in n}
    if any(k not in known and k not in tables for k in layer if k not in _FIELDS):
        known |= _former_names()  # another part's, or no part's: looked for only then
        tables = {n.partition(".")[0] for n in known if "." in n}
    old: dict[str, Any] = {}
    for k in [k for k in layer if k not in _FIELDS and (k in known or k in tables)]:
        value = layer.pop(k)
        if k not in tables:
            old[k] = value
        elif not isinstance(value, Mapping):
            raise SpecError(f"{label}: [{k}] must be a table, got {value!r}")
        else:
            old.update({f"{k}.{str(t).replace('-', '_')}": v for t, v in value.items()})
    out: dict[str, dict[str, Any]] = {}
    for key, value in old.items():
        if key in fixed and key not in taken and value == fixed[key]:
            continue  # what the part always does, as an old file may say (Kafka's truncation)
        if key in taken:
            name, option = taken[key]
            out.setdefault(name, {})[option] = value
        elif not recorded:
            raise SpecError(_not_taken(label, key, chosen))
    return out


def _former_names() -> frozenset[str]:
    """Every registered part's former TestSpec keys (`keys`, `consumer.commit`; looked at
    only for a key that is neither a TestSpec field nor taken by the run's parts)."""
    from harness import options as o

    return frozenset(d.meta.formerly for kind, name, part in o.registered()
                     for d in o.declared(kind, name, part) if d.meta.formerly)


def _not_taken(label: str, key: str, chosen: Mapping[str, str]) -> str:
    """Why a former key is refused: the parts that have it, not the run's."""
    from harness import options as o

    owners = [(kind, d) for kind, name, part in o.registered()
              for d in o.declared(kind, name, part) if d.meta.formerly == key]
    if not owners:
        return f"{label}: unknown key {key!r}"
    kind, d = owners[0]
    parts = " or ".join(o.label(k, x.part) for k, x in owners)
    return f"{label}: {d.flag or key}: only {parts} has it, not {chosen[kind]}"


def _resolve_options(chosen: Mapping[str, str],
                     parts: list[tuple[str, Mapping[str, Any], dict[str, Mapping[str, Any]]]]
                     ) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The chosen system's, workload's, backend's, nemesis package's and checkers' options,
    and the extra keys they took."""
    from harness import options as o

    options: dict[str, dict[str, Any]] = {}
    claimed: set[str] = set()
    for kind in o.KINDS:
        name = chosen[kind]
        try:
            part = o.part(kind, name)
        except SpecError:  # an unknown part: assembly says so, with the known names
            continue
        values = o.resolve(kind, name, part, [(label, extra, own.get(name, {}))
                                              for label, extra, own in parts])
        if values:
            options[name] = values
            claimed |= set(values)
    return options, claimed


def _unclaimed(label: str, key: str, chosen: Mapping[str, str]) -> str:
    """Why an extra key (or a flag that several parts share) is refused: the parts that
    have it, or that none has."""
    from harness import options as o

    owners = [d for kind, name, part in o.registered() for d in o.declared(kind, name, part)
              if d.name == key]
    if owners:
        d = owners[0]
        parts = " or ".join(o.label(x.kind, x.part) for x in owners if x.kind == d.kind)
        flag = f" ({d.flag})" if d.flag else ""
        return f"{label}: extra {key}: only {parts} has it, not {chosen[d.kind]}{flag}"
    return f"{label}: extra {key!r}: no system, workload or backend declares it (nor the " \
        "nemesis package, nor the checkers)"


def _options_as_extra(spec: TestSpec) -> dict[str, Any]:
    from harness import options as o

    out: dict[str, Any] = {}
    for kind in o.KINDS:
        name = o.part_name(kind, spec)
        if name in spec.options:
            out.update(o.non_default(kind, name, o.part(kind, name), spec.options[name]))
    return out


def _former_tables(spec: TestSpec) -> dict[str, dict[str, Any]]:
    """The run's parts' options that were in TestSpec's `FORMER_TABLES`, as those tables."""
    from harness import options as o

    out: dict[str, dict[str, Any]] = {t: {} for t in FORMER_TABLES}
    for kind in o.KINDS:
        name = o.part_name(kind, spec)
        if name not in spec.options:
            continue
        for d in o.declared(kind, name, o.part(kind, name)):
            table, _, key = (d.meta.formerly or "").rpartition(".")
            if table in out and d.name in spec.options[name]:
                out[table][key] = spec.options[name][d.name]
    return out


def load_toml(path: Path) -> dict[str, Any]:
    """A TOML experiment file: TestSpec keys at top level, each part's own options under its
    name ([queue], [undertow], [kafka], [standard], [checkers], ...); the tables that were
    TestSpec's ([broker], [producer], [consumer]) still work."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError as e:
        raise SpecError(f"--config: no such file {path}") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"--config {path}: {e}") from e


def load_test_json(path: Path) -> TestSpec:
    """The spec a run was made with, from its test.json (unknown keys are ignored; an old
    one's keys that a part took over since are that part's options: `_formerly`); SpecError
    when there is none, HistoryError (a ValueError) when it cannot be read."""
    from harness.runfiles import read_test_json

    data = read_test_json(path)
    if data is None:
        raise SpecError(f"{path}: no such file")
    former = _former_names()
    keep = {f.name for f in fields(TestSpec)} | {"extra"} | former | \
        {n.partition(".")[0] for n in former}
    return build_spec({k: v for k, v in data.items() if k in keep}, where=(str(path),),
                      recorded=True)
