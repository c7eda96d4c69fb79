"""An asyncio client for broker-to-broker requests (fetch, heartbeat, alter_partition)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from .protocol import (
    MAX_RESPONSE_BYTES,
    FrameDecoder,
    ProtocolError,
    decode_response,
    encode_frame,
)


class RpcError(Exception):
    """The peer could not be reached or the connection broke."""


class Peer:
    """One connection to a peer, opened on demand; requests are pipelined and matched by id."""

    def __init__(self, addr: str, connect_timeout_s: float = 1.0) -> None:
        host, _, port = addr.rpartition(":")
        self.host, self.port = host, int(port)
        self.connect_timeout_s = connect_timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), self.connect_timeout_s)
            except (OSError, TimeoutError, RuntimeError) as e:
                raise RpcError(f"connect {self.host}:{self.port}: {e!r}") from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dec = FrameDecoder(MAX_RESPONSE_BYTES)
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                for body in dec.feed(data):
                    msg = decode_response(body)
                    fut = self._waiting.pop(msg["id"], None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
        except (OSError, ProtocolError):
            pass
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(RpcError("connection closed"))
            self._waiting.clear()

    async def call(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        writer = await self._connect()
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            writer.write(encode_frame({**msg, "id": rid}))
            await writer.drain()
            return await asyncio.wait_for(fut, timeout_s)
        except (OSError, TimeoutError, RuntimeError) as e:
            # RuntimeError: uvloop refuses writes on a handle that closed under us
            writer.close()  # this connection only: a newer one may already be in use
            if self._writer is writer:
                self._writer = None
            raise RpcError(f"{msg.get('type')} to {self.host}:{self.port}: {e!r}") from None
        finally:
            self._waiting.pop(rid, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved: the caller already got an RpcError

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
