"""`undertow image kafka`: Kafka's jars from Maven Central into the versioned cache, once."""

from __future__ import annotations

import click


@click.command("kafka")
@click.option("--kafka-version", default=None, metavar="V",
              help="A release (3.9 or later); default: the newest cached 4.x, else the newest "
                   "4.x on Maven Central.")
def kafka(kafka_version: str | None) -> None:
    """Fetch Apache Kafka's jars with Maven into the versioned cache (once)."""
    from systems.kafka.jars import KafkaJarsError, resolve

    try:
        j = resolve(kafka_version, progress=lambda m: click.echo(f"kafka: {m}", err=True))
    except KafkaJarsError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"kafka {j.version}  {'cached' if j.cached else 'resolved'}  "
               f"{j.seconds:.1f} s  {j.libs}")
