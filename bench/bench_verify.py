#!/usr/bin/env python3
"""verify and dump-log speed on an uncompressed v2 segment held in page cache.

    python bench/bench_verify.py [--mb 256] [--batch-kb 16] [--record-bytes 1000]

Prints the raw CRC-32C speed over the same bytes (the ceiling: verify must at
least CRC every byte), `verify --quick` (headers + CRCs, what Kafka's recovery
checks) and full `verify` (every record decoded) as MB/s and as a fraction of
the CRC speed, and `dump-log --deep-iteration` in records/s.  Standalone, not
part of the test suite.
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkatool.forensics import dump as D  # noqa: E402
from kafkatool.forensics import verify as V  # noqa: E402
from kafkatool.formats import records as R  # noqa: E402
from kafkatool.formats.crc import crc32c  # noqa: E402


def build_segment(path: Path, mb: int, batch_kb: int, record_bytes: int) -> tuple[int, int]:
    per_batch = max(1, batch_kb * 1024 // (record_bytes + 20))
    value = os.urandom(record_bytes)
    template = [R.SimpleRecord(value, b"key-%06d" % i, (), 1_700_000_000_000 + i) for i in range(per_batch)]
    one = R.build_record_batch(template, producer_id=1, producer_epoch=0, base_sequence=0)
    n = mb * 1024 * 1024 // len(one)
    buf = bytearray()
    for i in range(n):
        b = bytearray(one)
        R.set_base_offset(b, 0, i * per_batch)
        buf += b
    path.write_bytes(buf)
    return n, n * per_batch


def best_of(fn, repeat=3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--batch-kb", type=int, default=16)
    ap.add_argument("--record-bytes", type=int, default=1000)
    ap.add_argument(
        "--dump-mb", type=int, default=32, help="size of the segment used for the dump-log figure"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seg = Path(tmp) / "t-0" / f"{0:020d}.log"
        seg.parent.mkdir()
        batches, records = build_segment(seg, args.mb, args.batch_kb, args.record_bytes)
        size = seg.stat().st_size
        mbytes = size / 1e6
        with open(seg, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            crc_t = best_of(lambda: crc32c(m))
        quick_t = best_of(lambda: V.verify_segment(seg, deep=False))
        full_t = best_of(lambda: V.verify_segment(seg, deep=True), repeat=1)
        rep = V.verify_segment(seg, deep=False)
        assert rep.batches == batches and not rep.findings
        print(
            f"segment: {mbytes:.0f} MB, {batches} batches of ~{args.batch_kb} KiB, {records} records of "
            f"{args.record_bytes} B"
        )
        print(f"raw CRC-32C over the file      : {mbytes / crc_t:8.0f} MB/s")
        print(
            f"verify --quick (headers + CRCs): {mbytes / quick_t:8.0f} MB/s = {crc_t / quick_t:.2f} of CRC speed"
        )
        print(
            f"verify (every record decoded)  : {mbytes / full_t:8.0f} MB/s = {crc_t / full_t:.3f} of CRC speed, "
            f"{records / full_t:,.0f} records/s"
        )
        small = Path(tmp) / "d-0" / f"{0:020d}.log"
        small.parent.mkdir()
        _, small_records = build_segment(small, args.dump_mb, args.batch_kb, args.record_bytes)
        opts = D.DumpOptions(deep_iteration=True)

        def dump() -> None:
            with open(os.devnull, "w") as null:
                for ev in D.dump_file(small, opts):
                    line = D.kafka_line(ev, opts)
                    if line is not None:
                        null.write(line)

        dump_t = best_of(dump, repeat=1)
        print(
            f"dump-log --deep-iteration      : {small_records / dump_t:8,.0f} records/s "
            f"({args.dump_mb} MB segment, text lines to /dev/null)"
        )


if __name__ == "__main__":
    main()
