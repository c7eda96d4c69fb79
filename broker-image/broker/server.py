"""The node's one TCP port: framing, dispatch, and the request handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .broker import Broker
from .clock import Clock
from .config import NodeConfig, split_addr
from .controller import Controller, not_controller
from .coordinator import Coordinator
from .internal import NOT_COORDINATOR
from .log import Record
from .protocol import (
    INVALID_REQUEST,
    NOT_LEADER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_PARTITION,
    UNKNOWN_SERVER_ERROR,
    FrameDecoder,
    FrameTooLarge,
    ProtocolError,
    decode_request,
    encode_frame,
    error_reply,
    producer_tag,
)
from .raft.messages import MessageError
from .testcontrols import TestControls
from .txncoord import TxnCoordinator
from .txnindex import is_aborted

ISOLATIONS = ("read_uncommitted", "read_committed")


def _replica_record(r: Record) -> list[Any]:
    """A record as replica_fetch sends it: [offset, epoch, value], then the producer tag
    when there is one, then 1 for a transactional record."""
    if r.producer is None:
        return [r.offset, r.epoch, r.value]
    return [r.offset, r.epoch, r.value, *r.producer, *([1] if r.txn else [])]

def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


log = logging.getLogger("broker.server")
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


class Conn:
    """One client connection; replies written in the same loop tick go out in one send."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._out: list[bytes] = []

    def reply(self, msg: dict[str, Any]) -> None:
        if not self._out:
            asyncio.get_running_loop().call_soon(self.flush)
        self._out.append(encode_frame(msg))

    def flush(self) -> None:
        out, self._out = self._out, []
        if out and not self.writer.is_closing():
            try:
                self.writer.write(b"".join(out))
            except RuntimeError:  # uvloop: the handle closed under us; the peer is gone
                self.writer.close()


