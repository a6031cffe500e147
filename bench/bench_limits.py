"""The machine's own limits, and our broker against them, in one run (issue 16, first part).

Two ceilings are measured on this machine, now, with the same loopback and the same
filesystem the broker uses:

* ingest: a sender writes 1 MB chunks over loopback TCP to a receiver that
  ``recv_into``s them and ``os.write``s them to a file in the log dir's filesystem
  (what a produce path at best does: socket -> page cache).  Measured twice: rewriting
  one file (the page cache reuses the pages it frees) and writing new files as a log
  grows.  The produce ratios use the second, because a log only grows: on a virtual
  machine whose balloon reports free pages to the host, the first write to a page costs
  a host fault, and on this machine that makes new-page writes 2-2.5x slower;
* egress: ``os.sendfile`` of a page-cached file over loopback to a receiver that
  discards (what a fetch path at best does: page cache -> socket).

Then ``kafkatool serve`` takes raw produce requests (1 MB and 16 KiB batches, acks=1; the
16 KiB ones also with every partition's batch in one request, as a client sends them)
with the load generator of ``bench_broker.py``, and serves a raw fetch loop from the
start of the partitions whose client costs no more than the egress probe's receiver
(``recv_into`` a preallocated buffer, read only the high watermark and batch headers;
``bench_broker``'s decoding client is shown too, it is bound by its own parsing); the table shows each figure, its ceiling and the ratio, with the
issue's targets (produce 1 MB >= 70%, 16 KiB >= 40% of ingest; fetch >= 80% of egress).

    python bench/bench_limits.py            # about a minute
    python bench/bench_limits.py --quick    # a smoke run, a few seconds per figure

Opt-in, never part of the test suite; every loop is bounded in time; only 127.0.0.1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_broker as BB  # noqa: E402
from table import emit, limit_row, ratio_row  # noqa: E402

from kafkatool.protocol.framing import encode_request  # noqa: E402

CHUNK = 1 << 20


def _pair() -> tuple[socket.socket, socket.socket]:
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


def ingest_ceiling(directory: Path, seconds: float, fresh: bool = False) -> float:
    """MB/s: loopback TCP in 1 MB chunks -> recv_into -> os.write into a file in ``directory``.

    ``fresh=False`` rewrites one file, truncated every GB: the page cache reuses the pages it
    just freed.  ``fresh=True`` writes the way a log grows: new 1 GB files, kept until the end,
    so every write needs a page the file never had.  On a virtual machine whose balloon
    reports free pages to the host (virtio-balloon free page reporting) a page that was never
    written, or was freed a few seconds ago, costs the host a fault on first touch; a growing
    log pays that, and only the fresh figure is the ceiling for it."""
    client, conn = _pair()
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
    for path in paths:
        path.unlink(missing_ok=True)
    return received[0] / dt / 1e6


def egress_ceiling(directory: Path, seconds: float, size: int = 256 << 20) -> float:
    """MB/s: os.sendfile of a page-cached file over loopback to a receiver that discards."""
    path = directory / "egress-probe.bin"
    with open(path, "wb") as f:
        block = os.urandom(CHUNK)
        for _ in range(size // CHUNK):
            f.write(block)
    with open(path, "rb") as f:  # into the page cache
        while f.read(8 << 20):
            pass
    client, conn = _pair()
    received = [0]

    def receiver() -> None:
        buf = bytearray(33 << 20)
        while True:
            n = client.recv_into(buf)
            if n == 0:
                return
            received[0] += n

    th = threading.Thread(target=receiver, daemon=True)
    th.start()
    fd = os.open(path, os.O_RDONLY)
    t0 = time.perf_counter()
    deadline = t0 + seconds
    sent = 0
    while time.perf_counter() < deadline:
        offset = 0
        while offset < size and time.perf_counter() < deadline:
            n = os.sendfile(conn.fileno(), fd, offset, size - offset)
            offset += n
            sent += n
    conn.shutdown(socket.SHUT_WR)
    th.join(30)
    dt = time.perf_counter() - t0
    os.close(fd)
    client.close()
    conn.close()
    path.unlink(missing_ok=True)
    return received[0] / dt / 1e6


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("closed")
        got += n


_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_I32 = struct.Struct(">i")
_SENTINEL = 0x7A5A7A5A7A5A7A5A  # the fetch offset placeholder in the pre-encoded request


def fetch_lean(
    port: int, topic: str, partitions: int, seconds_cap: float, min_seconds: float = 0.0
) -> tuple[float, int]:
    """MB/s of a raw Fetch v11 loop from offset 0 to the high watermark, one connection and
    process per partition, that costs the client as little as the egress probe's receiver: the request
    is encoded once and only its correlation id and fetch offset are patched; each
    response is ``recv_into`` a preallocated buffer and only the fields the loop needs are
    read (the high watermark, then batch headers to find the next offset); no copies, no
    record decoding.  With ``min_seconds`` each reader starts again from offset 0 at the
    high watermark until that long has passed (the log stays in the page cache), so the
    figure is not a sub-second burst.  Returns (MB/s, errors)."""
    totals = [0] * partitions
    errors = [0]

    def reader(p: int) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray(33 << 20)
        view = memoryview(buf)
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
                _recv_exact(sock, view[:4])
                size = int.from_bytes(buf[:4], "big")
                if size > len(buf):
                    raise RuntimeError(f"response of {size} bytes")
                _recv_exact(sock, view[:size])
                # correlation id 4, throttle 4, error 2, session 4, topics 4, name i16+bytes
                pos = 4 + 4 + 2 + 4 + 4
                pos += 2 + int.from_bytes(buf[pos : pos + 2], "big")
                pos += 4 + 4  # partitions count, partition index
                err = int.from_bytes(buf[pos : pos + 2], "big", signed=True)
                hw = int.from_bytes(buf[pos + 2 : pos + 10], "big", signed=True)
                pos += 2 + 8 + 8 + 8
                aborted = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                pos += 4 + max(aborted, 0) * 16 + 4  # aborted transactions, preferred read replica
                n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                pos += 4
                if err:
                    errors[0] += 1
                    return
                if n > 0:
                    totals[p] += n
                    end = pos + n
                    unpack = _BATCH_HEAD.unpack_from
                    last = -1
                    while pos + 61 <= end:
                        base, length = unpack(buf, pos)
                        if pos + 12 + length > end:
                            break
                        last = pos
                        pos += 12 + length
                    if last >= 0:
                        offset = (
                            int.from_bytes(buf[last : last + 8], "big")
                            + int.from_bytes(buf[last + 23 : last + 27], "big")
                            + 1
                        )
                if offset >= hw:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each probe and load")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1.5 s per figure")
    ap.add_argument("--dir", type=Path, default=None, help="where the log dir goes (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    args = ap.parse_args()
    seconds = 1.5 if args.quick else args.seconds
    work = Path(tempfile.mkdtemp(prefix="kafkatool-limits-", dir=args.dir))
    try:
        settle()
        recycled = ingest_ceiling(work, seconds)
        settle()
        ingest = ingest_ceiling(work, seconds, fresh=True)
        settle()
        egress = egress_ceiling(work, seconds, size=(64 << 20) if args.quick else (256 << 20))
        t = BB.start_ours(work)
        try:
            BB.create_topic(t.port, "limits", BB.PARTITIONS)
            settle()
            big = BB.produce_raw(t, "limits", 1000, 1 << 20, 1, seconds)
            settle()
            small = BB.produce_raw(t, "limits", 1000, 16 << 10, 1, seconds)
            settle()
            small4 = BB.produce_raw(t, "limits", 1000, 16 << 10, 1, seconds, per_request=BB.PARTITIONS)
            settle()
            fetch, fetch_errors = fetch_lean(
                t.port, "limits", BB.PARTITIONS, seconds_cap=max(10.0, seconds * 4), min_seconds=seconds
            )
            parsing = BB.consume_raw(t, "limits", seconds_cap=max(10.0, seconds * 4))
        finally:
            t.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        ceiling = "ingest (new pages)"
        emit(
            [
                limit_row("limits", "ingest ceiling, recycled pages", recycled, "MB/s"),
                limit_row("limits", "ingest ceiling, new pages (a growing log)", ingest, "MB/s"),
                limit_row("limits", "egress ceiling (sendfile from page cache)", egress, "MB/s"),
                ratio_row("limits", "produce, 1 MB batches, acks=1", big.mb_s, "MB/s", ingest, ceiling, 0.70),
                ratio_row(
                    "limits", "produce, 16 KiB batches, acks=1", small.mb_s, "MB/s", ingest, ceiling, 0.40
                ),
                ratio_row(
                    "limits",
                    f"  same, {BB.PARTITIONS} partitions' batches per request",
                    small4.mb_s,
                    "MB/s",
                    ingest,
                    ceiling,
                    None,
                ),
                ratio_row("limits", "fetch from the start (raw loop)", fetch, "MB/s", egress, "egress", 0.80),
            ]
        )
        return
    rows = [
        ("ingest ceiling, recycled pages (file rewritten)", recycled, None, None, None),
        ("ingest ceiling, new pages (a growing log)", ingest, None, None, None),
        ("egress ceiling (sendfile page cache -> loopback)", egress, None, None, None),
        ("produce, 1 MB batches, acks=1", big.mb_s, ingest, 0.70, big.errors),
        ("produce, 16 KiB batches, acks=1", small.mb_s, ingest, 0.40, small.errors),
        (
            f"  same, {BB.PARTITIONS} partitions' batches per request",
            small4.mb_s,
            ingest,
            None,
            small4.errors,
        ),
        ("fetch from the start (raw loop)", fetch, egress, 0.80, fetch_errors),
        ("  same, bench_broker's decoding client", parsing.mb_s, egress, None, parsing.errors),
    ]
    print(f"{'figure':52} {'MB/s':>9} {'limit':>9} {'ratio':>7} {'target':>7}  errors")
    for name, value, limit, target, errors in rows:
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
