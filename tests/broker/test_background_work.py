"""Background work (compaction, retention) runs off the event loop and loses nothing
(issue 16).  No timing thresholds: the assertions are on completeness and ordering."""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime

from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
)
from tests.broker.test_protocol import batches_of, create_topic, fetch, produce
from tests.broker.test_storage import all_records
from tests.broker.wire import WireClient

KEYS = [b"k%02d" % i for i in range(20)]


def keyed(round_: int, pad: int = 200) -> bytes:
    now = int(time.time() * 1000)
    return R.build_record_batch([R.SimpleRecord(b"r%05d-" % round_ + b"p" * pad, k, (), now) for k in KEYS])


def plain(round_: int) -> bytes:
    return R.build_record_batch([R.SimpleRecord(b"plain-%05d" % round_, None, (), int(time.time() * 1000))])


def cleaned_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "log cleaned" in ln and "voided" not in ln]


def fill_compacted(c: WireClient, topic: str, batches: int = 150, start: int = 0) -> int:
    """A compacted topic of ``batches`` batches of 2,000 distinct keys (about 40 KB each), in
    1 MB segments, not due for cleaning while it fills (an uncleaned log's dirty ratio is
    1.0, never above min.cleanable.dirty.ratio 1.0); the next key number."""
    create_topic(
        c,
        topic,
        configs={"cleanup.policy": "compact", "segment.bytes": "1000000", "min.cleanable.dirty.ratio": "1.0"},
    )
    return produce_keys(c, topic, batches, start)


def produce_keys(c: WireClient, topic: str, batches: int, start: int, value: bytes = b"v") -> int:
    """``batches`` batches of 2,000 records with the distinct keys from ``start`` on; the next."""
    now = int(time.time() * 1000)
    n = start
    for _ in range(batches):
        recs = [R.SimpleRecord(value, b"key-%07d" % (n + i), (), now) for i in range(2000)]
        assert produce(c, topic, R.build_record_batch(recs)).error_code == 0
        n += 2000
    return n


def make_cleanable(c: WireClient, topic: str) -> None:
    """min.cleanable.dirty.ratio 0.01: the topic's next cleaner pass cleans it."""
    req = G.IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=2,
                resource_name=topic,
                configs=[AlterableConfig(name="min.cleanable.dirty.ratio", config_operation=0, value="0.01")],
            )
        ],
        validate_only=False,
    )
    assert c.request(44, 1, req).responses[0].error_code == 0


def test_compaction_concurrent_with_appends_and_fetches_loses_nothing(make_broker):
    b = make_broker(
        extra=[
            "log.cleaner.backoff.ms=50",
            "log.retention.check.interval.ms=200",
            "log.roll.jitter.ms=0",
        ]
    ).start()
    errors: list[str] = []
    stop = threading.Event()
    fetched = [0]

    def fetcher() -> None:
        # fetches of the compacted partition from its start while the cleaner swaps segments
        # in: every batch a fetch returns must be whole (CRC) and in offset order
        try:
            with WireClient(b.bootstrap) as fc:
                while not stop.is_set():
                    pd = fetch(fc, "cmp", 0).responses[0].partitions[0]
                    if pd.error_code != 0:
                        errors.append(f"fetch error {pd.error_code}")
                        return
                    last = -1
                    for bt in batches_of(pd.records):
                        bt.ensure_valid()
                        if bt.base_offset <= last:
                            errors.append(f"offsets out of order at {bt.base_offset}")
                        last = bt.last_offset
                    fetched[0] += 1
        except Exception as exc:  # reported below, with the broker's log
            errors.append(repr(exc))

    with WireClient(b.bootstrap) as c:
        create_topic(
            c,
            "cmp",
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": "20000",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        create_topic(c, "plain", configs={"segment.bytes": "20000", "retention.bytes": "-1"})
        th = threading.Thread(target=fetcher, daemon=True)
        th.start()
        rounds = 0
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                assert produce(c, "cmp", keyed(rounds)).error_code == 0
                assert produce(c, "plain", plain(rounds)).error_code == 0
                rounds += 1
                if rounds >= 300 and len(cleaned_lines(b.log_text())) >= 3 and fetched[0] >= 3:
                    break
        finally:
            stop.set()
            th.join(30)
        assert not errors, (errors, b.log_text()[-3000:])
        assert len(cleaned_lines(b.log_text())) >= 3, b.log_text()[-3000:]
        # nothing lost: the latest value of every key, every record of the other partition
        latest = {}
        offsets = []
        for r in all_records(c, "cmp"):
            latest[r.key] = r.value
            offsets.append(r.offset)
        last_round = rounds - 1
        assert latest == {k: b"r%05d-" % last_round + b"p" * 200 for k in KEYS}
        assert offsets == sorted(set(offsets)) and offsets[-1] == rounds * len(KEYS) - 1
        assert len(offsets) < rounds * len(KEYS)  # compaction did remove records
        got = [(r.offset, r.value) for r in all_records(c, "plain")]
        assert got == [(i, b"plain-%05d" % i) for i in range(rounds)]
    text = b.log_text()
    assert "Traceback" not in text and "cleaner pass failed" not in text, text[-3000:]
    b.stop()
    # after a clean restart the compacted log still holds the latest value of every key
    b.start()
    with WireClient(b.bootstrap) as c:
        latest = {r.key: r.value for r in all_records(c, "cmp")}
        assert latest == {k: b"r%05d-" % last_round + b"p" * 200 for k in KEYS}
    b.stop()


def _log_time(line: str) -> float:
    stamp = re.match(r"(\S+)Z ", line).group(1)
    return datetime.fromisoformat(stamp + "+00:00").timestamp()


def test_requests_are_answered_while_a_long_compaction_runs(make_broker):
    """A Metadata request sent after a cleaning round began is answered before the round
    ends (the round runs in the cleaner's worker process, not on the event loop)."""
    b = make_broker(extra=["log.cleaner.backoff.ms=50", "log.roll.jitter.ms=0"]).start()
    part_dir = b.data_dir / "big-0"
    with WireClient(b.bootstrap) as c:
        fill_compacted(c, "big")
        make_cleanable(c, "big")
        # the round has begun once its worker writes a .cleaned segment
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            p.name.endswith(".cleaned") for p in part_dir.iterdir()
        ):
            assert not cleaned_lines(b.log_text()), "the round ended before a .cleaned file was seen"
            time.sleep(0.005)
        answered = []
        while time.monotonic() < deadline and not cleaned_lines(b.log_text()):
            resp = c.request(3, 9, G.MetadataRequest(topics=None, allow_auto_topic_creation=False))
            assert any(t.name == "big" for t in resp.topics)
            answered.append(time.time())
        lines = cleaned_lines(b.log_text())
        assert lines, b.log_text()[-3000:]
        assert answered and answered[0] < _log_time(lines[0]), (answered[:3], lines[0])
    b.stop()


