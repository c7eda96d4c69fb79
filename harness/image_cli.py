"""`undertow image build`: make the base, a system's node image (and sshd), skipping current ones;
`undertow image NAME`: what a system fetches for itself (`undertow image kafka`: its jars)."""

from __future__ import annotations

import click


@click.group()
def image() -> None:
    """Build the images of the docker backend: the base and a system's node image."""


@image.command()
@click.option("--sshd/--no-sshd", default=True, show_default=True,
              help="Also build the sshd test-host variant (for the ssh backend's tests).")
@click.option("--force", is_flag=True, help="Rebuild even when an image is current.")
@click.option("--system", default="undertow", show_default=True,
              help="Whose node image to build (the system under test).")
def build(sshd: bool, force: bool, system: str) -> None:
    """Build what is missing: base (debootstrap + docker import), the system's node image, sshd."""
    from harness import registry
    from harness.image import ImageError, ensure_images
    from harness.protocols import HasNodeImage
    from harness.spec import SpecError

    try:
        part = registry.get("system", system)
    except SpecError as e:
        raise click.BadParameter(str(e), param_hint="--system") from e
    node = part.node_image() if isinstance(part, HasNodeImage) else None
    try:
        images = ensure_images(node, sshd=sshd, force=force,
                               progress=lambda m: click.echo(f"image: {m}", err=True))
    except ImageError as e:
        raise click.ClickException(str(e)) from e
    for b in (images.base, images.node, images.sshd):
        if b is not None:
            click.echo(f"{b.tag}  {'built' if b.built else 'cached'}  {b.seconds:.1f} s")


def _system_commands() -> None:
    """`undertow image NAME` for what a system fetches or builds for itself (entry points of
    the `undertow.image` group: `undertow image kafka` fetches Kafka's jars)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="undertow.image"):
        image.add_command(ep.load(), ep.name)


_system_commands()
