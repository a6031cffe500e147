"""A seeded corpus of damaged partitions (issue 18), and every offline command run over each.

Two sources of clean data: a log dir written by a real ``kafkatool serve`` (uncompressed and
every codec, a compacted topic with tombstones, committed and aborted transactions, several
segments each) and a synthetic partition cycling every codec.  Nine classes of damage are
made from them, seeded.  For every case: no traceback escapes, the exit code is one the
contract allows, verify sees the damage it always must, a read-only or dry-run command
changes no byte, and a real ``recover --all`` never drops a CRC-valid record that lay
before the first damaged byte.  The default run makes 288 cases; ``pytest -m slow
tests/faults`` makes 10,000.  A failure names its case (seed, class, source); rerun one with
``CASE=seed:class:source pytest tests/faults/test_damage_corpus.py``."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct
from pathlib import Path

import pytest
from segments import make_partition
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.formats.errors import FormatError

runner = CliRunner()
CLASSES = (
    "bitflip",
    "truncate",
    "zero_length",
    "batch_length",
    "header_recomputed_crc",
    "garbage_compressed",
    "garbage_named_file",
    "index_cut",
    "special_file",
)
# damage that verify must always see (a flip may land in a field no check covers,
# e.g. the partition leader epoch; a cut may land on a batch boundary; an empty
# index is a valid sparse index)
ALWAYS_SEEN = {"batch_length", "header_recomputed_crc", "garbage_named_file", "special_file"}


SERVE_TOPICS = {
    # topic: (producer settings, topic configs)
    "plain": ({"compression.type": "none"}, {}),
    "gz": ({"compression.type": "gzip"}, {}),
    "sn": ({"compression.type": "snappy"}, {}),
    "l4": ({"compression.type": "lz4"}, {}),
    "zs": ({"compression.type": "zstd"}, {}),
    "cmp": ({"compression.type": "none"}, {"cleanup.policy": "compact"}),
}


def _serve_dir(root: Path) -> Path:
    """A log dir written by ``kafkatool serve`` through confluent-kafka, shut down cleanly."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.conftest import BrokerProcess

    data = root / "data"
    b = BrokerProcess(data, extra=["num.partitions=1", "log.segment.bytes=16384"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = [NewTopic(t, 1, 1, config=cfg) for t, (_, cfg) in SERVE_TOPICS.items()] + [
            NewTopic("txn", 1, 1)
        ]
        for f in admin.create_topics(topics).values():
            f.result(15)
        for topic, (settings, _) in SERVE_TOPICS.items():
            p = Producer(
                {"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 5, **settings}
            )
            for i in range(400):
                key = f"k{i % 37}".encode()
                value = None if topic == "cmp" and i % 11 == 0 else (f"{topic}-{i}-" * 8).encode()
                p.produce(topic, value=value, key=key)
                if i % 50 == 49:
                    p.flush(15)
            assert p.flush(15) == 0
        tp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "corpus-tx", "linger.ms": 5})
        tp.init_transactions(15)
        for n in range(6):
            tp.begin_transaction()
            for i in range(40):
                tp.produce("txn", value=f"tx{n}-{i}".encode() * 6, key=b"t")
            if n % 3 == 2:
                tp.abort_transaction(15)
            else:
                tp.commit_transaction(15)
    finally:
        assert b.stop() == 0
    return data


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """{source name: a dir holding clean partition dirs}."""
    synth = tmp_path_factory.mktemp("corpus-synth")
    make_partition(synth, "t-0", segments=3, batches_per_segment=8, codec_cycle=(0, 1, 2, 3, 4))
    return {"synthetic": synth, "serve": _serve_dir(tmp_path_factory.mktemp("corpus-serve"))}


def _batches(path: Path) -> list[tuple[int, int, int]]:
    """(position, end, codec) of each batch of a clean segment."""
    data = path.read_bytes()
    return [(b.position, b.end, b.codec) for b in R.iter_batches(data)]


def _records(part: Path) -> set[tuple[int, bytes | None, bytes | None]]:
    out = set()
    for log in sorted(part.glob("*.log")):
        if not log.is_file():
            continue
        for b in R.iter_batches(log.read_bytes()):
            if b.is_valid():
                try:
                    out.update((r.offset, r.key, r.value) for r in b.records())
                except FormatError:
                    pass  # CRC-valid but its records do not decode: not a record to keep
    return out


def _tree_hash(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if p.is_symlink() or not p.is_file():
                out[str(p)] = "special"
                continue
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _set_i32_recompute(buf: bytearray, pos: int, field: int, value: int) -> None:
    struct.pack_into(">i", buf, pos + field, value)
    end = pos + 12 + struct.unpack_from(">i", buf, pos + 8)[0]
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))


