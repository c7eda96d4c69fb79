"""`undertow image build`: make the base, broker (and sshd) images, skipping current ones;
`undertow image kafka`: Apache Kafka's jars from Maven Central into the cache."""

from __future__ import annotations

import click


@click.group()
def image() -> None:
    """Build the base and broker images for the docker backend."""


@image.command()
@click.option("--sshd/--no-sshd", default=True, show_default=True,
              help="Also build the sshd test-host variant (for the ssh backend's tests).")
@click.option("--force", is_flag=True, help="Rebuild even when an image is current.")
def build(sshd: bool, force: bool) -> None:
    """Build what is missing: base (debootstrap + docker import), broker, sshd."""
    from harness.image import ImageError, ensure_images

    try:
        images = ensure_images(sshd=sshd, force=force,
                               progress=lambda m: click.echo(f"image: {m}", err=True))
    except ImageError as e:
        raise click.ClickException(str(e)) from e
    for b in (images.base, images.broker, images.sshd):
        if b is not None:
            click.echo(f"{b.tag}  {'built' if b.built else 'cached'}  {b.seconds:.1f} s")


@image.command()
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
