"""Offline readers of a damaged log dir (consume, groups and transactions with --log-dir): what
can be read is shown, each damage met is one line naming the file, the byte and the offset and
what the reader did about it, and the exit status is 1.  Until session 25 a damaged entry made
them exit 2 showing nothing (consume lost the records before it and did not name the file), and
a batch failing its CRC, or a record of __consumer_offsets or __transaction_state that did not
decode, went by without a word.  And the live consumer's check.crcs, which was taken without
effect: Kafka's consumer stops at a corrupt batch."""

from __future__ import annotations

import shutil
import struct

import pytest

from kafkatool.formats import records as R
from tests.broker.conftest import BrokerProcess, free_port
from tests.cli_result import json_rows as rows
from tests.cli_result import run

pytest.importorskip("confluent_kafka")


def damage_lines(res) -> list[str]:
    return [x for x in res.stderr.splitlines() if x.startswith("kafkatool: error: ")]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A stopped broker's dir: topic t (3 segments, 60 records each of one batch of 20), a
    group's commits and a committed transaction."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path_factory.mktemp("damage") / "data"
    b = BrokerProcess(
        data,
        port=free_port(),
        extra=["offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1"],
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        fs = admin.create_topics([NewTopic("t", 1, 1, config={"segment.bytes": "2000"})])
        for f in fs.values():
            f.result(15)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for i in range(60):
            p.produce("t", value=b"%03d" % i + b"x" * 60, partition=0)
            p.flush(15)  # one record a batch: several segments of several batches
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g", "enable.auto.commit": False})
        for off in (10, 20, 30):
            c.commit(offsets=[TopicPartition("t", 0, off)], asynchronous=False)
        c.close()
        tp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "tx"})
        tp.init_transactions(15)
        tp.begin_transaction()
        tp.produce("t", value=b"in a transaction", partition=0)
        tp.commit_transaction(15)
        tp.flush(15)
    finally:
        b.stop()
    return data


