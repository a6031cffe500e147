"""Every core (issue 16): the broker on 1 core, then on 2 cores as 2 processes, same load, one run.

``kafkatool serve`` is started three times (a fresh log dir each time, deleted after its run):

(a) under ``taskset -c 0``, one process (the baseline);
(b) under ``taskset -c 0,1`` with ``kafkatool.processes=2``: two processes on the same log
    dir, seen by clients as two brokers, each the leader of its share of the partitions;
(c) under ``taskset -c 0,1``, one process (for information: what a second core gives a
    broker of one process).

Where the load generators run is stated with every figure, and is the same rule in every
run, as the issue asks ("generator on the rest or on the same cores in both runs, stated";
``--load``): on a machine of 4 cores or more they are pinned to the cores the broker does not
use (2 and up: ``rest``); with fewer cores there is no rest for the 2-core run, so they are
pinned to the broker's own cores in each run (``same``: core 0 in (a), cores 0-1 in (b) and
(c)), so that 1 core and 2 cores each carry the broker and its load.  ``--load unpinned``
is the rule sessions 12-14 measured with: the generators on whatever core is free, which on 2
cores gives the 1-core broker a second core for its load but not the 2-core one (the ratio
then compares the broker alone with the broker plus its load).  With several processes each partition's produce and fetch connections go to
its leader (``bench_broker.leader_ports``, from Metadata).  Figures: produce with 16 KiB
batches (acks=1, ``bench_broker``'s raw producer) and a many-partition fetch (16
partitions read from the start with ``bench_limits``' lean fetch loop).  The issue's target
is >= 1.6x from (a) to (b); the table prints the ratios, (c) against (a) too.  Beside
them, the machine's own: the fetch path without a broker (``egress_scaling``: blocking
``os.sendfile`` loops to the same discarding readers) with its senders on 1 core and on 2,
so the table says how far this machine's kernel path scales with the load where it is; and the
produce path without a broker (``ingest_scaling``: 16 KiB frames over loopback into growing
files, answered, from the same sender layout) with one receiver on 1 core and two on 2.  Below
the table, the CPU-seconds per GB fetched of the broker and of its readers, and of the
machine path's senders and readers: where readers and broker share 2 cores, what the
readers cost is taken from the broker (fetch_lean's readers walk every batch head, the
machine path's only discard); and the CPU-seconds per GB produced of the broker and of the
machine's produce path (its receivers, its senders): where the broker's rise from 1 core to 2
is larger than the machine path's, the rest is the broker's own.  What limits it is written in DESIGN.md ("Every core").

    python bench/bench_cores.py            # 5 s per figure, 3 rounds
    python bench/bench_cores.py --quick    # 1.5 s per figure, 1 round

With 2 cores the run with two processes has the machine 100% busy (the broker's two
processes and the load generators), and any other tenant of the host lands on the
broker: the same code measured 167-291 MB/s from one run to the next.  So (a), (b) and
(c) are run in ``--rounds`` rounds, alternating their order (a b c, then c b a, ...), and
each figure is the median over the rounds; the per-round ratios are printed beside it.

Page state: each run's log dir is deleted when the run ends, so every run writes into pages the
run before it freed.  Until session 16 the dirs were kept until the end (and a round's run
appended to the same setup's log of the round before): each run then wrote into pages the
machine had not held for a while, and on this virtual machine, whose balloon hands free pages
back to the host, the first write to such a page costs a host fault (bench_limits' "new pages"
ceiling).  That cost is per byte, so the 2-core run, writing 1.5-1.8x the bytes per second, met it
harder.  The same code, 16 KiB produce: with the dirs kept 1 core 171 MB/s, 2 processes 257
(1.50x; session 15 measured the broker at 5.41 and 6.94 CPU-s per GB that way); with each
deleted 233-243 and 435-440 MB/s (1.79x, 1.89x; 3.75-3.89 and 3.98-4.03 CPU-s per GB: the
two set-ups then cost the same per byte).  The CPU-seconds per GB below the table show which
regime a run was in.

Opt-in, never part of the test suite; needs ``taskset`` and at least 2 cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_broker as BB  # noqa: E402
import bench_limits as BL  # noqa: E402
from table import emit, ratio_row  # noqa: E402

from kafkatool.protocol import generated as G  # noqa: E402
from kafkatool.protocol.framing import encode_request, parse_response  # noqa: E402
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402

PARTITIONS = 16


def _tag(cpus: str, processes: int) -> str:
    return cpus.replace(",", "-") + (
        f"-p{processes}" if processes > 1 else ""
    )  # a comma would split log.dirs


def _data_dir(workdir: Path, cpus: str, processes: int) -> Path:
    return workdir / f"data-{_tag(cpus, processes)}"


def start_pinned(workdir: Path, cpus: str, processes: int = 1) -> BB.Target:
    """``kafkatool serve`` under ``taskset -c cpus`` (its other processes inherit the
    affinity); ``processes`` > 1 sets ``kafkatool.processes``."""
    port = BB.free_port()
    tag = _tag(cpus, processes)
    log = open(workdir / f"serve-{tag}.log", "wb")
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
            f"log.dirs={_data_dir(workdir, cpus, processes)}",
        ]
        + (["-o", f"kafkatool.processes={processes}"] if processes > 1 else [])
        + BB.override_args(),
        cwd=BB.REPO,
        stdout=log,
        stderr=log,
    )
    BB.wait_port(port, proc)
    return BB.Target(f"kafkatool@{cpus}x{processes}", proc, port, workdir)


def fill(port: int, topic: str, partitions: int, mb_each: int, ports: dict[int, int] | None = None) -> None:
    """``mb_each`` MB of 1 MB batches into every partition (acks=1); ``ports``: partition ->
    its leader's port (a broker of several processes), else every partition through ``port``."""
    data, _ = BB.make_batch(1000, 1 << 20)
    conns: dict[int, BB.Conn] = {}
    try:
        for p in range(partitions):
            to = port if ports is None else ports[p]
            if to not in conns:
                conns[to] = BB.Conn(to)
            c = conns[to]
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
                _, resp = parse_response(c.recv_frame(), 0, 7)
                code = resp.responses[0].partition_responses[0].error_code
                if code:
                    raise RuntimeError(f"fill {topic}-{p}: produce error {code}")
    finally:
        for c in conns.values():
            c.sock.close()


