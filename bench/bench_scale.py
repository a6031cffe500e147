"""Partitions at scale (issue 16): one ``kafkatool serve`` holding 100 / 1,000 / 10,000 partitions.

For each size N (topics of 10 partitions each) the run:

1. starts ``serve`` on an empty dir and creates the topics through CreateTopics, 500
   partitions per request (the issue's batch), timing each request against
   ``request.timeout.ms`` (30 s);
2. produces one small batch to every partition (one Produce request per 1,000 partitions,
   acks=1), so every partition has a non-empty active segment, then measures
   - produce msgs/s to 1,000 partitions at once (one batch of 1 record per partition per
     request) against msgs/s to one partition (one batch of 1 record per request), both
     with a window of in-flight requests on one connection;
   - Metadata for all topics, 15 times: the broker's answer (send to the last byte of the
     response received; median and max) apart from the bench client's decoding of it;
   - ListOffsets (latest) for 1,000 partitions in one request, and a Fetch of 1,000
     partitions from offset 0 in one request (median of a few);
   - RSS and open descriptors of the broker (/proc);
3. stops the broker with SIGTERM and times a restart (clean shutdown), then kills it
   with SIGKILL and times a restart (recovery from the recovery point); "start-up" is
   the time until the broker answers a Metadata request naming every topic.

The table prints each figure with the issue's target: CreateTopics batch < 30 s, RSS
<= 500 MB, Metadata answer <= 100 ms (median), clean start-up <= 10 s, start-up after
kill -9 <= 30 s, many-partition produce >= 50% of single-partition msgs/s.  Descriptors: 10,000
partitions need the broker's ``ulimit -n`` raised as the README says (Kafka's own advice
is 100,000); the run raises its soft limit to the hard limit and says what it got.

    python bench/bench_scale.py                  # 100, 1,000 and 10,000 partitions
    python bench/bench_scale.py --quick          # 100 and 1,000
    python bench/bench_scale.py --sizes 2000

Opt-in, never part of the test suite; every wait is bounded; only 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_broker as BB  # noqa: E402
from table import emit, limit_row, ratio_row  # noqa: E402

from kafkatool.formats import records as R  # noqa: E402
from kafkatool.protocol import generated as G  # noqa: E402
from kafkatool.protocol.framing import encode_request, parse_response  # noqa: E402
from kafkatool.protocol.generated.create_topics_request import CreatableTopic  # noqa: E402
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkatool.protocol.generated.list_offsets_request import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsTopic,
)
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402

PER_TOPIC = 10
CREATE_BATCH = 500  # partitions per CreateTopics request (the figure)
REQUEST_TIMEOUT_S = 30.0  # request.timeout.ms default
TARGET_RSS_MB = 500.0
TARGET_METADATA_MS = 100.0
TARGET_CLEAN_START_S = 10.0
TARGET_KILLED_START_S = 30.0
TARGET_MANY_RATIO = 0.5
WINDOW = 8


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def topic_names(n_partitions: int) -> list[str]:
    return [f"s{i:05d}" for i in range(max(1, n_partitions // PER_TOPIC))]


def start(data: Path, log_path: Path) -> tuple[subprocess.Popen, int]:
    port = BB.free_port()
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [
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
            f"log.dirs={data}",
            *BB.override_args(),
        ],
        cwd=BB.REPO,
        stdout=log,
        stderr=log,
    )
    log.close()
    return proc, port


def wait_all_topics(port: int, proc: subprocess.Popen, topics: list[str], timeout: float) -> None:
    """Until a Metadata request names every topic with a leader for every partition."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with BB.Conn(port) as c:
                md = c.request(3, 7, G.MetadataRequest(topics=None))
            names = {t.name for t in md.topics if t.error_code == 0}
            if all(t in names for t in topics):
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"broker did not serve every topic within {timeout:.0f} s")


