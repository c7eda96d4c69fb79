"""Options owned by the parts: a System, a Workload, a Backend, the nemesis package or the
checkers declare their own as a dataclass.

Each field is one option: its type (the annotation), its default, its help, the values it
refuses (`choices`, or a `check` that says what is wrong) and its command-line flag
(`--<name>` unless it names one). The part names the class as its `options` attribute; the
harness generates `undertow run`'s flags from it (shown under the part's heading in
`--help`), reads the TOML file's `[<part name>]` table with it, validates what was given,
and keeps the values in `TestSpec.options[<part name>]` (test.json's `options`). The part
reads its own back, typed: `KafkaOptions.of(spec)`.

A backend is found by the run's `--backend` name (harness/backends.py), a system or a
workload through harness/registry.py, the nemesis package likewise (always the one named
`NEMESIS_PACKAGE`, "standard": the spec's `nemesis` is the list of faults, so its table is
`[standard]`, test.json's `options.standard`), the checkers' likewise (always the run-file
checker suite, checkers/suite.py `RunFileChecker`, named `CHECKERS`, "checkers": its
table is `[checkers]`, test.json's `options.checkers`; checkers/options.py says what they
choose); past that the five kinds are handled alike.

Parts of one kind may share one options class (the queue and txn workloads): their flags
are listed once, under both names, and set the run's part's options. An option that was
a TestSpec field before its part took it over names that key (`formerly="keys"`,
`"consumer.commit"` for a table's), and harness/spec.py maps a layer's key there to it, so
old TOML files, scenarios and test.json files keep working (a part without that option may
still accept the one value it always has: `formerly_fixed`). A rule between two options
of a part is its class's `refuse()`.

`extra` (`--extra KEY=VALUE`, a TOML `[extra]` table, a scenario's `extra`) still works for
every option, so old files and commands keep working: a key the run's system, workload or
backend declares is taken from it, checked and moved to the part's options; a key none of
them declares is refused (an old test.json's is dropped: harness/spec.py).
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any, Literal, Self

from harness.spec import SpecError

Kind = Literal["system", "workload", "backend", "nemesis", "checkers"]
KINDS: tuple[Kind, ...] = ("system", "workload", "backend", "nemesis", "checkers")
CHECKERS = "checkers"  # the checkers' part: its TOML table and test.json's options key
_META = "undertow.option"


@dataclass(frozen=True, slots=True)
class Meta:
    """What the dataclass field alone cannot say about an option."""

    help: str
    flag: str | None = None  # None: --<name with dashes>; "" for no flag (file and --extra only)
    choices: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None  # what is wrong with a value, or None
    parse: Callable[[str], Any] | None = None  # a command-line string to a value
    metavar: str | None = None
    # where the option was a TestSpec field before its part took it over: a top-level key
    # ("keys") or a table's ("consumer.commit"); old files, scenarios and test.json say so
    formerly: str | None = None


def option(default: Any, help: str, *, flag: str | None = None, choices: Iterable[str] = (),
           check: Callable[[Any], str | None] | None = None,
           parse: Callable[[str], Any] | None = None, metavar: str | None = None,
           formerly: str | None = None) -> Any:
    """A dataclass field that is an option (use as `name: int = option(0, "why")`)."""
    meta = Meta(help, flag, tuple(choices), check, parse, metavar, formerly)
    return field(default=default, metadata={_META: meta})


class _PartOptions:
    kind: typing.ClassVar[Kind]
    # former keys of another part's options (`"broker.truncation"`) that this part has no
    # option for but whose value it always has: an old file or scenario naming that value
    # is accepted (and the key dropped), another value refused naming the part that has it
    formerly_fixed: typing.ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def of(cls, spec: Any) -> Self:
        """The part's options in spec (the defaults when the spec has none for it). Read
        through a class the part's own extends (the queue options of a txn run), only that
        class's fields are taken."""
        own = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        values = spec.options.get(part_name(cls.kind, spec), {})
        return cls(**{k: v for k, v in values.items() if k in own})

    def refuse(self) -> str | None:
        """What is wrong with these options taken together (one against another), or None;
        each alone was checked already. A part that has such a rule overrides this."""
        return None


