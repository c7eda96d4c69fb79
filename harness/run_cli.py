"""`undertow run` and `undertow heal`.

The spec is built from layers, later winning: defaults < the scenario's settings
< the TOML file (--config) < the options given on the command line (only those
actually given, by click's ParameterSource).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from harness.options import Declared, base_type, declared, label, registered
from harness.runfiles import EXIT_USAGE
from harness.spec import SpecError, TestSpec, build_spec, load_toml

if TYPE_CHECKING:
    from harness.core import Stopper

# option name -> spec field (the replication and producer settings are the systems' own
# options now, their flags generated with the other parts': systems/settings.py)
FIELDS: dict[str, str] = {
    "system": "system", "backend": "backend", "nodes": "node_count", "node": "hosts",
    "cluster_file": "cluster_file",
    "workload": "workload", "nemesis": "nemesis",
    "time_limit": "time_limit_s",
    "concurrency": "concurrency", "seed": "seed", "scenario": "scenario",
    "results_dir": "results_dir", "test_count": "test_count",
}


def part_options() -> list[Declared]:
    """Every registered system's, workload's, backend's, nemesis package's and the checkers'
    own options (harness/options.py)."""
    out = [d for kind, name, part in registered() for d in declared(kind, name, part)]
    flag_parts(out)  # refuses a flag that two parts declare differently
    return out


def flag_parts(options: list[Declared]) -> dict[str, tuple[Declared, tuple[str, ...]]]:
    """Each flag -> its option and the parts that declare it. Parts of one kind may share
    an option, declared alike (the queue and txn workloads share one options class): the
    flag sets it for whichever of them the run uses. Any other repeat is refused."""
    seen: dict[str, tuple[Declared, tuple[str, ...]]] = {}
    for d in options:
        if not d.flag:
            continue
        if d.flag in seen:
            other, parts = seen[d.flag]
            if other.signature != d.signature:
                raise SpecError(f"{d.flag}: declared by {other.kind} {other.part} and by "
                                f"{d.kind} {d.part}")
            seen[d.flag] = (other, (*parts, d.part))
        else:
            seen[d.flag] = (d, (d.part,))
    return seen


def _click_option(d: Declared) -> click.Option:
    """The command-line option of a part's option (no default: only what is typed counts)."""
    base, _ = base_type(d.type)
    shown = ",".join(d.default) if isinstance(d.default, tuple | list) else d.default
    help = f"{d.meta.help} [default: {shown}]" if d.default is not None else d.meta.help
    if base is bool:
        name = d.flag[2:]
        return click.Option([f"--{name}/--no-{name}", d.param], default=None, help=help)
    kind: Any = click.Choice(d.meta.choices) if d.meta.choices else \
        {int: click.INT, float: click.FLOAT}.get(base, click.STRING)
    return click.Option([d.flag, d.param], type=kind, default=None, help=help,
                        metavar=d.meta.metavar)


class RunCommand(click.Command):
    """`undertow run`: the harness's options, then each part's own, generated from the
    parts' declarations; --help shows each part's under its own heading."""

    def parts(self, ctx: click.Context) -> list[tuple[Declared, tuple[str, ...], click.Option]]:
        """The parts' options, one per flag (with the parts that share it), made once per
        invocation (a part registered since is seen)."""
        key = f"undertow.parts.{id(self)}"
        if key not in ctx.meta:
            try:
                ctx.meta[key] = [(d, parts, _click_option(d))
                                 for d, parts in flag_parts(part_options()).values()]
            except SpecError as e:
                raise BadUsage(str(e)) from e
        parts: list[tuple[Declared, tuple[str, ...], click.Option]] = ctx.meta[key]
        return parts

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        own = super().get_params(ctx)
        return [*own[:-1], *(o for _, _, o in self.parts(ctx)), *own[-1:]]  # --help last

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        part_params = {id(o) for _, _, o in self.parts(ctx)}
        rows = [r for p in self.get_params(ctx) if id(p) not in part_params
                and (r := p.get_help_record(ctx)) is not None]
        with formatter.section("Options"):
            formatter.write_dl(rows)
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for d, parts, o in self.parts(ctx):
            if (r := o.get_help_record(ctx)) is not None:
                groups.setdefault((d.kind, ", ".join(parts)), []).append(r)
        for (kind, part), rows in groups.items():
            with formatter.section(f"Options of {label(kind, part)}"):
                formatter.write_dl(rows)


class BadUsage(click.ClickException):
    exit_code = EXIT_USAGE


