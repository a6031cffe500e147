"""Log-dir fuzz: seeded damage to a real broker's log dir (bit flips, truncations, zeroed
ranges, appended garbage, extreme int32 fields, duplicated ranges, deleted files; any file of
it: segments, indexes, snapshots, checkpoints, metadata) read by every offline command
(verify, dump-log, recover, rebuild-index, compact, retention, consume, groups and transactions
with --log-dir: the dry runs and the readers, then the runs that change the dir) and, in the slow run, by ``kafkatool serve`` starting on it
(its clean-shutdown marker kept or not): requests that read the stored data of every
partition (ListOffsets by time, Fetch from several offsets, OffsetForLeaderEpoch,
DescribeProducers) and consumers reading every topic.

Bad input never produces a traceback: every command exits 0, 1 or 2 with no Python traceback
in what it prints; the broker starts, serves and stops with 0, or refuses with one line, its
log free of tracebacks.  Default: 12 damaged dirs through the commands in-process;
``pytest -m slow tests/faults/test_logdir_fuzz.py``: 300 through the commands and 60 through
serve (``FUZZ_CASES`` overrides the counts).  A failure names its seed and the damage.  The
first run of this fuzz found three tracebacks (compact on a partition without segment files;
a corrupt batch in __transaction_state or __consumer_offsets under a clean-shutdown marker)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatool.broker.group.hashing import partition_for
from kafkatool.cli import app
from kafkatool.formats import compression
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.describe_producers_request import TopicRequest
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkatool.protocol.generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.broker.test_group_protocol import commit
from tests.broker.test_protocol import batch, create_topic, fetch_req, produce
from tests.broker.test_txn_protocol import (
    OVERRIDES,
    TXN_PARTITIONS,
    add_partitions,
    end_txn,
    init_pid,
    txn_produce,
)
from tests.broker.wire import WireClient

SEGMENT_BYTES = 4096
TOPICS = ("plain", "zipped", "txn")
KINDS = ("flip", "flip", "truncate", "zero", "garbage", "delete", "int32", "duplicate")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A log dir a real broker wrote and shut down cleanly: several segments a partition (with
    indexes, producer snapshots, a transaction index), compressed batches, a committed and an
    aborted transaction, a group's offsets, every checkpoint."""
    root = tmp_path_factory.mktemp("fuzz-base")
    data = root / "data"
    b = BrokerProcess(data, extra=[*OVERRIDES, f"log.segment.bytes={SEGMENT_BYTES}"]).start()
    try:
        with WireClient(b.bootstrap) as c:
            for t in TOPICS:
                create_topic(c, t, 2)
            for i in range(30):
                produce(c, "plain", batch(5, size=60, key=b"k%d" % (i % 3)), partition=i % 2)
                produce(
                    c,
                    "zipped",
                    batch(8, size=80, codec=compression.ZSTD if i % 2 else compression.GZIP),
                    i % 2,
                )
            pid = init_pid(c, "fz-t").producer_id
            seq = 0
            for commit_it in (True, False, True):
                assert add_partitions(c, "fz-t", pid, 0, "txn", [0]) == {("txn", 0): 0}
                for _ in range(3):
                    assert txn_produce(c, "txn", pid, 0, seq, n=4, tid="fz-t").error_code == 0
                    seq += 4
                assert end_txn(c, "fz-t", pid, 0, commit_it) == 0
            assert (
                commit(c, 8, "fz-g", {("plain", 0): 7, ("plain", 1): 3}).topics[0].partitions[0].error_code
                == 0
            )
    finally:
        assert b.stop() == 0
    assert len(list((data / "plain-0").glob("*.log"))) > 1
    assert (data / f"__transaction_state-{partition_for('fz-t', TXN_PARTITIONS)}").is_dir()
    return data


