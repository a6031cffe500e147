"""A synthetic Kafka fleet written by the project's own log engine, with known damage.

Replicas of a partition get the same batches appended as a follower, so their
files are byte-identical (as a real follower's are); the damage is injected
afterwards and recorded in :class:`Fleet` so tests can check that exactly it
is found.  Also used by ``bench/bench_fleet.py``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.forensics.verify import segment_files
from kafkatool.formats import compression
from kafkatool.formats import properties as P
from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
BASE_TS = 1_700_000_000_000
# (topic, partitions, replication factor)
TOPICS = [("orders", 10, 3), ("events", 10, 2), ("clicks", 10, 2)]
BROKERS = (1, 2, 3)


@dataclass
class Fleet:
    root: Path
    log_dirs: dict[int, list[Path]]  # broker -> log dirs
    assignment: dict[tuple[str, int], list[int]]  # (topic, partition) -> replicas
    partition_dirs: dict[tuple[str, int, int], Path] = field(default_factory=dict)  # (t, p, broker)
    # injected damage
    bit_flip: tuple[Path, int] | None = None  # (segment, byte position of the damaged batch)
    truncated: tuple[Path, int] | None = None  # (segment, position of the partial batch)
    divergence: tuple[str, int, int, int] | None = None  # (topic, partition, broker, offset)
    orphan: Path | None = None
    delete_dir: Path | None = None

    def inventory(self, path: Path) -> Path:
        doc = {
            "brokers": {
                str(b): {"host": f"kafka{b}.example", "rack": f"rack-{b}", "log_dirs": [str(d) for d in dirs]}
                for b, dirs in self.log_dirs.items()
            },
            "assignment": {
                "version": 1,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": r}
                    for (t, p), r in sorted(self.assignment.items())
                ],
            },
        }
        path.write_text(json.dumps(doc, indent=1))
        return path

    def all_log_dirs(self) -> list[Path]:
        return [d for dirs in self.log_dirs.values() for d in dirs]


def _batch(
    rng: random.Random, offset: int, epoch: int, codec: int, pid: int, seq: int, n: int, value_size: int
):
    recs = [
        R.SimpleRecord(
            rng.randbytes(value_size // 2).hex().encode()[:value_size],
            b"key-%d" % rng.randrange(1000),
            (),
            BASE_TS + offset + i,
        )
        for i in range(n)
    ]
    return R.build_record_batch(
        recs,
        base_offset=offset,
        codec=codec,
        partition_leader_epoch=epoch,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
    )


def write_meta(log_dir: Path, broker: int, kraft: bool) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    meta = P.MetaProperties(1 if kraft else 0, broker, "fleet-test-cluster-id1", None)
    (log_dir / "meta.properties").write_bytes(P.encode_meta_properties(meta, "Sun Nov 22 00:00:00 UTC 2026"))


def build_fleet(
    root: Path,
    *,
    batches: int = 24,
    records_per_batch: int = 10,
    value_size: int = 100,
    segment_bytes: int = 8 * 1024,
    topics=TOPICS,
    seed: int = 7,
    damage: bool = True,
) -> Fleet:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    # broker 1 has two log dirs (JBOD); broker 3 is a KRaft node (node.id)
    log_dirs = {1: [root / "b1" / "d1", root / "b1" / "d2"], 2: [root / "b2" / "d1"], 3: [root / "b3" / "d1"]}
    for b, dirs in log_dirs.items():
        for d in dirs:
            write_meta(d, b, kraft=b == 3)
    fleet = Fleet(root, log_dirs, {})
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=1024)
    n = 0
    for topic, partitions, rf in topics:
        for p in range(partitions):
            replicas = [BROKERS[(p + i) % len(BROKERS)] for i in range(rf)]
            fleet.assignment[(topic, p)] = replicas
            logs = {}
            for b in replicas:
                dirs = log_dirs[b]
                pdir = dirs[(p + len(topic)) % len(dirs)] / f"{topic}-{p}"
                fleet.partition_dirs[(topic, p, b)] = pdir
                logs[b] = Log(pdir, config, clock=lambda: BASE_TS, flush_on_roll=False)
            codec = CODECS[n % len(CODECS)]
            n += 1
            pid = 1000 + p if p % 2 == 0 else -1
            offset = 0
            for i in range(batches):
                epoch = 0 if i < batches // 2 else 1
                data = _batch(rng, offset, epoch, codec, pid, offset, records_per_batch, value_size)
                for log in logs.values():
                    log.append_as_follower(data)
                offset += records_per_batch
            for log in logs.values():
                log.close()
    if damage:
        inject_damage(fleet, rng, records_per_batch, value_size)
    return fleet


def inject_damage(fleet: Fleet, rng: random.Random, records_per_batch: int, value_size: int) -> None:
    # 1. a bit flip in the payload of a batch in the middle of a non-active segment
    pdir = fleet.partition_dirs[("orders", 1, 2)]
    seg = segment_files(pdir)[1]
    data = bytearray(seg.read_bytes())
    batches = list(R.iter_batches(data))
    victim = batches[len(batches) // 2]
    data[victim.position + 70] ^= 0x10
    seg.write_bytes(data)
    fleet.bit_flip = (seg, victim.position)
    # 2. a truncated tail: the active segment loses half of its last batch
    pdir = fleet.partition_dirs[("events", 4, fleet.assignment[("events", 4)][0])]
    seg = segment_files(pdir)[-1]
    data = seg.read_bytes()
    last = list(R.iter_batches(data))[-1]
    cut = last.position + last.size // 2
    os.truncate(seg, cut)
    fleet.truncated = (seg, last.position)
    # 3. one replica of orders-5 diverges after an offset (an unclean leader election)
    topic, part = "orders", 5
    replicas = fleet.assignment[(topic, part)]
    odd = replicas[-1]
    pdir = fleet.partition_dirs[(topic, part, odd)]
    log = Log(
        pdir,
        LogConfig(segment_bytes=8 * 1024, index_interval_bytes=1024),
        clock=lambda: BASE_TS,
        flush_on_roll=False,
    )
    diverge_at = log.log_end_offset - 3 * records_per_batch
    log.truncate_to(diverge_at)
    offset = diverge_at
    for _ in range(5):
        log.append_as_follower(
            _batch(rng, offset, 7, compression.NONE, -1, -1, records_per_batch, value_size)
        )
        offset += records_per_batch
    log.close()
    fleet.divergence = (topic, part, odd, diverge_at)
    # 4. an orphaned replica: a stale copy of clicks-3 left on a broker not in its replica set
    topic, part = "clicks", 3
    outsider = next(b for b in BROKERS if b not in fleet.assignment[(topic, part)])
    src = fleet.partition_dirs[(topic, part, fleet.assignment[(topic, part)][0])]
    dst = fleet.log_dirs[outsider][0] / f"{topic}-{part}"
    shutil.copytree(src, dst)
    fleet.orphan = dst
    # 5. a partition dir scheduled for deletion
    src = fleet.partition_dirs[("events", 0, fleet.assignment[("events", 0)][0])]
    dst = src.parent / f"events-9.{'ab' * 16}-delete"
    shutil.copytree(src, dst)
    fleet.delete_dir = dst
