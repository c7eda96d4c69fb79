"""`python -m broker --config NODE.json`: run one node until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .broker import Broker
from .clock import Clock
from .config import ConfigError, NodeConfig, load_config
from .controller import Controller
from .quorum import make_metadata_log
from .server import Server


async def run_node(cfg: NodeConfig) -> None:
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    clock = Clock(cfg.clock_file)
    controller = None
    mlog = transport = None
    if cfg.is_controller:  # a voter of the controller quorum (Raft over the metadata log)
        mlog, transport = make_metadata_log(cfg)
        await mlog.start()
        controller = Controller(cfg, mlog, clock)
        await controller.start()
    broker = Broker(cfg, clock) if cfg.is_broker else None
    if broker is not None and controller is not None:
        voter = controller
        broker.local_leader = lambda: voter.leader
    server = Server(cfg, clock, broker, controller)
    await server.start()
    logging.getLogger("broker").info("%s listening on %s (roles %s, quorum voters %s)",
                                     cfg.node_id, cfg.listen, ",".join(cfg.process_roles),
                                     ",".join(cfg.controller_quorum_voters))
    tasks = []
    if controller is not None:
        tasks.append(asyncio.create_task(controller.run()))
    if broker is not None:
        broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    logging.getLogger("broker").info("%s stopping", cfg.node_id)
    await server.close()
    for t in tasks:
        t.cancel()
    if broker is not None:
        broker.shutdown()
    if mlog is not None:
        await mlog.stop()
    if transport is not None:
        transport.close()


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker", description=__doc__)
    ap.add_argument("--config", required=True, type=Path, help="the node's NODE.json")
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        print(f"broker: {e}", file=sys.stderr)
        return 2
    try:
        if os.environ.get("BROKER_EVENT_LOOP", "auto") == "asyncio" or not _has_uvloop():
            asyncio.run(run_node(cfg))
        else:  # about twice as fast when present; the image may not have it
            import uvloop

            uvloop.run(run_node(cfg))
    except OSError as e:
        print(f"broker: {cfg.node_id}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