@dataclass
class Run:
    produce: float  # MB/s
    fetch: float  # MB/s
    cpu_per_gb: float  # the broker's CPU-seconds (every process) per GB produced
    produce_errors: int
    fetch_errors: int
    #: CPU-seconds per GB fetched: the broker (every process), and its readers (fetch_lean's)
    fetch_broker_cpu: float = 0.0
    fetch_readers_cpu: float = 0.0


@dataclass
class Egress:
    """The machine's own fetch path (see :func:`egress_scaling`)."""

    mb_s: float
    #: CPU-seconds per GB sent: the sendfile senders, and the discarding readers
    sender_cpu: float
    readers_cpu: float


def run(workdir: Path, cpus: str, seconds: float, processes: int = 1, load_here: bool = False) -> Run:
    """One serve under ``taskset -c cpus``; ``load_here``: the load generators (threads and
    processes started by this thread from now on inherit its affinity) run on ``cpus`` too."""
    t = start_pinned(workdir, cpus, processes)
    try:
        with _load_on(cpus if load_here else None):
            return _measure(t, processes, seconds)
    finally:
        # every run starts from the same state: the run before it wrote its data and freed it
        # (see the module's docstring: "Page state")
        shutil.rmtree(_data_dir(workdir, cpus, processes), ignore_errors=True)


class _load_on:
    """Pin the calling thread (the load generators it starts inherit it) to ``cpus`` for the
    block, then back; ``None``: leave it."""

    def __init__(self, cpus: str | None) -> None:
        self.cpus = None if cpus is None else {int(c) for c in cpus.split(",")}

    def __enter__(self) -> None:
        self.before = os.sched_getaffinity(0)
        if self.cpus is not None:
            os.sched_setaffinity(0, self.cpus)

    def __exit__(self, *exc) -> None:
        os.sched_setaffinity(0, self.before)