def broker_stats(pid: int) -> tuple[float, int]:
    rss = float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def create_all(port: int, topics: list[str]) -> list[float]:
    per_request = max(1, CREATE_BATCH // PER_TOPIC)
    times = []
    with BB.Conn(port) as c:
        for i in range(0, len(topics), per_request):
            chunk = topics[i : i + per_request]
            req = G.CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=t, num_partitions=PER_TOPIC, replication_factor=1) for t in chunk
                ],
                timeout_ms=int(REQUEST_TIMEOUT_S * 1000),
            )
            t0 = time.perf_counter()
            resp = c.request(19, 4, req)
            times.append(time.perf_counter() - t0)
            bad = [(t.name, t.error_code) for t in resp.topics if t.error_code not in (0, 36)]
            if bad:
                raise RuntimeError(f"CreateTopics failed: {bad[:3]}")
    return times


def one_record_batch() -> bytes:
    return R.build_record_batch([R.SimpleRecord(b"v" * 100, None, (), int(time.time() * 1000))])


def produce_frame(parts: list[tuple[str, int]], data: bytes, corr: int) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    body = G.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name=t, partition_data=[PartitionProduceData(index=p, records=data) for p in ps])
            for t, ps in by_topic.items()
        ],
    )
    return encode_request(0, 7, corr, "bench", body)


def produce_rate(port: int, parts: list[tuple[str, int]], seconds: float) -> tuple[float, int]:
    """Records/s with a window of in-flight requests, each carrying one record per partition."""
    frame = produce_frame(parts, one_record_batch(), 1)
    records = 0
    errors = 0
    with BB.Conn(port) as c:
        inflight = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while time.perf_counter() < end:
            while inflight < WINDOW:
                c.sock.sendall(frame)
                inflight += 1
            _, resp = parse_response(c.recv_frame(), 0, 7)
            inflight -= 1
            for tr in resp.responses:
                for pr in tr.partition_responses:
                    if pr.error_code:
                        errors += 1
                    else:
                        records += 1
        while inflight:
            c.recv_frame()
            inflight -= 1
        elapsed = time.perf_counter() - t0
    return records / elapsed, errors


def timed(fn, repeat: int = 5) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1000


METADATA_SAMPLES = 15


def metadata_samples(c: BB.Conn, n_parts: int, samples: int = METADATA_SAMPLES) -> dict:
    """Metadata for all topics, ``samples`` times one after another on one connection.

    Each sample is split in two: the broker's answer, from the request's send to the last
    byte of the response received (``recv_frame`` returns when the frame is whole), and the
    bench client's own decoding of it (``parse_response``: 10,000 partition objects in
    Python, as costly as the answer itself and nothing the broker does).  The target is on
    the answer's median: a typical answer, where the max of a few samples on this shared
    2-core machine is mostly another tenant's scheduling; the max is reported beside it, so a
    periodic pause of the broker (a full garbage collection every tenth answer was one)
    shows there.  The decode is the load generator's cost, reported as the benches report
    their generators' costs elsewhere."""
    frame = encode_request(3, 7, 1, "bench", G.MetadataRequest(topics=None))
    answer, decode = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        c.sock.sendall(frame)
        raw = c.recv_frame()
        t1 = time.perf_counter()
        md = parse_response(raw, 3, 7)[1]
        decode.append(time.perf_counter() - t1)
        answer.append(t1 - t0)
        got = sum(len(t.partitions) for t in md.topics)
        if got < n_parts:
            raise RuntimeError(f"Metadata named {got} partitions of {n_parts}")
    return {
        "metadata_ms": statistics.median(answer) * 1000,
        "metadata_max_ms": max(answer) * 1000,
        "metadata_decode_ms": statistics.median(decode) * 1000,
        "metadata_bytes": len(raw),
    }


