"""The asyncio network layer: one reader task per connection, responses strictly FIFO.

A connection reads size-prefixed frames (``readexactly``, so a client sending
byte by byte or nothing at all costs nothing but its socket) and hands each to
the router, which answers at once (bytes), later (a future: long-poll fetch,
waits) or never (acks=0).  Answers are queued in request order and a writer
task sends them in that order, so a parked fetch holds back the responses
behind it exactly as Kafka's one-request-in-flight channel does, while the
reader keeps pipelining.  Segment bytes of fetch responses go out with
``loop.sendfile`` (``os.sendfile`` underneath) when they are large, except on
TLS connections, where the bytes must be encrypted in user space and are written
from a buffer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque

from kafkatool.errors import KafkatoolError

log = logging.getLogger("kafkatool.broker.network")

#: stop reading a connection while this many responses wait to be written
MAX_QUEUED_RESPONSES = 256
#: slices smaller than this are read and written; larger ones are sendfile'd
SENDFILE_MIN_BYTES = 64 * 1024
_WRITE_HIGH_WATER = 4 * 1024 * 1024


class CloseConnection(KafkatoolError):
    """Raised by the router: log the reason and close this connection (Kafka's behaviour for bad input)."""


class FileSlice:
    """``size`` bytes of an open file from ``position``: what a fetch sends without copying.

    A slice queued behind other responses holds its own duplicate of the segment's
    descriptor (``owned``), so retention or compaction closing the segment meanwhile
    can never make it send another file's bytes."""

    __slots__ = ("fd", "position", "size", "owned")
    mode = "rb"

    def __init__(self, fd: int, position: int, size: int, owned: bool = False):
        self.fd = fd
        self.position = position
        self.size = size
        self.owned = owned

    # the file-object interface loop.sendfile needs; seek is a no-op so the
    # segment's own file position is never moved
    def fileno(self) -> int:
        return self.fd

    def seek(self, *_args) -> int:
        return 0

    def read_bytes(self) -> bytes:
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"short read of a segment: {len(data)} of {self.size} bytes")
        return data

    def own(self) -> FileSlice:
        return FileSlice(os.dup(self.fd), self.position, self.size, True)

    def close(self) -> None:
        if self.owned and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class FinalResponse(bytes):
    """The last bytes a connection sends (an authentication failure's answer): written, then closed."""


class Parts(list):
    """A response made of bytes and :class:`FileSlice` pieces (size prefix included)."""

    def close(self) -> None:
        for p in self:
            if type(p) is FileSlice:
                p.close()


def _discard(item) -> None:
    """Release what a queued response holds (duplicated descriptors)."""
    if isinstance(item, asyncio.Future):
        if item.done() and not item.cancelled() and item.exception() is None:
            item = item.result()
        else:
            item.cancel()
            return
    if type(item) is Parts:
        item.close()


