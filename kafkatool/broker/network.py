"""The asyncio network layer: one reader task per connection, responses strictly FIFO.

A connection reads size-prefixed frames (``readexactly``, so a client sending
byte by byte or nothing at all costs nothing but its socket) and hands each to
the router, which answers at once (bytes), later (a future: long-poll fetch,
waits) or never (acks=0).  Answers are queued in request order and a writer
task sends them in that order, so a parked fetch holds back the responses
behind it exactly as Kafka's one-request-in-flight channel does, while the
reader keeps pipelining.

Reading (:class:`FrameProtocol`, a buffered protocol the connection's transport is
switched to): the kernel copies request bytes with ``recv_into`` straight into their
final buffer; a frame too large for the connection's receive area gets a buffer of
its own, sized from its length prefix, and is received in place, so a produce
request's records go from the socket to the segment's ``pwrite`` with no copy in
between (the log writes offsets into that very buffer).  Smaller frames are cut out
of the receive area (one copy, many frames per ``recv_into``).

Segment bytes of fetch responses go out with ``os.sendfile`` when they are large
(straight into the socket while it has room; the rest on a network thread,
:class:`SendfileThreads`, or through ``loop.sendfile``), except on TLS connections, where
the bytes must be encrypted in user space and are written from a buffer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from kafkatool.errors import KafkatoolError

log = logging.getLogger("kafkatool.broker.network")

#: stop reading a connection while this many responses wait to be written
MAX_QUEUED_RESPONSES = 256
#: the per-connection receive area (headers and small frames, many per recv_into)
RECEIVE_AREA = 64 * 1024
#: a frame at least this large that does not fit the receive area is received in place
OWN_BUFFER_MIN = 16 * 1024
#: stop reading the socket while this many received frames wait for the router
MAX_QUEUED_FRAMES = 64
#: slices smaller than this are read and written; larger ones are sendfile'd
SENDFILE_MIN_BYTES = 64 * 1024
#: of a sendfile'd slice at least this large, all but the first SENDFILE_MIN_BYTES go out
#: uncorked with Nagle's algorithm (Connection._write_parts)
NAGLE_MIN_BYTES = 1024 * 1024
_WRITE_HIGH_WATER = 4 * 1024 * 1024
#: large frames' buffers kept for reuse (FrameBuffers), in count and in bytes
POOL_MAX_BUFFERS = 32
POOL_MAX_BYTES = 64 * 1024 * 1024


class FrameBuffers:
    """Buffers for large frames, reused once nothing refers to them any more.

    A large frame is received into a bytearray of its own, and lives as long as anything
    decoded from it (a produce request's records are memoryviews of it until the append,
    not during an acks=all wait; a follower's fetch response until its append).  A new
    bytearray per frame costs an allocation, a zero-fill and, for a fresh mapping, a page
    fault per 4 KiB (on a virtual machine also the host's), which profiles showed as a
    tenth of a follower's time.  The pool keeps a reference to every buffer it hands
    out; one whose only reference is the pool's is free (CPython counts references, and
    every memoryview of a bytearray holds one), and is resized in place, within the
    memory it already has, and handed out again.  Shared by the process's connections,
    bounded in count and bytes; a lock makes the check-and-take atomic across threads."""

    def __init__(self, max_buffers: int = POOL_MAX_BUFFERS, max_bytes: int = POOL_MAX_BYTES):
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes
        self._bufs: list[bytearray] = []
        self._lock = threading.Lock()

    def get(self, size: int) -> bytearray:
        """A bytearray of exactly ``size`` bytes, contents undefined (the caller overwrites
        all of it).

        Pooled buffers have power-of-two capacities, so one serves every size of its class
        (more than half its capacity, up to all of it): CPython resizes a bytearray in
        place while the new size stays above half of what it has allocated, and requests
        of one client vary in size from one to the next.  An exact-size buffer served only
        the sizes from half of its own up to it (sizes drawn at random from 100 KB to 1 MB
        with four held at a time: 48 fresh allocations in 5,000 frames, 17 with classes)."""
        getrefcount = sys.getrefcount
        with self._lock:
            bufs = self._bufs
            free = -1
            for i in range(len(bufs)):
                if getrefcount(bufs[i]) != 2:  # the list's reference and the argument
                    continue
                b = bufs[i]
                if size < b.__alloc__() <= 2 * size:  # within its class: no reallocation
                    _resize(b, size)
                    return b
                if free < 0:
                    free = i
            cap = 1 << (size - 1).bit_length()
            if cap > self.max_bytes:
                return bytearray(size)  # never pooled: no rounding up
            used = sum(x.__alloc__() for x in bufs)
            if free >= 0 and (len(bufs) >= self.max_buffers or used + cap > self.max_bytes):
                used -= bufs.pop(free).__alloc__()  # make room: drop a free one of another class
            b = bytearray(cap)
            _resize(b, size)
            if len(bufs) < self.max_buffers and used + cap <= self.max_bytes:
                bufs.append(b)
            return b


#: zeros to grow a pooled buffer with, without a temporary object per call
_ZEROS = memoryview(bytes(1 << 20))


def _resize(b: bytearray, size: int) -> None:
    """Resize within the capacity a bytearray already has (see FrameBuffers.get)."""
    n = len(b)
    if n > size:
        del b[size:]
    while n < size:
        k = min(size - n, len(_ZEROS))
        b += _ZEROS[:k]
        n += k


FRAME_BUFFERS = FrameBuffers()


def _sendfile_waiting(
    sock_fd: int, file_fd: int, position: int, size: int, stall_ms: int, budget_s: float
) -> int:
    """On a network thread: ``os.sendfile`` until ``size`` bytes are sent, waiting for room
    with ``poll`` (the interpreter lock is released in both); stops early when the socket
    had no room for ``stall_ms`` or after ``budget_s``.  Closes both descriptors (its own
    duplicates: the loop may close the originals meanwhile)."""
    try:
        poller = select.poll()
        poller.register(sock_fd, select.POLLOUT)
        deadline = time.monotonic() + budget_s
        sent = 0
        while sent < size:
            try:
                n = os.sendfile(sock_fd, file_fd, position + sent, size - sent)
            except BlockingIOError:
                if time.monotonic() > deadline or not poller.poll(stall_ms):
                    break
                continue
            if n == 0:
                break  # the file ends early: the caller reports the short send
            sent += n
        return sent
    finally:
        os.close(sock_fd)
        os.close(file_fd)


class SendfileThreads:
    """Kafka's network threads' share of a fetch: the rest of a large sendfile that did not
    fit the socket's buffer runs on a thread that waits for room in ``poll``, so the
    kernel's work of many connections' sendfiles (about 93% of a broker's CPU while it
    serves fetches: page cache references, loopback TCP, wake-ups) runs on several cores
    beside the event loop.  A request never waits for a thread: with all busy the loop's
    own ``loop.sendfile`` sends it, as it does what a stalled reader left.  A process
    allowed only one core (``taskset``) hands nothing over: there a thread cannot run beside
    the loop and would only add switches."""

    def __init__(self, count: int, stall_ms: int = 10, budget_s: float = 0.2):
        self.count = count if len(os.sched_getaffinity(0)) > 1 else 0
        self.stall_ms = stall_ms
        self.budget_s = budget_s
        self.busy = 0
        #: sendfiles handed to a thread, and the bytes the threads sent (the loop's counts)
        self.handoffs = 0
        self.sent = 0
        self.pool = ThreadPoolExecutor(
            max_workers=max(1, count), thread_name_prefix="data-plane-kafka-network-thread"
        )

    async def send(self, loop, sock_fd: int, file_fd: int, position: int, size: int) -> int:
        if self.busy >= self.count:
            return 0
        fds = (os.dup(sock_fd), os.dup(file_fd))
        try:
            fut = loop.run_in_executor(
                self.pool, _sendfile_waiting, *fds, position, size, self.stall_ms, self.budget_s
            )
        except RuntimeError:  # shut down
            os.close(fds[0])
            os.close(fds[1])
            return 0
        self.handoffs += 1
        self.busy += 1  # until the thread is done, even if the caller is cancelled meanwhile
        fut.add_done_callback(self._done)
        return await asyncio.shield(fut)

    def _done(self, fut) -> None:
        self.busy -= 1
        if not fut.cancelled() and fut.exception() is None:
            self.sent += fut.result()

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False)


class CloseConnection(KafkatoolError):
    """Raised by the router: log the reason and close this connection (Kafka's behaviour for bad input)."""


class RequestFailed(KafkatoolError):
    """A handler's failure that Kafka answers for the whole request as the client sent it
    (KafkaApis.handleError -> AbstractRequest.getErrorResponse), raised before the handler
    answers anything: the router answers ``answer(request)`` (which raises CloseConnection where
    Kafka has no answer, acks=0).  A wrapper that narrowed the request (security/acl_rules: the
    topics the principal may not write) puts it back before the error goes on, as Kafka's
    authorization leaves the request whole."""

    def __init__(self, detail: str, answer):
        super().__init__(detail)
        self.answer = answer


class FrameProtocol(asyncio.BufferedProtocol):
    """Size-prefixed frames received with ``recv_into`` (see the module docstring), as
    writable ``bytearray``s in arrival order; also the transport's write flow control."""

    def __init__(self, transport, max_frame: int):
        self.transport = transport
        self.max_frame = max_frame
        self._area = bytearray(RECEIVE_AREA)
        self._start = 0  # first byte not yet cut into a frame
        self._end = 0  # end of the received bytes
        self._own: bytearray | None = None  # a large frame being received in place
        self._own_got = 0
        self.frames: deque = deque()
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future | None = None
        self._reading = True
        #: a client quota's throttle (KIP-219): nothing is read from the socket meanwhile
        self._muted = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future] = []

    # --- the transport's side
    def get_buffer(self, sizehint: int):
        if self._own is not None:
            return memoryview(self._own)[self._own_got :]
        if self._end == len(self._area):
            self._compact()
        return memoryview(self._area)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._own is not None:
            self._own_got += nbytes
            if self._own_got == len(self._own):
                self._push(self._own)
                self._own = None
            return
        self._end += nbytes
        self._cut_frames()

    def _compact(self) -> None:
        left = self._end - self._start
        if self._start:
            self._area[:left] = self._area[self._start : self._end]
        self._start, self._end = 0, left

    def _cut_frames(self) -> None:
        area = self._area
        while True:
            avail = self._end - self._start
            if avail < 4:
                break
            size = int.from_bytes(area[self._start : self._start + 4], "big", signed=True)
            if size < 0 or size > self.max_frame:
                self._push(
                    CloseConnection(
                        f"frame size {size} outside [0, {self.max_frame}] (socket.request.max.bytes)"
                    )
                )
                self.transport.pause_reading()
                self._reading = False
                self._start = self._end = 0
                return
            if avail - 4 >= size:
                begin = self._start + 4
                self._push(area[begin : begin + size])  # a bytearray: one copy, writable
                self._start = begin + size
                continue
            if size >= OWN_BUFFER_MIN or 4 + size > len(area):
                # received in place from here on: the rest of the frame lands in its own buffer
                own = FRAME_BUFFERS.get(size)
                got = avail - 4
                own[:got] = area[self._start + 4 : self._end]
                self._start = self._end = 0
                if got == size:
                    self._push(own)
                else:
                    self._own, self._own_got = own, got
                return
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(area):
            self._compact()

    def _push(self, item) -> None:
        self.frames.append(item)
        if self._reading and len(self.frames) >= MAX_QUEUED_FRAMES:
            self.transport.pause_reading()
            self._reading = False
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return True  # keep the transport: queued responses still go out (half-close)

    def connection_lost(self, exc) -> None:
        self._eof = True
        if exc is not None and self._error is None:
            self._error = exc
        self._wake()
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(exc or ConnectionResetError("connection lost"))
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()

    # --- the connection's side
    async def read_frame(self) -> bytearray:
        """The next frame; IncompleteReadError at end of stream (with a partial frame's
        bytes, if any), CloseConnection for an impossible length prefix."""
        while not self.frames:
            if self._error is not None:
                raise self._error
            if self._eof:
                partial = bytes(self._area[self._start : self._end])
                if self._own is not None:
                    partial += bytes(self._own[: self._own_got])
                raise asyncio.IncompleteReadError(partial, None)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self.frames.popleft()
        if not self._reading and len(self.frames) <= MAX_QUEUED_FRAMES // 4 and self._error is None:
            if not isinstance(item, CloseConnection) and not self._muted:
                self._reading = True
                self.transport.resume_reading()
        if isinstance(item, CloseConnection):
            raise item
        return item

    def mute(self) -> None:
        """Stop reading the socket (a throttled connection, SocketServer's channel mute)."""
        if not self._muted:
            self._muted = True
            if self._reading and not self.transport.is_closing():
                self.transport.pause_reading()

    def unmute(self) -> None:
        if self._muted:
            self._muted = False
            if self._reading and not self.transport.is_closing():
                self.transport.resume_reading()

    async def drain(self) -> None:
        if self.transport.is_closing():
            await asyncio.sleep(0)  # as StreamWriter.drain: let connection_lost run
            if self._error is not None:
                raise self._error
            return
        if not self._write_paused:
            return
        w = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(w)
        await w

    def take_over(self, reader: asyncio.StreamReader) -> None:
        """Become the transport's protocol; bytes the stream reader already holds come first."""
        pending = bytes(reader._buffer)
        reader._buffer.clear()
        self.transport.set_protocol(self)
        view = memoryview(pending)
        while view:
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]
        if reader.at_eof() or reader._eof:
            self._eof = True


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


