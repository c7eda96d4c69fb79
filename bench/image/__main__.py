"""Image and container-backend figures.

python -m bench.image [--rounds 3] [--no-scratch] [--no-ssh]

- image build from scratch (debootstrap + import + broker + sshd; `--force`, so images in
  use by containers need not be removed), target <= 3 min;
- image build from cache (everything current), target <= 10 s;
- docker cluster start to ready (3 containers, brokers, every partition led), target <= 15 s;
- ssh cluster start to ready against three sshd containers (upload + start + ready).
Writes bench/out/image.json and prints a summary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import core
from harness.control.docker import DockerBackend
from harness.control.ssh import SshBackend
from harness.image import ensure_images
from harness.protocols import Run
from harness.runfiles import RunPaths
from harness.spec import build_spec
from systems.undertow.system import system as undertow

OUT = Path(__file__).resolve().parents[1] / "out"


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _timed_up(backend: Any, spec_layer: dict[str, Any], root: Path) -> float:
    spec = build_spec(spec_layer)
    root.mkdir(parents=True)
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root), log=logging.getLogger("bench"))
    t0 = time.monotonic()
    try:
        core.cluster_up(backend, run)
        return time.monotonic() - t0
    finally:
        core.cluster_down(backend, run)

NODE = undertow.node_image()


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.image")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-scratch", action="store_true", help="skip the from-scratch build")
    ap.add_argument("--no-ssh", action="store_true", help="skip the ssh start-to-ready figure")
    args = ap.parse_args()
    out: dict[str, Any] = {"load_before": _load()}
    if not args.no_scratch:
        t0 = time.monotonic()
        imgs = ensure_images(NODE, sshd=True, force=True, progress=lambda m: print("  image:", m))
        out["build_scratch_s"] = round(time.monotonic() - t0, 1)
        out["build_scratch_parts_s"] = {b.tag: round(b.seconds, 1)
                                        for b in (imgs.base, imgs.node, imgs.sshd) if b}
        out["load_after_scratch"] = _load()
    t0 = time.monotonic()
    imgs = ensure_images(NODE, sshd=True)
    out["build_cached_s"] = round(time.monotonic() - t0, 2)
    out["cached_rebuilt_anything"] = any(b.built for b in (imgs.base, imgs.node, imgs.sshd) if b)
    with tempfile.TemporaryDirectory(prefix="undertow-bench-image.") as tmp:
        docker_s = [_timed_up(DockerBackend(), {"backend": "docker"}, Path(tmp) / f"d{i}")
                    for i in range(args.rounds)]
        out["docker_start_to_ready_s"] = [round(x, 2) for x in docker_s]
        out["docker_start_to_ready_median_s"] = round(statistics.median(docker_s), 2)
        if not args.no_ssh:
            from harness.control.sshd_hosts import sshd_hosts

            with sshd_hosts(Path(tmp) / "sshd") as (cluster, _hosts):
                ssh_s = [_timed_up(SshBackend(), {"backend": "ssh",
                                                  "cluster_file": str(cluster)},
                                   Path(tmp) / f"s{i}") for i in range(args.rounds)]
            out["ssh_start_to_ready_s"] = [round(x, 2) for x in ssh_s]
            out["ssh_start_to_ready_median_s"] = round(statistics.median(ssh_s), 2)
    out["load_after"] = _load()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "image.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"image build from scratch: {out.get('build_scratch_s', 'skipped')} s (target <= 180)")
    print(f"image build from cache:   {out['build_cached_s']} s (target <= 10)")
    print(f"docker start to ready:    median {out['docker_start_to_ready_median_s']} s of "
          f"{out['docker_start_to_ready_s']} (target <= 15)")
    if "ssh_start_to_ready_median_s" in out:
        print(f"ssh start to ready:       median {out['ssh_start_to_ready_median_s']} s of "
              f"{out['ssh_start_to_ready_s']}")
    print(f"load (1/5/15 min): before {out['load_before']}, after {out['load_after']}")


if __name__ == "__main__":
    main()
