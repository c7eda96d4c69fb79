"""`undertow scenarios`: the named scenarios, their settings and what they must find."""

from __future__ import annotations

import json

import click

from harness.scenarios import all_scenarios


@click.command("scenarios")
@click.option("--json", "as_json", is_flag=True, help="Print the scenarios as JSON.")
def scenarios(as_json: bool) -> None:
    """List the named scenarios (undertow run --scenario NAME) with their settings."""
    SCENARIOS = all_scenarios()
    if as_json:
        click.echo(json.dumps({n: {"description": s.description, "settings": s.settings,
                                   "expected": list(s.expected),
                                   "fixed_by": list(s.fixed_by)}
                               for n, s in SCENARIOS.items()}, indent=1, default=list))
        return
    for name, s in SCENARIOS.items():
        click.echo(f"[{s.settings.get('system', 'undertow')}] ", nl=False)
        must = ", ".join(s.expected) if s.expected else "nothing (valid)"
        click.echo(click.style(name, bold=True) + f"  -> must find: {must}")
        click.echo(f"  {s.description}")
        broker = s.settings.get("broker", {})
        spec = {k: v for k, v in s.settings.items() if k not in ("broker", "name", "scenario")}
        click.echo("  run:    " + ", ".join(f"{k}={_fmt(v)}" for k, v in spec.items()))
        click.echo("  broker: " + ", ".join(f"{k}={_fmt(v)}" for k, v in broker.items()))
        if s.fixed_by:
            click.echo(f"  fixed:  undertow run --scenario {name} {' '.join(s.fixed_by)}"
                       "  -> must find nothing")
        click.echo("")


def _fmt(v: object) -> str:
    if isinstance(v, tuple | list):
        return ",".join(map(str, v))
    return str(v)