def damage(root: Path, rng: random.Random) -> list[str]:
    """One to two seeded changes to files of ``root``; what was done, for the failure's message."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    done = []
    for _ in range(rng.choice((1, 1, 2))):
        path = rng.choice(files)
        if not path.exists():
            continue
        kind = rng.choice(KINDS)
        done.append(f"{kind} {path.relative_to(root)}")
        if kind == "delete":
            path.unlink()
            continue
        data = bytearray(path.read_bytes())
        if not data or kind == "garbage":
            data += os.urandom(rng.randint(1, 200)) if rng.random() < 0.5 else bytes(rng.randint(1, 200))
        elif kind == "flip":
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
        elif kind == "truncate":
            del data[rng.randrange(len(data)) :]
        elif kind == "zero":
            i = rng.randrange(len(data))
            n = min(rng.randint(1, 64), len(data) - i)
            data[i : i + n] = bytes(n)
        elif kind == "int32" and len(data) >= 4:
            i = rng.randrange(len(data) - 3)
            data[i : i + 4] = rng.choice(
                (b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff", bytes(4))
            )
        elif kind == "duplicate":
            i, j = rng.randrange(len(data)), rng.randrange(len(data))
            data[j:j] = data[i : i + rng.randint(1, 100)]
        path.write_bytes(bytes(data))
    return done


def command_lines(root: Path, rng: random.Random) -> list[list[str]]:
    partition = rng.choice(sorted(p for p in root.iterdir() if p.is_dir()))
    files = sorted(p for p in partition.iterdir() if p.is_file())
    topic = partition.name.rsplit("-", 1)[0]
    r = str(root)
    out = [
        ["verify", r, "--json"],
        ["dump-log", str(partition)],
        ["recover", r, "--dry-run", "--json"],
        ["rebuild-index", r, "--dry-run", "--json"],
        ["compact", r, "--dry-run", "--json", "--cleanup-policy", "compact"],
        ["retention", r, "--dry-run", "--json", "--retention-ms", "1"],
        ["consume", "--log-dir", r, "--topic", topic, "--from-beginning", "--exit-at-end", "--json"],
        # the readers of __consumer_offsets and __transaction_state (read past damage, exit 1)
        ["groups", "describe", "--all-groups", "--log-dir", r, "--json"],
        ["transactions", "list", "--log-dir", r, "--json"],
        ["transactions", "find-hanging", "--log-dir", r, "--json"],
        ["recover", r, "--json"],
        ["rebuild-index", r, "--json"],
        ["compact", r, "--json", "--cleanup-policy", "compact"],
        ["verify", r, "--json"],
    ]
    if files:
        out.insert(1, ["dump-log", str(rng.choice(files)), "--json"])
    return out


def damaged_copies(base: Path, work: Path, cases: int, seed0: int):
    """For each case: (seed, its random source, a damaged copy of ``base``, what was done); the
    copy is removed when the caller is done with it."""
    for case in range(cases):
        seed = seed0 + case
        rng = random.Random(seed)
        root = work / f"case-{seed}"
        shutil.copytree(base, root)
        yield seed, rng, root, damage(root, rng)
        shutil.rmtree(root)


def fuzz_commands(base: Path, work: Path, cases: int, seed0: int) -> int:
    runner = CliRunner()
    ran = 0
    for seed, rng, root, done in damaged_copies(base, work, cases, seed0):
        for args in command_lines(root, rng):
            res = runner.invoke(app, args)
            ran += 1
            where = f"seed {seed} ({'; '.join(done)}): kafkatool {' '.join(args)}"
            if res.exception is not None and not isinstance(res.exception, SystemExit):
                raise AssertionError(f"{where} raised {res.exception!r}") from res.exception
            assert res.exit_code in (0, 1, 2), f"{where} exited {res.exit_code}: {res.output[-2000:]}"
            assert "Traceback" not in res.output, f"{where}: {res.output[-3000:]}"
    return ran


def test_logdir_fuzz_commands(base, tmp_path):
    cases = int(os.environ.get("FUZZ_CASES", "12"))
    assert fuzz_commands(base, tmp_path, cases, int(os.environ.get("FUZZ_SEED", "1000"))) >= cases * 10


@pytest.mark.slow
def test_logdir_fuzz_commands_slow(base, tmp_path):
    cases = int(os.environ.get("FUZZ_CASES", "300"))
    assert fuzz_commands(base, tmp_path, cases, int(os.environ.get("FUZZ_SEED", "5000"))) >= cases * 10


def read_stored_data(port: int) -> None:
    """Requests whose answers read the stored data (ListOffsets by time and the special
    timestamps, Fetch from several offsets with small limits, OffsetForLeaderEpoch,
    DescribeProducers) for every partition: each must be answered on the same connection."""
    names = [*TOPICS, "__consumer_offsets", "__transaction_state"]
    parts = (0, 1, 2)
    with WireClient(f"127.0.0.1:{port}") as c:
        for t in names:
            for ts in (0, 1, int(time.time() * 1000), -1, -2, -3):
                c.request(
                    2,
                    8,
                    G.ListOffsetsRequest(
                        replica_id=-1,
                        isolation_level=1,
                        topics=[
                            ListOffsetsTopic(
                                name=t,
                                partitions=[
                                    ListOffsetsPartition(partition_index=p, timestamp=ts) for p in parts
                                ],
                            )
                        ],
                    ),
                )
            for offset in (0, 3, 7, 50):
                c.request(1, 12, fetch_req(t, offset, partition=parts, max_bytes=1500, partition_max=1500))
            c.request(
                23,
                4,
                G.OffsetForLeaderEpochRequest(
                    replica_id=-1,
                    topics=[
                        OffsetForLeaderTopic(
                            topic=t,
                            partitions=[
                                OffsetForLeaderPartition(partition=p, current_leader_epoch=-1, leader_epoch=0)
                                for p in parts
                            ],
                        )
                    ],
                ),
            )
            c.request(
                61,
                0,
                G.DescribeProducersRequest(topics=[TopicRequest(name=t, partition_indexes=list(parts))]),
            )


def consume(port: int, topic: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", "consume", "--bootstrap-server", f"127.0.0.1:{port}"]
        + ["--topic", topic, "--from-beginning", "--exit-at-end", "--timeout-ms", "8000", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_logdir_fuzz_serve(base, tmp_path):
    cases = int(os.environ.get("FUZZ_CASES", "60"))
    seed0 = int(os.environ.get("FUZZ_SEED", "9000"))
    for seed, rng, root, done in damaged_copies(base, tmp_path, cases, seed0):
        if rng.random() < 0.6:
            (root / ".kafka_cleanshutdown").unlink(missing_ok=True)
            done.append("no clean-shutdown marker")
        where = f"seed {seed} ({'; '.join(done)})"
        port = free_port()
        log_path = tmp_path / f"serve-{seed}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kafkatool", "serve", "--no-banner"]
                + ["-o", f"listeners=PLAINTEXT://127.0.0.1:{port}", "-o", f"log.dirs={root}"],
                cwd=REPO,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 30
                while "broker started" not in log_path.read_text(errors="replace"):
                    if proc.poll() is not None:
                        break
                    assert time.monotonic() < deadline, f"{where}: not started in 30 s"
                    time.sleep(0.05)
                if proc.poll() is None:
                    try:
                        read_stored_data(port)
                    except (OSError, ConnectionError) as exc:
                        raise AssertionError(f"{where}: {exc!r}: {log_path.read_text()[-3000:]}") from exc
                    for topic in TOPICS:
                        r = consume(port, topic)
                        assert r.returncode in (0, 1, 2), f"{where}: consume {topic} exited {r.returncode}"
                        assert "Traceback" not in r.stdout + r.stderr, f"{where}: {r.stderr[-2000:]}"
                    proc.send_signal(signal.SIGTERM)
                    assert proc.wait(30) == 0, f"{where}: {log_path.read_text()[-3000:]}"
                else:
                    assert proc.returncode in (1, 2), f"{where}: exited {proc.returncode}"
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
        text = log_path.read_text(errors="replace")
        assert "Traceback" not in text and "handler failed" not in text, f"{where}: {text[-3000:]}"
