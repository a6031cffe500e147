"""The append writer: client produce appends written by one thread that runs without the GIL.

A broker's event loop holds the GIL while it handles requests, so a Python thread calling
``os.pwrite`` gains nothing (it waits for the GIL at every call).  The native core
(``kafkatool/log/_append_writer.pyx``, built by tools/build_accel.py) runs its loop in C
without the GIL: the page-cache copy of a produce's bytes (20-47 us of system CPU for 16 KiB)
runs on another core while the loop handles the next requests.

- ``submit(fd, tag, data, position)`` queues a write (FIFO) and returns its sequence number;
  the core holds ``data``'s buffer until the write is done and the loop collected it, so a
  pooled frame buffer (network.FrameBuffers) is not reused meanwhile.
- ``wait(seq, tag)`` (any thread, no GIL held while waiting) returns once ``seq`` is written
  and raises the OSError of a failed write of ``tag`` (a segment: every later write of a
  failed segment fails too and is not written).
- ``when_written(seq)`` (the loop) is a future resolved once ``seq`` is written (None: it
  is already); ``failure(seq)`` then says whether that very write failed (the produce answer's
  KAFKA_STORAGE_ERROR).  The thread signals an eventfd the loop watches.
- A failed write is reported by the writer itself, as the loop collects it (the thread
  signals every failure, awaited or not): ``on_failure(owner, error)``, once per tag, with
  the owner ``own`` registered for the tag (a Segment; None once it is gone).  The broker's
  takes the segment's log dir offline (Kafka's maybeHandleIOException around the append),
  whatever became of the request that asked for the write; answers only read ``failure``.

Without the binary (no Cython or no build, KAFKATOOL_PURE_PYTHON=1) the same interface writes
at ``submit`` and is complete at once (:class:`SyncCore`): behaviour never depends on the
build, only speed.
"""

from __future__ import annotations

import collections
import errno as errno_mod
import logging
import os
import threading
import weakref

log = logging.getLogger("kafkatool.broker")

try:
    from kafkatool.log._append_writer import WriterCore as _NativeCore
except ImportError:  # not built (or stale, or KAFKATOOL_PURE_PYTHON=1): SyncCore
    _NativeCore = None


def native_available() -> bool:
    return _NativeCore is not None


class SyncCore:
    """The native core's interface, writing at submit (the thread-less fallback)."""

    def __init__(self, efd: int = -1, capacity: int = 0):
        self.submitted = 0
        self.completed = 0
        self.released = 0
        self._failed: dict[int, int] = {}  # tag -> errno
        self._failures: list[tuple[int, int, int]] = []

    def submit(self, fd: int, tag: int, data, position: int) -> int:
        seq = self.submitted + 1
        err = self._failed.get(tag, 0)
        if not err:
            try:
                n = len(data)
                written = os.pwrite(fd, data, position)
                while written < n:
                    step = os.pwrite(fd, memoryview(data)[written:], position + written)
                    if step == 0:
                        raise OSError(errno_mod.EIO, os.strerror(errno_mod.EIO))
                    written += step
            except OSError as exc:
                err = exc.errno or errno_mod.EIO
                self._failed[tag] = err
        if err:
            self._failures.append((seq, tag, err))
        self.submitted = self.completed = seq
        return seq

    def wait(self, seq: int, tag: int = 0) -> int:
        if seq > self.completed:
            return -1
        return self._failed.get(tag, 0) if tag else 0

    def failed(self, tag: int) -> int:
        return self._failed.get(tag, 0)

    def collect(self):
        failures, self._failures = self._failures or None, []
        self.released = self.completed
        return self.completed, failures

    def arm(self, seq: int) -> bool:
        return seq > self.completed

    def run(self) -> None:
        pass

    def stop(self) -> None:
        pass


def _error(err: int) -> OSError:
    return OSError(err, os.strerror(err))