def _comma_list(value: str) -> tuple[str, ...]:
    if value.strip().lower() in ("none", ""):
        return ()
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _cli_layer(ctx: click.Context, params: dict[str, Any]) -> dict[str, Any]:
    """Only the options the user typed (not click's defaults) as a spec layer."""
    layer: dict[str, Any] = {}
    for name, target in FIELDS.items():
        if ctx.get_parameter_source(name) != click.core.ParameterSource.COMMANDLINE:
            continue
        value = params[name]
        if name == "nemesis":
            value = _comma_list(value)
        elif name == "node":
            value = tuple(value)
        elif name in ("results_dir", "cluster_file"):
            value = str(value)
        layer[target] = value
    for d, parts in flag_parts(part_options()).values():  # the parts' own options
        if ctx.get_parameter_source(d.param) != click.core.ParameterSource.COMMANDLINE:
            continue
        value = d.from_text(params[d.param]) if isinstance(params[d.param], str) \
            else params[d.param]
        # under the part's name; one that parts share goes to whichever the run uses
        layer.setdefault(d.part if len(parts) == 1 else "extra", {})[d.name] = value
    return layer


def _scenario_layer(name: str) -> dict[str, Any]:
    from harness.scenarios import scenario

    settings = dict(scenario(name).settings)
    return {**settings, "scenario": name}


