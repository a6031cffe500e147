"""Storage-engine throughput: leader appends of 1 KiB and 64 KiB batches, catch-up reads, and
start-up recovery.

Run standalone: ``python bench/bench_log.py [--mb N]`` (not part of pytest).
Appends go through ``Log.append_as_leader`` (CRC check, in-place offset and
leader-epoch assignment, segment append with sparse index entries, producer
state), no fsync except at segment rolls.  Catch-up reads are ``Log.read`` of 1 MiB (a
consumer's max.partition.fetch.bytes) at random offsets of the same log reopened and rolled,
so its segment is inactive and its index is read as a fetch of old data reads it (opened per
lookup: log/indexes); the bytes are not read, a fetch sends them with sendfile.  Recovery is
``Log`` opened after an unclean shutdown with recovery point 0 (every batch's CRC, index
rebuild).  The baseline row (``os.write`` of the same bytes to one file) makes runs on
different machines comparable as ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log

CONFIG = LogConfig(segment_bytes=256 * 1024 * 1024)


def client_batch(batch_size: int, record_size: int = 1024, seed: int = 1) -> bytes:
    rnd = random.Random(seed)
    n = max(1, batch_size // (record_size + 16))
    recs = [
        R.SimpleRecord(rnd.randbytes(record_size - 10), b"key-%05d" % i, (), 1_700_000_000_000 + i)
        for i in range(n)
    ]
    # no producer id: the same idempotent batch appended again would be a duplicate (the log
    # answers with the original's offsets and writes nothing), which this bench measured
    # until session 23 (64 KiB "appends" at 3x os.write's speed)
    return R.build_record_batch(recs)


def bench_baseline(root: Path, data: bytes, total: int) -> float:
    path = root / "baseline.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    t = time.perf_counter()
    written = 0
    while written < total:
        os.write(fd, data)
        written += len(data)
    elapsed = time.perf_counter() - t
    os.close(fd)
    path.unlink()
    return written / elapsed / 1e6


def bench_append(root: Path, batch_size: int, total: int) -> tuple[float, float, Path]:
    data = client_batch(batch_size)
    d = root / f"bench-{batch_size}"
    log = Log(d, CONFIG)
    n = max(1, total // len(data))
    t = time.perf_counter()
    for _ in range(n):
        log.append_as_leader(data, leader_epoch=0)
    elapsed = time.perf_counter() - t
    log.close()
    return n * len(data) / elapsed / 1e6, n / elapsed, d


def bench_catch_up(d: Path, reads: int = 5000) -> tuple[float, int]:
    """Microseconds per 1 MiB ``Log.read`` at random offsets of the inactive segment, and the
    entries of its offset index."""
    log = Log(d, CONFIG)
    try:
        end = log.log_end_offset
        log.roll()
        seg = log.segments[0]
        rnd = random.Random(7)
        offsets = [rnd.randrange(0, end) for _ in range(reads)]
        t = time.perf_counter()
        for offset in offsets:
            log.read(offset, 1 << 20)
        elapsed = time.perf_counter() - t
        return elapsed / reads * 1e6, seg.offset_index.entries
    finally:
        log.close()


def bench_recovery(d: Path) -> float:
    size = sum(p.stat().st_size for p in d.glob("*.log"))
    for p in d.glob("*.index"):
        p.unlink()  # force every segment through recovery
    t = time.perf_counter()
    log = Log(d, CONFIG, recovery_point=0)
    elapsed = time.perf_counter() - t
    assert log.load_result.recovered
    log.close()
    return size / elapsed / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256, help="bytes appended per run, in MB")
    args = ap.parse_args()
    total = args.mb * 1_000_000
    root = Path(tempfile.mkdtemp(prefix="bench-log-"))
    try:
        base = bench_baseline(root, client_batch(64 * 1024), total)
        print(f"baseline os.write 64 KiB chunks : {base:9.1f} MB/s")
        for size in (1024, 64 * 1024):
            mbs, bps, d = bench_append(root, size, total)
            print(
                f"append {size // 1024:>2} KiB batches        : {mbs:9.1f} MB/s {bps:12.0f} batches/s  ({mbs / base:.2f}x baseline)"
            )
            us, entries = bench_catch_up(d)
            print(
                f"catch-up read of {size // 1024:>2} KiB batches : {us:9.1f} us per 1 MiB read "
                f"(inactive segment, {entries} index entries)"
            )
            rec = bench_recovery(d)
            print(f"recovery of {size // 1024:>2} KiB batches     : {rec:9.1f} MB/s")
            shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
