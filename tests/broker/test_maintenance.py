"""Background retention and compaction in a running broker (the engine the CLI uses)."""

from __future__ import annotations

import time

import pytest

from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.broker.test_background_work import fill_compacted, make_cleanable, produce_keys
from tests.broker.test_protocol import create_topic, produce
from tests.broker.test_storage import all_records
from tests.broker.wire import WireClient


def earliest(c: WireClient, topic: str) -> int:
    req = G.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-2)])
        ],
    )
    return c.request(2, 7, req).topics[0].partitions[0].offset


def keyed_batch(keys: list[bytes], value: bytes) -> bytes:
    now = int(time.time() * 1000)
    return R.build_record_batch([R.SimpleRecord(value + k, k, (), now) for k in keys])


def test_retention_and_compaction_run_in_the_background(make_broker):
    b = make_broker(
        extra=["log.retention.check.interval.ms=300", "log.cleaner.backoff.ms=200", "log.roll.jitter.ms=0"]
    ).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "ret", configs={"segment.bytes": "4000", "retention.bytes": "8000"})
        for _ in range(60):
            assert produce(c, "ret", keyed_batch([b"a", b"b"], b"x" * 300)).error_code == 0
        create_topic(
            c,
            "cmp",
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": "3000",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        keys = [b"k%d" % i for i in range(5)]
        for round_ in range(40):
            assert produce(c, "cmp", keyed_batch(keys, b"v%03d-" % round_ + b"p" * 100)).error_code == 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if earliest(c, "ret") > 0 and len(all_records(c, "cmp")) < 100:
                break
            time.sleep(0.2)
        start = earliest(c, "ret")
        assert start > 0, b.log_text()[-2000:]
        recs = all_records(c, "ret", start=start)
        assert recs[0].offset == start and recs[-1].offset == 119
        cmp = all_records(c, "cmp")
        assert len(cmp) < 100, b.log_text()[-2000:]
        latest = {}
        for r in cmp:
            latest[r.key] = r.value
        assert latest == {k: b"v039-" + b"p" * 100 + k for k in keys}
        offsets = [r.offset for r in cmp]
        assert offsets == sorted(offsets) and offsets[-1] == 199
    assert "retention deleted" in b.log_text() and "log cleaned" in b.log_text()
    b.stop()
    assert (b.data_dir / "cleaner-offset-checkpoint").exists()


@pytest.mark.parametrize("damage", ["key_length", "header_count"])
def test_a_record_the_decoder_refuses_marks_its_partition_uncleanable(make_broker, damage):
    """Kafka's cleaner thread: the exception out of a round on a record DefaultRecord.readFrom
    refuses (a 6-byte key length, or 50 headers in no bytes, in a CRC-valid batch) becomes a
    LogCleaningException; the partition is marked uncleanable (not picked again), its
    segments and checkpoint stay, the other logs are cleaned.  Ours: one warning line naming
    the file, the batch offset and the byte position, no traceback, not retried."""
    from tests.log.maint_util import bad_header_count_batch, overlong_varint_batch

    b = _bad_and_good(make_broker)
    # offset 7's batch, rewritten in place with as many bytes (the producer path would refuse it)
    part = b.data_dir / "bad-0"
    seg = max(p for p in part.glob("*.log") if int(p.stem) <= 7)
    data = bytearray(seg.read_bytes())
    (old,) = [bt for bt in R.iter_batches(bytes(data)) if bt.base_offset == 7]
    if damage == "key_length":
        new = bytearray(
            overlong_varint_batch(7, b"k1", b"v" * 40 + b"k1", "key_length", timestamp=old.base_timestamp)
        )
        at, message = old.position + 61 + 4, "varint longer than 5 bytes"  # the key length
    else:
        new = bytearray(bad_header_count_batch(7, b"k1", b"v" * 40 + b"k1", timestamp=old.base_timestamp))
        at, message = old.end, "invalid header count 50"  # after the count, the batch's last byte
    assert len(new) == old.size
    new[12:16] = data[old.position + 12 : old.position + 16]  # the leader epoch (not under the CRC)
    data[old.position : old.end] = new
    seg.write_bytes(bytes(data))
    bad_files = {p.name: p.read_bytes() for p in part.glob("*.log")}
    text, stopped = _restart_cleaning(b)
    assert stopped and "log cleaned topic=good" in text, text[-3000:]
    assert len(stopped) == 1, stopped  # marked uncleanable: not picked again
    assert f"{seg}: {message} in the batch at offset 7 (at byte {at})" in stopped[0]
    assert "marked uncleanable" in stopped[0]
    assert "Traceback" not in text and "cleaner pass failed" not in text, text[-3000:]
    assert {p.name: p.read_bytes() for p in part.glob("*.log")} == bad_files
    assert not list(part.glob("*.cleaned"))
    with WireClient(b.bootstrap) as c:
        assert len(all_records(c, "good")) < 30
    # doneCleaning: the good log's checkpoint is its cleaned end, the bad one's the round's
    # start (not advanced), both written as each pass ended
    assert _cleaner_checkpoint(b, {("good", 0), ("bad", 0)})[("bad", 0)] == 0
    assert _cleaner_checkpoint(b, {("good", 0)})[("good", 0)] == _logged_checkpoint(text, "good")
    b.stop()


def _bad_and_good(make_broker, second_dir: bool = False):
    """A stopped broker with two compacted topics, "bad" then "good" (created first: picked first
    among equally dirty logs), of 30 batches over 3 keys each in 1,000-byte segments.
    ``second_dir``: log dirs data and data2 (the last of the broker's extra settings), "good"
    created first, in data, and "bad" in data2."""
    cfg = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"}
    extra = ["log.cleaner.enable=false", "log.roll.jitter.ms=0"]
    b = make_broker(extra=extra)
    if second_dir:
        b.extra.append(f"log.dirs={b.data_dir},{b.data_dir.with_name('data2')}")
    b.start()
    with WireClient(b.bootstrap) as c:
        for topic in ("good", "bad") if second_dir else ("bad", "good"):
            create_topic(c, topic, configs=cfg)
            for i in range(30):
                assert produce(c, topic, keyed_batch([b"k%d" % (i % 3)], b"v" * 40)).error_code == 0
    b.stop()
    return b


def _restart_cleaning(b) -> tuple[str, list[str]]:
    """Start ``b`` with its cleaner until "bad" stopped and "good" was cleaned (and ten more
    passes); the log's text and its "log cleaning stopped" lines."""
    b.extra = ["log.cleaner.backoff.ms=100", "log.roll.jitter.ms=0"]
    b.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = b.log_text()
        if "log cleaning stopped topic=bad" in text and "log cleaned topic=good" in text:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # ten more cleaner passes
    text = b.log_text()
    return text, [line for line in text.splitlines() if "log cleaning stopped" in line]


def _logged_checkpoint(text: str, topic: str) -> int:
    import re

    found = re.findall(rf"log cleaned topic={topic} partition=0 \S+ checkpoint=(\d+)", text)
    assert found, text[-3000:]
    return int(found[-1])


def _cleaner_checkpoint(b, keys: set, timeout: float = 10.0) -> dict:
    """The broker's cleaner-offset-checkpoint once it names ``keys`` (its scheduler thread
    writes it shortly after a pass)."""
    from kafkatool.formats import checkpoint as ck

    path = b.data_dir / ck.CLEANER_OFFSET_CHECKPOINT
    deadline = time.monotonic() + timeout
    while True:
        offsets = ck.decode_offset_checkpoint(path.read_bytes()) if path.exists() else {}
        if keys <= set(offsets) or time.monotonic() > deadline:
            assert keys <= set(offsets), (offsets, b.log_text()[-3000:])
            return offsets
        time.sleep(0.05)


def test_an_io_error_in_a_round_takes_its_log_dir_offline(make_broker):
    """A round that fails with an I/O error (here the cleaned segment's path is a directory,
    so the worker cannot create it: EISDIR) takes its log dir offline, as Kafka's LogCleaner
    does ("Failed to clean up log ... due to IOException" to the LogDirFailureChannel): one
    ERROR line, the dir's partitions answer KAFKA_STORAGE_ERROR, the other dir's logs are
    cleaned as ever, no traceback, and the shutdown leaves no clean-shutdown marker in the
    failed dir (its logs are recovered at the next start)."""
    from kafkatool.formats import checkpoint as ck
    from kafkatool.protocol.errors import ErrorCode

    b = _bad_and_good(make_broker, second_dir=True)
    bad_dir = b.data_dir.with_name("data2")
    part = bad_dir / "bad-0"
    (part / "00000000000000000000.log.cleaned").mkdir()
    bad_files = {p.name: p.read_bytes() for p in part.glob("*.log")}
    b.extra = ["log.cleaner.backoff.ms=100", "log.roll.jitter.ms=0", *b.extra[-1:]]
    b.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = b.log_text()
        if "is offline" in text and "log cleaned topic=good" in text:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # ten more cleaner passes
    text = b.log_text()
    failed = [line for line in text.splitlines() if "level=error" in line]
    assert len(failed) == 1, text[-3000:]
    assert f"Failed to clean up log for bad-0 in dir {bad_dir} due to IOException" in failed[0]
    assert "Is a directory" in failed[0] and f"log dir {bad_dir} is offline" in failed[0]
    assert "log cleaned topic=good" in text
    assert "Traceback" not in text and "cleaner pass failed" not in text, text[-3000:]
    assert {p.name: p.read_bytes() for p in part.glob("*.log")} == bad_files
    with WireClient(b.bootstrap) as c:
        assert len(all_records(c, "good")) < 30
        assert produce(c, "bad", keyed_batch([b"k0"], b"v")).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert produce(c, "good", keyed_batch([b"k0"], b"v")).error_code == 0
    assert _cleaner_checkpoint(b, {("good", 0)})[("good", 0)] == _logged_checkpoint(text, "good") > 0
    assert b.stop() == 0
    assert (b.data_dir / ck.CLEAN_SHUTDOWN_FILE).exists()
    assert not (bad_dir / ck.CLEAN_SHUTDOWN_FILE).exists()


def test_the_cleaner_io_rate_is_a_dynamic_broker_config(make_broker):
    """log.cleaner.io.max.bytes.per.second is one of Kafka's LogCleaner.ReconfigurableConfigs:
    IncrementalAlterConfigs (and the legacy AlterConfigs) on the broker resource set it,
    validated as at start-up (above 0), kept with the other dynamic broker configs, and the
    next cleaning round is throttled at it; deleting it lifts the throttle."""
    import json
    import re

    from kafkatool.protocol.errors import ErrorCode
    from kafkatool.protocol.generated import alter_configs_request as AC
    from kafkatool.protocol.generated.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )
    from tests.broker.test_admin import describe

    name = "log.cleaner.io.max.bytes.per.second"

    def inc(c, op, value=None, validate_only=False):
        res = AlterConfigsResource(
            resource_type=4,
            resource_name="1",
            configs=[AlterableConfig(name=name, config_operation=op, value=value)],
        )
        req = G.IncrementalAlterConfigsRequest(resources=[res], validate_only=validate_only)
        return c.request(44, 1, req).responses[0].error_code

    def legacy(c, configs, validate_only=False):
        res = AC.AlterConfigsResource(
            resource_type=4,
            resource_name="1",
            configs=[AC.AlterableConfig(name=n, value=v) for n, v in configs],
        )
        req = G.AlterConfigsRequest(resources=[res], validate_only=validate_only)
        return c.request(33, 2, req).responses[0].error_code

    def entry(c):
        e = describe(c, "1", keys=[name], rtype=4)[1][name]
        return e.value, e.config_source, e.read_only

    def cleaned(count: int) -> list[tuple[float, float]]:
        deadline = time.monotonic() + 60
        while True:
            found = re.findall(
                r"log cleaned topic=big .* seconds=(\S+) throttled_seconds=(\S+)", b.log_text()
            )
            if len(found) >= count or time.monotonic() > deadline:
                assert len(found) >= count, b.log_text()[-3000:]
                return [(float(s), float(t)) for s, t in found]
            time.sleep(0.1)

    b = make_broker(extra=["log.cleaner.backoff.ms=100", "log.roll.jitter.ms=0"]).start()
    default = ("1.7976931348623157E308", 5, False)
    with WireClient(b.bootstrap) as c:
        assert entry(c) == default
        for bad in ("0", "-1", "fast", "nan"):
            # a broker config's bad value: INVALID_REQUEST, as Kafka 3.7 answers (KAFKA-13609)
            assert inc(c, 0, bad) == ErrorCode.INVALID_REQUEST, bad
            assert legacy(c, [(name, bad)]) == ErrorCode.INVALID_REQUEST, bad
        assert inc(c, 0, "5e6", validate_only=True) == 0
        assert legacy(c, [(name, "5e6")], validate_only=True) == 0
        assert entry(c) == default
        assert inc(c, 0, "5e6") == 0
        assert entry(c) == ("5e6", 2, False)
        saved = json.loads((b.data_dir / "kafkatool-dynamic-broker-configs.json").read_text())
        assert saved["configs"] == {name: "5e6"}
        # one round over ~6 MB; the throttle checks every 300 ms (Kafka's), so the round must
        # run longer than that
        n = fill_compacted(c, "big")
        make_cleanable(c, "big")
        seconds, throttled = cleaned(1)[0]
        # MBs read twice and written once at 5 MB/s: part of the round slept
        assert seconds > throttled > 0, b.log_text()[-2000:]
        # the legacy AlterConfigs replaces the broker's dynamic configs: none left, no limit
        assert legacy(c, []) == 0
        assert entry(c) == default
        produce_keys(c, "big", 30, n, b"w")  # one more segment to clean
        assert cleaned(2)[1][1] == 0.0
    assert "Traceback" not in b.log_text()
    b.stop()