def damage(part: Path, kind: str, rng: random.Random) -> tuple[Path | None, int | None]:
    """Damage the copy ``part``; returns (segment, first damaged byte) when a .log is hit."""
    logs = sorted(part.glob("*.log"))
    seg = rng.choice(logs)
    buf = bytearray(seg.read_bytes())
    batches = _batches(seg)
    if kind == "bitflip":
        pos = rng.randrange(len(buf))
        buf[pos] ^= 1 << rng.randrange(8)
        seg.write_bytes(buf)
        return seg, pos
    if kind == "truncate":
        cut = rng.randrange(len(buf))
        os.truncate(seg, cut)
        return seg, cut
    if kind == "zero_length":
        target = rng.choice([seg, seg.with_suffix(".index"), seg.with_suffix(".timeindex")])
        os.truncate(target, 0)
        return (seg, 0) if target == seg else (None, None)
    if kind == "batch_length":
        pos, _, _ = rng.choice(batches)
        struct.pack_into(">i", buf, pos + 8, rng.choice([0, -1, 0x7FFFFFFF]))
        seg.write_bytes(buf)
        return seg, pos
    if kind == "header_recomputed_crc":
        pos, _, _ = rng.choice(batches)
        field, value = rng.choice(
            [(23, -1), (23, 1 << 30), (57, 0), (57, 1 << 20), (57, -5)]
        )  # lastOffsetDelta, recordsCount
        _set_i32_recompute(buf, pos, field, value)
        seg.write_bytes(buf)
        return seg, pos
    if kind == "garbage_compressed":
        compressed = [b for b in batches if b[2]] or batches
        pos, end, _ = rng.choice(compressed)
        start = pos + R.RECORD_BATCH_OVERHEAD
        for i in range(start, end):
            buf[i] = rng.randrange(256)
        struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
        seg.write_bytes(buf)
        return seg, pos
    if kind == "garbage_named_file":
        name = rng.choice(
            [
                "00000000000000099999.log",
                "00000000000000099999.index",
                "00000000000000099999.snapshot",
                "leader-epoch-checkpoint",
                "partition.metadata",
            ]
        )
        (part / name).write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
        return None, None
    if kind == "index_cut":
        target = rng.choice([seg.with_suffix(".index"), seg.with_suffix(".timeindex")])
        size = target.stat().st_size
        os.truncate(target, max(1, size - rng.randrange(1, 8)))
        return None, None
    if kind == "special_file":
        name = part / "00000000000000099999.log"
        if rng.random() < 0.5:
            os.mkfifo(name)
        else:
            os.symlink(name.name, name)  # a loop
        return None, None
    raise AssertionError(kind)


def _invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args}: traceback: {res.exception!r}\n{res.output[-2000:]}")
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output[-2000:])
    return res


def _partitions(root: Path) -> list[str]:
    return sorted(
        p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.log")) and "__" not in p.name
    )


def run_case(sources: dict[str, Path], work: Path, seed: int, kind: str, source: str) -> None:
    rng = random.Random(f"{seed}:{kind}:{source}")
    base = sources[source]
    name = rng.choice(_partitions(base))
    case = work / f"case-{seed}-{kind}-{source}"
    # the log dir's own files (checkpoints, meta.properties, the clean-shutdown marker) and
    # the one partition the case damages
    case.mkdir()
    for f in base.iterdir():
        if f.is_file() and f.name != ".lock":
            shutil.copy2(f, case / f.name)
    shutil.copytree(base / name, case / name)
    part = case / name
    original = _records(part)
    logs_before = sorted(part.glob("*.log"))
    hit, first_bad = damage(part, kind, rng)
    # what recovery must keep: every record of a batch that lies wholly before the damage
    keep = set()
    for log in logs_before:
        if hit is not None and log == hit:
            clean = (base / name / log.name).read_bytes()
            for b in R.iter_batches(clean):
                if b.end <= first_bad:
                    keep.update((r.offset, r.key, r.value) for r in b.records())
            break
        keep.update((r.offset, r.key, r.value) for b in R.iter_batches(log.read_bytes()) for r in b.records())
    if hit is None:
        keep = original
    before = _tree_hash(case)
    where = f"CASE={seed}:{kind}:{source} ({name})"
    v = _invoke("verify", "--json", part)
    if kind in ALWAYS_SEEN:
        assert v.exit_code != 0, (where, v.output[-1500:])
    for log in sorted(part.glob("*.log")):
        _invoke("dump-log", "--deep-iteration", "--print-data-log", log)
    _invoke("recover", "--dry-run", "--all", part)
    _invoke("rebuild-index", "--dry-run", part)
    _invoke("retention", "--dry-run", "--retention-ms", "1", "--cleanup-policy", "delete", part)
    _invoke("compact", "--dry-run", part)
    assert _tree_hash(case) == before, (where, "a read-only or dry-run command changed the tree")
    _invoke("recover", "--all", part)
    after = _records(part)
    lost = keep - after
    if lost:
        # Kafka's recovery truncates a whole segment when an offset cannot go into its index
        # (LogLoader: InvalidOffsetException -> truncateTo(baseOffset)), valid batches before
        # the damage included; recover does the same and keeps the bytes in its quarantine
        lost -= _quarantined(part)
    assert not lost, (where, f"recover dropped {len(lost)} CRC-valid records before the damage")
    shutil.rmtree(case, ignore_errors=True)


def _quarantined(part: Path) -> set[tuple[int, bytes | None, bytes | None]]:
    """The records of every batch recover moved into the partition's quarantine."""
    out = set()
    for f in (part / "kafkatool-quarantine").rglob("*"):
        if not f.is_file():
            continue
        try:
            for b in R.iter_batches(f.read_bytes()):
                if b.is_valid():
                    out.update((r.offset, r.key, r.value) for r in b.records())
        except Exception:  # damaged bytes after the valid batches: what recover cut
            continue
    return out


def _cases(seeds: range):
    only = os.environ.get("CASE")
    if only:
        seed, kind, source = only.split(":")
        return [(int(seed), kind, source)]
    return [(seed, kind, source) for seed in seeds for kind in CLASSES for source in ("synthetic", "serve")]


@pytest.mark.parametrize("kind", CLASSES)
def test_damage_corpus(sources, tmp_path, kind):
    for seed, k, source in _cases(range(16)):
        if k == kind:
            run_case(sources, tmp_path, seed, kind, source)


@pytest.mark.slow
@pytest.mark.parametrize("kind", CLASSES)
def test_damage_corpus_slow(sources, tmp_path, kind):
    n = 10_000 // (2 * len(CLASSES)) + 1
    for seed, k, source in _cases(range(1000, 1000 + n)):
        if k == kind:
            run_case(sources, tmp_path, seed, kind, source)