def _measure(t: BB.Target, processes: int, seconds: float) -> Run:
    try:
        BB.create_topic(t.port, "cores", BB.PARTITIONS)
        ports = BB.leader_ports(t.port, "cores") if processes > 1 else None
        produce = BB.produce_raw(t, "cores", 1000, 16 << 10, 1, seconds, ports=ports)
        BB.create_topic(t.port, "many", PARTITIONS)
        ports = BB.leader_ports(t.port, "many") if processes > 1 else None
        fill(t.port, "many", PARTITIONS, 32, ports=ports)
        cpu0, readers0, t0 = t.cpu_seconds(), _children_cpu(), time.perf_counter()
        fetch, errors = BL.fetch_lean(
            t.port, "many", PARTITIONS, seconds_cap=max(10.0, seconds * 4), min_seconds=seconds, ports=ports
        )
        gb = fetch * (time.perf_counter() - t0) / 1e3
        return Run(
            produce.mb_s,
            fetch,
            produce.cpu_per_gb,
            produce.errors,
            errors,
            (t.cpu_seconds() - cpu0) / gb if gb else 0.0,
            (_children_cpu() - readers0) / gb if gb else 0.0,
        )
    finally:
        t.stop()


def _children_cpu() -> float:
    """CPU-seconds of this process's children that were waited for (fetch_lean's readers are
    joined before it returns; the broker, still running, is not counted)."""
    t = os.times()
    return t.children_user + t.children_system


