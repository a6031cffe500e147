"""Every core (issue 16): the broker pinned to 1 core, then to 2 cores, same load, one run.

``kafkatool serve`` is started under ``taskset -c 0`` and then under ``taskset -c 0,1``
(a fresh log dir each time); the load generators are not pinned (they run on whatever
core is free, the same way in both runs).  Figures: produce with 16 KiB batches (acks=1,
``bench_broker``'s raw producer) and a many-partition fetch (16 partitions read from the
start with ``bench_limits``' lean fetch loop).  The issue's target is >= 1.6x from 1 to 2
cores; the table prints the ratio.  What limits it is written in DESIGN.md ("Every core").
A third run shows what a broker of several processes could reach at best here: two
standalone brokers pinned to the same 2 cores, the producer's connections split between
them (each process owns its partitions and its clients reach it directly: no forwarding).

    python bench/bench_cores.py            # 5 s per figure
    python bench/bench_cores.py --quick    # 1.5 s per figure

Opt-in, never part of the test suite; needs ``taskset`` and at least 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_broker as BB  # noqa: E402
import bench_limits as BL  # noqa: E402
from table import emit, ratio_row  # noqa: E402

from kafkatool.protocol import generated as G  # noqa: E402
from kafkatool.protocol.framing import encode_request  # noqa: E402
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402

PARTITIONS = 16


def start_pinned(workdir: Path, cpus: str) -> BB.Target:
    port = BB.free_port()
    log = open(workdir / f"serve-{cpus}.log", "wb")
    proc = subprocess.Popen(
        [
            "taskset",
            "-c",
            cpus,
            sys.executable,
            "-m",
            "kafkatool",
            "serve",
            "--no-banner",
            "--log-level",
            "warning",
            "-o",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "-o",
            f"log.dirs={workdir / ('data-' + cpus.replace(',', '-'))}",  # a comma would split log.dirs
        ],
        cwd=BB.REPO,
        stdout=log,
        stderr=log,
    )
    BB.wait_port(port, proc)
    return BB.Target(f"kafkatool@{cpus}", proc, port, workdir)


def fill(port: int, topic: str, partitions: int, mb_each: int) -> None:
    """``mb_each`` MB of 1 MB batches into every partition (acks=1)."""
    data, _ = BB.make_batch(1000, 1 << 20)
    with BB.Conn(port) as c:
        for p in range(partitions):
            body = G.ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout_ms=30000,
                topic_data=[
                    TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=p, records=data)])
                ],
            )
            frame = encode_request(0, 7, 1, "bench", body)
            for _ in range(mb_each):
                c.sock.sendall(frame)
                c.recv_frame()


def run(workdir: Path, cpus: str, seconds: float) -> tuple[float, float, float]:
    t = start_pinned(workdir, cpus)
    try:
        BB.create_topic(t.port, "cores", BB.PARTITIONS)
        produce = BB.produce_raw(t, "cores", 1000, 16 << 10, 1, seconds)
        BB.create_topic(t.port, "many", PARTITIONS)
        fill(t.port, "many", PARTITIONS, 32)
        fetch, errors = BL.fetch_lean(
            t.port, "many", PARTITIONS, seconds_cap=max(10.0, seconds * 4), min_seconds=seconds
        )
        return produce.mb_s, fetch, produce.cpu_per_gb
    finally:
        t.stop()


def run_split(workdir: Path, seconds: float) -> float:
    """MB/s of the 16 KiB produce load split between two brokers pinned to cores 0,1."""
    targets = []
    try:
        for i in range(2):
            d = workdir / f"split-{i}"
            d.mkdir()
            targets.append(start_pinned(d, "0,1"))
            BB.create_topic(targets[-1].port, "cores", BB.PARTITIONS)
        results: list = [None, None]

        def load(i: int) -> None:
            results[i] = BB.produce_raw(
                targets[i], "cores", 1000, 16 << 10, 1, seconds, connections=max(1, BB.CONNECTIONS // 2)
            )

        threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return sum(r.mb_s for r in results)
    finally:
        for t in targets:
            t.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    args = ap.parse_args()
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        sys.exit("needs taskset and at least 2 cores")
    seconds = 1.5 if args.quick else args.seconds
    work = Path(tempfile.mkdtemp(prefix="kafkatool-cores-", dir=args.dir))
    try:
        one = run(work, "0", seconds)
        two = run(work, "0,1", seconds)
        split = run_split(work, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        emit(
            [
                ratio_row(
                    "cores", "produce 16 KiB batches, 2 cores vs 1", two[0], "MB/s", one[0], "1 core", 1.6
                ),
                ratio_row(
                    "cores",
                    "  same, 2 broker processes splitting the load (best case)",
                    split,
                    "MB/s",
                    one[0],
                    "1 core",
                    None,
                ),
                ratio_row(
                    "cores",
                    f"fetch {PARTITIONS} partitions, 2 cores vs 1",
                    two[1],
                    "MB/s",
                    one[1],
                    "1 core",
                    1.6,
                ),
            ]
        )
        return
    print(f"{'figure (MB/s)':44} {'1 core':>9} {'2 cores':>9} {'ratio':>7} {'target':>7}")
    for name, a, b, target in [
        ("produce, 16 KiB batches, acks=1", one[0], two[0], 1.6),
        ("  same, 2 broker processes splitting the load", one[0], split, None),
        (f"fetch, {PARTITIONS} partitions from the start", one[1], two[1], 1.6),
    ]:
        r = b / a if a else 0.0
        if target is None:
            print(f"{name:44} {a:9.1f} {b:9.1f} {r:7.2f}")
            continue
        print(f"{name:44} {a:9.1f} {b:9.1f} {r:7.2f} {target:7.2f}  {'ok' if r >= target else 'below'}")
    print(f"broker CPU-seconds per GB produced: 1 core {one[2]:.2f}, 2 cores {two[2]:.2f}")


if __name__ == "__main__":
    main()
