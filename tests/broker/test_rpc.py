"""The peer client turns every connection failure into RpcError, on asyncio and uvloop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from broker.rpc import Peer, RpcError


def loops() -> list[str]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "uvloop"]


def run(kind: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    if kind == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


@pytest.mark.parametrize("kind", loops())
def test_a_peer_that_hangs_up_gives_rpc_errors_only(kind: str) -> None:
    async def main() -> None:
        async def hang_up(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await r.read(1)
            w.transport.abort()  # RST, as a killed broker or a cut link does

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        peer = Peer(f"127.0.0.1:{port}")
        for _ in range(30):  # concurrent callers race the connection's teardown
            results = await asyncio.gather(
                *(peer.call({"type": "metadata"}, timeout_s=1.0) for _ in range(8)),
                return_exceptions=True)
            assert all(isinstance(r, RpcError) for r in results), results
        server.close()
        peer.close()

    run(kind, main)


@pytest.mark.parametrize("kind", loops())
def test_nobody_listening_is_an_rpc_error(kind: str) -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(RpcError):
            await Peer(f"127.0.0.1:{port}").call({"type": "metadata"}, timeout_s=1.0)

    run(kind, main)


def test_a_write_refused_by_a_closed_handle_is_an_rpc_error() -> None:
    """uvloop raises RuntimeError writing to a handle that closed before the reader noticed;
    that must read as a lost connection (it once killed the heartbeat loop)."""
    async def main() -> None:
        async def echo_id(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            from broker.protocol import FrameDecoder, decode_request, encode_frame
            dec = FrameDecoder()
            while data := await r.read(65536):
                for body in dec.feed(data):
                    w.write(encode_frame({"id": decode_request(body)["id"], "error": None}))

        server = await asyncio.start_server(echo_id, "127.0.0.1", 0)
        peer = Peer(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        assert (await peer.call({"type": "metadata"}, timeout_s=2.0))["error"] is None
        writer = peer._writer
        assert writer is not None

        def refuse(data: bytes | bytearray | memoryview) -> None:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")

        writer.write = refuse  # type: ignore[method-assign]  # a closed transport, on purpose
        with pytest.raises(RpcError):
            await peer.call({"type": "metadata"}, timeout_s=2.0)
        assert (await peer.call({"type": "metadata"}, timeout_s=2.0))["error"] is None
        peer.close()
        server.close()

    asyncio.run(main())
