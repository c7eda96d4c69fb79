"""Image content hashes, and `undertow image build` skipping what is current."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import image
from harness.image_cli import image as image_cmd
from systems.undertow.system import system as undertow


def _node(d: Path) -> image.NodeImage:
    """Our broker's node image, with its Dockerfile from the folder d."""
    node = undertow.node_image()
    return image.NodeImage(node.repo, d / "Dockerfile", node.context)


def _copy_image_dir(tmp_path: Path) -> Path:
    d = tmp_path / "broker-image"
    shutil.copytree(image.IMAGE_DIR, d, ignore=shutil.ignore_patterns("broker"))
    return d


def test_hashes_follow_content_only(tmp_path: Path) -> None:
    d = _copy_image_dir(tmp_path)
    base = image.base_hash(d)
    assert base == image.base_hash(image.IMAGE_DIR)  # same files, same hash, any location
    broker = image.node_hash(base, _node(d))
    (d / "Dockerfile").write_text((d / "Dockerfile").read_text() + "# changed\n")
    assert image.node_hash(base, _node(d)) != broker
    assert image.base_hash(d) == base  # the broker's Dockerfile is not the base's
    (d / "base" / "packages.txt").write_text("python3\n")
    assert image.base_hash(d) != base
    assert image.node_hash(image.base_hash(d), _node(d)) != image.node_hash(base, _node(d))
    assert image.tag_for("undertow/base", "ab" * 32) == "undertow/base:abababababab"


def test_packages_are_what_the_nemesis_needs() -> None:
    pkgs = (image.IMAGE_DIR / "base" / "packages.txt").read_text().split()
    for p in ("python3", "iproute2", "iptables", "procps"):
        assert p in pkgs


def test_an_engine_that_does_not_answer_says_how_to_start_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(image.ImageError, match=r"does not answer .*scripts/docker-up"):
        image.docker_client()


@pytest.mark.docker
@pytest.mark.slow
def test_build_skips_what_is_current_and_rebuilds_what_changed(tmp_path: Path) -> None:
    try:
        client = image.docker_client()
    except image.ImageError as e:
        pytest.skip(str(e))
    node = undertow.node_image()
    first = image.ensure_images(node, sshd=True)  # builds whatever a fresh machine lacks
    again = image.ensure_images(node, sshd=True)
    assert first.node is not None and again.node is not None
    assert not (again.base.built or again.node.built or (again.sshd and again.sshd.built))
    assert again.node.tag == first.node.tag
    labels = client.images.get(again.node.tag).labels
    assert labels[image.HASH_LABEL] == again.node.content_hash

    d = _copy_image_dir(tmp_path)
    (d / "Dockerfile").write_text((d / "Dockerfile").read_text() + "LABEL undertow.test=1\n")
    changed = image.ensure_images(_node(d), image_dir=d, prune=False)
    assert changed.node is not None
    try:
        assert not changed.base.built and changed.node.built
        assert changed.node.tag != again.node.tag
        out = client.containers.run(changed.node.tag, ["python3", "-c", "import broker"],
                                    remove=True)
        assert out == b""
    finally:
        client.images.get(again.node.tag).tag(node.repo, "latest")
        # what a build with prune does: the repo's other hash tags go (the image with them)
        removed = image.prune_old(client, node.repo, again.node.tag)
    assert changed.node.tag in removed and again.node.tag not in removed
    assert client.images.get(f"{node.repo}:latest").id == client.images.get(again.node.tag).id

    result = CliRunner().invoke(image_cmd, ["build"])
    assert result.exit_code == 0, result.output
    assert "cached" in result.output and "built" not in result.output
