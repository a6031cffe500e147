"""Large frames' buffers are reused only when nothing refers to them (broker/network.FrameBuffers)."""

from __future__ import annotations

import asyncio

from kafkatool.broker.network import FrameBuffers, FrameProtocol


def test_a_released_buffer_is_reused_resized_in_place():
    pool = FrameBuffers()
    a = pool.get(1000)
    assert len(a) == 1000
    ident = id(a)
    a[:] = b"x" * 1000
    del a
    b = pool.get(900)  # within the memory it has: the same object, shrunk
    assert id(b) == ident and len(b) == 900
    del b
    c = pool.get(1000)  # and grown back
    assert id(c) == ident and len(c) == 1000


def test_one_buffer_serves_every_size_of_its_power_of_two_class():
    # a client's requests vary in size: 600 KB then 1 MB must not cost a new buffer
    pool = FrameBuffers()
    a = pool.get(600_000)
    ident = id(a)
    del a
    b = pool.get(1_000_000)
    assert id(b) == ident and len(b) == 1_000_000
    b[-1] = 7  # really that long, in place
    del b
    c = pool.get(524_289)  # the smallest size of the 1 MiB class
    assert id(c) == ident and len(c) == 524_289
    del c
    d = pool.get(524_288)  # the next class down: another buffer
    assert id(d) != ident and len(d) == 524_288


def test_a_buffer_still_referred_to_is_never_handed_out():
    pool = FrameBuffers()
    a = pool.get(1000)
    view = memoryview(a)[10:20]  # as a decoded request's records are
    b = pool.get(1000)
    assert b is not a
    a_id = id(a)
    del a
    c = pool.get(1000)  # only the view refers to a: still in use
    assert id(c) != a_id and c is not b
    view[:] = b"y" * 10
    del view, b, c


def test_sizes_far_apart_get_their_own_buffer_and_the_pool_is_bounded():
    pool = FrameBuffers(max_buffers=2, max_bytes=10_000)
    small = pool.get(1000)
    del small
    big = pool.get(4000)  # 1000 bytes of memory cannot hold it; a new buffer
    assert len(big) == 4000
    del big
    held = [pool.get(3000), pool.get(3000), pool.get(3000)]
    assert len(pool._bufs) <= 2
    assert sum(b.__alloc__() for b in pool._bufs) <= 10_000
    assert all(len(b) == 3000 for b in held)


class _Transport:
    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


def test_frames_received_into_reused_buffers_keep_their_own_bytes():
    async def run():
        proto = FrameProtocol(_Transport(), 1 << 20)
        frames = []
        for n in range(6):
            body = bytes([n]) * 50_000
            data = len(body).to_bytes(4, "big") + body
            pos = 0
            while pos < len(data):
                buf = proto.get_buffer(-1)
                k = min(len(buf), len(data) - pos, 7000)
                buf[:k] = data[pos : pos + k]
                proto.buffer_updated(k)
                pos += k
            frame = await proto.read_frame()
            if n % 2 == 0:
                frames.append(frame)  # kept: its buffer must not be reused
            del frame
        return frames

    kept = asyncio.run(run())
    assert [bytes(f) for f in kept] == [bytes([n]) * 50_000 for n in (0, 2, 4)]