class AppendWriter:
    """One per broker process (the broker's serve installs it; Log and Segment take it per
    append, client produce appends only)."""

    #: appends smaller than this are written on the event loop (Segment.append), unless writes
    #: of their segment are still queued: handing one over costs the loop more than its copy
    #: (produce of one batch a request, writer on against off, one process on 2 cores: 200 B
    #: -15%, 1 KiB -17%, 4 KiB -2%, 16 KiB +18%)
    min_bytes = 8192

    def __init__(self, *, native: bool | None = None, capacity: int = 1024, min_bytes: int | None = None):
        use_native = native_available() if native is None else native
        if use_native and _NativeCore is None:
            raise RuntimeError("the native append writer is not built (python tools/build_accel.py)")
        self.native = use_native
        if min_bytes is not None:
            self.min_bytes = min_bytes  # 0: every client append queued (tests)
        self._efd = -1
        self._loop = None
        self._thread: threading.Thread | None = None
        self._waiters: collections.deque = collections.deque()  # (seq, future), seq ascending
        self._failed: dict[int, OSError] = {}  # seq -> error, until failure() takes it
        #: (owner, OSError) -> None: a failed write, reported as collected (once per tag)
        self.on_failure = None
        self._owners: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # tag -> owner
        self._reported: set[int] = set()  # tags whose failure on_failure was told
        self.stopped = False
        if use_native:
            self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self.core = _NativeCore(self._efd, capacity)
            self._thread = threading.Thread(target=self.core.run, name="kafkatool-append-writer", daemon=True)
            self._thread.start()
        else:
            self.core = SyncCore()

    @property
    def kind(self) -> str:
        return "native" if self.native else "synchronous"

    def attach(self, loop) -> None:
        """Completions are handled on ``loop`` (its thread submits)."""
        self._loop = loop
        if self._efd >= 0:
            loop.add_reader(self._efd, self._on_ready)

    # --- the loop's side
    def own(self, tag: int, owner) -> None:
        """``owner`` (held weakly) is what a failed write of ``tag`` is reported for."""
        self._owners[tag] = owner

    def submit(self, fd: int, tag: int, data, position: int) -> int:
        """Queue a write (the synchronous core writes it now; its failure is collected, and
        reported, by the next done/when_written: never inside the append that submits)."""
        return self.core.submit(fd, tag, data, position)

    @property
    def submitted(self) -> int:
        return self.core.submitted

    def written(self, seq: int) -> bool:
        """``seq`` is in its file (or failed), collected or not (any thread)."""
        return self.core.completed >= seq

    def done(self, seq: int) -> bool:
        """``seq`` is written and collected (its failure, if any, known to :meth:`failure`)."""
        core = self.core
        if core.released >= seq:
            return True
        if core.completed >= seq:
            self.collect()
            return True
        return False

    def when_written(self, seq: int):
        """A future resolved once ``seq`` is written, or None when it already is (and collected)."""
        if self.core.released >= seq:
            return None
        if self.core.completed >= seq:
            self.collect()
            return None
        fut = self._loop.create_future()
        self._waiters.append((seq, fut))
        if not self.core.arm(self._waiters[0][0]):
            self.collect()  # written meanwhile: no signal comes for it
        return fut

    def failure(self, seq: int) -> OSError | None:
        """The error of write ``seq`` (once collected), taken: None when it was written."""
        if not self._failed:
            return None
        return self._failed.pop(seq, None)

    def _on_ready(self) -> None:
        try:
            os.eventfd_read(self._efd)
        except BlockingIOError:
            pass
        self.collect()

    def collect(self) -> None:
        """Release the written items' buffers, record and report failures, then resolve
        waiters (in order: an answer built once its write is done finds the dir offline)."""
        upto, failures = self.core.collect()
        if failures:
            for seq, tag, err in failures:
                exc = self._failed[seq] = _error(err)
                if tag not in self._reported:
                    self._reported.add(tag)
                    self._report(tag, exc)
            if len(self._failed) > 100_000:  # answers that never asked (a bound, not expected)
                for seq in sorted(self._failed)[:50_000]:
                    del self._failed[seq]
        waiters = self._waiters
        if not waiters:
            return
        while waiters and waiters[0][0] <= upto:
            _seq, fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
        if waiters and not self.core.arm(waiters[0][0]):
            # the next one was written meanwhile: resolve now (call_soon: not recursively)
            self._loop.call_soon(self.collect)

    def _report(self, tag: int, exc: OSError) -> None:
        owner = self._owners.get(tag)
        if self.on_failure is None:
            log.error("a write queued to the append writer failed (%r): %s", owner, exc)
            return
        try:
            self.on_failure(owner, exc)
        except Exception:  # the waiters must still be resolved
            log.exception("reporting a failed write of %r (%s)", owner, exc)

    # --- any thread
    def wait(self, seq: int, tag: int = 0) -> None:
        """Until write ``seq`` is done; the OSError of a failed write of ``tag`` (any thread)."""
        err = self.core.wait(seq, tag)
        if err:
            if err < 0:
                raise OSError(errno_mod.EIO, f"the append writer stopped before write {seq} was done")
            raise _error(err)

    def failed(self, tag: int) -> OSError | None:
        err = self.core.failed(tag)
        return _error(err) if err else None

    def hold(self, held: bool) -> None:
        """Tests: while held, the native thread starts no write (a stop still drains)."""
        if not self.native:
            raise RuntimeError("only the native append writer can be held")
        self.core.hold(held)

    # --- the end
    def stop(self) -> None:
        """Every queued write done, the thread ended, buffers released, waiters resolved."""
        if self.stopped:
            return
        self.stopped = True
        self.core.stop()
        if self._thread is not None:
            self._thread.join()
        if self._loop is not None and self._efd >= 0:
            try:
                self._loop.remove_reader(self._efd)
            except Exception:  # a closed loop
                pass
        if self._loop is not None and self._loop.is_closed():
            self._waiters.clear()  # nothing can run their callbacks any more
        self.collect()
        if self._efd >= 0:
            os.close(self._efd)
            self._efd = -1
