"""The machine's own limits, and our broker against them, in one run (issue 16, first part).

Two ceilings are measured on this machine, now, with the same loopback and the same
filesystem the broker uses:

* ingest: a sender writes 1 MB chunks over loopback TCP to a receiver that
  ``recv_into``s them and ``os.write``s them to a file in the log dir's filesystem
  (what a produce path at best does: socket -> page cache).  Measured twice: rewriting
  one file (the page cache reuses the pages it frees) and writing new files as a log
  grows.  The produce ratios use the second, because a log only grows: on a virtual
  machine whose balloon reports free pages to the host, the first write to a page costs
  a host fault, and on this machine that makes new-page writes 2-2.5x slower.  What it
  costs swings with the host and with what was freed seconds before (a single writer:
  420 MB/s on new pages, 2.8-3.1 GB/s on just-freed ones), and the produce ratios swing
  with it.  How long freed pages stay cheap (session 23: 2 GB written and deleted, then
  1 GB of new pages written by 1 MB pwrites after a wait; system CPU-seconds per GB): 0 s
  0.16-0.20, 2 s 0.29, 5 s 0.90, 10 s 2.14, 20 s 1.93; the size of the writes does not
  matter (16 KiB or 1 MB pwrites: 2.3-2.5 on new pages).  So the order of the figures
  decides: the new-pages probe deletes its files when done, the 1 MB produce figure after it
  writes into their pages (1.11 of the ceiling, ~1 ms of system CPU per MB), and the 16 KiB
  figure after that meets new pages (0.31, ~2.8 ms per MB).  Waiting 12 s before each
  figure with the probe's files kept (each starting on pages the host took back) did not
  line them up: the probe read 922 MB/s, the 1 MB and 16 KiB figures 339 and 221 (0.37,
  0.24); the probe's writes come cheaper than a pwrite loop's in the same state (705 and
  1,399 MB/s a minute apart, against 427-789), for reasons not found.  Session 24 (the
  kernel here counts what it reported: /sys/module/page_reporting/parameters/reported_kib):
  3 GB freed are reported 2 s later at 130-270 MB/s (2.2 GB after 17 s), so what was deleted
  in the last minute (another bench's temp dir) sets the state; waiting until the count
  stopped growing, the first writer of a script read 1,273 MB/s (0.66 system CPU-s/GB) and
  every later one, of any kind (this probe, its sender in another process, pwrite, 16 KiB
  frames, a pwrite loop with no socket), 331-423 (2.3-3.0); but in this bench, with that
  wait and a probe (files kept) right before each produce figure, the probes read
  916-1,231 and the broker's 1 MB and 16 KiB figures 358 and 213 (2.7 and 3.2 ms of system
  CPU per MB): not kept.  Session 25, files kept throughout and the cheap pages first used
  up (a 1 MB pwrite loop until its rate fell): this probe read 297-418 MB/s, its receiver
  paying 2.2-2.6 ms of system CPU per MB and its sender 0.10, the same as a bare 1 MB pwrite
  loop right after it (361-408) and one of the 16 KiB figure's own 16,189-byte batches
  (357-400; 29-49 us of system CPU a write into 4 files or 1, 10-35 with 20 us of other work
  between the writes): in that state the broker's 54-56 us of system CPU per 16 KiB batch is the
  write's own cost plus its sockets, not something of the broker's.  In the state before
  (pages freed in the last seconds, of which ~1.5-1.9 GB came cheap to small writes after a
  large delete, while 1 MB writes met the expensive ones at once: the page cache gives them
  large folios, built from the high-order free blocks the balloon reports), the same
  16,189-byte writes cost 8-9 us, 16 KiB writes at 16 KiB-aligned offsets 4.5-5.3, and 1 MB
  ones 2.7 per 16 KiB: a log's batches start and end inside pages, and pay for it.
  ``--slices N`` measures each produce figure interleaved with its own ceiling instead (see ``interleaved``: opt-in, a diagnostic, because it reads far lower and
  the faster writer's reclaim hands it cheaper pages: see ``interleaved``);
* egress: ``os.sendfile`` of a page-cached file over loopback to a receiver that
  discards (what a fetch path at best does: page cache -> socket).  The receiver does not
  copy the bytes: ``recv`` with ``MSG_TRUNC`` makes Linux TCP free them in the kernel
  (``tcp_recvmsg`` skips the copy to user memory and returns how many it dropped).
  Measured in rounds around the fetch figure (``--rounds``, default 3: probe, fetch, probe,
  fetch, ..., probe; the medians of both are compared and every round's ratio is
  printed): on this shared machine the ceiling swings 2x within minutes, and the fetch
  row notes how busy other processes kept the cores meanwhile (``bench/quiet.py``).
  During the fetch the broker spends about 93% of its CPU in the kernel (perf: sendfile,
  the loopback TCP path and wake-ups), as the probe's sender does: both are bound by the
  same kernel path, so one pair of figures mostly measures the host's noise.

Then ``kafkatool serve`` takes raw produce requests (1 MB and 16 KiB batches, acks=1; the
16 KiB ones also with every partition's batch in one request, as a client sends them)
with the load generator of ``bench_broker.py``, and serves a raw fetch loop from the
start of a partition whose client costs no more than the egress probe's receiver
(it reads the high watermark and each batch's head, and drops the rest of the bytes with
``MSG_TRUNC`` as the probe does; ``bench_broker``'s decoding client is shown too, it is
bound by its own parsing).  The fetch figure reads the batches the 1 MB produce figure
wrote (partition 0 up to its log end offset after that figure, then from the start
again): only there does the client cost what the probe's receiver does.  A 16 KiB batch
has to be walked through a copying window (``fetch_lean``), and the whole log read the
same way is shown beside it, without a target.

One partition, one connection, one reader: the issue's figure ("a raw fetch loop from the
start of a partition") and the probe's shape (one sender, one discarding receiver).  Until
session 30 the judged row read all 4 partitions at once (4 connections, 4 reader
processes) against the probe's one receiver; it stays in the table, without a target, as
"4 partitions at once", and ``bench_cores.py`` compares many readers with the machine's own
sendfile to as many (its 16-partition rows).  With ``--processes N`` the judged row is
still one partition, so one process serves it: it says that several processes cost a
single stream nothing; the "at once" row spreads its readers over the processes.  Measured in session 24, one broker, the
two loops alternating 4 times (4 readers on 2 cores; CPU-seconds per GB): the 1 MB
batches 4,590-5,090 MB/s (mean 4,860), broker 0.19-0.21, readers 0.12-0.13; the whole
log 4,250-4,940 (mean 4,460), broker 0.19-0.23, readers 0.13-0.14; the machine's own
blocking sendfile to 4 discarding readers 7,620-7,720 MB/s (sender 0.14, readers 0.11),
to 1 reader 6,000-6,900.  Session 30 (its note: the egress probe, then the loop, three
times per reader count, one broker): 1 reader 0.92, 0.95, 1.07 of the probe
right before it (broker 0.13-0.19 CPU-s per GB, reader 0.09-0.10, the cores 73-88% busy),
4 readers 0.74, 0.75, 0.80 (broker 0.19: its event loop 0.11-0.12 and the three network
threads 0.07-0.08; readers 0.12; the cores 89-90% busy: on 2 cores the 4 readers take
what the broker would send with).
The table shows each figure, its ceiling and the ratio, with the issue's targets (produce 1 MB >= 70%, 16 KiB >= 40% of ingest; fetch >= 80% of egress).
Each produce figure also says where its time went, per batch: the broker's user and system
CPU and the load generator's (``cpu_note``; with 2 cores busy, 2,000,000 / batches per second
microseconds of CPU are spent per batch in all).

Why the receivers discard instead of copying: over loopback the copy of every byte into
the receiver's memory is done by the receiver's CPU, and it is about as much work as the
whole sending side (measured on a 2-core VM: 0.36-0.49 CPU-seconds to copy 2 GB out of a
socket, 0.18-0.23 to discard them, the ``sendfile`` sender 0.2-0.3).  The egress and
fetch figures are meant to measure the sender (the machine's page cache -> socket path,
then our broker), and where readers and broker share the cores (``bench_cores.py``, 2
broker processes on 2 cores) a copying reader would mostly measure itself.  A real
consumer copies the bytes (and decodes them), so neither figure is what a consumer
gets; but both sides of the fetch/egress ratio use the same receiver, so the ratio
compares the broker with the machine's limit.

    python bench/bench_limits.py            # about a minute
    python bench/bench_limits.py --quick    # a smoke run, a few seconds per figure
    python bench/bench_limits.py --processes 2   # the broker as 2 processes (kafkatool.processes)

With ``--processes N`` (N > 1) each partition's produce and fetch connections go to its
leader's port (Metadata); the row of several partitions' batches per request is left out
(one request cannot reach several processes).

Opt-in, never part of the test suite; every loop is bounded in time; only 127.0.0.1.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_broker as BB  # noqa: E402
from quiet import OthersLoad  # noqa: E402
from table import emit, hot_path_line, limit_row, ratio_row  # noqa: E402

from kafkatool.protocol import generated as G  # noqa: E402
from kafkatool.protocol.framing import encode_request  # noqa: E402
from kafkatool.protocol.generated.list_offsets_request import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsTopic,
)

CHUNK = 1 << 20


def loopback_pair() -> tuple[socket.socket, socket.socket]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    client = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    srv.close()
    return client, conn


def settle() -> None:
    """Write back every dirty page before a figure (``os.sync``, bounded by what is dirty: a
    few GB at the disk's speed).  Each figure then starts from the same state: a probe or a
    produce run that follows another one's gigabytes would otherwise meet the kernel's
    dirty-page throttling seconds earlier (measured: the new-pages ceiling read 750 MB/s
    right after the recycled-pages probe, 1,030-1,090 after a sync)."""
    os.sync()
    time.sleep(0.5)


def ingest_ceiling(
    directory: Path, seconds: float, fresh: bool = False, keep: list[Path] | None = None
) -> float:
    """MB/s: loopback TCP in 1 MB chunks -> recv_into -> os.write into a file in ``directory``.

    ``fresh=False`` rewrites one file, truncated every GB: the page cache reuses the pages it
    just freed.  ``fresh=True`` writes the way a log grows: new 1 GB files, kept until the end,
    so every write needs a page the file never had.  On a virtual machine whose balloon
    reports free pages to the host (virtio-balloon free page reporting) a page that was never
    written, or was freed a few seconds ago, costs the host a fault on first touch; a growing
    log pays that, and only the fresh figure is the ceiling for it.  ``keep``: the new files
    are not deleted but added to it (the caller deletes them; see :func:`interleaved`)."""
    client, conn = loopback_pair()
    paths = [directory / "ingest-probe-0.bin"]
    fd = os.open(paths[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fds = [fd]
    received = [0]
    stop = threading.Event()

    def receiver() -> None:
        nonlocal fd
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        written = 0
        while True:
            n = conn.recv_into(view)
            if n == 0:
                return
            os.write(fd, view[:n])
            received[0] += n
            written += n
            if written > (1 << 30):
                written = 0
                if fresh:  # roll, as a log rolls a segment
                    paths.append(directory / f"ingest-probe-{len(paths)}.bin")
                    fd = os.open(paths[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    fds.append(fd)
                else:  # keep the file (and the disk) bounded
                    os.ftruncate(fd, 0)
                    os.lseek(fd, 0, os.SEEK_SET)

    th = threading.Thread(target=receiver, daemon=True)
    th.start()
    payload = os.urandom(CHUNK)
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline and not stop.is_set():
        client.sendall(payload)
    client.shutdown(socket.SHUT_WR)
    th.join(30)
    dt = time.perf_counter() - t0
    client.close()
    conn.close()
    for f in fds:
        os.close(f)
    if keep is not None:
        keep.extend(paths)
    else:
        for path in paths:
            path.unlink(missing_ok=True)
    return received[0] / dt / 1e6


@dataclass
class Interleaved:
    """A produce figure and the ingest ceiling it ran against (see :func:`interleaved`)."""

    mb_s: float
    ingest: float
    #: each pair's produce MB/s over its ceiling, in order
    ratios: list[float]
    errors: int
    #: each pair's (produce, ceiling) MB/s, in order
    pairs: list[tuple[float, float]] = field(default_factory=list)
    #: CPU per batch of a figure measured in one piece (bench_broker.produce_raw's extra)
    cpu: dict = field(default_factory=dict)


def cpu_note(cpu: dict) -> str:
    """Where a produce figure's time went, per batch: the broker's user and system CPU and the
    load generator's (all cores count: 2 cores at 100% give 2,000,000 / batches-per-second us)."""
    if not cpu:
        return ""
    return (
        f"CPU per batch: broker user {cpu['broker_user_us']:.0f} us + system {cpu['broker_sys_us']:.0f} us, "
        f"load generator {cpu['generator_us']:.0f} us"
    )


def interleaved(
    produce: Callable[[float], BB.Result], directory: Path, seconds: float, slices: int
) -> Interleaved:
    """A produce figure measured against the new-pages ingest ceiling in ``slices`` pairs of
    slices of ``seconds / slices`` each: a probe slice and a produce slice, their order
    alternating from pair to pair, after one probe slice that only warms up.  The probe's
    files are kept until the figure is taken (deleting them would hand their pages to the
    next produce slice) and deleted after it; the warm-up slice first takes the pages an
    earlier figure freed.  The ceiling and the figure are the means of their slices.

    Why: on a virtual machine whose balloon reports free pages to the host, what a write to
    a new page costs depends on the host's state and on what was freed in the last seconds,
    not on the writer.  Measured in one minute, the same fresh probe read 370 to 1,700 MB/s
    and the same broker's 16 KiB produce 190 to 450 MB/s, and the order decided the ratio
    (0.23 to 1.03 for the same code).

    Opt-in (``--slices``), not the table's figure: in whole bench runs on a quiet machine
    the probe slices read 1,300-2,000 MB/s throughout while the broker's 1 MB produce
    slices, between them, read 280-730 (ratios 0.17-0.42; the sequential figure read 0.88
    in an earlier run), and a shorter script alternating the same two (/tmp, session 13)
    saw both slow after the first pair (probe 360-410, produce 300-360: 0.85).  The likely
    reason (/proc/vmstat per slice): the probe at ~2 GB/s sets off background writeback
    and reclaim of old clean page cache, and takes the pages just freed (cheap: the host
    still backs them) as fast as it writes, pgfree about pgalloc; the broker at 0.3-1.4
    GB/s takes pages from the free lists the balloon reported to the host (expensive),
    nr_free_pages falling.  So the faster writer makes itself faster, and the two sides do
    not write into the same pages after all; until they do (e.g. RAM filled with clean
    page cache first), this is a diagnostic."""
    step = seconds / slices
    held: list[Path] = []
    probes: list[float] = []
    results: list[BB.Result] = []
    try:
        settle()
        ingest_ceiling(directory, step, fresh=True, keep=held)  # warm-up: not counted
        for i in range(slices):
            for side in ("probe", "produce") if i % 2 == 0 else ("produce", "probe"):
                settle()
                if side == "probe":
                    probes.append(ingest_ceiling(directory, step, fresh=True, keep=held))
                else:
                    results.append(produce(step))
    finally:
        for path in held:
            path.unlink(missing_ok=True)
    return Interleaved(
        statistics.fmean(r.mb_s for r in results),
        statistics.fmean(probes),
        [r.mb_s / p if p else 0.0 for r, p in zip(results, probes, strict=True)],
        sum(r.errors for r in results),
        [(r.mb_s, p) for r, p in zip(results, probes, strict=True)],
    )


def egress_ceiling(directory: Path, seconds: float, size: int = 256 << 20) -> float:
    """MB/s: os.sendfile of a page-cached file over loopback to a receiver that discards.

    The receiver takes up to ``DISCARD_CHUNK`` bytes per call with ``MSG_TRUNC``
    (``_discard``): the kernel frees them without copying them to user memory, so the
    figure is the sending side's (page cache -> socket), not the receiver's copy, which on
    loopback costs about as much CPU as the sender.  ``fetch_lean`` reads the broker's
    responses the same way, so the fetch/egress ratio compares senders."""
    path = directory / "egress-probe.bin"
    cached_file(path, size)
    client, conn = loopback_pair()
    received = [0]

    def receiver() -> None:
        received[0] = discard_to_end(client)

    th = threading.Thread(target=receiver, daemon=True)
    th.start()
    fd = os.open(path, os.O_RDONLY)
    t0 = time.perf_counter()
    sendfile_until(conn, fd, size, t0 + seconds)
    conn.shutdown(socket.SHUT_WR)
    th.join(30)
    dt = time.perf_counter() - t0
    os.close(fd)
    client.close()
    conn.close()
    path.unlink(missing_ok=True)
    return received[0] / dt / 1e6


def cached_file(path: Path, size: int) -> None:
    """A file of ``size`` bytes (random 1 MB blocks), read once into the page cache."""
    with open(path, "wb") as f:
        block = os.urandom(CHUNK)
        for _ in range(size // CHUNK):
            f.write(block)
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def sendfile_until(conn: socket.socket, fd: int, size: int, deadline: float) -> int:
    """The egress probes' sender: blocking ``os.sendfile`` of the file's ``size`` bytes, again
    and again, until ``deadline`` (perf_counter); the bytes sent."""
    sent = 0
    while time.perf_counter() < deadline:
        offset = 0
        while offset < size and time.perf_counter() < deadline:
            n = os.sendfile(conn.fileno(), fd, offset, size - offset)
            offset += n
            sent += n
    return sent


def discard_to_end(sock: socket.socket) -> int:
    """The egress probes' receiver: bytes dropped in the kernel (``MSG_TRUNC``, see
    ``_discard``) until the sender shuts its side; how many."""
    scratch = memoryview(bytearray(DISCARD_CHUNK))  # never written: MSG_TRUNC
    got = 0
    while True:
        n = sock.recv_into(scratch, len(scratch), socket.MSG_TRUNC)
        if n == 0:
            return got
        got += n


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("closed")
        got += n


DISCARD_CHUNK = 4 << 20  # the most one discarding recv takes


def _discard(sock: socket.socket, scratch: memoryview, n: int) -> None:
    """Take exactly ``n`` bytes off ``sock``'s stream without copying them: on Linux TCP
    ``MSG_TRUNC`` frees them in the kernel and returns how many it dropped (it may be fewer
    than asked, hence the loop).  ``scratch`` is only there because ``recv_into`` wants a
    buffer as large as the request (``recv`` would allocate one per call); Linux never
    writes it.  Elsewhere TCP ignores ``MSG_TRUNC`` and the bytes land in ``scratch``:
    slower, still correct."""
    while n > 0:
        k = sock.recv_into(scratch, min(n, len(scratch)), socket.MSG_TRUNC)
        if k == 0:
            raise ConnectionError("closed")
        n -= k


# a v2 batch's first 27 bytes: baseOffset i64, batchLength i32, partitionLeaderEpoch i32
# (skipped), magic i8, crc u32 and attributes i16 (skipped), lastOffsetDelta i32
_BATCH_HEAD = struct.Struct(">qi4xb6xi")
_HEAD = _BATCH_HEAD.size  # 27
_MIN_BATCH = 61  # the smallest v2 batch: its header, no record
WINDOW = 64 << 10  # small batches are copied through a window this large (see fetch_lean)
_I32 = struct.Struct(">i")
_SENTINEL = 0x7A5A7A5A7A5A7A5A  # the fetch offset placeholder in the pre-encoded request


def fetch_lean(
    port: int,
    topic: str,
    partitions: int,
    seconds_cap: float,
    min_seconds: float = 0.0,
    ports: dict[int, int] | None = None,
    ends: dict[int, int] | None = None,
) -> tuple[float, int]:
    """MB/s of a raw Fetch v11 loop from offset 0 to the high watermark, one connection and
    process per partition, that costs the client as little as the egress probe's receiver:
    the request is encoded once and only its correlation id and fetch offset are patched;
    of each response only the fields the loop needs are read (the high watermark, then each
    batch's first 27 bytes: base offset, length, last offset delta), and the rest of the
    record set is dropped in the kernel with ``MSG_TRUNC`` (``_discard``) as the egress
    probe's receiver drops its bytes; no record decoding.

    Why not copy: on loopback the receiver's copy of every byte is about as much CPU as
    the broker's sending, and where readers and broker share the cores (``bench_cores.py``)
    the figure would mostly measure the readers.  It is meant to measure the broker: a
    real consumer would copy (and decode) the bytes, but the egress ceiling this figure is
    divided by has the same discarding receiver.

    The record set is walked batch by batch: when the next head is needed, up to
    ``WINDOW`` bytes are read (copied) into a small buffer, and a batch that ends beyond
    it has the rest of its body discarded; after a batch larger than the window only the
    next 27 bytes are read.  So a 1 MB batch costs two syscalls and no copy, while 16 KiB
    batches are copied a few at a time (measured: a discarding syscall per 16 KiB batch
    costs more CPU than copying it; through the window they cost no more than copying the
    whole response, 1 MB batches half of it).  A batch Kafka cut at the end of the record
    set is discarded and the next fetch offset is the one after the last complete batch.
    The bytes counted are the record sets' sizes.

    With ``min_seconds`` each reader starts again from offset 0 at the high watermark until
    that long has passed (the log stays in the page cache), so the figure is not a
    sub-second burst.  ``ports`` (partition -> its leader's port, from
    ``bench_broker.leader_ports``; a broker of several processes): reader p connects to
    ``ports[p]`` instead of ``port``.  ``ends`` (partition -> offset, from :func:`end_offsets`):
    reader p treats that offset, when it is below the high watermark, as the end of its
    partition (the pass that reaches it starts again from 0, or stops).  Returns (MB/s,
    errors): responses with an error code, at the top or the partition's level (the reader
    stops there)."""
    totals = [0] * partitions
    errors = [0]

    def reader(p: int) -> None:
        sock = socket.create_connection(("127.0.0.1", port if ports is None else ports[p]), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        win = bytearray(WINDOW)
        wv = memoryview(win)
        scratch = memoryview(bytearray(DISCARD_CHUNK))  # never written: MSG_TRUNC
        unpack = _BATCH_HEAD.unpack_from
        big = False  # the last batch was larger than the window: read only the next head

        def walk(rem: int) -> int | None:
            """Take the record set (``rem`` bytes) off the socket; the offset after its last
            complete batch, None if it has none."""
            nonlocal big
            lo = hi = 0  # win[lo:hi]: bytes of the record set read but not walked yet
            nxt = None
            while True:
                have = hi - lo
                if have + rem < _MIN_BATCH:  # no complete batch left (a cut one, or nothing)
                    _discard(sock, scratch, rem)
                    return nxt
                if have < _HEAD:
                    if lo:
                        win[:have] = win[lo:hi]
                        lo, hi = 0, have
                    want = min(rem, _HEAD - have if big else WINDOW - have)  # >= _HEAD - have
                    while hi < _HEAD:
                        k = sock.recv_into(wv[hi : hi + want])
                        if k == 0:
                            raise ConnectionError("closed")
                        hi += k
                        rem -= k
                        want -= k
                    have = hi
                base, length, magic, delta = unpack(win, lo)
                if magic != 2 or length < _MIN_BATCH - 12:
                    raise RuntimeError(f"partition {p}: not a v2 batch (magic {magic}, length {length})")
                blen = 12 + length
                if blen > have + rem:  # the batch Kafka cut at the end: drop what is left of it
                    _discard(sock, scratch, rem)
                    return nxt
                nxt = base + delta + 1
                if blen <= have:
                    lo += blen
                    big = False
                else:
                    k = blen - have
                    _discard(sock, scratch, k)
                    rem -= k
                    lo = hi = 0
                    big = blen > WINDOW

        req = BB.fetch_request(topic, p, _SENTINEL, 32 << 20)
        frame = bytearray(encode_request(1, 11, 0, "bench", req))
        at = frame.find(_SENTINEL.to_bytes(8, "big"))
        offset = 0
        corr = 0
        t0 = time.perf_counter()
        try:
            while time.perf_counter() - t0 < seconds_cap:
                corr += 1
                frame[8:12] = _I32.pack(corr)  # size 4, api key 2, version 2, then the correlation id
                frame[at : at + 8] = offset.to_bytes(8, "big")
                sock.sendall(frame)
                # size 4, correlation id 4, throttle 4, error 2, session 4, topics 4, name length 2
                _recv_exact(sock, wv[:24])
                size = int.from_bytes(win[:4], "big")
                top_err = int.from_bytes(win[12:14], "big", signed=True)
                ntopics = int.from_bytes(win[18:22], "big", signed=True)
                name = int.from_bytes(win[22:24], "big")
                if top_err or ntopics != 1:
                    errors[0] += 1
                    return
                # the name, partitions count 4, partition index 4, error 2, high watermark 8,
                # last stable offset 8, log start offset 8, aborted transactions count 4
                _recv_exact(sock, wv[: name + 38])
                err = int.from_bytes(win[name + 8 : name + 10], "big", signed=True)
                hw = int.from_bytes(win[name + 10 : name + 18], "big", signed=True)
                aborted = max(int.from_bytes(win[name + 34 : name + 38], "big", signed=True), 0)
                # the aborted transactions (16 bytes each), preferred read replica 4, records size 4
                tail = aborted * 16 + 8
                if tail > WINDOW:
                    raise RuntimeError(f"partition {p}: {aborted} aborted transactions")
                _recv_exact(sock, wv[:tail])
                n = int.from_bytes(win[tail - 4 : tail], "big", signed=True)
                if err:
                    errors[0] += 1
                    return
                if size != 20 + name + 38 + tail + max(n, 0):  # v11: the record set ends the response
                    raise RuntimeError(f"partition {p}: response of {size} bytes, record set of {n}")
                if n > 0:
                    totals[p] += n
                    nxt = walk(n)
                    if nxt is not None:
                        offset = nxt
                if offset >= (hw if ends is None else min(hw, ends[p])):
                    if time.perf_counter() - t0 >= min_seconds:
                        return
                    offset = 0
        finally:
            sock.close()

    # one process per reader (fork): threads would share one GIL, and the readers' recv_into
    # calls would queue on it, which the egress probe's single receiver never does
    ctx = multiprocessing.get_context("fork")
    results = ctx.SimpleQueue()

    def child(p: int) -> None:
        try:
            reader(p)
        finally:
            results.put((totals[p], errors[0]))

    t0 = time.perf_counter()
    procs = [ctx.Process(target=child, args=(p,)) for p in range(partitions)]
    for pr in procs:
        pr.start()
    total = 0
    errs = 0
    for _ in procs:
        n, e = results.get()
        total += n
        errs += e
    dt = time.perf_counter() - t0
    for pr in procs:
        pr.join(30)
    return total / dt / 1e6, errs


def end_offsets(
    port: int, topic: str, partitions: int, ports: dict[int, int] | None = None
) -> dict[int, int]:
    """Partition -> its log end offset now (ListOffsets, latest), one request to each leader
    for its partitions (``ports``, as :func:`fetch_lean` takes them; else all of ``port``)."""
    by_port: dict[int, list[int]] = {}
    for p in range(partitions):
        by_port.setdefault(port if ports is None else ports[p], []).append(p)
    out = {}
    for leader, parts in by_port.items():
        with BB.Conn(leader) as c:
            r = c.request(
                2,
                5,
                G.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        ListOffsetsTopic(
                            name=topic,
                            partitions=[ListOffsetsPartition(partition_index=p, timestamp=-1) for p in parts],
                        )
                    ],
                ),
            )
        for part in r.topics[0].partitions:
            if part.error_code:
                raise RuntimeError(f"{topic}-{part.partition_index}: ListOffsets error {part.error_code}")
            out[part.partition_index] = part.offset
    if sorted(out) != list(range(partitions)):
        raise RuntimeError(f"{topic}: ListOffsets answered partitions {sorted(out)} of {partitions}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each probe and load")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1.5 s per figure")
    ap.add_argument("--dir", type=Path, default=None, help="where the log dir goes (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    ap.add_argument(
        "--processes",
        type=int,
        default=1,
        help="the broker's kafkatool.processes (> 1: produce and fetch go to each partition's "
        "leader; the several-partitions-per-request row is left out)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="fetch figures, each between two egress probes; medians (default 3, --quick 1)",
    )
    ap.add_argument(
        "--slices",
        type=int,
        default=0,
        help="N > 0: each produce figure measured in N pairs of slices interleaved with its own "
        "new-pages ingest probe (see interleaved); default 0: against the probe at the start",
    )
    args = ap.parse_args()
    if args.slices < 0:
        ap.error("--slices must not be negative")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.processes < 1:
        ap.error("--processes must be at least 1")
    print(hot_path_line(), flush=True)
    multi = args.processes > 1
    seconds = 1.5 if args.quick else args.seconds
    rounds = 1 if args.quick else args.rounds
    work = Path(tempfile.mkdtemp(prefix="kafkatool-limits-", dir=args.dir))
    small4 = None
    try:
        settle()
        recycled = ingest_ceiling(work, seconds)
        settle()
        ingest = ingest_ceiling(work, seconds, fresh=True)
        egress_size = (64 << 20) if args.quick else (256 << 20)
        t = BB.start_ours(work, processes=args.processes)
        try:
            BB.create_topic(t.port, "limits", BB.PARTITIONS)
            ports = BB.leader_ports(t.port, "limits") if multi else None

            def figure(batch_bytes: int, per_request: int = 1) -> Interleaved:
                def produce(secs: float) -> BB.Result:
                    if per_request > 1:
                        return BB.produce_raw(
                            t, "limits", 1000, batch_bytes, 1, secs, per_request=per_request
                        )
                    return BB.produce_raw(t, "limits", 1000, batch_bytes, 1, secs, ports=ports)

                if args.slices:  # against its own ceiling, measured interleaved with it
                    return interleaved(produce, work, seconds, args.slices)
                settle()  # against the new-pages ceiling measured at the start
                r = produce(seconds)
                return Interleaved(
                    r.mb_s, ingest, [r.mb_s / ingest if ingest else 0.0], r.errors, cpu=r.extra
                )

            big = figure(1 << 20)
            # where the 1 MB batches end: the fetch figure reads them only (see the docstring)
            big_ends = end_offsets(t.port, "limits", BB.PARTITIONS, ports)
            small = figure(16 << 10)
            if not multi:  # one request for several partitions' leaders: not with several processes
                small4 = figure(16 << 10, BB.PARTITIONS)

            def fetch_loop(ends: dict[int, int] | None, partitions: int = 1) -> tuple[float, int]:
                """fetch_lean over the first ``partitions`` partitions (one reader each), each up
                to ``ends`` (None: its high watermark)."""
                return fetch_lean(
                    t.port,
                    "limits",
                    partitions,
                    seconds_cap=max(10.0, seconds * 4),
                    min_seconds=seconds,
                    ports=ports,
                    ends=ends,
                )

            # the egress ceiling right before and right after each fetch figure, in rounds:
            # on this shared machine the ceiling alone swings 2x within minutes (2,300-6,900
            # MB/s), so a ceiling measured a minute earlier, before the produce runs, is not the
            # ceiling the fetch ran against, and one pair of figures is one draw of that swing
            # (one run read 0.66, the next session's rounds 1.01, 1.05 and 1.63 for the same
            # code).  Round r's fetch runs between egress probes r and r + 1; the figures are
            # the medians (the fetch's over its rounds, the ceiling's over its probes), and
            # each round's ratio (its fetch over the mean of its two probes) is printed
            settle()
            egresses = [egress_ceiling(work, seconds, size=egress_size)]
            fetches: list[float] = []
            fetch_errors = 0
            shares: list[float] = []
            for _ in range(rounds):
                with OthersLoad(t.cpu_seconds) as load:
                    mb_s, errs = fetch_loop(big_ends)
                fetches.append(mb_s)
                fetch_errors += errs
                shares.append(load.share)
                egresses.append(egress_ceiling(work, seconds, size=egress_size))
            fetch = statistics.median(fetches)
            egress = statistics.median(egresses)
            per_round = [f / ((egresses[i] + egresses[i + 1]) / 2) for i, f in enumerate(fetches)]
            busiest = max(shares, key=lambda x: -1.0 if math.isnan(x) else x)
            fetch_note = (
                f"median of {rounds}; per round {', '.join(f'{r:.2f}' for r in per_round)}; "
                f"other processes kept at most {busiest * 100:.0f}% of the cores busy meanwhile"
            )
            # the same loop over the whole log, the 16 KiB batches too, and over every partition
            # at once, a reader each (shown, no target)
            whole, whole_errors = fetch_loop(None)
            every, every_errors = fetch_loop(big_ends, BB.PARTITIONS)
            parsing = BB.consume_raw(t, "limits", seconds_cap=max(10.0, seconds * 4), ports=ports)
        finally:
            t.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # with several processes the broker's figures say so (the ceilings are the machine's)
    tag = f" [{args.processes} processes]" if multi else ""

    def slice_note(f: Interleaved) -> str:
        if not f.pairs:
            return cpu_note(f.cpu)
        pairs = ", ".join(f"{r:.2f} ({a:.0f}/{b:.0f})" for r, (a, b) in zip(f.ratios, f.pairs, strict=True))
        return f"interleaved, {len(f.ratios)} pairs; per pair (MB/s ours/ceiling): {pairs}"

    if args.json:
        ceiling = "ingest (new pages, interleaved)" if args.slices else "ingest (new pages)"
        rows = [
            limit_row("limits", "ingest ceiling, recycled pages", recycled, "MB/s"),
            limit_row("limits", "ingest ceiling, new pages (a growing log)", ingest, "MB/s"),
            replace(
                limit_row("limits", "egress ceiling (sendfile from page cache)", egress, "MB/s"),
                note=f"median of {len(egresses)} around the fetch rounds: {', '.join(f'{e:.0f}' for e in egresses)}",
            ),
            replace(
                ratio_row(
                    "limits",
                    "produce, 1 MB batches, acks=1" + tag,
                    big.mb_s,
                    "MB/s",
                    big.ingest,
                    ceiling,
                    0.70,
                ),
                note=slice_note(big),
            ),
            replace(
                ratio_row(
                    "limits",
                    "produce, 16 KiB batches, acks=1" + tag,
                    small.mb_s,
                    "MB/s",
                    small.ingest,
                    ceiling,
                    0.40,
                ),
                note=slice_note(small),
            ),
        ]
        if small4 is not None:
            rows.append(
                replace(
                    ratio_row(
                        "limits",
                        f"  same, {BB.PARTITIONS} partitions' batches per request",
                        small4.mb_s,
                        "MB/s",
                        small4.ingest,
                        ceiling,
                        None,
                    ),
                    note=slice_note(small4),
                )
            )
        rows.append(
            replace(
                ratio_row(
                    "limits",
                    "fetch from the start of a partition (raw loop)" + tag,
                    fetch,
                    "MB/s",
                    egress,
                    "egress",
                    0.80,
                ),
                note=fetch_note,
            )
        )
        rows.append(
            replace(
                ratio_row("limits", "  same, the whole log" + tag, whole, "MB/s", egress, "egress", None),
                note="the 16 KiB batches too, which the reader copies: one run, after the rounds",
            )
        )
        rows.append(
            replace(
                ratio_row(
                    "limits",
                    f"  same, {BB.PARTITIONS} partitions at once" + tag,
                    every,
                    "MB/s",
                    egress,
                    "egress",
                    None,
                ),
                note=f"{BB.PARTITIONS} connections, a reader process each: one run, after the rounds",
            )
        )
        emit(rows)
        return
    rows = [
        ("ingest ceiling, recycled pages (file rewritten)", recycled, None, None, None),
        ("ingest ceiling, new pages (a growing log; at the start)", ingest, None, None, None),
        (
            f"egress ceiling (sendfile; median of {', '.join(f'{e:.0f}' for e in egresses)})",
            egress,
            None,
            None,
            None,
        ),
        ("produce, 1 MB batches, acks=1", big.mb_s, big.ingest, 0.70, big.errors),
        ("produce, 16 KiB batches, acks=1", small.mb_s, small.ingest, 0.40, small.errors),
        (
            f"  same, {BB.PARTITIONS} partitions' batches per request",
            small4.mb_s if small4 is not None else None,
            small4.ingest if small4 is not None else small.ingest,
            None,
            small4.errors if small4 is not None else None,
        ),
        ("fetch from the start of a partition (raw loop)", fetch, egress, 0.80, fetch_errors),
        ("  same, the whole log (16 KiB batches too)", whole, egress, None, whole_errors),
        (f"  same, {BB.PARTITIONS} partitions at once (a reader each)", every, egress, None, every_errors),
        ("  same, bench_broker's decoding client", parsing.mb_s, egress, None, parsing.errors),
    ]
    print(
        "produce figures, each against the new-pages ceiling measured interleaved with it:"
        if args.slices
        else "produce figures, where their time went:"
    )
    for name, f in (("1 MB", big), ("16 KiB", small), ("16 KiB, several per request", small4)):
        if f is not None:
            print(f"  {name}: {slice_note(f)}")
    print(f"fetch from the start of a partition: {fetch_note}")
    if multi:
        print(
            f"broker: kafkatool.processes={args.processes}, produce and fetch sent to each partition's leader"
        )
    print(f"{'figure':52} {'MB/s':>9} {'limit':>9} {'ratio':>7} {'target':>7}  errors")
    for name, value, limit, target, errors in rows:
        if value is None:
            print(f"{name:52} {'n/a':>9} {limit:9.1f} {'n/a':>7} {'':>7}  (not with several processes)")
            continue
        if limit is None:
            print(f"{name:52} {value:9.1f}")
            continue
        r = value / limit if limit else 0.0
        if target is None:
            print(f"{name:52} {value:9.1f} {limit:9.1f} {r:7.2f} {'':>7}  {errors}")
            continue
        mark = "ok" if r >= target else "below"
        print(f"{name:52} {value:9.1f} {limit:9.1f} {r:7.2f} {target:7.2f}  {errors} {mark}")


if __name__ == "__main__":
    main()
