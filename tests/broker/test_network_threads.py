"""Writing responses with segment bytes (broker/network.Connection._write_parts) and the
network threads (SendfileThreads): the rest of a large sendfile that did not fit the socket
runs on a thread, never holds one for a stalled reader, never makes a request wait for a
thread, and works on descriptors of its own."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from kafkatool.broker.network import (
    NAGLE_MIN_BYTES,
    SENDFILE_MIN_BYTES,
    Connection,
    FileSlice,
    Parts,
    SendfileThreads,
)

BIG = 24 << 20  # far more than a loopback socket's buffers hold

needs_two_cores = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="network threads hand over only with 2 cores or more"
)


def _segment(tmp_path, size: int = BIG):
    seg = tmp_path / "seg.log"
    data = os.urandom(1 << 20) * (size >> 20)
    seg.write_bytes(data)
    return seg, data


class _Server:
    def __init__(self, threads):
        self.network_threads = threads


async def _connected(threads, pause_s: float, got: bytearray, expected: int):
    """A connection to a reader that waits ``pause_s`` before it reads (the socket fills),
    then reads everything; returns (conn, reader_done, server)."""
    done = asyncio.Event()

    async def serve(reader, writer):
        await asyncio.sleep(pause_s)
        while len(got) < expected:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            got.extend(chunk)
        done.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    conn = Connection.__new__(Connection)
    conn.server = _Server(threads)
    conn.writer, conn.transport, conn.tls = writer, writer.transport, False
    conn._sock = writer.get_extra_info("socket")
    return conn, done, server


def _send(seg, parts_of, expected_len: int, threads=None, pause_s: float = 0.0, during=None, on_conn=None):
    """The response ``parts_of(fd)`` (fd: ``seg`` opened) written by a Connection to a reader
    (see ``_connected``); ``on_conn(conn)`` runs first, ``during(threads, got)`` while it is
    written.  Returns (the bytes read, (TCP_CORK, TCP_NODELAY) once it is written, what
    ``during`` returned)."""

    async def run():
        got = bytearray()
        conn, done, server = await _connected(threads, pause_s, got, expected_len)
        if on_conn is not None:
            on_conn(conn)
        fd = os.open(seg, os.O_RDONLY)
        try:
            task = asyncio.ensure_future(conn._write_parts(parts_of(fd)))
            seen = await during(threads, got) if during is not None else None
            await asyncio.wait_for(task, 60)
            sock = conn._sock
            after = tuple(
                sock.getsockopt(socket.IPPROTO_TCP, o) for o in (socket.TCP_CORK, socket.TCP_NODELAY)
            )
            await asyncio.wait_for(done.wait(), 60)
        finally:
            os.close(fd)
            conn.writer.close()
            server.close()
        return bytes(got), after, seen

    return asyncio.run(run())


def _run(tmp_path, threads, pause_s: float, during=None):
    seg, data = _segment(tmp_path)
    expected = b"HEAD" + data + b"tail"
    got, after, seen = _send(
        seg,
        lambda fd: Parts([b"HEAD", FileSlice(fd, 0, len(data)), b"tail"]),
        len(expected),
        threads,
        pause_s,
        during,
    )
    assert got == expected
    assert after == (0, 1)  # uncorked, TCP_NODELAY set again
    return seen


@needs_two_cores
def test_the_rest_of_a_large_slice_is_sent_by_a_network_thread(tmp_path):
    threads = SendfileThreads(2)
    try:
        _run(tmp_path, threads, pause_s=0)
    finally:
        threads.shutdown()
    # the loop sent what fitted at once; a thread, waiting for room in poll, sent more
    assert 0 < threads.sent < BIG
    assert threads.busy == 0


@needs_two_cores
def test_a_stalled_reader_holds_no_network_thread(tmp_path):
    """The reader reads nothing for a second: the thread gives up after its stall time and
    the loop waits for the reader (loop.sendfile); every byte still arrives in order."""
    threads = SendfileThreads(1, stall_ms=10, budget_s=0.2)

    async def during(th, got):
        # the socket fills at once and the reader sleeps: the thread takes the rest, finds no
        # room for its stall time and is free again while the reader has not read a byte
        for _ in range(300):
            await asyncio.sleep(0.005)
            if th.handoffs and th.busy == 0:
                return len(got) == 0
        return None

    try:
        freed = _run(tmp_path, threads, pause_s=1.0, during=during)
    finally:
        threads.shutdown()
    assert freed is True


def test_with_every_thread_busy_the_loop_sends_without_waiting(tmp_path):
    threads = SendfileThreads(1)
    threads.busy = 1  # as if a thread served another connection
    try:
        _run(tmp_path, threads, pause_s=0.05)
    finally:
        threads.shutdown()
    assert threads.sent == 0


@needs_two_cores
def test_the_thread_sends_from_its_own_descriptors(tmp_path):
    """Retention may close a segment's descriptor while a thread still sends from it (and the
    number be reused by another file): the thread works on duplicates of both descriptors."""
    seg, data = _segment(tmp_path, 8 << 20)
    other = tmp_path / "other.log"
    other.write_bytes(b"\0" * len(data))

    async def run():
        got = bytearray()
        threads = SendfileThreads(1, stall_ms=1000, budget_s=30)
        conn, done, server = await _connected(threads, 0.1, got, len(data))
        fd = os.open(seg, os.O_RDONLY)
        try:
            task = asyncio.ensure_future(
                threads.send(asyncio.get_running_loop(), conn._sock.fileno(), fd, 0, len(data))
            )
            await asyncio.sleep(0)  # the coroutine took its duplicates and handed them over
            os.close(fd)
            fd = os.open(other, os.O_RDONLY)  # likely the same number, another file
            sent = await asyncio.wait_for(task, 60)
            await asyncio.wait_for(done.wait(), 60)
        finally:
            os.close(fd)
            conn.writer.close()
            server.close()
            threads.shutdown()
        return bytes(got), sent

    got, sent = asyncio.run(run())
    assert sent == len(data)
    assert got == data


def test_a_process_on_one_core_hands_nothing_over():
    """Pinned to one core (taskset), a thread cannot run beside the loop: no hand-over."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        one = SendfileThreads(3)
    finally:
        os.sched_setaffinity(0, before)
    two = SendfileThreads(3)
    try:
        assert one.count == 0
        assert two.count == (3 if len(before) > 1 else 0)
    finally:
        one.shutdown()
        two.shutdown()