class SystemOptions(_PartOptions):
    """Base of a System's options dataclass."""

    kind = "system"


class WorkloadOptions(_PartOptions):
    """Base of a Workload's options dataclass."""

    kind = "workload"


class BackendOptions(_PartOptions):
    """Base of a Backend's options dataclass (its class's `options` attribute)."""

    kind = "backend"


class NemesisOptions(_PartOptions):
    """Base of a nemesis package's options dataclass (nemesis/options.py's StandardOptions)."""

    kind = "nemesis"


class CheckerOptions(_PartOptions):
    """Base of the checkers' options dataclass (checkers/options.py's SparkOptions)."""

    kind = "checkers"


def part_name(kind: Kind, spec: Any) -> str:
    """The name of the run's part of that kind: spec.system, spec.workload, spec.backend;
    the nemesis package is always NEMESIS_PACKAGE (spec.nemesis names faults, not it), the
    checkers' part always CHECKERS (the workload names the checkers a run has)."""
    if kind == "nemesis":
        from harness.faultplan import NEMESIS_PACKAGE

        return NEMESIS_PACKAGE
    if kind == "checkers":
        return CHECKERS
    return str(getattr(spec, kind))


def label(kind: str, name: str) -> str:
    """How --help and the errors name a part: `--system kafka`, `the nemesis package standard`,
    `the checkers`."""
    if kind == "checkers":
        return "the checkers"
    return f"the nemesis package {name}" if kind == "nemesis" else f"--{kind} {name}"


@dataclass(frozen=True, slots=True)
class Declared:
    """One option of one part, as the CLI, the TOML reader and the validator see it."""

    kind: Kind
    part: str
    name: str
    type: Any
    default: Any
    meta: Meta

    @property
    def signature(self) -> tuple[Any, ...]:
        """What two parts' options must share to be one option declared alike (one flag
        for both: harness/run_cli.py `flag_parts`; carried over to another system:
        harness/plan_cli.py)."""
        return self.kind, self.name, self.type, self.default, self.meta

    @property
    def flag(self) -> str:
        return self.meta.flag if self.meta.flag is not None else \
            "--" + self.name.replace("_", "-")

    @property
    def where(self) -> str:
        key = f"{self.part}.{self.name}"
        return f"{self.flag} ({key})" if self.flag else key

    @property
    def param(self) -> str:
        """The click parameter's name (an identifier no harness option uses)."""
        return "".join(c if c.isalnum() else "_" for c in f"part_{self.kind}_{self.part}_"
                       f"{self.name}")

    def validate(self, value: Any) -> Any:
        """value when the option takes it, else SpecError naming the option and the fault."""
        base, optional = base_type(self.type)
        if value is None:
            if optional or self.default is None:
                return None
            raise SpecError(f"{self.where}: a value is needed")
        wrong = None
        if base is bool and not isinstance(value, bool):
            wrong = f"expected true or false, got {value!r}"
        elif base is int and (isinstance(value, bool) or not isinstance(value, int)):
            wrong = f"expected an integer, got {value!r}"
        elif base is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                wrong = f"expected a number, got {value!r}"
            else:
                value = float(value)
        elif base is str and isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # `--extra kafka_version=4` reads as a number
        elif base is str and not isinstance(value, str):
            wrong = f"expected a string, got {value!r}"
        if wrong is None and self.meta.choices and value not in self.meta.choices:
            wrong = f"{value!r} is not one of {', '.join(self.meta.choices)}"
        if wrong is None and self.meta.check is not None:
            wrong = self.meta.check(value)
        if wrong is not None:
            raise SpecError(f"{self.where}: {wrong}")
        return value

    def from_text(self, text: str) -> Any:
        """A command-line string as the option's value."""
        if self.meta.parse is not None:
            return self.meta.parse(text)
        base, _ = base_type(self.type)
        if base in (str, int, float, bool):
            return text  # click converted it already
        try:
            return json.loads(text)
        except ValueError:
            return text


