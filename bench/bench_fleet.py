#!/usr/bin/env python3
"""Fleet scan throughput: Spark local[1] and local[2] against serial `verify` on the same files.

    python bench/bench_fleet.py [--batches 200] [--records 20] [--value-bytes 200] [--segment-kb 256]

Writes the synthetic fleet of the test suite (3 brokers, 30 partitions, RF 2-3,
every codec, with its injected damage) with the project's log engine into a
temp dir, then times
  - serial: verify_log_dir over every log dir in this process (what `kafkatool
    verify` does), the baseline;
  - Spark local[1] and local[2]: `run_scan` (listing, per-segment verify,
    aggregation, replica comparison), each after one warm-up scan so JVM and
    Python worker start-up are not counted (Spark start-up is reported apart).
Prints MB/s and segments/s for each and the overhead versus serial.  Standalone,
not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fleet.fleetgen import build_fleet  # noqa: E402

from kafkatool.fleet import inventory, job  # noqa: E402
from kafkatool.forensics import verify as V  # noqa: E402


def serial(fleet, deep: bool) -> tuple[float, int, int, int]:
    t = time.perf_counter()
    segs = size = findings = 0
    for d in fleet.all_log_dirs():
        for r in V.verify_log_dir(d, deep=deep):
            findings += len(r.findings)
            if r.kind == "log":
                segs += 1
                size += r.size
    return time.perf_counter() - t, segs, size, findings


def spark_runs(master: str, inv, deep: bool, repeat: int) -> tuple[float, float, dict]:
    t = time.perf_counter()
    spark = job.make_spark(master, conf={"spark.sql.shuffle.partitions": "8"})
    startup = time.perf_counter() - t
    job.run_scan(spark, inv, deep=deep)  # warm-up: Python workers, JIT
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        res = job.run_scan(spark, inv, deep=deep)
        el = time.perf_counter() - t
        if best is None or el < best[0]:
            best = (el, res)
    spark.stop()
    return startup, best[0], best[1].summary, best[1].timings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=200, help="batches per partition")
    ap.add_argument("--records", type=int, default=20, help="records per batch")
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--segment-kb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="headers and CRCs only (verify --quick)")
    args = ap.parse_args()
    deep = not args.quick
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        t = time.perf_counter()
        fleet = build_fleet(
            Path(tmp) / "data",
            batches=args.batches,
            records_per_batch=args.records,
            value_size=args.value_bytes,
            segment_bytes=args.segment_kb * 1024,
        )
        inv = inventory.load_inventory(fleet.inventory(Path(tmp) / "fleet.json"))
        print(f"fleet written in {time.perf_counter() - t:.1f}s; cpus: {os.cpu_count()}; deep={deep}")
        serial(fleet, deep)  # page cache warm
        el, segs, size, findings = min((serial(fleet, deep) for _ in range(args.repeat)), key=lambda r: r[0])
        mb = size / 1e6
        print(f"{'mode':10} {'seconds':>8} {'MB/s':>8} {'segments/s':>11} {'vs serial':>10}")
        print(
            f"{'serial':10} {el:8.2f} {mb / el:8.1f} {segs / el:11.0f} {1.0:10.2f}   ({segs} segments, {mb:.1f} MB)"
        )
        for master in ("local[1]", "local[2]"):
            startup, best, summary, timings = spark_runs(master, inv, deep, args.repeat)
            assert summary["segments"] == segs, (summary["segments"], segs)
            print(
                f"{master:10} {best:8.2f} {mb / best:8.1f} {segs / best:11.0f} {best / el:10.2f}"
                f"   (Spark start-up {startup:.1f}s; {summary['errors']} errors, "
                f"{summary['divergent_partitions']} divergent partitions)"
            )
            scan = timings["scan"]
            print(
                f"{'':10} stages: {', '.join(f'{k} {v:.2f}s' for k, v in timings.items())}; "
                f"the verify stage alone: {mb / scan:.1f} MB/s, {segs / scan:.0f} segments/s"
            )


if __name__ == "__main__":
    main()