def test_a_response_with_file_slices_arrives_whole_and_leaves_the_socket_uncorked(tmp_path):
    """Small pieces joined, big slices sent with sendfile, TCP_CORK set while the response is
    written and cleared after it (a socket left corked would hold every later small response
    back)."""
    seg = tmp_path / "seg.log"
    data = os.urandom(3 * SENDFILE_MIN_BYTES)
    seg.write_bytes(data)
    big = 2 * SENDFILE_MIN_BYTES
    expected = b"HEAD" + b"ab" + data[:big] + b"mid" + data[big : big + 100] + b"tail"

    got, after, _ = _send(
        seg,
        lambda fd: Parts([b"HEAD", b"ab", FileSlice(fd, 0, big), b"mid", FileSlice(fd, big, 100), b"tail"]),
        len(expected),
    )
    assert got == expected
    assert after[0] == 0


def test_the_headers_go_corked_with_the_first_bytes_and_the_rest_under_nagle(tmp_path):
    """TCP_CORK is set before the pieces ahead of a slice are written.  Of a slice of
    NAGLE_MIN_BYTES or more, once the first SENDFILE_MIN_BYTES are in the socket the cork is
    taken off and the rest goes out with TCP_NODELAY off (Nagle's algorithm: large packets);
    a smaller slice goes corked to the end.  When the response ends the socket is uncorked
    and has TCP_NODELAY again (left corked or without it, the socket would hold later small
    responses back).  The cork and no-delay changes and each sendfile's state are recorded
    in order."""
    seg = tmp_path / "seg.log"
    one = NAGLE_MIN_BYTES + 2 * SENDFILE_MIN_BYTES
    data = os.urandom(one + 2 * SENDFILE_MIN_BYTES)
    seg.write_bytes(data)
    expected = b"HEAD" + data[:one] + b"mid" + data[one:] + b"tail"

    events = []

    def recording(conn):
        def state(opt):
            return conn._sock.getsockopt(socket.IPPROTO_TCP, opt)

        def record(name, real):
            def wrapper(*args):
                if name == "send":
                    events.append(("send", state(socket.TCP_CORK), state(socket.TCP_NODELAY), *args[1:]))
                else:
                    events.append((name, *args))
                return real(*args)

            return wrapper

        conn._set_cork = record("cork", conn._set_cork)
        conn._set_nodelay = record("nodelay", conn._set_nodelay)
        conn._sendfile_now = record("send", conn._sendfile_now)

    got, after, _ = _send(
        seg,
        lambda fd: Parts(
            [b"HEAD", FileSlice(fd, 0, one), b"mid", FileSlice(fd, one, len(data) - one), b"tail"]
        ),
        len(expected),
        on_conn=recording,
    )
    assert got == expected
    # the large slice: the pieces and its first bytes corked, the rest with no cork and no
    # TCP_NODELAY (the sendfile from where the first stopped)
    first = ("send", 1, 1, 0, SENDFILE_MIN_BYTES)
    assert events[:4] == [("cork", 1), first, ("cork", 0), ("nodelay", 0)]
    assert events[4][:3] == ("send", 0, 0) and len(events[4]) == 4
    # the small one: corked again for "mid" and sent corked whole; then the response's end
    assert events[5:] == [("cork", 1), ("send", 1, 0, 0), ("cork", 0), ("nodelay", 1)]
    assert after == (0, 1)