@pytest.fixture
def copy(written, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(written, d)
    return d


def _batches(path) -> list:
    return list(R.iter_batches(path.read_bytes()))


def _zero_length(path, index: int) -> int:
    """Batch ``index`` of the segment gets an impossible length; its byte position."""
    b = _batches(path)[index]
    data = bytearray(path.read_bytes())
    data[b.position + 8 : b.position + 12] = struct.pack(">i", 5)
    path.write_bytes(bytes(data))
    return b.position


def _flip_crc(path, index: int) -> int:
    """Batch ``index``'s stored CRC changed (its records still decode); its byte position."""
    b = _batches(path)[index]
    data = bytearray(path.read_bytes())
    data[b.position + 17] ^= 0xFF
    path.write_bytes(bytes(data))
    return b.position


def _segments(copy, name: str) -> list:
    return sorted((copy / name).glob("*.log"))


def test_the_data_is_as_the_tests_need_it(written):
    segs = _segments(written, "t-0")
    assert len(segs) >= 3 and all(len(_batches(s)) >= 3 for s in segs[:-1])
    res = run("consume", "--log-dir", written, "--topic", "t", "--from-beginning", "--exit-at-end", "--json")
    assert res.exit_code == 0 and len(rows(res)) == 61 and damage_lines(res) == []


def test_consume_prints_what_is_before_and_after_an_entry_that_does_not_parse(copy):
    segs = _segments(copy, "t-0")
    first = segs[0]
    offset = _batches(first)[2].base_offset
    pos = _zero_length(first, 2)
    res = run("consume", "--log-dir", copy, "--topic", "t", "--from-beginning", "--exit-at-end", "--json")
    assert res.exit_code == 1, res.output
    got = [r["offset"] for r in rows(res)]
    next_base = int(segs[1].stem)
    # the two records before the damage, none of the rest of that segment, then everything else
    assert got[:2] == [0, 1] and got[2] == next_base and len(got) == 61 - next_base + 2
    assert damage_lines(res) == [
        f"kafkatool: error: {first}: entry size 5 is smaller than the minimum 14 (at byte {pos}, "
        f"offset {offset}): the rest of the segment is left out"
    ]


def test_consume_says_a_batch_failing_its_crc_and_prints_it(copy):
    seg = _segments(copy, "t-0")[1]
    pos = _flip_crc(seg, 1)
    offset = _batches(seg)[1].base_offset
    res = run("consume", "--log-dir", copy, "--topic", "t", "--from-beginning", "--exit-at-end", "--json")
    assert res.exit_code == 1 and len(rows(res)) == 61
    (line,) = damage_lines(res)
    assert line.startswith(f"kafkatool: error: {seg}: record batch CRC mismatch: stored ")
    assert line.endswith(f"(at byte {pos}, offset {offset}): its records are read as they are")


def test_groups_read_the_commits_before_damage_in_consumer_offsets(copy):
    log = _segments(copy, "__consumer_offsets-0")[0]
    n = len(_batches(log))
    assert n >= 3  # the group's records, then the three commits (one batch each)
    pos = _zero_length(log, n - 1)  # the last commit (30) is lost, the one before (20) stands
    res = run("groups", "describe", "--group", "g", "--log-dir", copy, "--json")
    assert res.exit_code == 1, res.output
    assert [(r["partition"], r["current_offset"]) for r in rows(res) if r["type"] == "offset"] == [(0, 20)]
    (line,) = damage_lines(res)
    assert line.startswith(
        f"kafkatool: error: {log}: entry size 5 is smaller than the minimum 14 (at byte {pos}, "
    )
    assert line.endswith("): the rest of the segment is left out")
    # the other commands that read the groups say it too, and exit 1
    assert run("groups", "list", "--log-dir", copy).exit_code == 1
    assert run("groups", "export", "--all-groups", "--log-dir", copy).exit_code == 1


def test_groups_say_a_commit_failing_its_crc(copy):
    log = _segments(copy, "__consumer_offsets-0")[0]
    pos = _flip_crc(log, len(_batches(log)) - 1)
    res = run("groups", "describe", "--group", "g", "--log-dir", copy, "--json")
    assert res.exit_code == 1
    assert [r["current_offset"] for r in rows(res) if r["type"] == "offset"] == [30]
    (line,) = damage_lines(res)
    assert f"{log}: record batch CRC mismatch" in line and f"(at byte {pos}, " in line


def test_transactions_read_past_damage_in_transaction_state(copy):
    log = _segments(copy, "__transaction_state-0")[0]
    pos = _zero_length(log, 0)
    res = run("transactions", "list", "--log-dir", copy, "--json")
    assert res.exit_code == 1 and rows(res) == []
    (line,) = damage_lines(res)
    assert line == (
        f"kafkatool: error: {log}: entry size 5 is smaller than the minimum 14 (at byte {pos}, offset 0): "
        "the rest of the segment is left out"
    )
    assert run("transactions", "describe", "--transactional-id", "tx", "--log-dir", copy).exit_code == 1
    res = run("transactions", "find-hanging", "--log-dir", copy, "--json")
    assert res.exit_code == 1 and line in damage_lines(res)
    # describe-producers of t does not read __transaction_state's damage: nothing to say
    res = run(
        "transactions", "describe-producers", "--topic", "t", "--partition", "0", "--log-dir", copy, "--json"
    )
    assert res.exit_code == 0 and damage_lines(res) == [] and rows(res)


def test_undamaged_offline_readers_say_nothing(written):
    for args in (
        ["groups", "describe", "--all-groups"],
        ["groups", "list"],
        ["transactions", "list"],
        ["transactions", "find-hanging"],
        ["transactions", "describe-producers", "--topic", "t", "--partition", "0"],
    ):
        res = run(*args, "--log-dir", written)
        assert res.exit_code == 0 and damage_lines(res) == [], (args, res.output)


def test_a_live_consumer_stops_at_a_batch_failing_its_crc_as_kafkas_does(copy):
    """check.crcs (Kafka's default true): the records before the corrupt batch are printed,
    then the consumer stops with CompletedFetch's exception and its cause (ConsoleConsumer
    logs it and ends); check.crcs=false (librdkafka's default) prints the batch as it is.
    The broker serves the batch as Kafka's does (a fetch sends the stored bytes)."""
    seg = _segments(copy, "t-0")[1]
    bad = _batches(seg)[1]
    _flip_crc(seg, 1)
    b = BrokerProcess(copy, port=free_port()).start()
    try:
        args = ["consume", "--bootstrap-server", b.bootstrap, "--topic", "t", "--from-beginning"]
        res = run(*args, "--exit-at-end", "--json")
        assert res.exit_code == 2, res.output
        assert [r["offset"] for r in rows(res)] == list(range(bad.base_offset))
        assert damage_lines(res) == [
            "kafkatool: error: Received exception when fetching the next record from t-0. If needed, "
            "please seek past the record to continue consumption. Caused by: Record batch for "
            f"partition t-0 at offset {bad.base_offset} is invalid, cause: Record is corrupt (stored "
            f"crc = {bad.crc ^ (0xFF << 24)}, computed crc = {bad.crc})"
        ]
        res = run(*args, "--exit-at-end", "--json", "--consumer-property", "check.crcs=false")
        assert res.exit_code == 0 and len(rows(res)) == 61 and damage_lines(res) == []
    finally:
        b.stop()


def test_a_producer_state_replay_names_the_damaged_segment(copy):
    """Without the clean shutdown's snapshots the reader replays the producer state from the
    segments (read_committed needs it); damage there is one line naming the segment file and its
    byte, as every other reader's (the replay named the partition dir and put the file at the
    end of the message until session 26)."""
    for snap in (copy / "t-0").glob("*.snapshot"):
        snap.unlink()
    (copy / ".kafka_cleanshutdown").unlink(missing_ok=True)
    first = _segments(copy, "t-0")[0]
    pos = _zero_length(first, 2)
    res = run(
        "transactions", "describe-producers", "--topic", "t", "--partition", "0", "--log-dir", copy, "--json"
    )
    assert res.exit_code == 1, res.output
    assert damage_lines(res) == [
        f"kafkatool: error: {first}: entry size 5 is smaller than the minimum 14 (at byte {pos}): "
        "the producer state is rebuilt from the batches before it"
    ]


def test_get_offsets_by_time_answers_the_damaged_partition_with_the_brokers_error(copy):
    """`topics get-offsets --time T --log-dir` over damage: the partition is answered as serve's
    ListOffsets answers it (one rule, handlers/offsets.offset_by_spec: CORRUPT_MESSAGE), the line
    names the file and the byte, the exit status is 1 and the other partitions are answered.
    Until session 26 the command stopped at the damage with exit 2 and answered nothing."""
    first = _segments(copy, "t-0")[0]
    bs = _batches(first)
    k = next(i for i in range(2, len(bs)) if bs[i - 1].max_timestamp < bs[i].max_timestamp)
    pos = _zero_length(first, k)
    at = str(bs[k - 1].max_timestamp + 1)  # every batch before the damaged one is older
    res = run("topics", "get-offsets", "--log-dir", copy, "--time", at)
    assert res.exit_code == 1, res.output
    assert damage_lines(res)[0] == (
        "kafkatool: error: Skip getting offsets for topic-partition t-0 due to error: CORRUPT_MESSAGE: entry "
        f"size 5 is smaller than the minimum 14 in {first} (at byte {pos})"
    )
    assert "t:0:" not in res.stdout and res.stdout.strip()  # the internal topics are answered
    # a time before the damage is answered as before
    res = run("topics", "get-offsets", "--log-dir", copy, "--topic", "t", "--time", str(bs[0].max_timestamp))
    assert res.exit_code == 0 and res.stdout.strip() == f"t:0:{bs[0].base_offset}"
