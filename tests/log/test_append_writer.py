"""The append writer (log/append_writer.py): client produce appends written by a thread that
runs without the GIL, and the segment's reads, truncation, flush and close waiting for them.

The native core is held (``AppendWriter.hold``) to make "the write has not happened yet"
deterministic; those tests need the built binary (tools/build_accel.py) and are skipped
without it.  The synchronous core (the fallback) is checked against the same interface."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from kafkatool.formats import records as R
from kafkatool.log.append_writer import AppendWriter, SyncCore, native_available
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log

needs_native = pytest.mark.skipif(not native_available(), reason="the native append writer is not built")
KINDS = [pytest.param(True, marks=needs_native, id="native"), pytest.param(False, id="synchronous")]


def _batch(value: bytes = b"v", n: int = 1) -> bytes:
    return R.build_record_batch([R.SimpleRecord(value, b"k%d" % i, [], 1_700_000_000_000) for i in range(n)])


@pytest.fixture
def writer(request):
    w = AppendWriter(native=request.param, min_bytes=0)
    yield w
    w.stop()


def _in_thread(fn):
    """Run ``fn`` on a thread: (thread, box) where box gets its result or exception."""
    box: dict = {}

    def run():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def _still_waiting(t: threading.Thread, seconds: float = 0.3) -> bool:
    t.join(seconds)
    return t.is_alive()


@pytest.mark.parametrize("writer", KINDS, indirect=True)
def test_writes_land_in_order_and_buffers_are_held_until_collected(writer, tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        buf = bytearray(b"a" * 4096 + b"b" * 4096)
        seqs = [writer.submit(fd, 1, memoryview(buf)[i * 4096 : (i + 1) * 4096], i * 4096) for i in range(2)]
        if writer.native:
            # the writer holds the buffer: a pooled frame buffer is not reused meanwhile
            with pytest.raises(BufferError):
                buf.extend(b"x")
        writer.wait(seqs[-1], 1)
        assert os.pread(fd, 8192, 0) == bytes(buf)
        for s in seqs:
            assert writer.done(s) and writer.failure(s) is None
        buf.extend(b"x")  # collected: released
    finally:
        os.close(fd)


@pytest.mark.parametrize("writer", KINDS, indirect=True)
def test_a_failed_write_fails_every_later_write_of_its_tag_and_only_those(writer, tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    ro = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        bad = writer.submit(ro, 7, b"xxxx", 0)  # EBADF: not open for writing
        later = writer.submit(fd, 7, b"yyyy", 0)  # same tag: failed too, not written
        other = writer.submit(fd, 8, b"zzzz", 4)
        with pytest.raises(OSError) as e:
            writer.wait(later, 7)
        assert e.value.errno == errno.EBADF
        writer.wait(other, 8)
        assert writer.done(other)
        assert writer.failure(bad).errno == errno.EBADF
        assert writer.failure(later).errno == errno.EBADF
        assert writer.failure(other) is None
        assert os.pread(fd, 8, 0) == b"\0\0\0\0zzzz"
        assert writer.failed(7).errno == errno.EBADF and writer.failed(8) is None
    finally:
        os.close(fd)
        os.close(ro)


@pytest.mark.parametrize("writer", KINDS, indirect=True)
def test_a_failed_write_is_reported_once_for_its_owner_as_collected(writer, tmp_path):
    """The writer reports a failure itself (``on_failure``), once per tag, for the owner
    registered for the tag, before any waiter of the write is resolved."""
    import asyncio

    class Owner:
        pass

    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    ro = os.open(tmp_path / "f", os.O_RDONLY)
    owner, told = Owner(), []
    writer.on_failure = lambda o, exc: told.append((o, exc.errno))

    async def main():
        writer.attach(asyncio.get_running_loop())
        writer.own(7, owner)
        writer.submit(ro, 7, b"xxxx", 0)  # EBADF
        last = writer.submit(fd, 7, b"yyyy", 0)  # same tag: failed too
        ok = writer.submit(fd, 8, b"zzzz", 0)
        fut = writer.when_written(ok)
        if fut is not None:
            fut.add_done_callback(lambda _f: told.append("resolved"))
            await asyncio.wait_for(fut, 10)
        assert writer.done(last) and writer.failure(last).errno == errno.EBADF

    try:
        asyncio.run(main())
        assert told[0] == (owner, errno.EBADF)
        assert told.count((owner, errno.EBADF)) == 1  # once for the tag
    finally:
        os.close(fd)
        os.close(ro)


@needs_native
def test_a_failed_write_nobody_waits_for_is_reported_by_the_loop(tmp_path):
    """The native thread signals a failure whoever waits: the loop collects and reports it
    though no answer asked (a produce whose connection is gone)."""
    import asyncio

    w = AppendWriter(native=True, min_bytes=0)
    ro = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)
    owner = type("Owner", (), {})()
    told = []

    async def main():
        loop = asyncio.get_running_loop()
        reported = loop.create_future()
        w.on_failure = lambda o, exc: reported.done() or reported.set_result((o, exc.errno))
        w.attach(loop)
        w.own(3, owner)
        w.hold(True)
        w.submit(ro, 3, b"xxxx", 0)
        await asyncio.sleep(0.05)
        w.hold(False)  # written (failed) with no waiter armed: no done/when_written is asked
        told.append(await asyncio.wait_for(reported, 10))

    try:
        asyncio.run(main())
        assert told == [(owner, errno.EBADF)]
    finally:
        w.stop()
        os.close(ro)


def test_the_synchronous_core_is_complete_at_submit(tmp_path):
    core = SyncCore()
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        seq = core.submit(fd, 1, b"abc", 0)
        assert core.completed == seq == 1 and core.wait(seq, 1) == 0
        assert os.pread(fd, 3, 0) == b"abc"
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the segment waits


@pytest.fixture
def held():
    if not native_available():
        pytest.skip("the native append writer is not built")
    w = AppendWriter(native=True, min_bytes=0)  # every append queued, however small
    w.hold(True)
    yield w
    w.hold(False)
    w.stop()


def _log_with_one_queued_append(tmp_path, writer):
    lg = Log(tmp_path / "t-0", LogConfig())
    data = bytearray(_batch(b"queued"))
    info = lg.append_as_leader(data, 0, writer=writer)
    assert info.write_seq > 0
    return lg, lg.active_segment, len(data)


def test_a_queued_append_moves_the_log_on_but_is_not_in_the_file_until_written(tmp_path, held):
    lg, seg, n = _log_with_one_queued_append(tmp_path, held)
    assert lg.log_end_offset == 1 and seg.size == n
    assert os.fstat(seg._fd).st_size == 0  # not written yet
    # a read (a fetch's descriptor, a scan of the batches) waits for it
    t, box = _in_thread(lambda: [b.base_offset for b in seg.batches()])
    assert _still_waiting(t)
    held.hold(False)
    t.join(10)
    assert box == {"result": [0]}
    assert os.fstat(seg._fd).st_size == n
    lg.close()


def test_a_fetch_slice_of_a_queued_append_sends_its_bytes(tmp_path, held):
    lg, seg, n = _log_with_one_queued_append(tmp_path, held)
    t, box = _in_thread(lambda: lg.read(0, 1 << 20).slices[0].read_bytes())
    assert _still_waiting(t)
    held.hold(False)
    t.join(10)
    data = box["result"]
    assert len(data) == n and R.RecordBatch(data, 0).base_offset == 0
    lg.close()


@pytest.mark.parametrize("operation", ["close", "truncate", "flush", "delete"])
def test_close_truncate_flush_and_delete_wait_for_queued_writes(tmp_path, held, operation):
    lg, seg, n = _log_with_one_queued_append(tmp_path, held)
    path = seg.log_path
    ops = {
        "close": lambda: seg.close(),
        "truncate": lambda: seg.truncate_to(0),
        "flush": lambda: seg.flush(),
        "delete": lambda: seg.delete_files(),
    }
    t, box = _in_thread(ops[operation])
    assert _still_waiting(t)
    assert "result" not in box and "error" not in box
    held.hold(False)
    t.join(10)
    assert "error" not in box, box
    if operation in ("close", "flush"):
        assert path.stat().st_size == n  # the bytes are there before the close/fsync
    elif operation == "truncate":
        assert box["result"] == n and seg.size == 0 and os.fstat(seg._fd).st_size == 0
    else:
        assert not path.exists()
    if operation != "delete":
        lg.close()


def test_a_failed_queued_write_is_raised_by_reads_and_flush_not_by_release(tmp_path):
    if not native_available():
        pytest.skip("the native append writer is not built")
    w = AppendWriter(native=True, min_bytes=0)
    try:
        w.hold(True)
        lg, seg, _n = _log_with_one_queued_append(tmp_path, w)
        ro = os.open(seg.log_path, os.O_RDONLY)
        os.dup2(ro, seg._fd)  # the segment's descriptor now refuses writes (EBADF)
        os.close(ro)
        w.hold(False)
        with pytest.raises(OSError) as e:
            seg.fileno()
        assert e.value.errno == errno.EBADF
        with pytest.raises(OSError):
            lg.flush()
        lg.release()  # a failed dir's logs are let go of without raising
    finally:
        w.stop()


def test_a_writer_stopped_with_queued_writes_writes_them_first(tmp_path, held):
    lg, seg, n = _log_with_one_queued_append(tmp_path, held)
    t, box = _in_thread(held.stop)
    t.join(10)
    assert not t.is_alive() and "error" not in box
    assert os.fstat(seg._fd).st_size == n
    lg.close()


def test_without_a_writer_appends_stay_synchronous(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig())
    data = _batch()
    info = lg.append_as_leader(data, 0)
    assert info.write_seq == 0
    assert os.fstat(lg.active_segment._fd).st_size == len(data)
    lg.close()


def test_a_roll_waits_for_the_old_segments_writes(tmp_path, held):
    lg, seg, n = _log_with_one_queued_append(tmp_path, held)
    t, box = _in_thread(lambda: lg.roll())
    assert _still_waiting(t)  # on_become_inactive trims the file: after its writes
    held.hold(False)
    t.join(10)
    assert "error" not in box, box
    assert seg.log_path.stat().st_size == n
    lg.close()


def test_a_big_queue_grows_the_ring(tmp_path, held):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        seqs = [held.submit(fd, 1, b"%08d" % i, 8 * i) for i in range(5000)]
        held.hold(False)
        held.wait(seqs[-1], 1)
        assert os.pread(fd, 16, 8 * 4998) == b"%08d%08d" % (4998, 4999)
        start = time.monotonic()
        while not held.done(seqs[-1]) and time.monotonic() - start < 5:
            time.sleep(0.01)
        assert held.done(seqs[-1])
    finally:
        os.close(fd)


def test_a_synchronous_append_after_queued_ones_waits_for_them(tmp_path, held):
    """A transaction marker (a coordinator's append) must not reach the file past a hole of
    queued client bytes: a crash then would leave a batch recovery drops."""
    lg, seg, n = _log_with_one_queued_append(tmp_path, held)
    marker = bytearray(_batch(b"sync"))
    t, box = _in_thread(lambda: lg.append_as_leader(marker, 0, origin="coordinator"))
    assert _still_waiting(t)
    assert os.fstat(seg._fd).st_size == 0
    held.hold(False)
    t.join(10)
    assert "error" not in box, box
    assert [b.base_offset for b in seg.batches()] == [0, 1]
    lg.close()


def test_a_small_append_is_written_on_the_loop_unless_writes_of_its_segment_are_queued(tmp_path):
    """Below min_bytes an append is written at once (handing it over costs more than its copy),
    except behind queued writes of its segment, where it is queued too: the file gets every
    batch in offset order either way."""
    if not native_available():
        pytest.skip("the native append writer is not built")
    w = AppendWriter(native=True)
    w.hold(True)
    try:
        lg = Log(tmp_path / "t-0", LogConfig())
        seg = lg.active_segment
        small = _batch(b"s")
        assert len(small) < w.min_bytes
        assert lg.append_as_leader(bytearray(small), 0, writer=w).write_seq == 0
        assert os.fstat(seg._fd).st_size == len(small)  # written though the writer is held
        big = _batch(b"b" * w.min_bytes)
        assert lg.append_as_leader(bytearray(big), 0, writer=w).write_seq > 0
        assert lg.append_as_leader(bytearray(_batch(b"t")), 0, writer=w).write_seq > 0  # behind it
        assert os.fstat(seg._fd).st_size == len(small)
        w.hold(False)
        assert [b.base_offset for b in seg.batches()] == [0, 1, 2]
        assert [r.value for b in seg.batches() for r in b.records()] == [b"s", b"b" * w.min_bytes, b"t"]
        assert lg.append_as_leader(bytearray(_batch(b"u")), 0, writer=w).write_seq == 0  # none queued now
    finally:
        w.hold(False)
        w.stop()