def parse_extra(items: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """`--extra KEY=VALUE` options as a part's options by key (a VALUE that reads as JSON
    is that value: 1, true; anything else a string: 4.0.2)."""
    import json

    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SpecError(f"--extra {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def build_run_spec(ctx: click.Context, params: dict[str, Any]) -> TestSpec:
    """Defaults < scenario < TOML < command line; a random seed when none is given."""
    cli = _cli_layer(ctx, params)
    toml: dict[str, Any] = {}
    if params.get("config") is not None:
        toml = load_toml(Path(params["config"]))
        if "nemesis" in toml and isinstance(toml["nemesis"], str):
            toml["nemesis"] = list(_comma_list(toml["nemesis"]))
    layers: list[dict[str, Any]] = []
    where: list[str] = []
    scenario = cli.get("scenario") or toml.get("scenario")
    if scenario:
        layers.append(_scenario_layer(str(scenario)))
        where.append(f"scenario {scenario}")
    if toml:
        layers.append(toml)
        where.append(f"--config {params['config']}")
    if params.get("extra"):  # --extra KEY=VALUE (a flag given for the same option wins)
        cli["extra"] = {**parse_extra(params["extra"]), **cli.get("extra", {})}
    layers.append(cli)  # each layer's extra keys are options, layered one by one
    where.append("command line")
    if not any("seed" in layer for layer in layers):
        layers.append({"seed": random.SystemRandom().randrange(2**31)})
        where.append("random seed")
    return build_spec(*layers, where=tuple(where))


@click.command("run", cls=RunCommand)
@click.option("--system", default="undertow", show_default=True,
              help="The system under test (a registered name: undertow, ...).")
@click.option("--backend", type=click.Choice(["local", "docker", "ssh"]), default="local",
              show_default=True, help="Where the nodes run.")
@click.option("--nodes", type=int, default=3, show_default=True,
              help="Node count (local and docker backends).")
@click.option("--node", multiple=True, metavar="HOST[:PORT]",
              help="An ssh node; repeat for each.")
@click.option("--cluster-file", type=click.Path(dir_okay=False),
              help="ssh backend: a ducktape-style cluster.json.")
@click.option("--workload", default="queue", show_default=True,
              help="What the clients do (a registered name: queue, txn, ...).")
@click.option("--nemesis", default="kill,partition", show_default=True,
              help="Comma list of faults (kill, pause, partition, slow, lossy, clock, "
                   "lose-unflushed, the systems' sequences, a plug-in's own), or none; their "
                   "shaping: the nemesis package's options.")
@click.option("--time-limit", type=float, default=60.0, show_default=True,
              help="Seconds of workload and faults (before the final heal and reads).")
@click.option("--concurrency", type=int, default=10, show_default=True)
@click.option("--extra", multiple=True, metavar="KEY=VALUE",
              help="A system's, workload's or backend's option by its key "
                   "(kafka_version=4.0.2, ssh_user=...), repeatable, over the scenario's.")
@click.option("--seed", type=int, help="Seed of every random choice (default: random, printed).")
@click.option("--scenario", help="A named scenario (`undertow scenarios` lists them).")
@click.option("--config", type=click.Path(dir_okay=False), help="A TOML experiment file.")
@click.option("--results-dir", type=click.Path(file_okay=False), default="results",
              show_default=True)
@click.option("--test-count", type=int, default=1, show_default=True,
              help="Run the test this many times (seeds seed, seed+1, ...).")
@click.option("--print-spec", is_flag=True, help="Print the spec as JSON and exit.")
@click.pass_context
def run(ctx: click.Context, /, **params: Any) -> None:
    """Run an experiment: cluster up, workload + nemesis, final reads, check, report."""
    from harness.core import Stopper

    stopper = Stopper()  # Ctrl-C from here on ends on the interrupted path (exit 130)
    with stopper.installed():
        sys.exit(_run(ctx, params, stopper))


def _run(ctx: click.Context, params: dict[str, Any], stopper: Stopper) -> int:
    try:
        spec = build_run_spec(ctx, params)
        if spec.test_count < 1:
            raise SpecError("--test-count must be at least 1")
    except SpecError as e:
        raise BadUsage(str(e)) from e
    if params.get("print_spec"):
        import json

        click.echo(json.dumps(spec.to_json(), indent=1, default=str))
        return 0
    from harness import core
    from harness.runfiles import EXIT_INTERRUPTED, worst_exit_code
    from harness.store import test_name

    try:
        core.check_startable(spec)
    except SpecError as e:
        raise BadUsage(str(e)) from e
    from checkers.options import SparkOptions
    from checkers.spark_server import SparkError, resolve

    spark = SparkOptions.of(spec)  # the checkers' options
    try:  # a named Spark that cannot be had is said now, not after the run
        resolve(spark.spark, spark.spark_master, spark.spark_remote)
    except SparkError as e:
        raise BadUsage(str(e)) from e
    click.echo(f"undertow run: {test_name(spec)}, "
               f"{spec.system} on {len(spec.nodes)} nodes ({spec.backend}), nemesis "
               f"{','.join(spec.nemesis) or 'none'}, {spec.time_limit_s:g} s, seed {spec.seed}",
               err=True)
    codes: list[int] = []
    for i in range(spec.test_count):
        if stopper.requested.is_set():
            click.echo("INTERRUPTED (before the run started)")
            codes.append(EXIT_INTERRUPTED)
            break
        one = spec if i == 0 else _with_seed(spec, spec.seed + i)
        watch = core.Watch()
        try:
            with _progress(watch):
                outcome = core.run(one, watch=watch, stopper=stopper)
        except SpecError as e:
            raise BadUsage(str(e)) from e
        click.echo(outcome.summary())
        codes.append(outcome.exit_code)
        if outcome.interrupted:
            break
    return worst_exit_code(codes)


def _with_seed(spec: TestSpec, seed: int) -> TestSpec:
    from dataclasses import replace

    return replace(spec, seed=seed)


class _progress:
    """A live status line on stderr while the run goes on (only on a terminal)."""

    def __init__(self, watch: Any) -> None:
        self.watch = watch
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> _progress:
        from rich.console import Console

        self.console = Console(stderr=True)
        if self.console.is_terminal:
            self.thread = threading.Thread(target=self._loop, name="progress", daemon=True)
            self.thread.start()
        return self

    def line(self) -> str:
        w = self.watch
        counts, faults = w.stats.snapshot()
        if w.main_started_s is not None and w.phase == "running":
            t = f"{min(time.monotonic() - w.main_started_s, w.time_limit_s):5.1f}/" \
                f"{w.time_limit_s:g} s"
        else:
            t = f"{time.monotonic() - w.started_s:5.1f} s"
        ops = (f"ok {counts.get('ok', 0)} fail {counts.get('fail', 0)} "
               f"info {counts.get('info', 0)}")
        f = "; ".join(f"{k} {v}" for k, v in sorted(faults.items())) or "none"
        return f"[{w.phase}] {t} | {ops} | faults: {f}"

    def _loop(self) -> None:
        from rich.live import Live
        from rich.text import Text

        with Live(Text(self.line()), console=self.console, transient=True,
                  refresh_per_second=4) as live:
            while not self.stop.wait(0.25):
                live.update(Text(self.line()))

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=2.0)


@click.command("heal")
@click.option("--force", is_flag=True,
              help="Also undo what runs still alive made (stops them from working).")
def heal(force: bool) -> None:
    """Undo whatever dead runs left behind: broker processes, proxies, containers, rules."""
    from harness.leftovers import heal_all

    done = heal_all(force=force)
    for line in done:
        click.echo(line)
    click.echo(f"healed {len(done)} item(s)" if done else "nothing to heal")