def _thread_opening_a_fifo(pid: int) -> bool:
    """A thread of ``pid`` waits in open(2) of a FIFO that has no reader."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                if f.read().strip() == "wait_for_partner":
                    return True
        except OSError:
            continue
    return False


def test_requests_are_answered_while_a_checkpoint_write_waits(make_broker):
    """Offset checkpoint files are written on the scheduler thread (an fsync there can wait
    seconds for the journal under a heavy write load).  While the write of a log dir's
    replication-offset-checkpoint cannot even open its file (a FIFO with no reader stands at
    its ``.tmp`` path), Metadata and Produce requests are answered; freed, the write fails and,
    as Kafka's OffsetCheckpointFile.write does, takes that log dir offline: one ERROR line,
    its partition answers KAFKA_STORAGE_ERROR, the other dir's are served."""
    from kafkatool.protocol.errors import ErrorCode

    b = make_broker(extra=["replica.high.watermark.checkpoint.interval.ms=100"])
    second = b.data_dir.with_name("data2")
    b.extra.append(f"log.dirs={b.data_dir},{second}")
    b.start()
    ckpt = second / "replication-offset-checkpoint"
    fifo = second / "replication-offset-checkpoint.tmp"
    deadline = time.monotonic() + 30
    with WireClient(b.bootstrap) as c:
        create_topic(c, "a")  # in the first dir (the fewest partitions, then the name)
        create_topic(c, "t")  # in the second
        while time.monotonic() < deadline and not ckpt.exists():
            time.sleep(0.02)
        assert ckpt.exists() and (second / "t-0").is_dir()
        os.mkfifo(fifo)
        assert produce(c, "t", plain(0)).error_code == 0  # a new high watermark to checkpoint
        while time.monotonic() < deadline and not _thread_opening_a_fifo(b.proc.pid):
            time.sleep(0.01)
        assert _thread_opening_a_fifo(b.proc.pid), b.log_text()[-2000:]
        for i in range(1, 6):
            resp = c.request(3, 9, G.MetadataRequest(topics=None, allow_auto_topic_creation=False))
            assert [t.name for t in resp.topics] == ["a", "t"]
            assert produce(c, "t", plain(i)).error_code == 0
        assert _thread_opening_a_fifo(b.proc.pid)  # the answers came while the write waited
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # frees it: the fsync of a FIFO fails
        try:
            while time.monotonic() < deadline and "is offline" not in b.log_text():
                time.sleep(0.02)
        finally:
            os.close(reader)
            fifo.unlink()
        lines = [ln for ln in b.log_text().splitlines() if "level=error" in ln]
        assert len(lines) == 1, b.log_text()[-2000:]
        assert f"Error while writing to checkpoint file {ckpt}" in lines[0]
        assert f"log dir {second} is offline" in lines[0]
        assert "Traceback" not in b.log_text()
        assert produce(c, "t", plain(6)).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert produce(c, "a", plain(0)).error_code == 0
    assert b.stop() == 0
