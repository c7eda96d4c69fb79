"""`undertow plan RUN_DIR`: a run's settings and its recorded fault plan as an experiment file.

Why: to ask whether an outage is the system's or the faults', run another system (or the
same one again) under the very faults a run had: `undertow plan RUN --system kafka -o
plan.toml`, then `undertow run --config plan.toml` (options given on the command line
win, e.g. `--kafka-version 4.4.0`). The plan is test.json's `nemesis_plan`: each step at
its offset, a node name staying that node, a role ("the leader of key 3") resolved again
when the replay injects it (nemesis.replay).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from harness import options as o
from harness import registry
from harness.runfiles import TEST_JSON
from harness.spec import SpecError, load_test_json
from nemesis import replay


@click.command("plan")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--system", default=None,
              help="Write the experiment for this system instead of the run's (the options "
                   "both systems declare alike, such as --acks, carry over; the run's "
                   "system's others are left out and the new one's take their defaults).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the file here (default: standard output).")
def plan(run_dir: Path, system: str | None, output: Path | None) -> None:
    """Write a run's settings and recorded fault plan as a TOML experiment file, which
    `undertow run --config FILE` replays."""
    try:
        spec = load_test_json(run_dir / TEST_JSON)
    except (SpecError, ValueError) as e:
        raise click.UsageError(f"{run_dir}: {e}") from e
    if not spec.nemesis_plan:
        raise click.UsageError(f"{run_dir / TEST_JSON}: the run recorded no fault plan "
                               "(nemesis_plan): it ran no faults")
    steps = replay.steps_from_json(spec.nemesis_plan, str(run_dir / TEST_JSON))
    run_id = run_dir.resolve().name
    header = f"replay of {run_id} (system {spec.system}, seed {spec.seed}): {len(steps)} steps"
    if system is not None and system != spec.system:
        known = registry.names("system")
        if system not in known:
            raise click.BadParameter(f"{system!r} is not a system; known: {', '.join(known)}",
                                     param_hint="--system")
        header += f", on {system}"
        options = {k: v for k, v in spec.options.items() if k != spec.system}
        if shared := _shared_options(spec.system, system, spec.options.get(spec.system, {})):
            options[system] = shared
        spec = replace(spec, system=system, options=options)
    text = replay.experiment_toml(spec, steps, header + "\nundertow run --config FILE")
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"wrote {output}: undertow run --config {output}", err=True)


def _shared_options(old: str, new: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The old system's option values that the new one declares alike (the replication and
    producer settings both systems take): they carry over to the new system."""
    try:
        theirs = {d.signature for d in o.declared("system", old, registry.get("system", old))}
    except SpecError:  # a system this installation lacks: nothing is known to be shared
        return {}
    return {d.name: values[d.name]
            for d in o.declared("system", new, registry.get("system", new))
            if d.name in values and d.signature in theirs}
