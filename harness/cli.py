"""`undertow`: the command line. Each command lives beside the part it drives.

Command modules keep their heavy imports (pyspark, docker, paramiko) inside the
command function, so `undertow --help` and `undertow heal` start at once.
"""

from __future__ import annotations

import importlib

import click

# command name -> "module:attribute" of a click.Command; loaded only when used.
COMMANDS: dict[str, str] = {
    "run": "harness.run_cli:run",
    "check": "checkers.cli:check",
    "report": "harness.report.cli:report",
    "serve": "harness.report.cli:serve",
    "trends": "harness.report.cli:trends",
    "heal": "harness.run_cli:heal",
    "image": "harness.image_cli:image",
    "scenarios": "harness.scenarios_cli:scenarios",
    "shrink": "harness.shrink_cli:shrink",
    "spark": "checkers.spark_cli:spark",
    "matrix": "harness.matrix_cli:matrix",
    "plan": "harness.plan_cli:plan",
}


HELP: dict[str, str] = {
    "run": "Run an experiment: cluster up, workload + nemesis, check, report.",
    "check": "Check run folders (history.jsonl, replicas.jsonl) and write results.json.",
    "report": "Render report.html for a run folder.",
    "serve": "Serve the results folder and its index on localhost.",
    "trends": "Runs side by side: a row per scenario, a column per run, unstable ones marked.",
    "heal": "Undo whatever a dead run left behind (processes, proxies, containers, rules).",
    "image": "Build the docker backend's images: the base and a system's node image.",
    "scenarios": "List the named scenarios and their settings.",
    "shrink": "Shrink a failing run's fault plan to the smallest that still fails.",
    "spark": "A warm Spark for many checks: start, status, stop (cold local by default).",
    "matrix": "Scenarios x releases x seeds: one run folder each, one comparison page.",
    "plan": "A run's settings and fault plan as an experiment file, to replay elsewhere.",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List every command, without importing any (so help is instant and never fails)."""
        rows = [(name, HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:  # a part not built yet: say so plainly
            raise click.ClickException(f"`undertow {cmd_name}` is not available: {e}") from e
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="undertow")
def main() -> None:
    """Undertow: fault injection and checking for Kafka-style replicated logs."""


if __name__ == "__main__":
    main()