class Server:
    def __init__(self, cfg: NodeConfig, clock: Clock, broker: Broker | None,
                 controller: Controller | None) -> None:
        self.cfg = cfg
        self.clock = clock
        self.broker = broker
        self.controller = controller
        tests = TestControls(self)  # off unless settings.test.controls.enable
        self.handlers: dict[str, Handler] = {
            "produce": self.produce, "fetch": self.fetch, "list_offsets": self.list_offsets,
            "metadata": self.metadata, "clock": self.read_clock, "dump": self.dump,
            "replica_fetch": self.replica_fetch,
            "offsets_for_leader_epoch": self.offsets_for_leader_epoch,
            "heartbeat": self.heartbeat, "alter_partition": self.alter_partition,
            "init_producer_id": self.init_producer_id,
            "test_fetcher": tests.test_fetcher, "test_checkpoint": tests.test_checkpoint,
            "test_flush": tests.test_flush, "test_fence": tests.test_fence,
            "test_metadata": tests.test_metadata, "test_alter_timeout": tests.test_alter_timeout,
            "raft": self.raft,
            "find_coordinator": self.find_coordinator, "join_group": self.join_group,
            "sync_group": self.sync_group, "group_heartbeat": self.group_heartbeat,
            "leave_group": self.leave_group, "offset_commit": self.offset_commit,
            "offset_fetch": self.offset_fetch,
            "find_txn_coordinator": self.find_txn_coordinator,
            "init_txn_producer": self.init_txn_producer,
            "add_txn_partitions": self.add_txn_partitions, "end_txn": self.end_txn,
            "write_txn_markers": self.write_txn_markers,
            "add_txn_offsets": self.add_txn_offsets,
            "txn_offset_commit": self.txn_offset_commit,
        }
        self.coordinator = Coordinator(broker) if broker is not None else None
        self.txn_coordinator = TxnCoordinator(broker) if broker is not None else None
        if self.txn_coordinator is not None:
            self.txn_coordinator.groups = self.coordinator
        self._server: asyncio.AbstractServer | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        host, port = split_addr(self.cfg.listen, "listen")
        self._server = await asyncio.start_server(self._serve, host, port,
                                                  reuse_address=True, limit=1 << 20)
        if self.coordinator is not None:
            self.coordinator.start()
        if self.txn_coordinator is not None:
            self.txn_coordinator.start()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()

    # -- connections -------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dec = FrameDecoder(self.cfg.settings.max_request_bytes)
        conn = Conn(writer)
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                try:
                    bodies = dec.feed(data)
                except FrameTooLarge as e:
                    writer.write(encode_frame(error_reply(None, e.code, str(e))))
                    break
                for body in bodies:
                    try:
                        msg = decode_request(body)
                    except ProtocolError as e:
                        conn.reply(error_reply(e.request_id, e.code, str(e)))
                        continue
                    if msg["type"] == "produce":  # the hot path: callbacks, no task
                        try:
                            self._produce(msg, conn)
                        except ProtocolError as e:
                            conn.reply(error_reply(msg["id"], e.code, str(e)))
                        except Exception as e:  # a bug must not take the node down
                            log.exception("produce failed")
                            conn.reply(error_reply(msg["id"], UNKNOWN_SERVER_ERROR, repr(e)))
                        continue
                    t = asyncio.create_task(self._handle(msg, conn))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                if writer.transport.get_write_buffer_size() > 4 << 20:
                    await writer.drain()
            if tasks:  # the peer stopped sending: let short requests finish and reply
                await asyncio.wait(tasks, timeout=1.0)
        except (OSError, RuntimeError, asyncio.IncompleteReadError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            conn.flush()
            writer.close()

    async def _handle(self, msg: dict[str, Any], conn: Conn) -> None:
        rid = msg["id"]
        try:
            reply = await self.handlers[msg["type"]](msg)
            if reply is None:
                return
            reply = {"id": rid, "error": None, **reply}
        except ProtocolError as e:
            reply = {**error_reply(rid, e.code, str(e)), **e.extra}
        except Exception as e:  # a bug must not take the node down: report it
            log.exception("request %s failed", msg.get("type"))
            reply = error_reply(rid, UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")
        conn.reply(reply)

    # -- helpers -------------------------------------------------------------------
    def _broker(self) -> Broker:
        if self.broker is None:
            raise ProtocolError(NOT_LEADER, f"{self.cfg.node_id} is not a broker")
        return self.broker

    def _partition(self, pid: int, *, internal: bool = False) -> Any:
        """A replica held here; `internal`: the offsets topic's too (replication only)."""
        b = self._broker()
        end = self.cfg.topic.partitions + (self.cfg.internal_partitions if internal else 0)
        if not 0 <= pid < end:
            raise ProtocolError(UNKNOWN_PARTITION, f"no partition {pid}")
        p = b.partitions.get(pid)
        if p is None:
            raise ProtocolError(NOT_LEADER, f"{self.cfg.node_id} holds no replica of {pid}")
        return p

    def _controller(self) -> Controller:
        if self.controller is None:
            hint = self.broker.controller_guess if self.broker else self.cfg.controller
            raise not_controller(self.cfg.node_id, hint)
        return self.controller

    # -- clients -------------------------------------------------------------------
    def _produce(self, req: dict[str, Any], conn: Conn) -> None:
        """Queue the record for the next batched append; reply from completion callbacks."""
        rid, acks = req["id"], req["acks"]
        p = self._partition(req["partition"])
        tag = producer_tag(req)
        p.check_produce(acks)
        loop = asyncio.get_running_loop()
        timeout_ms = max(0, min(req["timeout_ms"], self.cfg.settings.request_timeout_ms))
        deadline_s = loop.time() + timeout_ms / 1000

        def committed(offset: int | None, err: ProtocolError | None) -> None:
            if err is not None:
                conn.reply(error_reply(rid, err.code, str(err)))
            else:
                conn.reply({"id": rid, "error": None, "offset": offset})

        def appended(offset: int | None, err: ProtocolError | None) -> None:
            if acks == "0":
                return
            if err is not None or offset is None or acks == "1":
                committed(offset, err)
            else:
                p.wait_committed(offset, deadline_s, committed)

        txn = bool(req.get("transactional")) and tag is not None
        p.pending.append((req["value"], tag, txn, appended))
        self._broker().schedule_append(p)

    async def produce(self, req: dict[str, Any]) -> dict[str, Any] | None:
        raise ProtocolError(INVALID_REQUEST, "produce is served by the fast path")

    async def fetch(self, req: dict[str, Any]) -> dict[str, Any]:
        """Records from `offset`: below the HW (read_uncommitted, the default), or below the
        last stable offset without aborted transactions' records (`isolation`
        "read_committed"). Markers are never records; `next` is where to fetch next."""
        p = self._partition(req["partition"])
        if p.role != "leader":
            raise ProtocolError(NOT_LEADER, f"{self.cfg.node_id} does not lead {p.pid}")
        off = req["offset"]
        if off < 0 or off > p.log.leo:
            raise ProtocolError(OFFSET_OUT_OF_RANGE, f"offset {off} outside [0, {p.log.leo}]")
        isolation = req.get("isolation", "read_uncommitted")
        if isolation not in ISOLATIONS:
            raise ProtocolError(INVALID_REQUEST, f"fetch: isolation {isolation!r:.40} is not "
                                f"one of {ISOLATIONS}")
        committed = isolation == "read_committed"
        limit = max(0, min(req["max_records"], 10_000))
        lso = p.lso
        recs = p.log.read(off, limit, upto=lso if committed else p.log.hw)
        aborted = p.log.txn_index.aborted_from(off) if committed and recs else {}
        out = [[r.offset, r.value] for r in recs if isinstance(r.value, int) and not (
            r.txn and r.producer and is_aborted(aborted, r.producer[0], r.offset))]
        nxt = recs[-1].offset + 1 if recs else off
        return {"records": out, "next": nxt, "hw": p.log.hw, "lso": lso, "leo": p.log.leo}

    async def list_offsets(self, req: dict[str, Any]) -> dict[str, Any]:
        p = self._partition(req["partition"])
        if p.role != "leader":
            raise ProtocolError(NOT_LEADER, f"{self.cfg.node_id} does not lead {p.pid}")
        return {"hw": p.log.hw, "leo": p.log.leo}

    async def metadata(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.broker is not None:
            view = self.broker.meta.view()
            local = self.broker.local_view()
        else:
            view = self._controller().view()
            local = {}
        if self.cfg.internal_partitions:  # internal topics apart: clients see the topic's own
            every = view["partitions"]
            view["partitions"] = {k: v for k, v in every.items()
                                  if int(k) < self.cfg.topic.partitions}
            view["offsets_partitions"] = {k: v for k, v in every.items()
                                          if int(k) in self.cfg.offsets_pids}
            view["transaction_partitions"] = {k: v for k, v in every.items()
                                              if int(k) in self.cfg.txn_pids}
        if self.controller is not None:  # a voter: the Raft leader it knows, and the quorum
            quorum = self.controller.quorum_view()
            controller = self.controller.leader
        else:  # a broker only: the controller that last answered its heartbeat
            b = self._broker()
            controller = b.controller_known
            quorum = {"leader": controller, "epoch": b.controller_epoch, "role": "observer",
                      "voters": list(self.cfg.controller_quorum_voters)}
        return {"node": self.cfg.node_id, "controller": controller, "quorum": quorum,
                "topic": self.cfg.topic.name, "roles": list(self.cfg.process_roles),
                "clock_offset_ns": self.clock.offset_ns, **view, "local": local}

    async def read_clock(self, req: dict[str, Any]) -> dict[str, Any]:
        """The time this node acts on, and its offset: a clock fault's evidence."""
        return {"now_ns": self.clock.now_ns(), "offset_ns": self.clock.offset_ns}

    async def dump(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"rows": self.broker.dump_rows() if self.broker else []}

    # -- replication -----------------------------------------------------------------
    async def replica_fetch(self, req: dict[str, Any]) -> dict[str, Any]:
        b = self._broker()
        follower = req["node"]
        now = self.clock.now_ms()
        limit = b.settings.fetch_max_records
        wanted: list[tuple[Any, int]] = []
        epochs: dict[int, int] = {}
        out: list[dict[str, Any]] = []
        for item in req["partitions"]:
            if (not isinstance(item, list) or len(item) != 3
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in item)):
                raise ProtocolError(INVALID_REQUEST,
                                    "partitions: expected [partition, epoch, offset]")
            pid, epoch, off = item
            try:
                p = self._partition(pid, internal=True)
                recs, want = p.on_follower_fetch(follower, epoch, off, now, limit)
            except ProtocolError as e:
                res = {"partition": pid, "error": e.code, "message": str(e)}
                if e.code == OFFSET_OUT_OF_RANGE:
                    res["leo"] = b.partitions[pid].log.leo
                out.append(res)
                continue
            if want == "expand":
                b.spawn(b.alter_isr(p, [*p.isr, follower]))
            wanted.append((p, off))
            epochs[pid] = epoch
            out.append({"partition": pid, "error": None, "records": recs})
        if wanted and not any(o.get("records") for o in out) and not any(
                o.get("error") for o in out) and req["max_wait_ms"] > 0:
            for p, off in wanted:
                p.park(follower, off)
            woken = b.next_append()
            timer = asyncio.get_running_loop().call_later(
                min(req["max_wait_ms"], 10_000) / 1000, _wake, woken)
            try:
                await woken
            finally:
                timer.cancel()
                for p, _off in wanted:
                    p.park(follower, None)
            now = self.clock.now_ms()
            for p, off in wanted:
                p.still_caught_up(follower, off, now)
            by_pid = {p.pid: (p, off) for p, off in wanted}
            for o in out:
                p, off = by_pid[o["partition"]]
                if p.role == "leader" and p.leader_epoch == epochs[p.pid]:
                    o["records"] = p.log.read(off, limit)
                else:  # demoted while we waited: nothing of ours is authoritative now
                    del o["records"]
                    o.update(error=NOT_LEADER, message="leadership changed during the fetch")
        for o in out:
            if "records" in o:
                p = b.partitions[o["partition"]]
                o["records"] = [_replica_record(r) for r in o["records"]]
                o["hw"] = p.log.hw
                o["leo"] = p.log.leo
        return {"partitions": out}

    async def offsets_for_leader_epoch(self, req: dict[str, Any]) -> dict[str, Any]:
        p = self._partition(req["partition"], internal=True)
        p.check_leader_epoch(req["leader_epoch"])
        epoch, end = p.log.end_offset_for_epoch(req["epoch"])
        return {"epoch": epoch, "end_offset": end}

    # -- controller --------------------------------------------------------------------
    async def heartbeat(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._controller().heartbeat(req["node"], req["incarnation"],
                                                  req["metadata_offset"])

    async def alter_partition(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._controller().alter_partition(
            req["node"], req["partition"], req["leader_epoch"], req["partition_epoch"],
            req["isr"])

    async def init_producer_id(self, req: dict[str, Any]) -> dict[str, Any]:
        """A new idempotent producer: its id, from the active controller."""
        return await self._controller().init_producer_id()

    async def raft(self, req: dict[str, Any]) -> dict[str, Any]:
        """A Raft message from another voter (see broker/quorum.py)."""
        deliver = getattr(self.controller.log, "deliver", None) if self.controller else None
        if deliver is None:
            raise not_controller(self.cfg.node_id, None)
        try:
            deliver(req["from"], req["message"])
        except MessageError as e:
            raise ProtocolError(INVALID_REQUEST, f"raft: {e}") from None
        return {}

    # -- consumer groups ------------------------------------------------------------------
    def _groups(self) -> Coordinator:
        if self.coordinator is None:
            raise ProtocolError(NOT_COORDINATOR, f"{self.cfg.node_id} is not a broker")
        return self.coordinator

    async def find_coordinator(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._groups().find(req["group"])

    async def join_group(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._groups().join(req)

    async def sync_group(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._groups().sync(req)

    async def group_heartbeat(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._groups().heartbeat(req)

    async def leave_group(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._groups().leave(req)

    async def offset_commit(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._groups().commit(req)

    async def offset_fetch(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._groups().fetch_offsets(req)

    async def txn_offset_commit(self, req: dict[str, Any]) -> dict[str, Any]:
        """TxnOffsetCommit: pending in the group until the producer's transaction ends."""
        return await self._groups().commit(req)

    # -- transactions ------------------------------------------------------------------------
    def _txns(self) -> TxnCoordinator:
        if self.txn_coordinator is None:
            raise ProtocolError(NOT_COORDINATOR, f"{self.cfg.node_id} is not a broker")
        return self.txn_coordinator

    async def find_txn_coordinator(self, req: dict[str, Any]) -> dict[str, Any]:
        return self._txns().find(req["transactional_id"])

    async def init_txn_producer(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._txns().init(req)

    async def add_txn_partitions(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._txns().add_partitions(req)

    async def end_txn(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._txns().end(req)

    async def add_txn_offsets(self, req: dict[str, Any]) -> dict[str, Any]:
        return await self._txns().add_offsets(req)

    async def write_txn_markers(self, req: dict[str, Any]) -> dict[str, Any]:
        """A transaction's commit or abort markers in partitions led here, from its
        coordinator, written together: answered once each is committed here (the HW passed
        it), so a failover of that partition keeps it; `errors` names those that are not."""
        parts = req["partitions"]
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in parts):
            raise ProtocolError(INVALID_REQUEST, "write_txn_markers: partitions must be "
                                "integers")
        coordinator = self._txns()

        async def one(part: int) -> str | None:
            try:
                if part >= self.cfg.topic.partitions and part not in self.cfg.offsets_pids:
                    raise ProtocolError(UNKNOWN_PARTITION, f"no marker goes to partition {part}")
                await coordinator.write_marker(self._partition(part, internal=True),
                                               req["producer_id"], req["producer_epoch"],
                                               bool(req["commit"]))
            except ProtocolError as e:
                return e.code
            return None

        codes = await asyncio.gather(*(one(x) for x in parts))
        return {"errors": {str(x): code for x, code in zip(parts, codes, strict=True) if code}}