def egress_scaling(workdir: Path, cpus: str, streams: int, seconds: float) -> Egress:
    """MB/s of the machine's own fetch path without a broker: ``streams`` blocking
    ``os.sendfile`` loops of a page-cached 32 MB file each (the size ``fill`` gives every
    partition), one thread per stream in one sender process pinned to ``cpus``, each to a
    reader process that discards with ``MSG_TRUNC`` as ``fetch_lean``'s readers and the
    egress probe's receiver do (the readers run where the bench's load runs).  Run with the
    senders on 1 core and on 2, it says how far the kernel's page cache -> loopback path
    itself scales from 1 to 2 cores with the readers sharing the cores as the broker's do:
    during a fetch the broker spends ~93% of its CPU in that path (perf)."""
    size = 32 << 20
    paths = [workdir / f"egress-{i}.bin" for i in range(streams)]
    for path in paths:
        BL.cached_file(path, size)
    pairs = [BL.loopback_pair() for _ in range(streams)]
    ctx = multiprocessing.get_context("fork")
    results = ctx.SimpleQueue()
    ready = ctx.Barrier(streams + 1)
    cores = {int(c) for c in cpus.split(",")}

    def sender() -> None:
        os.sched_setaffinity(0, cores)
        ready.wait()
        deadline = time.perf_counter() + seconds

        def loop(i: int) -> None:
            conn = pairs[i][1]
            fd = os.open(paths[i], os.O_RDONLY)
            try:
                BL.sendfile_until(conn, fd, size, deadline)
            finally:
                os.close(fd)
                conn.shutdown(socket.SHUT_WR)

        c0 = os.times()
        threads = [threading.Thread(target=loop, args=(i,)) for i in range(streams)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(seconds + 30)
        c1 = os.times()
        results.put(("sender", c1.user + c1.system - c0.user - c0.system))

    def reader(i: int) -> None:
        ready.wait()
        c0 = os.times()
        t0 = time.perf_counter()
        got = BL.discard_to_end(pairs[i][0])
        c1 = os.times()
        results.put((got, time.perf_counter() - t0, c1.user + c1.system - c0.user - c0.system))

    procs = [ctx.Process(target=sender)] + [ctx.Process(target=reader, args=(i,)) for i in range(streams)]
    for pr in procs:
        pr.start()
    for a, b in pairs:
        a.close()
        b.close()
    total = 0
    longest = 0.0
    sender_cpu = readers_cpu = 0.0
    for _ in range(streams + 1):
        item = results.get()
        if item[0] == "sender":
            sender_cpu = item[1]
            continue
        got, dt, cpu = item
        total += got
        longest = max(longest, dt)
        readers_cpu += cpu
    for pr in procs:
        pr.join(30)
    for path in paths:
        path.unlink(missing_ok=True)
    gb = total / 1e9
    return Egress(
        total / longest / 1e6 if longest else 0.0,
        sender_cpu / gb if gb else 0.0,
        readers_cpu / gb if gb else 0.0,
    )


@dataclass
class Ingest:
    """The machine's own produce path (see :func:`ingest_scaling`)."""

    mb_s: float
    #: CPU-seconds per GB written: the receivers (the broker's place), and the senders
    receiver_cpu: float
    sender_cpu: float


def ingest_scaling(workdir: Path, cpus: str, receivers: int, seconds: float) -> Ingest:
    """MB/s of the machine's own produce path without a broker, placed as the broker runs are:
    ``receivers`` processes pinned to ``cpus`` (one for the 1-core run, two for the 2-core run,
    as the broker's processes) take ``bench_broker.CONNECTIONS`` loopback connections between
    them; each connection brings 16 KiB frames (a length prefix and the bytes, ``WINDOW`` in
    flight, as ``produce_raw`` sends them, from one sender process of one thread per
    connection); a receiver ``recv_into``s its connections' bytes (64 KiB at a time, as the
    broker's receive area), ``os.write``s every frame into a new file of its connection (a
    growing log: new pages) and answers each frame with a few bytes, joined per ``recv``.
    What is left of a broker is the kernel's path (loopback TCP in, page cache, the answers
    out, the wake-ups) and a little Python per frame; the sender runs where the bench's load
    runs (the caller's affinity).  Run on 1 core and on 2, it says how far that path scales on
    this machine with its load on the same cores, and what it costs per GB on each: the part
    of the broker's own rise in CPU per GB (the table's note) that is the machine's."""
    import selectors

    frame_size = 16 << 10
    nconn = BB.CONNECTIONS
    pairs = [BL.loopback_pair() for _ in range(nconn)]
    ctx = multiprocessing.get_context("fork")
    results = ctx.SimpleQueue()
    ready = ctx.Barrier(receivers + 2)
    cores = {int(c) for c in cpus.split(",")}
    mine = [list(range(nconn))[r::receivers] for r in range(receivers)]
    ack = b"\0" * 38  # about a Produce v7 answer

    def receiver(r: int) -> None:
        os.sched_setaffinity(0, cores)
        sel = selectors.DefaultSelector()
        state = {}
        for i in mine[r]:
            sock = pairs[i][1]
            sock.setblocking(False)
            fd = os.open(
                workdir / f"ingest-{cpus.replace(',', '-')}-{i}.bin",
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                0o644,
            )
            area = bytearray(64 << 10)
            state[sock] = [area, memoryview(area), 0, fd]
            sel.register(sock, selectors.EVENT_READ)
        ready.wait()
        c0 = os.times()
        got = 0
        open_ = len(state)
        while open_:
            for key, _ in sel.select(seconds + 30):
                sock = key.fileobj
                st = state[sock]
                area, view, have, fd = st
                try:
                    n = sock.recv_into(view[have:])
                except BlockingIOError:
                    continue
                if n == 0:
                    sel.unregister(sock)
                    open_ -= 1
                    continue
                have += n
                pos = frames = 0
                while have - pos >= 4:
                    size = int.from_bytes(area[pos : pos + 4], "big")
                    if have - pos - 4 < size:
                        break
                    os.write(fd, view[pos + 4 : pos + 4 + size])
                    got += size
                    pos += 4 + size
                    frames += 1
                if pos:
                    area[: have - pos] = area[pos:have]
                    have -= pos
                st[2] = have
                if frames:
                    sock.setblocking(True)
                    sock.sendall(ack * frames)
                    sock.setblocking(False)
        c1 = os.times()
        for st in state.values():
            os.close(st[3])
        results.put(("receiver", got, c1.user + c1.system - c0.user - c0.system))

    def sender() -> None:
        frame = (frame_size).to_bytes(4, "big") + os.urandom(frame_size)
        bursts = [frame * k for k in range(BB.WINDOW + 1)]
        ready.wait()
        deadline = time.perf_counter() + seconds

        def loop(i: int) -> None:
            sock = pairs[i][0]
            sock.sendall(bursts[BB.WINDOW])
            inflight, pending = BB.WINDOW, 0
            while True:
                n = len(sock.recv(1 << 16))
                if n == 0:
                    return
                pending += n
                done, pending = divmod(pending, len(ack))
                inflight -= done
                if time.perf_counter() >= deadline:
                    if inflight == 0:
                        sock.shutdown(socket.SHUT_WR)
                        return
                    continue
                if done:
                    sock.sendall(bursts[done])
                    inflight += done

        c0 = os.times()
        t0 = time.perf_counter()
        threads = [threading.Thread(target=loop, args=(i,)) for i in range(nconn)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(seconds + 30)
        c1 = os.times()
        results.put(("sender", time.perf_counter() - t0, c1.user + c1.system - c0.user - c0.system))

    procs = [ctx.Process(target=sender)] + [ctx.Process(target=receiver, args=(r,)) for r in range(receivers)]
    for pr in procs:
        pr.start()
    for a, b in pairs:
        a.close()
        b.close()
    ready.wait()
    total = 0
    elapsed = receivers_cpu = sender_cpu = 0.0
    for _ in range(receivers + 1):
        item = results.get()
        if item[0] == "sender":
            elapsed, sender_cpu = item[1], item[2]
        else:
            total += item[1]
            receivers_cpu += item[2]
    for pr in procs:
        pr.join(30)
    for path in workdir.glob(f"ingest-{cpus.replace(',', '-')}-*.bin"):
        path.unlink(missing_ok=True)
    gb = total / 1e9
    return Ingest(
        total / elapsed / 1e6 if elapsed else 0.0,
        receivers_cpu / gb if gb else 0.0,
        sender_cpu / gb if gb else 0.0,
    )


def _median_run(runs: list[Run]) -> Run:
    """Each figure's median over the rounds (errors: their sum)."""
    return Run(
        statistics.median(r.produce for r in runs),
        statistics.median(r.fetch for r in runs),
        statistics.median(r.cpu_per_gb for r in runs),
        sum(r.produce_errors for r in runs),
        sum(r.fetch_errors for r in runs),
        statistics.median(r.fetch_broker_cpu for r in runs),
        statistics.median(r.fetch_readers_cpu for r in runs),
    )


def pin_load(mode: str) -> tuple[str, bool]:
    """Where the load generators run (``--load``): ``rest`` pins this process (the load
    generators: threads and processes started from now on inherit it) to cores 2 and up,
    ``same`` leaves it to each run (the broker's cores, see :func:`run`), ``unpinned``
    leaves it; ``auto`` is ``rest`` with at least 2 cores besides the broker's, else
    ``same``.  Returns the rows' wording and whether each run pins its load."""
    cores = sorted(os.sched_getaffinity(0))
    rest = [c for c in cores if c not in (0, 1)]
    if mode == "auto":
        mode = "rest" if len(rest) >= 2 else "same"
    if mode == "rest":
        if not rest:
            sys.exit("--load rest needs cores besides 0 and 1")
        os.sched_setaffinity(0, rest)
        return f"load on cores {rest[0]}-{rest[-1]}", False
    if mode == "same":
        return "load on the broker's cores", True
    return f"load unpinned, {len(cores)} cores", False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of (a), (b), (c); medians (default 3)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    ap.add_argument(
        "--load",
        choices=("auto", "rest", "same", "unpinned"),
        default="auto",
        help="where the load generators run, the same rule in every run (default auto: rest with 4+ cores, else same)",
    )
    args = ap.parse_args()
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        sys.exit("needs taskset and at least 2 cores")
    seconds = 1.5 if args.quick else args.seconds
    rounds = 1 if args.quick else max(1, args.rounds)
    where, load_here = pin_load(args.load)
    work = Path(tempfile.mkdtemp(prefix="kafkatool-cores-", dir=args.dir))
    setups = {"one": ("0", 1), "two": ("0,1", 2), "wide": ("0,1", 1)}  # (a), (b), (c)
    runs: dict[str, list[Run]] = {k: [] for k in setups}
    machine: dict[str, list[Egress]] = {"0": [], "0,1": []}  # egress_scaling, senders on 1 / 2 cores
    ingest: dict[str, list[Ingest]] = {"0": [], "0,1": []}  # ingest_scaling, receivers on 1 / 2 cores
    try:
        for r in range(rounds):
            for k in setups if r % 2 == 0 else reversed(setups):
                cpus, processes = setups[k]
                runs[k].append(run(work, cpus, seconds, processes=processes, load_here=load_here))
            for cpus in machine if r % 2 == 0 else reversed(machine):
                with _load_on(cpus if load_here else None):  # the readers where the broker's load runs
                    machine[cpus].append(egress_scaling(work, cpus, PARTITIONS, seconds))
            for cpus in ingest if r % 2 == 0 else reversed(ingest):
                with _load_on(cpus if load_here else None):  # the senders where the broker's load runs
                    ingest[cpus].append(
                        ingest_scaling(work, cpus, setups["two"][1] if cpus == "0,1" else 1, seconds)
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    one, two, wide = (_median_run(runs[k]) for k in setups)
    m1, m2 = (statistics.median(e.mb_s for e in machine[k]) for k in ("0", "0,1"))
    i1, i2 = (statistics.median(e.mb_s for e in ingest[k]) for k in ("0", "0,1"))
    icpu = {
        k: [statistics.median(e.receiver_cpu for e in v), statistics.median(e.sender_cpu for e in v)]
        for k, v in ingest.items()
    }
    mcpu = {
        k: [statistics.median(e.sender_cpu for e in v), statistics.median(e.readers_cpu for e in v)]
        for k, v in machine.items()
    }
    if not args.json and rounds > 1:
        for fig in ("produce", "fetch"):
            ratios = ", ".join(
                f"{getattr(b, fig) / getattr(a, fig):.2f}"
                for a, b in zip(runs["one"], runs["two"], strict=True)
            )
            print(f"{fig}: 2 processes / 1 core, round by round: {ratios}")
        ratios = ", ".join(
            f"{b.mb_s / a.mb_s:.2f}" for a, b in zip(machine["0"], machine["0,1"], strict=True)
        )
        print(f"machine's sendfile egress: 2 cores / 1 core, round by round: {ratios}")
        ratios = ", ".join(f"{b.mb_s / a.mb_s:.2f}" for a, b in zip(ingest["0"], ingest["0,1"], strict=True))
        print(f"machine's 16 KiB ingest: 2 cores / 1 core, round by round: {ratios}")
    rows = [
        (
            f"produce 16 KiB batches, 2 cores 2 processes vs 1 ({where}; median of {rounds})",
            one.produce,
            two.produce,
            1.6,
            two.produce_errors,
        ),
        ("  same, one process on 2 cores", one.produce, wide.produce, None, wide.produce_errors),
        (
            "  the machine's own: 16 KiB frames into growing files, 2 receivers on 2 cores vs 1",
            i1,
            i2,
            None,
            0,
        ),
        (
            f"fetch {PARTITIONS} partitions, 2 cores 2 processes vs 1 ({where}; median of {rounds})",
            one.fetch,
            two.fetch,
            1.6,
            two.fetch_errors,
        ),
        ("  same, one process on 2 cores", one.fetch, wide.fetch, None, wide.fetch_errors),
        (
            f"  the machine's own: sendfile to {PARTITIONS} discarding readers, senders on 2 cores vs 1",
            m1,
            m2,
            None,
            0,
        ),
    ]
    if args.json:
        emit([ratio_row("cores", name, b, "MB/s", a, "1 core", target) for name, a, b, target, _ in rows])
        return
    print(f"{'figure (MB/s)':52} {'1 core':>9} {'2 cores':>9} {'ratio':>7} {'target':>7}  errors")
    for name, a, b, target, errors in rows:
        r = b / a if a else 0.0
        if target is None:
            print(f"{name:52} {a:9.1f} {b:9.1f} {r:7.2f} {'':>7}  {errors}")
            continue
        print(
            f"{name:52} {a:9.1f} {b:9.1f} {r:7.2f} {target:7.2f}  {errors} {'ok' if r >= target else 'below'}"
        )
    print(f"errors in the 1-core run (1 core column): produce {one.produce_errors}, fetch {one.fetch_errors}")
    print(
        "CPU-seconds per GB fetched (medians), broker / its readers: "
        f"1 core {one.fetch_broker_cpu:.3f} / {one.fetch_readers_cpu:.3f}, "
        f"2 cores 2 processes {two.fetch_broker_cpu:.3f} / {two.fetch_readers_cpu:.3f}, "
        f"2 cores 1 process {wide.fetch_broker_cpu:.3f} / {wide.fetch_readers_cpu:.3f}; "
        f"the machine's senders / readers: 1 core {mcpu['0'][0]:.3f} / {mcpu['0'][1]:.3f}, "
        f"2 cores {mcpu['0,1'][0]:.3f} / {mcpu['0,1'][1]:.3f}"
    )
    print(
        "broker CPU-seconds per GB produced (every process): "
        f"1 core {one.cpu_per_gb:.2f}, 2 cores 2 processes {two.cpu_per_gb:.2f}, "
        f"2 cores 1 process {wide.cpu_per_gb:.2f}; the machine's receivers / senders: "
        f"1 core {icpu['0'][0]:.2f} / {icpu['0'][1]:.2f}, 2 cores {icpu['0,1'][0]:.2f} / {icpu['0,1'][1]:.2f}"
    )


if __name__ == "__main__":
    main()
