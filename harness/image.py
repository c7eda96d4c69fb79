"""The images the docker and ssh tests run on, built here because no registry is reachable.

Three images, each tagged with a hash of what it is made from and labelled with the
full hash, so a build skips whatever is already current:

- base: debootstrap a minimal Debian (python3, iproute2, iptables, procps, openssh-server),
  tar it and `docker import` it; a system whose nodes need more Debian packages (Kafka:
  a JRE) declares them (`NodeImage.packages`) and gets a base of its own, debootstrapped
  with them, since a node image's build has no network;
- a system's node image (`NodeImage`, declared by the system: for our broker,
  broker-image/Dockerfile FROM the base with the broker package copied in);
- sshd: broker-image/base/sshd/Dockerfile FROM the base, an ssh test host.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.locks import exclusive

HASH_LABEL = "undertow.content-hash"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_REPO = "undertow/base"
SSHD_REPO = "undertow/sshd"
IMAGE_DIR = Path(__file__).resolve().parents[1] / "broker-image"

Progress = Callable[[str], None]


class ImageError(RuntimeError):
    """An image cannot be built: says which step failed and what to do."""


@dataclass(frozen=True, slots=True)
class Built:
    """One image: its tag, content hash, and whether this call built it (or found it)."""

    tag: str
    content_hash: str
    built: bool
    seconds: float


@dataclass(frozen=True, slots=True)
class NodeImage:
    """A system's node image: its Dockerfile (FROM the base, ARG BASE) and folders copied in."""

    repo: str
    dockerfile: Path
    context: Mapping[str, Path] = field(default_factory=dict)  # name in the context -> folder
    packages: tuple[str, ...] = ()  # Debian packages beyond the base's (debootstrapped in)

    @property
    def base_repo(self) -> str:
        """The base it is built FROM: the shared one, or, when it needs packages, the base
        with those packages (named by them, so images needing the same share it)."""
        return f"{BASE_REPO}-{packages_slug(self.packages)}" if self.packages else BASE_REPO


def packages_slug(packages: tuple[str, ...]) -> str:
    """Debian package names as a docker repository name's tail."""
    return re.sub(r"[^a-z0-9.-]", "-", "-".join(sorted(packages)))[:120]


@dataclass(frozen=True, slots=True)
class Images:
    base: Built
    node: Built | None
    sshd: Built | None


def _files_hash(h: Any, root: Path) -> None:
    """Feed every file under root (sorted, no caches) into h: path and content."""
    for p in sorted(root.rglob("*")):
        if p.is_dir() or "__pycache__" in p.parts or p.suffix in (".pyc", ".pyo"):
            continue
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")


def base_hash(image_dir: Path = IMAGE_DIR) -> str:
    h = hashlib.sha256(f"{SUITE}\0{MIRROR}\0".encode())
    _files_hash(h, image_dir / "base")
    return h.hexdigest()


def packages_hash(base: str, packages: tuple[str, ...]) -> str:
    """The hash of a base variant: the shared base's hash and the extra packages."""
    return hashlib.sha256(base.encode() + b"\0" + "\0".join(sorted(packages)).encode()).hexdigest()


def node_hash(base: str, node: NodeImage) -> str:
    h = hashlib.sha256(base.encode() + b"\0")
    h.update(node.dockerfile.read_bytes() + b"\0")
    for name, folder in sorted(node.context.items()):
        h.update(name.encode() + b"\0")
        _files_hash(h, folder)
    return h.hexdigest()


def sshd_hash(base: str, image_dir: Path = IMAGE_DIR) -> str:
    h = hashlib.sha256(base.encode() + b"\0sshd\0")
    h.update((image_dir / "base" / "sshd" / "Dockerfile").read_bytes())
    return h.hexdigest()


def tag_for(repo: str, content_hash: str) -> str:
    return f"{repo}:{content_hash[:12]}"


def docker_client() -> Any:
    """A docker SDK client, or an ImageError that says how to start the engine."""
    import docker  # heavy: imported only when a docker thing is done

    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception as e:
        raise ImageError(f"the Docker engine does not answer ({e}); start it with "
                         "`just docker-up` (scripts/docker-up)") from e
    return client


def current(client: Any, repo: str, content_hash: str) -> bool:
    """Whether an image with this content hash is already there."""
    import docker.errors

    try:
        image = client.images.get(tag_for(repo, content_hash))
    except docker.errors.ImageNotFound:
        return False
    labels = image.labels or {}
    return bool(labels.get(HASH_LABEL) == content_hash)


def _build_lock() -> contextlib.AbstractContextManager[None]:
    """One build at a time on this machine (parallel tests share the images)."""
    state = Path(os.environ.get("UNDERTOW_STATE_DIR", "/tmp/undertow-state"))
    return exclusive(state / "image-build.lock")


