"""Crash loop figures (issue 18): kill -9 of `kafkatool serve` at random moments under an
idempotent acks=all producer, during rolls, compaction, retention and log-dir moves; restart;
read back. Prints, for Kafka's default flush settings and for log.flush.interval.messages=1:
records acknowledged, missing, duplicated, reordered, the longest restart, and the acknowledged
rate (what fsync per append costs). The same loop, smaller, is tests/faults/test_crash_loop.py.

    python bench/bench_crash_loop.py [--kills 30] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from tests.faults.test_crash_loop import check, crash_loop  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rows = []
    for label, extra in (("defaults", []), ("flush every message", ["log.flush.interval.messages=1"])):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            res = crash_loop(Path(tmp), kills=args.kills, seed=args.seed, extra=extra)
            seconds = time.monotonic() - t0
            fig = check(res)
            rows.append((label, fig, fig["acked"] / seconds))
    print(
        f"{'flush':<22}{'acked':>10}{'missing':>9}{'dups':>6}{'reordered':>11}{'restart max s':>15}{'acked/s':>10}"
    )
    for label, fig, rate in rows:
        print(
            f"{label:<22}{fig['acked']:>10}{fig['missing']:>9}{fig['duplicates']:>6}{fig['reordered']:>11}"
            f"{fig['restart_s_max']:>15.2f}{rate:>10.0f}"
        )


if __name__ == "__main__":
    main()