class Connection:
    def __init__(
        self,
        server,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        listener=None,
        principal: str = "User:ANONYMOUS",
    ):
        self.server = server
        #: the config.Listener this connection came in on (None: the first one)
        self.listener = listener
        #: Kafka principal ("User:name"): from the TLS certificate or SASL, else ANONYMOUS
        self.principal = principal
        #: segment bytes cannot be spliced into a TLS stream: buffered writes instead of sendfile
        self.tls = writer.get_extra_info("ssl_object") is not None
        #: the SASL state (security/sasl.SaslSession) on SASL listeners, else None
        self.sasl = None
        self.reader = reader
        self.writer = writer
        self.transport = writer.transport
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.queue: deque = deque()
        self._wakeup = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._closed = False
        self._writer_task: asyncio.Task | None = None
        self.client_id: str | None = None
        self.last_active = time.monotonic()

    def _frame_buffered(self) -> bool:
        """A complete frame is already in the reader's buffer (so reading it will not wait)."""
        buf = getattr(self.reader, "_buffer", None)
        if buf is None or len(buf) < 4:
            return False
        return len(buf) >= 4 + int.from_bytes(buf[:4], "big", signed=True)

    def _flush(self, pending: list) -> None:
        self.writer.write(pending[0] if len(pending) == 1 else b"".join(pending))
        pending.clear()

    async def run(self) -> None:
        router = self.server.router
        max_frame = self.server.max_request_bytes
        reader = self.reader
        self._writer_task = asyncio.create_task(self._write_loop())
        # responses ready while more pipelined requests are already buffered are written
        # together, one send for many small responses
        pending: list = []
        try:
            while not self._closed:
                if pending and (len(pending) >= 64 or not self._frame_buffered()):
                    self._flush(pending)
                    if self.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                        await self.writer.drain()
                head = await reader.readexactly(4)
                size = int.from_bytes(head, "big", signed=True)
                if size < 0 or size > max_frame:
                    raise CloseConnection(
                        f"frame size {size} outside [0, {max_frame}] (socket.request.max.bytes)"
                    )
                frame = await reader.readexactly(size)
                self.last_active = time.monotonic()
                result = router.dispatch(self, frame)
                if result is None:
                    continue
                if not self.queue and type(result) is bytes:
                    pending.append(result)
                    continue
                if pending:
                    self._flush(pending)
                self.queue.append(result)
                self._wakeup.set()
                if len(self.queue) >= MAX_QUEUED_RESPONSES:
                    self._room.clear()
                    await self._room.wait()
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                log.info("client disconnected mid-request peer=%s bytes=%d", self.peer, len(exc.partial))
        except CloseConnection as exc:
            log.warning("closing connection peer=%s client_id=%s reason=%s", self.peer, self.client_id, exc)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection error peer=%s", self.peer)
        finally:
            if pending and not self.transport.is_closing():
                try:
                    self._flush(pending)
                except Exception:
                    pass
            await self._finish()

    async def _finish(self) -> None:
        # let already queued responses go out (a client pipelining then half-closing still gets them)
        if self._writer_task is not None and not self._writer_task.done():
            self._closed = True
            self._wakeup.set()
            try:
                await asyncio.wait_for(asyncio.shield(self._writer_task), 5)
            except (TimeoutError, asyncio.CancelledError, Exception):
                self._writer_task.cancel()
        self._closed = True
        for item in self.queue:
            _discard(item)
        self.queue.clear()
        try:
            self.writer.close()
        except Exception:
            pass

    def abort(self) -> None:
        self._closed = True
        self._wakeup.set()
        self.transport.abort()

    async def _write_loop(self) -> None:
        writer = self.writer
        queue = self.queue
        try:
            while True:
                if not queue:
                    if self._closed:
                        return
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                item = queue[0]
                if isinstance(item, asyncio.Future):
                    try:
                        item = await item
                    except asyncio.CancelledError:
                        return
                    except Exception:
                        log.exception("request failed peer=%s", self.peer)
                        self.transport.abort()
                        return
                if item is not None:
                    if type(item) is Parts:
                        try:
                            await self._write_parts(item)
                        finally:
                            item.close()
                    else:
                        writer.write(item)
                        if type(item) is FinalResponse:
                            await writer.drain()
                            self._closed = True
                            self.transport.close()
                            return
                queue.popleft()
                if not self._room.is_set() and len(queue) < MAX_QUEUED_RESPONSES // 2:
                    self._room.set()
                if self.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                    await writer.drain()
        except (ConnectionError, OSError, RuntimeError):
            self.transport.abort()
        finally:
            self._room.set()

    async def _write_parts(self, parts: Parts) -> None:
        loop = asyncio.get_running_loop()
        for p in parts:
            if type(p) is FileSlice:
                if p.size < SENDFILE_MIN_BYTES or self.tls:
                    self.writer.write(p.read_bytes())
                else:
                    sent = await loop.sendfile(self.transport, p, p.position, p.size)
                    if sent != p.size:
                        raise OSError(f"sendfile sent {sent} of {p.size} bytes")
            else:
                self.writer.write(p)