def base_type(t: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed); Any for unions of several."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        optional = len(args) < len(typing.get_args(t))
        return (args[0] if len(args) == 1 else Any), optional
    return t, False


def declared(kind: Kind, part_name: str, part: Any) -> list[Declared]:
    """The options part declares (its `options` dataclass), in field order."""
    cls = getattr(part, "options", None)
    if cls is None:
        return []
    if not (isinstance(cls, type) and is_dataclass(cls)):
        raise TypeError(f"{kind} {part_name}: `options` must be a dataclass, got {cls!r}")
    return [Declared(kind, part_name, *row) for row in _fields_of(cls)]


@functools.cache
def _fields_of(cls: type[Any]) -> tuple[tuple[str, Any, Any, Meta], ...]:
    """(name, type, default, meta) of each option of the dataclass, read once."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        meta = f.metadata.get(_META)
        if meta is None:
            raise TypeError(f"{cls.__name__}: field {f.name} is not an option(...)")
        out.append((f.name, hints[f.name], _default(f), meta))
    return tuple(out)


def _default(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def resolve(kind: Kind, part_name: str, part: Any,
            layers: list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> dict[str, Any]:
    """The part's option values from layers (later wins): each (where, extra, own table),
    the own table's unknown keys refused; extra's keys that the part does not declare are
    left alone. Every value checked; the defaults fill the rest."""
    opts = {d.name: d for d in declared(kind, part_name, part)}
    values = {name: d.default for name, d in opts.items()}
    for where, extra, own in layers:
        for k, v in extra.items():
            if k in opts:
                values[k] = v
        for k, v in own.items():
            key = k.replace("-", "_")
            if key not in opts:
                raise SpecError(f"{where} [{part_name}]: unknown key {k!r}; known: "
                                f"{', '.join(sorted(opts)) or 'none'}")
            values[key] = v
    out = {name: opts[name].validate(list(v) if isinstance(v, tuple) else v)
           for name, v in values.items()}
    refuse = getattr(part.options(**out), "refuse", None) if out else None
    if refuse is not None and (wrong := refuse()) is not None:
        raise SpecError(wrong)  # it names the options: `--key-pool 4: must be at least ...`
    return out


def non_default(kind: Kind, part_name: str, part: Any,
                values: Mapping[str, Any]) -> dict[str, Any]:
    """The values that differ from the defaults (test.json's `extra` keeps them, as it
    did when they were extra knobs; an option that was a TestSpec field never was one)."""
    return {d.name: values[d.name] for d in declared(kind, part_name, part)
            if d.name in values and values[d.name] != d.default and d.meta.formerly is None}


def names(kind: Kind) -> list[str]:
    """Every part's name of that kind: the backends' table, the checkers' one part, else the
    registry."""
    if kind == "checkers":
        return [CHECKERS]
    if kind == "backend":
        from harness.backends import CLASSES

        return list(CLASSES)
    from harness import registry

    return registry.names(kind)


def part(kind: Kind, name: str) -> Any:
    """The part named (a backend's class, the checker suite's); SpecError naming the option
    when unknown."""
    if kind == "checkers":
        if name != CHECKERS:
            raise SpecError(f"the checkers' options: {name!r} is not known (known: {CHECKERS})")
        from checkers.suite import RunFileChecker  # the run-file checks, Spark's options

        return RunFileChecker
    if kind == "backend":
        from harness.backends import backend_class

        return backend_class(name)
    from harness import registry

    return registry.get(kind, name)


def registered() -> list[tuple[Kind, str, Any]]:
    """Every system, workload, backend, nemesis package and the checkers, when they import
    (one that does not is left out here: naming it with --system says why)."""
    out = []
    for kind in KINDS:
        for name in names(kind):
            try:
                out.append((kind, name, part(kind, name)))
            except (ImportError, SpecError):
                continue
    return out
