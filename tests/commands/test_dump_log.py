"""`kafkatool dump-log`: kafka-dump-log.sh's lines, the --json contract, filters, damaged input."""

import base64
import json
import subprocess
import sys

import pytest
from segments import make_partition
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import compression
from kafkatool.formats import index as I
from kafkatool.formats import records as R
from kafkatool.formats import snapshot as S

runner = CliRunner()


def run(*args):
    res = runner.invoke(app, ["dump-log", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def jlines(res):
    return [json.loads(x) for x in res.stdout.splitlines() if x.strip()]


@pytest.fixture
def seg(tmp_path):
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    data = R.build_record_batch(
        [
            R.SimpleRecord(b"hello", b"k1", [("h1", b"x"), ("h2", None)], 1000),
            R.SimpleRecord(None, None, (), 1005),
        ],
        base_offset=10,
        partition_leader_epoch=3,
        producer_id=77,
        producer_epoch=1,
        base_sequence=4,
    )
    data += R.build_control_batch(
        R.COMMIT,
        base_offset=12,
        producer_id=77,
        producer_epoch=1,
        coordinator_epoch=5,
        timestamp=1010,
        partition_leader_epoch=3,
    )
    path = pdir / f"{10:020d}.log"
    path.write_bytes(data)
    return path


def test_kafka_batch_and_record_lines(seg):
    b0 = R.read_batch(seg.read_bytes())
    b1 = R.read_batch(seg.read_bytes(), b0.end)
    res = run(seg, "--print-data-log")
    assert res.exit_code == 0
    assert res.stdout.splitlines() == [
        f"Dumping {seg}",
        "Log starting offset: 10",
        "baseOffset: 10 lastOffset: 11 count: 2 baseSequence: 4 lastSequence: 5 producerId: 77 producerEpoch: 1 "
        "partitionLeaderEpoch: 3 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 1005 size: {b0.size} magic: 2 compresscodec: none crc: {b0.crc} isvalid: true",
        "| offset: 10 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: 4 headerKeys: [h1,h2] key: k1 payload: hello",
        "| offset: 11 CreateTime: 1005 keySize: -1 valueSize: -1 sequence: 5 headerKeys: []",
        "baseOffset: 12 lastOffset: 12 count: 1 baseSequence: -1 lastSequence: -1 producerId: 77 producerEpoch: 1 "
        "partitionLeaderEpoch: 3 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
        f"position: {b0.size} CreateTime: 1010 size: {b1.size} magic: 2 compresscodec: none crc: {b1.crc} isvalid: true",
        "| offset: 12 CreateTime: 1010 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT "
        "coordinatorEpoch: 5",
    ]
    res = run(seg, "--print-data-log", "--skip-record-metadata")
    assert "| key: k1 payload: hello" in res.stdout.splitlines()


def test_legacy_lines(tmp_path):
    data = R.build_legacy_message_set(
        [R.SimpleRecord(b"v", b"k", (), 42)], magic=1, codec=compression.GZIP, base_offset=5
    )
    path = tmp_path / f"{5:020d}.log"
    path.write_bytes(data)
    b = R.read_batch(data)
    inner = next(iter(b.records()))
    res = run(path, "--print-data-log")
    lines = res.stdout.splitlines()
    assert (
        lines[2]
        == f"offset: 5 position: 0 CreateTime: 42 size: {b.size} magic: 1 compresscodec: gzip crc: {b.crc} isvalid: true"
    )
    assert (
        lines[3]
        == f"| offset: 5 CreateTime: 42 keySize: 1 valueSize: 1 isValid: true crc: {inner.crc}}} key: k payload: v"
    )


def test_json_contract(seg):
    res = run(seg, "--deep-iteration", "--json")
    objs = jlines(res)
    batches = [o for o in objs if o["type"] == "batch"]
    recs = [o for o in objs if o["type"] == "record"]
    assert len(batches) == 2 and len(recs) == 3
    for key in (
        "baseOffset",
        "lastOffset",
        "count",
        "position",
        "size",
        "magic",
        "compresscodec",
        "crc",
        "isvalid",
        "producerId",
        "producerEpoch",
        "baseSequence",
        "lastSequence",
        "partitionLeaderEpoch",
        "isTransactional",
        "isControl",
        "deleteHorizonMs",
        "timestampType",
        "maxTimestamp",
    ):
        assert key in batches[0], key
    r0 = recs[0]
    assert (r0["offset"], r0["timestamp"], r0["keySize"], r0["valueSize"]) == (10, 1000, 2, 5)
    assert (
        r0["key"] == base64.b64encode(b"k1").decode() and r0["value"] == base64.b64encode(b"hello").decode()
    )
    assert r0["headers"] == [["h1", base64.b64encode(b"x").decode()], ["h2", None]]
    assert recs[1]["key"] is None and recs[1]["value"] is None
    assert recs[2]["controlType"] == "COMMIT" and recs[2]["coordinatorEpoch"] == 5
    hexed = [o for o in jlines(run(seg, "--json", "--decoder", "hex")) if o["type"] == "record"]
    assert hexed[0]["key"] == b"k1".hex()


def test_filters(tmp_path):
    pdir = make_partition(tmp_path, segments=1, batches_per_segment=10, codec_cycle=(0, 1))
    log = sorted(pdir.glob("*.log"))[0]
    objs = jlines(run(log, "--json", "--deep-iteration", "--offset-range", "12-17"))
    assert [o["offset"] for o in objs if o["type"] == "record"] == [12, 13, 14, 15, 16, 17]
    assert [o["baseOffset"] for o in objs if o["type"] == "batch"] == [10, 15]
    objs = jlines(run(log, "--json", "--key", "k23"))
    assert [o["offset"] for o in objs if o["type"] == "record"] == [23]
    assert jlines(run(log, "--json", "--producer-id", "8")) and not [
        o for o in jlines(run(log, "--json", "--producer-id", "8")) if o["type"] == "batch"
    ]
    res = run(log, "--offset-range", "9-3")
    assert res.exit_code == 2


def test_indexes_and_sanity(tmp_path):
    pdir = make_partition(tmp_path, segments=1, batches_per_segment=30)
    idx = sorted(pdir.glob("*.index"))[0]
    entries = I.decode_offset_entries(idx.read_bytes())
    res = run(idx)
    assert res.exit_code == 0
    assert res.stdout.splitlines()[1:] == [f"offset: {rel} position: {pos}" for rel, pos in entries]
    assert run(idx, "--index-sanity-check").stdout.splitlines()[1] == f"{idx} passed sanity check."
    # a mismatch: the entry's offset no longer matches the batch at its position
    bad = bytearray(idx.read_bytes())
    bad[3] -= 1
    idx.write_bytes(bad)
    res = run(idx, "--verify-index-only")
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [f"Dumping {idx}"]
    assert f"Mismatches in :{idx.resolve()}" in res.stderr
    assert f"  Index offset: {entries[0][0] - 1}, log offset: {entries[0][0]}" in res.stderr
    tidx = idx.with_suffix(".timeindex")
    res = run(tidx)
    assert res.stdout.splitlines()[1].startswith("timestamp: ")
    empty = pdir / f"{999:020d}.index"
    empty.write_bytes(b"")
    assert run(empty).stdout.splitlines()[1] == f"{empty} is empty."


def test_txnindex_snapshot_and_checkpoints(tmp_path):
    t = tmp_path / f"{0:020d}.txnindex"
    t.write_bytes(I.encode_txn_index([(5, 10, 20, 21)]))
    assert (
        run(t).stdout.splitlines()[1]
        == "version: 0 producerId: 5 firstOffset: 10 lastOffset: 20 lastStableOffset: 21"
    )
    s = tmp_path / f"{30:020d}.snapshot"
    s.write_bytes(S.encode_snapshot([S.ProducerSnapshotEntry(5, 2, 9, 29, 3, 1234, 7, -1)]))
    assert run(s).stdout.splitlines()[1] == (
        "producerId: 5 producerEpoch: 2 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1234 firstSequence: 6 lastSequence: 9 lastOffset: 29 offsetDelta: 3 timestamp: 1234"
    )
    c = tmp_path / "recovery-point-offset-checkpoint"
    c.write_bytes(b"0\n1\nmy.topic 3 42\n")
    assert run(c).stdout.splitlines()[1] == "topic: my.topic partition: 3 offset: 42"
    bad = bytearray(s.read_bytes())
    bad[-1] ^= 1
    s.write_bytes(bad)
    res = run(s)
    assert res.exit_code == 1 and "crc" in res.stderr.lower() or "CRC" in res.stderr


def test_damaged_logs(seg):
    data = seg.read_bytes()
    seg.write_bytes(data + b"\x00\x00garbage")
    res = run(seg)
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == f"Found 9 invalid bytes at the end of {seg.name}"
    res = run(seg, "--max-bytes", str(len(data) + 3))
    assert "invalid bytes" not in res.stdout
    bad = bytearray(data)
    bad[70] ^= 0xFF
    seg.write_bytes(bad)
    res = run(seg)
    assert res.exit_code == 1 and "isvalid: false" in res.stdout
    bad = bytearray(data)
    bad[8:12] = b"\x00\x00\x00\x01"  # size 1 < 14: Kafka's CorruptRecordException
    seg.write_bytes(bad)
    res = run(seg, "--json")
    (problem,) = [o for o in jlines(res) if o["type"] == "problem"]
    assert problem["position"] == 0 and problem["kind"] == "bad_length" and res.exit_code == 1
    seg.write_bytes(b"")
    assert run(seg).exit_code == 0


def test_unknown_and_missing_files(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    res = run(tmp_path / "x.txt")
    # Kafka's line, and the contract's input error: the file is not Kafka data
    assert res.exit_code == 2 and f"Ignoring unknown file {tmp_path / 'x.txt'}" in res.stderr
    out = subprocess.run(
        [sys.executable, "-m", "kafkatool", "dump-log", str(tmp_path / "none.log")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "none.log" in out.stderr and "Traceback" not in out.stderr
    assert run().exit_code == 2


def test_client_captures_dump_every_record(client_batches_dir, tmp_path):
    for cap in sorted(client_batches_dir.glob("*.bin")):
        meta = json.loads(cap.with_suffix(".json").read_text())
        log = tmp_path / f"{0:020d}.log"
        log.write_bytes(cap.read_bytes())
        objs = jlines(run(log, "--json", "--deep-iteration", "--decoder", "hex"))
        recs = [o for o in objs if o["type"] == "record"]
        assert [r["value"] for r in recs] == [m["value"] for m in meta["messages"]], cap.name
        assert [r["key"] for r in recs] == [m["key"] for m in meta["messages"]], cap.name


def _s16(s: str) -> bytes:
    import struct

    return struct.pack(">h", len(s.encode())) + s.encode()


def test_offsets_decoder(tmp_path):
    import struct

    key = struct.pack(">h", 1) + _s16("grp") + _s16("orders") + struct.pack(">i", 2)
    value = struct.pack(">h", 3) + struct.pack(">qi", 42, 7) + _s16("m") + struct.pack(">q", 1700000000000)
    unknown = struct.pack(">h", 99) + b"\x00"
    data = R.build_record_batch(
        [
            R.SimpleRecord(value, key, (), 1),
            R.SimpleRecord(None, key, (), 2),
            R.SimpleRecord(b"x", unknown, (), 3),
            R.SimpleRecord(b"\x00\x03\x01", struct.pack(">h", 1) + b"\x00", (), 4),
        ]
    )
    log = tmp_path / "__consumer_offsets-7" / f"{0:020d}.log"
    log.parent.mkdir()
    log.write_bytes(data)
    lines = run(log, "--offsets-decoder").stdout.splitlines()[3:]
    assert lines[0].endswith(
        ' key: {"type":"1","data":{"group":"grp","topic":"orders","partition":2}} '
        'payload: {"version":"3","data":{"offset":42,"leaderEpoch":7,"metadata":"m","commitTimestamp":1700000000000}}'
    )
    assert lines[1].endswith(" payload: <DELETE>")
    assert lines[2].endswith(" key: Unknown record type 99 at offset 2, skipping.")
    assert " key: Error at offset 3, skipping." in lines[3]
    objs = [o for o in jlines(run(log, "--offsets-decoder", "--json")) if o["type"] == "record"]
    assert objs[0]["key"]["data"]["group"] == "grp" and objs[0]["value"]["data"]["offset"] == 42
    assert objs[1]["value"] is None and objs[3]["decodeError"].startswith("Error at offset 3")


def test_transaction_log_and_cluster_metadata_decoders(tmp_path):
    import struct

    key = struct.pack(">h", 0) + _s16("txn-1")
    value = (
        struct.pack(">h", 0)
        + struct.pack(">qhib", 9, 1, 60000, 4)
        + struct.pack(">i", 1)
        + _s16("t")
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + struct.pack(">qq", 5, 4)
    )
    log = tmp_path / f"{0:020d}.log"
    log.write_bytes(R.build_record_batch([R.SimpleRecord(value, key, (), 1)]))
    line = run(log, "--transaction-log-decoder").stdout.splitlines()[3]
    assert line.endswith(
        " key: transaction_metadata::transactionalId=txn-1 payload: producerId:9,producerEpoch:1,"
        "state=CompleteCommit,partitions=[t-0],txnLastUpdateTimestamp=5,txnTimeoutMs=60000"
    )
    # a KRaft TopicRecord v0: frame 1, type 2, version 0, name (compact string), topic id, no tags
    topic_id = bytes(range(16))
    rec = bytes([1, 2, 0]) + bytes([len("events") + 1]) + b"events" + topic_id + b"\x00"
    log.write_bytes(R.build_record_batch([R.SimpleRecord(rec, None, (), 1)]))
    res = run(log, "--cluster-metadata-decoder")
    line = res.stdout.splitlines()[3]
    assert ' payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"events","topicId":' in line
    objs = [o for o in jlines(run(log, "--cluster-metadata-decoder", "--json")) if o["type"] == "record"]
    assert objs[0]["value"]["type"] == "TOPIC_RECORD" and objs[0]["value"]["data"]["name"] == "events"


def test_kraft_snapshot_control_records(tmp_path):
    import struct

    # SnapshotHeaderRecord v0: version int16 0, lastContainedLogTimestamp int64, no tags
    header = struct.pack(">hq", 0, 1234) + b"\x00"
    batch = R.build_record_batch(
        [R.SimpleRecord(header, struct.pack(">hh", 0, R.SNAPSHOT_HEADER), (), 5)], is_control=True
    )
    snap = tmp_path / "00000000000000000100-0000000003.checkpoint"
    snap.write_bytes(batch)
    lines = run(snap).stdout.splitlines()
    assert lines[1] == "Snapshot end offset: 100, epoch: 3"
    assert (
        run(snap, "--deep-iteration")
        .stdout.splitlines()[3]
        .endswith(' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1234}')
    )
