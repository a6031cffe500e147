"""Crash loop (issue 18): ``kill -9`` of a real ``kafkatool serve`` at random moments while an
idempotent ``acks=all`` producer writes, while the cleaner compacts, retention deletes,
segments roll and a partition moves between log dirs; restart each time, and in the end read
everything back.

What must hold: every acknowledged record of the checked topic is there exactly once and in
order (no loss, no duplicate, no reordering); on the compacted topic every key's last
acknowledged value survives; on the retention topic what is left is an in-order run of
acknowledged values without holes; ``verify`` is clean after the final clean shutdown.

The default run kills 3 times (~20 s); ``pytest -m slow tests/faults`` kills 30 times, and
once more with ``log.flush.interval.messages=1``.  ``bench/bench_crash_loop.py`` prints the
figures of a longer run.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirTopic,
)
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.test_admin import create
from tests.broker.wire import WireClient

TOPICS = {
    # topic: configs
    "crash": {"segment.bytes": "65536"},
    "cmp": {"cleanup.policy": "compact", "segment.bytes": "32768", "min.cleanable.dirty.ratio": "0.01"},
    "ret": {"retention.bytes": "100000", "segment.bytes": "32768"},
}
KEYS = 50


@dataclass
class Acked:
    values: dict[str, list[int]] = field(default_factory=lambda: {t: [] for t in TOPICS})
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _producer_thread(bootstrap: str, acked: Acked, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "batch.size": 16384,  # below the topics' segment.bytes (a larger batch is RECORD_LIST_TOO_LARGE)
            "message.timeout.ms": 120000,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        }
    )

    def done(err, msg):
        with acked.lock:
            if err is not None:
                acked.failed += 1
                if len(acked.errors) < 5:
                    acked.errors.append(f"{msg.topic()}: {err}")
            else:
                acked.values[msg.topic()].append(int(msg.value()))

    n = 0
    while not stop.is_set():
        for topic in TOPICS:
            try:
                p.produce(topic, key=f"k{n % KEYS}".encode(), value=str(n).encode(), on_delivery=done)
            except BufferError:
                p.poll(0.05)
        n += 1
        p.poll(0)
        if n % 20 == 0:
            time.sleep(0.002)
    assert p.flush(150) == 0


def _move(bootstrap: str, dest: Path) -> None:
    req = G.AlterReplicaLogDirsRequest(
        dirs=[
            AlterReplicaLogDir(path=str(dest), topics=[AlterReplicaLogDirTopic(name="crash", partitions=[0])])
        ]
    )
    try:
        with WireClient(bootstrap, timeout=3) as c:
            c.request(34, 2, req)
    except OSError:
        pass  # the broker was being killed


def _read_back(dirs: list[Path]) -> dict[str, list[tuple[bytes | None, int]]]:
    """(key, value) of every record of each topic, in offset order, through the engine."""
    from kafkatool.log.manager import LogManager

    out: dict[str, list[tuple[bytes | None, int]]] = {}
    with LogManager(dirs, writable=False) as mgr:
        for topic in TOPICS:
            lg = mgr.get_log(topic, 0)
            recs = []
            for b in lg.batches(lg.log_start_offset):
                if b.magic >= 2 and b.is_control:
                    continue
                recs.extend((r.key, int(r.value)) for r in b.records())
            out[topic] = recs
    return out


def crash_loop(tmp_path: Path, kills: int, seed: int, extra: list[str] | None = None) -> dict:
    rng = random.Random(seed)
    tmp_path.mkdir(parents=True, exist_ok=True)
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    port = free_port()
    settings = [
        "num.partitions=1",
        f"log.dirs={dirs[0]},{dirs[1]}",
        "log.cleaner.backoff.ms=200",
        "log.retention.check.interval.ms=300",
        "file.delete.delay.ms=100",
        "log.segment.delete.delay.ms=100",
        *(extra or []),
    ]

    def start() -> BrokerProcess:
        b = BrokerProcess(dirs[0], port=port, extra=settings)
        return b.start(timeout=60)

    b = start()
    with WireClient(b.bootstrap) as c:
        for topic, cfg in TOPICS.items():
            assert create(c, topic, 1, configs=cfg).error_code == 0
    acked = Acked()
    stop = threading.Event()
    prod = threading.Thread(target=_producer_thread, args=(b.bootstrap, acked, stop), daemon=True)
    prod.start()
    restart_seconds = []
    try:
        for k in range(kills):
            time.sleep(rng.uniform(0.3, 1.5))
            if rng.random() < 0.5:
                _move(b.bootstrap, dirs[k % 2])
                time.sleep(rng.uniform(0.0, 0.4))
            b.kill()
            t0 = time.monotonic()
            b = start()
            restart_seconds.append(time.monotonic() - t0)
        time.sleep(1.0)
    finally:
        stop.set()
        prod.join(180)
    assert not prod.is_alive(), "the producer did not finish"
    assert b.stop() == 0
    got = _read_back(dirs)
    v = CliRunner().invoke(app, ["verify", "--json", str(dirs[0]), str(dirs[1])])
    return {
        "acked": acked,
        "got": got,
        "verify_exit": v.exit_code,
        "verify_output": v.output[-3000:],
        "restart_seconds": restart_seconds,
        "broker_log": b.log_text(),
    }


def check(res: dict) -> dict:
    acked, got = res["acked"], res["got"]
    assert acked.failed == 0, f"{acked.failed} records failed to be acknowledged: {acked.errors}"
    # the checked topic: exactly the acknowledged values, once each, in order
    crash = [v for _, v in got["crash"]]
    want = sorted(acked.values["crash"])
    missing = set(want) - set(crash)
    dups = len(crash) - len(set(crash))
    reordered = sum(1 for a, b in zip(crash, crash[1:], strict=False) if b < a)
    assert (len(missing), dups, reordered) == (0, 0, 0), (sorted(missing)[:10], dups, reordered)
    # compacted: each key's last acknowledged value survives; values stay in order
    last = {}
    for v in sorted(acked.values["cmp"]):
        last[f"k{v % KEYS}".encode()] = v
    present = {}
    for key, v in got["cmp"]:
        present.setdefault(key, set()).add(v)
    lost_keys = [k for k, v in last.items() if v not in present.get(k, set())]
    assert lost_keys == [], lost_keys[:10]
    cmp_values = [v for _, v in got["cmp"]]
    assert cmp_values == sorted(set(cmp_values))
    # retention: an in-order run of acknowledged values with no holes
    ret = [v for _, v in got["ret"]]
    acked_ret = sorted(acked.values["ret"])
    if ret:
        i = acked_ret.index(ret[0])
        assert ret == acked_ret[i : i + len(ret)]
    assert res["verify_exit"] == 0, res["verify_output"]
    assert "Traceback" not in res["broker_log"]
    return {
        "acked": sum(len(v) for v in acked.values.values()),
        "missing": len(missing),
        "duplicates": dups,
        "reordered": reordered,
        "restart_s_max": max(res["restart_seconds"], default=0.0),
    }


def test_crash_loop(tmp_path):
    check(crash_loop(tmp_path, kills=3, seed=18))


@pytest.mark.slow
def test_crash_loop_slow(tmp_path):
    check(crash_loop(tmp_path / "a", kills=30, seed=1800))


@pytest.mark.slow
def test_crash_loop_flush_every_message(tmp_path):
    check(crash_loop(tmp_path / "b", kills=10, seed=1801, extra=["log.flush.interval.messages=1"]))