def measure_requests(port: int, parts: list[tuple[str, int]]) -> dict:
    sample = parts[:1000]
    by_topic: dict[str, list[int]] = {}
    for t, p in sample:
        by_topic.setdefault(t, []).append(p)
    with BB.Conn(port) as c:
        out = metadata_samples(c, len(parts))

        def list_offsets():
            c.request(
                2,
                5,
                G.ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        ListOffsetsTopic(
                            name=t,
                            partitions=[ListOffsetsPartition(partition_index=p, timestamp=-1) for p in ps],
                        )
                        for t, ps in by_topic.items()
                    ],
                ),
            )

        def fetch():
            c.request(
                1,
                11,
                G.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=50 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[
                        FetchTopic(
                            topic=t,
                            partitions=[
                                FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                                for p in ps
                            ],
                        )
                        for t, ps in by_topic.items()
                    ],
                ),
            )

        out["list_offsets_ms"] = timed(list_offsets)
        out["fetch_ms"] = timed(fetch)
        return out


def stop(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_size(n: int, workdir: Path, seconds: float) -> dict:
    data = workdir / f"data-{n}"
    log_path = workdir / f"serve-{n}.log"
    topics = topic_names(n)
    parts = [(t, p) for t in topics for p in range(PER_TOPIC)]
    out: dict = {"partitions": len(parts)}
    proc, port = start(data, log_path)
    try:
        BB.wait_port(port, proc, timeout=60)
        out["fds_empty"] = broker_stats(proc.pid)[1]
        creates = create_all(port, topics)
        out["create_max_s"] = max(creates)
        out["create_total_s"] = sum(creates)
        wait_all_topics(port, proc, topics, 120)
        # one batch into every partition: every partition has a non-empty active segment
        data_batch = one_record_batch()
        with BB.Conn(port) as c:
            for i in range(0, len(parts), 1000):
                c.sock.sendall(produce_frame(parts[i : i + 1000], data_batch, i + 1))
                c.recv_frame()
        out.update(measure_requests(port, parts))
        out["single_msgs_s"], e1 = produce_rate(port, parts[:1], seconds)
        out["many_msgs_s"], e2 = produce_rate(port, parts[:1000], seconds)
        out["produce_errors"] = e1 + e2
        out["rss_mb"], out["fds"] = broker_stats(proc.pid)
        stop(proc, signal.SIGTERM)

        proc, port = start(data, log_path)
        t0 = time.perf_counter()
        wait_all_topics(port, proc, topics, 300)
        out["clean_start_s"] = time.perf_counter() - t0
        out["rss_after_start_mb"], out["fds_after_start"] = broker_stats(proc.pid)
        stop(proc, signal.SIGKILL)

        proc, port = start(data, log_path)
        t0 = time.perf_counter()
        wait_all_topics(port, proc, topics, 300)
        out["killed_start_s"] = time.perf_counter() - t0
    finally:
        stop(proc, signal.SIGTERM)
    return out


def report(rows: list[dict], nofile: int) -> None:
    print(f"\nbroker soft RLIMIT_NOFILE {nofile}; topics of {PER_TOPIC} partitions; target in brackets\n")
    cols = [
        ("partitions", "partitions", "{:.0f}", None),
        ("create_max_s", "CreateTopics(500) max s", "{:.2f}", f"<{REQUEST_TIMEOUT_S:.0f}"),
        ("rss_mb", "RSS MB", "{:.0f}", f"<={TARGET_RSS_MB:.0f}"),
        ("fds", "fds", "{:.0f}", None),
        ("metadata_ms", "Metadata all: answer ms", "{:.1f}", f"<={TARGET_METADATA_MS:.0f}, median"),
        ("metadata_max_ms", "  answer max ms", "{:.1f}", None),
        ("metadata_decode_ms", "  client decode ms", "{:.1f}", None),
        ("metadata_bytes", "  response bytes", "{:.0f}", None),
        ("list_offsets_ms", "ListOffsets 1k ms", "{:.1f}", None),
        ("fetch_ms", "Fetch 1k ms", "{:.1f}", None),
        ("clean_start_s", "start clean s", "{:.2f}", f"<={TARGET_CLEAN_START_S:.0f}"),
        ("fds_after_start", "fds after start", "{:.0f}", None),
        ("killed_start_s", "start kill -9 s", "{:.2f}", f"<={TARGET_KILLED_START_S:.0f}"),
        ("single_msgs_s", "produce 1 part msg/s", "{:.0f}", None),
        ("many_msgs_s", "produce 1k parts msg/s", "{:.0f}", None),
    ]
    width = max(len(c[1]) for c in cols) + 2
    for key, label, fmt, target in cols:
        cells = [fmt.format(r[key]) if key in r else "-" for r in rows]
        line = f"{label:<{width}}" + "".join(f"{c:>12}" for c in cells)
        print(line + (f"   [{target}]" if target else ""))
    ratios = [r["many_msgs_s"] / r["single_msgs_s"] if r.get("single_msgs_s") else float("nan") for r in rows]
    print(
        f"{'many/single ratio':<{width}}"
        + "".join(f"{x:>12.2f}" for x in ratios)
        + f"   [>={TARGET_MANY_RATIO}]"
    )
    errs = sum(r.get("produce_errors", 0) for r in rows)
    if errs:
        print(f"produce errors: {errs}")


def json_rows(rows: list[dict]) -> list:
    out = []
    for r in rows:
        n = f"{r['partitions']:,} partitions"
        if "create_max_s" in r:
            out.append(
                limit_row(
                    "scale", f"{n}: CreateTopics(500) slowest", r["create_max_s"], "s", REQUEST_TIMEOUT_S
                )
            )
        if "rss_mb" in r:
            out.append(limit_row("scale", f"{n}: RSS", r["rss_mb"], "MB", TARGET_RSS_MB))
        if "fds" in r:  # the curve: descriptors beside RSS and start-up
            per = r["fds"] / r["partitions"]
            out.append(limit_row("scale", f"  descriptors open ({per:.2f} a partition)", r["fds"], "fds"))
        if "metadata_ms" in r:
            k = METADATA_SAMPLES
            out.append(
                limit_row(
                    "scale", f"{n}: Metadata all: answer, median", r["metadata_ms"], "ms", TARGET_METADATA_MS
                )
            )
            out.append(limit_row("scale", f"  answer, max (of {k} answers)", r["metadata_max_ms"], "ms"))
            out.append(
                limit_row("scale", "  client decode (generator's own), median", r["metadata_decode_ms"], "ms")
            )
        if "clean_start_s" in r:
            out.append(
                limit_row("scale", f"{n}: start-up, clean", r["clean_start_s"], "s", TARGET_CLEAN_START_S)
            )
        if "fds_after_start" in r:
            per = r["fds_after_start"] / r["partitions"]
            out.append(
                limit_row(
                    "scale", f"  descriptors after it ({per:.2f} a partition)", r["fds_after_start"], "fds"
                )
            )
        if "killed_start_s" in r:
            out.append(
                limit_row(
                    "scale", f"{n}: start-up after kill -9", r["killed_start_s"], "s", TARGET_KILLED_START_S
                )
            )
        if r.get("single_msgs_s"):
            out.append(
                ratio_row(
                    "scale",
                    f"{n}: produce to {min(r['partitions'], 1000):,} partitions vs 1",
                    r["many_msgs_s"],
                    "msg/s",
                    r["single_msgs_s"],
                    "1 partition",
                    TARGET_MANY_RATIO,
                )
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", help="partition counts (default 100 1000 10000)")
    ap.add_argument("--quick", action="store_true", help="100 and 1,000 partitions, short produce runs")
    ap.add_argument("--seconds", type=float, default=3.0, help="each produce-rate run")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    args = ap.parse_args()
    sizes = args.sizes or ([100, 1000] if args.quick else [100, 1000, 10000])
    seconds = 1.0 if args.quick else args.seconds
    nofile = raise_nofile()
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    rows = []
    try:
        for n in sizes:
            if not args.json:
                print(f"{n} partitions ...", flush=True)
            rows.append(run_size(n, workdir, seconds))
            shutil.rmtree(workdir / f"data-{n}", ignore_errors=True)
    finally:
        if args.json:
            emit(json_rows(rows))
        else:
            report(rows, nofile)
        if args.keep:
            print(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
