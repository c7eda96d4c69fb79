"""`undertow image kafka`: the releases cached, and Kafka's jars from Maven Central into the
versioned cache, once per release."""

from __future__ import annotations

import click


@click.command("kafka")
@click.option("--kafka-version", "versions", multiple=True, metavar="V",
              help="A release from 0.10.2.0 to 4.x (repeatable); default: the newest cached "
                   "4.x, else the newest 4.x on Maven Central.")
@click.option("--list", "list_only", is_flag=True, help="Only list the releases cached.")
def kafka(versions: tuple[str, ...], list_only: bool) -> None:
    """List the Kafka releases cached, and fetch the ones asked for with Maven (once)."""
    from systems.kafka.jars import KafkaJarsError, cached, resolve
    from systems.kafka.releases import release

    for j in cached():
        era = release(j.version).era
        click.echo(f"kafka {j.version}  cached  kafka_{era.scala}  "
                   f"{'/'.join(era.modes)}  {j.libs}")
    if list_only:
        return
    for v in versions or (None,):
        try:
            j = resolve(v, progress=lambda m: click.echo(f"kafka: {m}", err=True))
        except KafkaJarsError as e:
            raise click.ClickException(str(e)) from e
        if not j.cached or versions:
            click.echo(f"kafka {j.version}  {'cached' if j.cached else 'resolved'}  "
                       f"{j.seconds:.1f} s  {j.libs}")
