"""DefaultMessageFormatter's bytes (formats/message_formatter) and the consumer's reading of a
Fetch answer (assign/consume.fetched_records) on bytes alone: legacy message sets, a header
key that is not UTF-8, control batches, aborted transactions."""

from __future__ import annotations

import pytest

from kafkatool.assign.consume import fetched_records, parse_offset
from kafkatool.formats import records as R
from kafkatool.formats.index import AbortedTxn
from kafkatool.formats.message_formatter import (
    STRING_DESERIALIZER,
    ConsumerRecord,
    FormatterPropertyError,
    MessageFormatter,
    json_object,
)

ALL = {
    k: "true" for k in ("print.timestamp", "print.key", "print.partition", "print.offset", "print.headers")
}


def test_legacy_records_and_no_timestamp():
    v0 = R.build_legacy_message_set([R.SimpleRecord(b"a", b"k")], magic=0, base_offset=0)
    v1 = R.build_legacy_message_set([R.SimpleRecord(b"b", None, timestamp=5)], magic=1, base_offset=1)
    recs, nxt = fetched_records("t", 3, v0 + v1, 0, None, False)
    assert nxt == 2
    f = MessageFormatter(ALL)
    assert [f.format(r) for r in recs] == [
        b"NO_TIMESTAMP\tPartition:3\tOffset:0\tNO_HEADERS\tk\ta\n",
        b"CreateTime:5\tPartition:3\tOffset:1\tNO_HEADERS\tnull\tb\n",
    ]


def test_header_key_not_utf8_and_string_deserializer():
    batch = R.build_record_batch(
        [R.SimpleRecord(b"\xc3(", b"k", headers=[(b"\xed\xa0\x80h", b"\xff"), ("n", None)], timestamp=7)],
        timestamp_type=R.LOG_APPEND_TIME,
        log_append_time=9,
    )
    (r,), _ = fetched_records("t", 0, batch, 0, None, False)
    raw = MessageFormatter({"print.headers": "true", "print.timestamp": "true"}).format(r)
    # the key is Java's String of its bytes (one U+FFFD for an encoded surrogate); values raw
    assert raw == "LogAppendTime:9\t\ufffdh:".encode() + b"\xff,n:null\t\xc3(\n"
    text = MessageFormatter({"value.deserializer": STRING_DESERIALIZER}).format(r)
    assert text == "\ufffd(\n".encode()
    js = json_object(r)
    assert js["value_encoding"] == "base64" and js["value"] == "wyg="
    assert js["headers"] == [
        {"key": "\ufffdh", "value": "/w==", "value_encoding": "base64"},
        {"key": "n", "value": None},
    ]


def test_read_committed_drops_aborted_batches_and_every_control_batch():
    pid = 7
    data = b"".join(
        [
            R.build_record_batch([R.SimpleRecord(b"x0")], base_offset=0, producer_id=pid, producer_epoch=0,
                                 base_sequence=0, is_transactional=True),
            R.build_control_batch(R.ABORT, base_offset=1, producer_id=pid, producer_epoch=0),
            R.build_record_batch([R.SimpleRecord(b"c2")], base_offset=2, producer_id=pid, producer_epoch=0,
                                 base_sequence=1, is_transactional=True),
            R.build_control_batch(R.COMMIT, base_offset=3, producer_id=pid, producer_epoch=0),
            R.build_record_batch([R.SimpleRecord(b"p4")], base_offset=4),
        ]
    )  # fmt: skip
    aborted = [AbortedTxn(0, pid, 0, 1, 2)]
    rc, nxt = fetched_records("t", 0, data, 0, aborted, True)
    ru, _ = fetched_records("t", 0, data, 0, aborted, False)
    assert [r.value for r in rc] == [b"c2", b"p4"] and nxt == 5
    assert [r.value for r in ru] == [b"x0", b"c2", b"p4"]
    # records below the fetch offset are skipped; a batch cut short at the end is left for later
    part, nxt = fetched_records("t", 0, data[:-3], 3, aborted, True)
    assert part == [] and nxt == 4


def test_bad_properties_and_offsets():
    with pytest.raises(FormatterPropertyError, match="unknown formatter property"):
        MessageFormatter({"print.kye": "true"})
    with pytest.raises(FormatterPropertyError, match="only"):
        MessageFormatter({"key.deserializer": "com.example.Avro"})
    assert MessageFormatter({"print.key": " TRUE "}).print_key
    assert not MessageFormatter({"print.value": "yes"}).print_value
    assert parse_offset("Earliest") == -2 and parse_offset("LATEST") == -1 and parse_offset("12") == 12
    for bad in ("-1", "x", "1.5", ""):
        with pytest.raises(Exception, match="non-negative long"):
            parse_offset(bad)


def test_formatter_on_a_record_with_nothing_printed_but_the_value():
    r = ConsumerRecord("t", 0, 0, -1, R.CREATE_TIME, None, None)
    assert MessageFormatter().format(r) == b"null\n"
    assert MessageFormatter({"null.literal": "", "line.separator": "\r\n"}).format(r) == b"\r\n"
