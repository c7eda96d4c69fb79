"""`undertow image build`: make the base, broker (and sshd) images, skipping current ones."""

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
