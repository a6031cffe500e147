"""No stalls from background work (issue 16): latency while the cleaner and retention work.

One ``kafkatool serve``; the run:

1. latency run (the issue's fixed-rate latency target, acks=all p99 <= 1 ms on an idle
   machine): a producer sends one 100-byte record per request at 1,000 msg/s with
   ``acks=all`` to ``lat`` (its own process), nothing else; its own lateness against
   its schedule is reported beside the figure.  Then the idle window, the baseline of
   the stall figures: the same producer while a prober fetches partition ``other``
   (max.wait 0) every 10 ms (another process).  On a 2-core machine the second probe
   roughly doubles the producer's p99 (0.4 -> 0.8 ms): nearly every slow request
   overlaps a fetch, and pinning the broker to one core and the probes to the other
   brings it back to 0.6 ms, so it is three processes sharing two cores, not the
   broker's work (a small fetch costs it about 50 us).  Both run before the fill:
   after it the kernel writes the fill's 2 GB of dirty pages back for half a minute,
   and the machine is not idle.  For the same reason each starts only once the
   machine is quiet (``bench/quiet.py``: ``os.sync``, then a bounded wait until little is
   left to write back and the cores are idle; an earlier bench's writes are still being
   written back otherwise); the table prints that state beside the figure, and how busy
   other processes kept the cores during the window;
2. fills ``cmp`` (cleanup.policy=compact, not yet due) with ``--size-mb`` of keyed records
   and ``ret`` (delete) with as many bytes of plain records, in 1 MB batches;
3. background window: ``cmp`` is made due (min.cleanable.dirty.ratio 0.01) and ``ret``
   gets retention.ms=1, so the cleaner compacts the whole partition while retention
   deletes every segment of the other one; the same probes run until both finished
   (the broker's "log cleaned" and "retention deleted" lines, and the ``.deleted``
   files gone after ``file.delete.delay.ms`` = 1 s) or ``--max-seconds``.

The table prints p50/p99/p99.9/max produce latency and fetch delay for both windows
against the issue's targets (p99 <= 5 ms, p99.9 <= 20 ms, fetch delay <= 20 ms), and the
load generator's own overhead (how late it sent against its schedule).  The machine is
shared: the broker, its cleaner worker and both probes compete for the same cores.

    python bench/bench_stalls.py                 # 1 GB each, as the issue says
    python bench/bench_stalls.py --quick         # 64 MB each: a smoke run

Opt-in, never part of the test suite; every loop is bounded in time; only 127.0.0.1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_broker as BB  # noqa: E402
from quiet import OthersLoad, wait_quiet  # noqa: E402
from table import emit, limit_row  # noqa: E402

from kafkatool.formats import records as R  # noqa: E402
from kafkatool.protocol import generated as G  # noqa: E402
from kafkatool.protocol.framing import encode_request  # noqa: E402
from kafkatool.protocol.generated.create_topics_request import (  # noqa: E402
    CreatableTopic,
    CreatableTopicConfig,
)
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkatool.protocol.generated.incremental_alter_configs_request import (  # noqa: E402
    AlterableConfig,
    AlterConfigsResource,
)
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402

TARGET_P99_MS = 5.0
TARGET_IDLE_P99_MS = 1.0
TARGET_P999_MS = 20.0
TARGET_FETCH_MS = 20.0


def start_serve(workdir: Path) -> tuple[subprocess.Popen, int, Path]:
    port = BB.free_port()
    log_path = workdir / "serve.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkatool",
            "serve",
            "--no-banner",
            "-o",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "-o",
            f"log.dirs={workdir / 'data'}",
            "-o",
            "log.retention.check.interval.ms=500",
            "-o",
            "log.cleaner.backoff.ms=200",
            "-o",
            "log.roll.jitter.ms=0",
            "-o",
            # the unlinks of retention's .deleted files fall inside the measured window
            "log.segment.delete.delay.ms=1000",
            *BB.override_args(),
        ],
        cwd=BB.REPO,
        stdout=open(log_path, "wb"),
        stderr=subprocess.STDOUT,
    )
    BB.wait_port(port, proc)
    return proc, port, log_path


def create(c: BB.Conn, name: str, configs: dict[str, str]) -> None:
    req = G.CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=1,
                replication_factor=1,
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=10000,
    )
    code = c.request(19, 4, req).topics[0].error_code
    if code:
        raise RuntimeError(f"CreateTopics {name} failed with {code}")


def alter(c: BB.Conn, topic: str, name: str, value: str) -> None:
    req = G.IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=2,
                resource_name=topic,
                configs=[AlterableConfig(name=name, config_operation=0, value=value)],
            )
        ],
        validate_only=False,
    )
    code = c.request(44, 1, req).responses[0].error_code
    if code:
        raise RuntimeError(f"IncrementalAlterConfigs {topic} {name} failed with {code}")


def produce_frame(topic: str, data: bytes, acks: int, corr: int = 1) -> bytes:
    body = G.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=data)])
        ],
    )
    return encode_request(0, 9, corr, "bench", body)


def fill(port: int, topic: str, total: int, keyed: bool) -> None:
    """``total`` bytes in 1 MB batches; keyed: 1 KB values over 50,000 keys (so that
    compaction keeps about 50 MB of a large partition and has real work to do)."""
    value = os.urandom(1000)
    sent = 0
    n = 0
    with BB.Conn(port) as c:
        while sent < total:
            now = int(time.time() * 1000)
            recs = []
            for _ in range(950):
                key = b"key-%06d" % (n % 50_000) if keyed else None
                recs.append(R.SimpleRecord(value, key, (), now))
                n += 1
            data = R.build_record_batch(recs)
            c.sock.sendall(produce_frame(topic, data, 1))
            c.recv_frame()
            sent += len(data)


def producer_probe(port: int, stop, out, rate: int = 1000) -> None:
    """acks=all, one 100-byte record per request at ``rate``/s; (latencies, lateness) in s."""
    data = R.build_record_batch([R.SimpleRecord(b"x" * 100, None, (), int(time.time() * 1000))])
    frame = produce_frame("lat", data, -1)
    lat, late = [], []
    with BB.Conn(port) as c:
        interval = 1.0 / rate
        nxt = time.perf_counter()
        while not stop.is_set():
            now = time.perf_counter()
            if now < nxt:
                time.sleep(nxt - now)
            s = time.perf_counter()
            late.append(s - nxt)
            c.sock.sendall(frame)
            c.recv_frame()
            lat.append(time.perf_counter() - s)
            nxt = max(nxt + interval, time.perf_counter() - 0.1)  # no unbounded catch-up burst
    out.put(("produce", lat, late))


def fetch_probe(port: int, stop, out, every: float = 0.010) -> None:
    """A fetch of partition ``other`` (max.wait 0) every ``every`` s; round trips in s."""
    body = G.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic="other",
                partitions=[
                    FetchPartition(
                        partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 16
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    frame = encode_request(1, 11, 1, "bench", body)
    rtt = []
    with BB.Conn(port) as c:
        while not stop.is_set():
            s = time.perf_counter()
            c.sock.sendall(frame)
            c.recv_frame()
            rtt.append(time.perf_counter() - s)
            time.sleep(every)
    out.put(("fetch", rtt, []))


def run_probes(port: int, until, fetch: bool = True) -> dict:
    """The producer probe, and the fetch probe unless ``fetch`` is false, until ``until(t0)``
    returns: {"produce": (latencies, lateness), "fetch": (round trips, []), "seconds": s}."""
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=producer_probe, args=(port, stop, out))]
    if fetch:
        procs.append(ctx.Process(target=fetch_probe, args=(port, stop, out)))
    for p in procs:
        p.start()
    t0 = time.monotonic()
    until(t0)
    stop.set()
    got = {}
    for _ in procs:
        name, a, b = out.get(timeout=120)
        got[name] = (a, b)
    for p in procs:
        p.join(30)
    got.setdefault("fetch", ([], []))
    got["seconds"] = time.monotonic() - t0
    return got


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024, help="bytes of each of cmp and ret (default 1024)")
    ap.add_argument("--segment-mb", type=int, default=16, help="segment.bytes of cmp and ret")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--max-seconds", type=float, default=600.0, help="cap on the background window")
    ap.add_argument("--quick", action="store_true", help="64 MB each, 3 s idle window")
    ap.add_argument("--dir", type=Path, default=None, help="where the log dir goes (default: a temp dir)")
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    args = ap.parse_args()
    size = (64 if args.quick else args.size_mb) << 20
    idle = 3.0 if args.quick else args.idle_seconds
    seg = str(args.segment_mb << 20)
    work = Path(tempfile.mkdtemp(prefix="kafkatool-stalls-", dir=args.dir))
    proc = None
    try:
        proc, port, log_path = start_serve(work)
        with BB.Conn(port) as c:
            create(
                c,
                "cmp",
                {"cleanup.policy": "compact", "segment.bytes": seg, "min.cleanable.dirty.ratio": "1.0"},
            )
            create(c, "ret", {"segment.bytes": seg, "retention.ms": "-1", "retention.bytes": "-1"})
            create(c, "lat", {})
            create(c, "other", {})
            c.sock.sendall(produce_frame("other", R.build_record_batch([R.SimpleRecord(b"o" * 100)]), 1))
            c.recv_frame()
        # the idle window on an idle machine: no writeback of an earlier bench's gigabytes, no
        # CPU busy (bench/quiet.py; bounded: when it does not settle, the row says so)
        target = BB.Target("kafkatool", proc, port, work)
        calm = wait_quiet("the latency run", log=None if args.json else sys.stdout)
        with OthersLoad(target.cpu_seconds) as others:
            alone = run_probes(port, lambda t0: time.sleep(idle), fetch=False)
        alone_note = f"{calm.note()}; {others.note()}"
        calm = wait_quiet("the idle window", log=None if args.json else sys.stdout)
        with OthersLoad(target.cpu_seconds) as others:
            base = run_probes(port, lambda t0: time.sleep(idle))
        idle_note = f"{calm.note()}; {others.note()}"
        t0 = time.monotonic()
        fill(port, "cmp", size, keyed=True)
        fill(port, "ret", size, keyed=False)
        fill_s = time.monotonic() - t0
        if not args.json:
            print(f"filled cmp and ret with {size >> 20} MB each in {fill_s:.1f} s", flush=True)

        def background(t0: float) -> None:
            with BB.Conn(port) as c:
                alter(c, "cmp", "min.cleanable.dirty.ratio", "0.01")
                alter(c, "ret", "retention.ms", "1")
            while time.monotonic() - t0 < args.max_seconds:
                text = log_path.read_text(errors="replace")
                ret_dir = work / "data" / "ret-0"
                if (
                    "log cleaned topic=cmp" in text
                    and "retention deleted topic=ret" in text
                    and not any(p.name.endswith(".deleted") for p in ret_dir.iterdir())
                ):
                    return
                time.sleep(0.2)

        busy = run_probes(port, background)
        text = log_path.read_text(errors="replace")
        done = [
            ln
            for ln in text.splitlines()
            if "log cleaned topic=cmp" in ln or "retention deleted topic=ret" in ln
        ]
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    if args.json:
        emit(
            [
                replace(
                    limit_row(
                        "stalls",
                        "idle: produce acks=all p99 @1000 msg/s",
                        pct(alone["produce"][0], 0.99),
                        "ms",
                        TARGET_IDLE_P99_MS,
                    ),
                    note=alone_note,
                ),
                limit_row(
                    "stalls", "  generator lateness p99 (its own)", pct(alone["produce"][1], 0.99), "ms"
                ),
                replace(
                    limit_row(
                        "stalls",
                        "  same, a fetch every 10 ms beside it (the stalls baseline)",
                        pct(base["produce"][0], 0.99),
                        "ms",
                    ),
                    note=idle_note,
                ),
                limit_row(
                    "stalls", "background: produce p99", pct(busy["produce"][0], 0.99), "ms", TARGET_P99_MS
                ),
                limit_row(
                    "stalls",
                    "background: produce p99.9",
                    pct(busy["produce"][0], 0.999),
                    "ms",
                    TARGET_P999_MS,
                ),
                limit_row(
                    "stalls", "background: fetch max delay", pct(busy["fetch"][0], 1.0), "ms", TARGET_FETCH_MS
                ),
            ]
        )
        return
    print(f"latency run (the producer alone): {alone_note}")
    print(
        f"  produce acks=all p50 {pct(alone['produce'][0], 0.5):.2f} p99 {pct(alone['produce'][0], 0.99):.2f} "
        f"p99.9 {pct(alone['produce'][0], 0.999):.2f} ms (target p99 <= {TARGET_IDLE_P99_MS:.1f}); "
        f"generator lateness p99 {pct(alone['produce'][1], 0.99):.2f} ms; {len(alone['produce'][0])} requests"
    )
    print(f"idle window: {idle_note}")
    print("background work:")
    for ln in done:
        print("  " + ln.split(" logger=")[-1])
    print(f"{'figure (ms)':44} {'idle':>8} {'background':>11} {'target':>8}")
    rows = []
    for label, key, q, target in [
        ("produce acks=all p50", "produce", 0.50, None),
        ("produce acks=all p99", "produce", 0.99, TARGET_P99_MS),
        ("produce acks=all p99.9", "produce", 0.999, TARGET_P999_MS),
        ("produce acks=all max", "produce", 1.0, None),
        ("fetch of another partition p99", "fetch", 0.99, None),
        ("fetch of another partition max (delay)", "fetch", 1.0, TARGET_FETCH_MS),
    ]:
        a = pct(base[key][0], q)
        b = pct(busy[key][0], q)
        mark = "" if target is None else ("ok" if b <= target else "above")
        rows.append((label, a, b, target, mark))
        t = f"{target:8.1f}" if target is not None else " " * 8
        print(f"{label:44} {a:8.2f} {b:11.2f} {t} {mark}")
    print(
        f"{'generator lateness p99 (its own overhead)':44} {pct(base['produce'][1], 0.99):8.2f} "
        f"{pct(busy['produce'][1], 0.99):11.2f}"
    )
    print(
        f"requests: idle {len(base['produce'][0])} produce / {len(base['fetch'][0])} fetch in {base['seconds']:.1f} s; "
        f"background {len(busy['produce'][0])} / {len(busy['fetch'][0])} in {busy['seconds']:.1f} s"
    )


if __name__ == "__main__":
    main()