class AfterWrite:
    """An answer that may leave only once the append writer (log/append_writer.py) has written
    ``seq`` (a produce answer whose writes were queued): ``build()`` makes it then (a write's failure
    changes it: KAFKA_STORAGE_ERROR, or acks=0's CloseConnection).

    Lighter than an awaitable answer (no task, no future per request): the connection queues
    it, writes it at once when the write is already done, else its writer task waits for
    the writer's one future for ``seq`` (Connection).  The router wraps
    ``build`` so that it returns the encoded answer."""

    __slots__ = ("writer", "seq", "build")

    def __init__(self, writer, seq: int, build):
        self.writer = writer
        self.seq = seq
        self.build = build

    def done(self) -> bool:
        """Written (and its outcome collected): ``build`` may run."""
        return self.writer.done(self.seq)

    async def wait(self) -> None:
        fut = self.writer.when_written(self.seq)
        if fut is not None:
            await fut

    async def answer(self):
        """Wait, then build (for callers that await answers: a forwarded call, the
        deferred produce path)."""
        await self.wait()
        return self.build()


class Parts(list):
    """A response made of bytes and :class:`FileSlice` pieces (size prefix included)."""

    def close(self) -> None:
        for p in self:
            if type(p) is FileSlice:
                p.close()


class _Ready:
    """Bytes already encoded, built as an AfterWrite is (the write loop's batch of answers)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def build(self) -> bytes:
        return self.data


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
        #: authenticated with a delegation token (KafkaPrincipal.tokenAuthenticated)
        self.token_authenticated = False
        #: segment bytes cannot be spliced into a TLS stream: buffered writes instead of sendfile
        self.tls = writer.get_extra_info("ssl_object") is not None
        #: the TCP socket, for TCP_CORK around responses sent with sendfile (None on TLS)
        sock = writer.get_extra_info("socket")
        self._sock = (
            sock
            if not self.tls and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6)
            else None
        )
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
        #: a client quota's throttle: no request is read before this (time.monotonic), 0 none
        self.muted_until = 0.0
        #: set once the last produce whose append had to wait (KIP-890 verification) appended:
        #: the connection's next produce appends after it (handlers/produce.handle_produce)
        self.produce_appended: asyncio.Future | None = None
        #: the transport's protocol from now on: frames in, write flow control
        self.frames = FrameProtocol(self.transport, server.max_request_bytes)
        self.frames.take_over(reader)

    def _frame_buffered(self) -> bool:
        """A complete frame is already received (so reading it will not wait)."""
        return bool(self.frames.frames)

    def _flush(self, pending: list) -> None:
        """Write the answers ready; a produce answer whose writes are not done yet
        (AfterWrite) and all after it go to the writer task's queue, which waits for them."""
        held = None
        for i, item in enumerate(pending):
            if type(item) is AfterWrite:
                if not item.done():
                    held = pending[i:]
                    del pending[i:]
                    break
                try:
                    data = item.build()
                except CloseConnection:
                    # (a failed acks=0 produce's write): the answers before it go out
                    if i:
                        self.writer.write(b"".join(pending[:i]))
                    pending.clear()
                    raise
                pending[i] = data if data is not None else b""
        if pending:
            self.writer.write(pending[0] if len(pending) == 1 else b"".join(pending))
            pending.clear()
        if held:
            self.queue.extend(held)
            self._wakeup.set()

    async def run(self) -> None:
        router = self.server.router
        frames = self.frames
        self._writer_task = asyncio.create_task(self._write_loop())
        # responses ready while more pipelined requests are already buffered are written
        # together, one send for many small responses
        pending: list = []
        try:
            while not self._closed:
                if pending and (len(pending) >= 64 or not self._frame_buffered()):
                    self._flush(pending)
                    if self.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                        await frames.drain()
                if self.muted_until:
                    if pending:
                        self._flush(pending)
                    await self._wait_throttle()
                    continue
                frame = await frames.read_frame()
                self.last_active = time.monotonic()
                result = router.dispatch(self, frame)
                if result is None:
                    continue
                if not self.queue and (type(result) is bytes or type(result) is AfterWrite):
                    # an AfterWrite (a produce answer whose writes may still be queued) is
                    # built when the answers are written, by then its write is usually done
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
            self._log_close(exc)
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

    def throttle(self, ms: int) -> None:
        """KIP-219: the answer goes out at once with its throttle time, and the connection
        reads nothing more until ``ms`` from now (a longer throttle already running stays)."""
        until = time.monotonic() + ms / 1000.0
        if until > self.muted_until:
            self.muted_until = until
            self.frames.mute()
            # an answer that waited (a JoinGroup, a SyncGroup) is throttled when it is done,
            # while run() already waits for the next frame of the muted socket and so never
            # reaches _wait_throttle: the throttle's end unmutes it here too, as Kafka's
            # ClientQuotaManager.ThrottledChannelReaper ends any throttle
            # (EndThrottlingResponse), else nothing more was ever read from the connection
            asyncio.get_running_loop().call_later(ms / 1000.0, self._throttle_over)

    def _throttle_over(self) -> None:
        """A throttle's time has passed: read again, unless a longer one runs (or the timer
        came a moment early: then at its end)."""
        if not self.muted_until:
            return
        left = self.muted_until - time.monotonic()
        if left > 0:
            asyncio.get_running_loop().call_later(left, self._throttle_over)
            return
        self.muted_until = 0.0
        self.frames.unmute()

    async def _wait_throttle(self) -> None:
        """The reader's wait (no frame already received is dispatched meanwhile); the throttle
        ends by the one rule, :meth:`_throttle_over` (extended meanwhile: the reader waits again)."""
        delay = self.muted_until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        self._throttle_over()

    def _log_close(self, exc: CloseConnection) -> None:
        """The one line for a connection closed on bad input (Kafka closes it too)."""
        log.warning("closing connection peer=%s client_id=%s reason=%s", self.peer, self.client_id, exc)

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
                if type(item) is AfterWrite:
                    # a produce answer held until its writes are done; those after it that
                    # are ready then go out in the same write
                    if not item.done():
                        try:
                            await item.wait()
                        except asyncio.CancelledError:
                            return
                    out = []
                    try:
                        while True:
                            queue.popleft()
                            data = item.build()
                            if data is not None:
                                out.append(data)
                            if not queue:
                                break
                            item = queue[0]
                            if type(item) is bytes:
                                item = _Ready(item)
                            elif type(item) is not AfterWrite or not item.done():
                                break
                    except CloseConnection as exc:
                        if out:
                            writer.write(b"".join(out))
                        self._log_close(exc)
                        self._closed = True
                        self.transport.close()
                        return
                    if out:
                        writer.write(out[0] if len(out) == 1 else b"".join(out))
                    if not self._room.is_set() and len(queue) < MAX_QUEUED_RESPONSES // 2:
                        self._room.set()
                    if self.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                        await self.frames.drain()
                    continue
                if isinstance(item, asyncio.Future):
                    try:
                        item = await item
                    except asyncio.CancelledError:
                        return
                    except CloseConnection as exc:
                        # as the reader does for one answered at once: one line; the answers
                        # before it are written (FIFO), then the connection is closed
                        self._log_close(exc)
                        self._closed = True
                        self.transport.close()
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
                            await self.frames.drain()
                            self._closed = True
                            self.transport.close()
                            return
                queue.popleft()
                if not self._room.is_set() and len(queue) < MAX_QUEUED_RESPONSES // 2:
                    self._room.set()
                if self.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                    await self.frames.drain()
        except (ConnectionError, OSError, RuntimeError):
            self.transport.abort()
        finally:
            self._room.set()

    async def _write_parts(self, parts: Parts) -> None:
        """A response with segment bytes: the pieces between two sendfiles go out as one
        write (a fetch response's size prefix, headers and length prefixes are pieces of a
        few bytes; slices too small to sendfile are read and joined to them), and the socket
        is corked (TCP_CORK) from those pieces to the first bytes of the sendfile after them,
        so the headers leave in the packets of the data.  Uncorked, each small piece left in a
        packet of its own, which on loopback runs the receiver's TCP path in the sender's
        syscall and wakes the receiver for a few bytes: a leader's profile had a fifth of its
        time there.  Of a slice of NAGLE_MIN_BYTES or more, the rest goes out uncorked with
        Nagle's algorithm (TCP_NODELAY off) until the response ends, when TCP_NODELAY is set
        again (which sends what Nagle held at once): sent corked throughout, or with
        TCP_NODELAY, megabytes left in smaller packets, each its own trip through the
        receiver's TCP path (measured on loopback, 4 connections, 32 MiB each: 5.1 GB/s
        corked throughout, 6.0-6.4 with TCP_NODELAY, 7.7-8.0 as here, the same as a socket
        that never had either).  A smaller slice stays corked to the end of the response:
        there the two ways cost the same at 512 KiB, and corked throughout is faster below
        (128 KiB slices: 4.0 GB/s against 2.6)."""
        loop = asyncio.get_running_loop()
        cork = self._sock is not None and any(
            type(p) is FileSlice and p.size >= SENDFILE_MIN_BYTES for p in parts
        )
        corked = nagle = False
        try:
            write = self.writer.write
            pending: list = []
            size = 0
            for p in parts:
                if type(p) is FileSlice and p.size >= SENDFILE_MIN_BYTES and not self.tls:
                    if cork and not corked:
                        self._set_cork(1)
                        corked = True
                    if pending:
                        write(pending[0] if len(pending) == 1 else b"".join(pending))
                        pending, size = [], 0
                    sent = 0
                    if corked and p.size >= NAGLE_MIN_BYTES:  # the pieces and the first bytes, corked
                        sent = self._sendfile_now(p, 0, SENDFILE_MIN_BYTES)
                        self._set_cork(0)
                        corked = False
                        if sent < p.size and not nagle:
                            self._set_nodelay(0)
                            nagle = True
                    sent = self._sendfile_now(p, sent)
                    if sent < p.size:  # the socket is full: a network thread waits for room
                        sent += await self._sendfile_thread(loop, p, sent)
                    if sent < p.size:  # none free, or the reader stalled: asyncio waits for room
                        rest = FileSlice(p.fd, p.position + sent, p.size - sent)
                        sent += await loop.sendfile(self.transport, rest, rest.position, rest.size)
                    if sent != p.size:
                        raise OSError(f"sendfile sent {sent} of {p.size} bytes")
                    continue
                piece = p.read_bytes() if type(p) is FileSlice else p
                pending.append(piece)
                size += len(piece)
                if size >= SENDFILE_MIN_BYTES:  # bounded: never one big joined copy
                    write(pending[0] if len(pending) == 1 else b"".join(pending))
                    pending, size = [], 0
            if pending:
                write(pending[0] if len(pending) == 1 else b"".join(pending))
        finally:
            if corked:
                self._set_cork(0)
            if nagle:
                self._set_nodelay(1)

    def _sendfile_now(self, p: FileSlice, sent: int = 0, upto: int | None = None) -> int:
        """How much of ``p`` is in the socket once ``os.sendfile`` has put there what fits
        without waiting, from ``sent`` (bytes of ``p`` already sent) up to ``upto`` bytes of
        ``p`` (default: all of them); ``sent`` when the transport still buffers earlier
        bytes (they leave first) or the socket is full.  ``loop.sendfile`` costs a dozen
        Python calls and four epoll changes per call (it pauses reading and waits for
        writability even when the socket has room): a leader serving two followers made
        1,200 epoll_ctl calls a second for it.  The socket is used in place only while the
        transport is open and holds nothing, on the loop's thread, so no byte can overtake
        another."""
        if not self._socket_free():
            return sent
        fd = self._sock.fileno()
        end = p.size if upto is None else min(upto, p.size)
        try:
            while sent < end and fd >= 0:
                n = os.sendfile(fd, p.fd, p.position + sent, end - sent)
                if n == 0:
                    break  # the file ends early: the caller reports the short send
                sent += n
        except BlockingIOError:
            pass
        return sent

    def _socket_free(self) -> bool:
        """The socket may be written in place, bypassing the transport: a plain TCP socket,
        the transport open and holding no earlier bytes (they would be overtaken)."""
        return (
            self._sock is not None
            and not self.transport.is_closing()
            and not self.transport.get_write_buffer_size()
        )

    async def _sendfile_thread(self, loop, p: FileSlice, sent: int) -> int:
        """Bytes of ``p`` past ``sent`` that a network thread sent (``SendfileThreads``): 0
        when none is free or the socket cannot be used in place (``_socket_free``)."""
        threads = self.server.network_threads
        if threads is None or not self._socket_free():
            return 0
        return await threads.send(loop, self._sock.fileno(), p.fd, p.position + sent, p.size - sent)

    def _set_cork(self, on: int) -> None:
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, on)
        except OSError:
            pass  # the connection is going away; its writer finds out

    def _set_nodelay(self, on: int) -> None:
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, on)
        except OSError:
            pass  # the connection is going away; its writer finds out