def _ensure_debootstrap(progress: Progress) -> None:
    if shutil.which("debootstrap"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ImageError("debootstrap is missing: install it (apt-get install debootstrap) "
                         "and run `undertow image build` as root")
    progress("installing debootstrap (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "debootstrap"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0:
            raise ImageError(f"{' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")


def build_base(client: Any, content_hash: str, progress: Progress,
               image_dir: Path = IMAGE_DIR, *, repo: str = BASE_REPO,
               packages: tuple[str, ...] = ()) -> None:
    """debootstrap a rootfs (the base's packages and `packages`), then `docker import` it
    with the hash label."""
    if os.geteuid() != 0:
        raise ImageError("building the base image runs debootstrap, which needs root")
    _ensure_debootstrap(progress)
    extra = f" with {', '.join(packages)}" if packages else ""
    progress(f"debootstrap {SUITE} from {MIRROR}{extra} (a minute or two)")
    with tempfile.TemporaryDirectory(prefix="undertow-base.") as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        listed = Path(tmp) / "packages.txt"
        listed.write_text((image_dir / "base" / "packages.txt").read_text() + "\n"
                          + "".join(f"{p}\n" for p in packages))
        r = subprocess.run(
            [str(image_dir / "base" / "build-rootfs.sh"), str(tarball), SUITE, MIRROR,
             str(listed)],
            capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise ImageError(f"debootstrap of the base image failed:\n{r.stderr.strip()[-2000:]}")
        progress(f"docker import ({tarball.stat().st_size // 2**20} MiB)")
        tag = tag_for(repo, content_hash)
        changes = [f"LABEL {HASH_LABEL}={content_hash}", "ENV LANG=C.UTF-8",
                   'CMD ["/bin/bash"]']
        client.api.import_image_from_file(str(tarball), repository=repo,
                                          tag=content_hash[:12], changes=changes)
        client.images.get(tag).tag(repo, "latest")


def build_from(client: Any, repo: str, content_hash: str, base_tag: str,
               context: Path, progress: Progress) -> None:
    """`docker build` a Dockerfile FROM the base, labelled with its content hash."""
    import docker.errors

    progress(f"docker build {tag_for(repo, content_hash)}")
    try:
        image, _logs = client.images.build(
            path=str(context), tag=tag_for(repo, content_hash), rm=True, forcerm=True,
            buildargs={"BASE": base_tag}, labels={HASH_LABEL: content_hash}, network_mode="none")
    except docker.errors.BuildError as e:
        tail = "".join(str(x.get("stream", x.get("error", ""))) for x in e.build_log)[-2000:]
        raise ImageError(f"docker build of {repo} failed: {e}\n{tail}") from e
    image.tag(repo, "latest")


def prune_old(client: Any, repo: str, keep: str) -> list[str]:
    """Remove the repo's other hash tags (older builds); images in use are left alone."""
    import docker.errors

    removed: list[str] = []
    for img in client.images.list(name=repo):
        for tag in img.tags:
            if tag in (keep, f"{repo}:latest") or not tag.startswith(f"{repo}:"):
                continue
            try:
                client.images.remove(tag)
                removed.append(tag)
            except docker.errors.APIError:
                pass  # a container still uses it (another run): the next build tries again
    return removed


def _node_context(tmp: Path, node: NodeImage) -> Path:
    shutil.copy(node.dockerfile, tmp / "Dockerfile")
    for name, folder in node.context.items():
        shutil.copytree(folder, tmp / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return tmp


def ensure_images(node: NodeImage | None = None, *, sshd: bool = False, force: bool = False,
                  prune: bool = True, progress: Progress | None = None,
                  image_dir: Path = IMAGE_DIR) -> Images:
    """Build the base image, a system's node image and the sshd host unless already current.

    prune: remove the older hash tags of what was rebuilt (not those in use)."""
    say: Progress = progress or (lambda _msg: None)
    client = docker_client()
    with _build_lock():
        t0 = time.monotonic()
        bh = base_hash(image_dir)
        built_base = force or not current(client, BASE_REPO, bh)
        if built_base:
            build_base(client, bh, say, image_dir)
        base = Built(tag_for(BASE_REPO, bh), bh, built_base, time.monotonic() - t0)

        node_built: Built | None = None
        if node is not None:
            t0 = time.monotonic()
            node_base = base
            if node.packages:  # its own base: the shared one's packages and its own
                ph = packages_hash(bh, node.packages)
                built_variant = force or not current(client, node.base_repo, ph)
                if built_variant:
                    build_base(client, ph, say, image_dir, repo=node.base_repo,
                               packages=node.packages)
                    if prune:
                        prune_old(client, node.base_repo, tag_for(node.base_repo, ph))
                node_base = Built(tag_for(node.base_repo, ph), ph, built_variant, 0.0)
            kh = node_hash(node_base.content_hash, node)
            built_node = force or not current(client, node.repo, kh)
            if built_node:
                with tempfile.TemporaryDirectory(prefix="undertow-node-ctx.") as tmp:
                    build_from(client, node.repo, kh, node_base.tag,
                               _node_context(Path(tmp), node), say)
            node_built = Built(tag_for(node.repo, kh), kh, built_node, time.monotonic() - t0)

        sshd_built: Built | None = None
        if sshd:
            t0 = time.monotonic()
            sh = sshd_hash(bh, image_dir)
            built_sshd = force or not current(client, SSHD_REPO, sh)
            if built_sshd:
                build_from(client, SSHD_REPO, sh, base.tag, image_dir / "base" / "sshd", say)
            sshd_built = Built(tag_for(SSHD_REPO, sh), sh, built_sshd, time.monotonic() - t0)
        for b, repo in ((base, BASE_REPO), (node_built, node.repo if node else ""),
                        (sshd_built, SSHD_REPO)):
            if prune and b is not None and b.built:
                prune_old(client, repo, b.tag)
    return Images(base, node_built, sshd_built)
