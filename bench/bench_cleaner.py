#!/usr/bin/env python3
"""Compaction speed: the log cleaner on a partition of keyed records, in records/s.

    python bench/bench_cleaner.py [--records 200000] [--keys 10000] [--value-bytes 100]
                                  [--per-batch 20] [--codec none|gzip|snappy|lz4|zstd]

Builds a partition (1 MiB segments) where every key is written many times,
then times, on fresh copies: a baseline pass that only decodes every record
of the cleanable segments (the floor: the cleaner must read each key twice,
once for the offset map and once to filter), a dry run (map + filter, no
writes) and a real compaction (map + filter + .cleaned segments + swap +
quarantine links).  Standalone, not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkatool.formats import compression  # noqa: E402
from kafkatool.formats import records as R  # noqa: E402
from kafkatool.log.cleaner import compact  # noqa: E402
from kafkatool.log.config import LogConfig  # noqa: E402
from kafkatool.log.log import Log  # noqa: E402
from kafkatool.log.maintenance import Quarantine  # noqa: E402
from kafkatool.log.offset_map import OffsetMap  # noqa: E402

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=1 << 20, cleanup_policy=("compact",))


def build(part: Path, records: int, keys: int, value_bytes: int, per_batch: int, codec: int) -> None:
    log = Log(part, CFG, clock=lambda: NOW)
    value = os.urandom(value_bytes)
    offset = 0
    while offset < records:
        n = min(per_batch, records - offset)
        recs = [
            R.SimpleRecord(value, b"key-%08d" % ((offset + i) * 7919 % keys), (), NOW + offset + i)
            for i in range(n)
        ]
        log.append_as_follower(
            R.build_record_batch(recs, base_offset=offset, codec=codec, partition_leader_epoch=0)
        )
        offset += n
    log.roll()
    log.close()


def decode_all(part: Path) -> int:
    log = Log(part, CFG, writable=False)
    n = 0
    for b in log.batches():
        for r in b.records():
            n += r.key is not None
    log.close()
    return n


def run_compact(part: Path, *, write: bool) -> tuple[float, object]:
    log = Log(part, CFG, had_clean_shutdown=True, clock=lambda: NOW)
    log.update_high_watermark(log.log_end_offset)
    t = time.perf_counter()
    res = compact(
        log,
        CFG,
        checkpoint=None,
        now_ms=NOW,
        offset_map=OffsetMap(),
        write=write,
        quarantine=Quarantine(part, "bench") if write else None,
    )
    elapsed = time.perf_counter() - t
    log.close()
    return elapsed, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--per-batch", type=int, default=20)
    ap.add_argument("--codec", default="none")
    args = ap.parse_args()
    codec = compression.codec_from_name(args.codec)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src" / "t-0"
        t = time.perf_counter()
        build(src, args.records, args.keys, args.value_bytes, args.per_batch, codec)
        size = sum(p.stat().st_size for p in src.glob("*.log"))
        print(
            f"built {args.records} records, {args.keys} keys, {args.codec}, {size / 1e6:.1f} MB "
            f"in {time.perf_counter() - t:.1f} s"
        )
        t = time.perf_counter()
        decode_all(src)
        base = time.perf_counter() - t
        print(
            f"baseline decode of every record:  {args.records / base:>10,.0f} records/s  {size / base / 1e6:6.1f} MB/s"
        )
        for label, write in (("dry run (map + filter)", False), ("compaction (write + swap)", True)):
            work = Path(tmp) / label.split()[0] / "t-0"
            shutil.copytree(src, work)
            elapsed, res = run_compact(work, write=write)
            s = res.stats
            print(
                f"{label:<33} {s.records_read / elapsed:>10,.0f} records/s  {s.bytes_before / elapsed / 1e6:6.1f} MB/s  "
                f"({elapsed:.2f} s; kept {s.records_kept} of {s.records_read}, {s.bytes_after / 1e6:.2f} MB; "
                f"{elapsed / (2 * base):.2f}x two decode passes)"
            )


if __name__ == "__main__":
    main()
