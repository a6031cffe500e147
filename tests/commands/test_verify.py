"""`kafkatool verify` on healthy data and on a corpus of damaged files."""

import json
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from segments import make_batches, make_partition, write_segment
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.forensics import verify as V
from kafkatool.formats import checkpoint as C
from kafkatool.formats import records as R
from kafkatool.formats import snapshot as S
from kafkatool.formats.crc import crc32c

runner = CliRunner()


def run(*args):
    res = runner.invoke(app, ["verify", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def findings(*args):
    res = run("--json", *args)
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.strip()]
    assert lines[-1]["type"] == "summary"
    return res.exit_code, [x for x in lines if x["type"] == "finding"], lines[-1]


@pytest.fixture
def partition(tmp_path):
    return make_partition(tmp_path / "logdir")


def _log(pdir, n=0):
    return sorted(pdir.glob("*.log"))[n]


def test_healthy_log_dir_is_clean(partition):
    code, fs, summary = findings(partition.parent)
    assert fs == [] and code == 0
    assert summary["segments"] == 2 and summary["batches"] == 60 and summary["records"] == 300
    res = run(partition)
    assert res.exit_code == 0 and "clean" in res.stdout


def test_bit_flip_reports_damage_and_resumes(partition):
    log = _log(partition)
    data = bytearray(log.read_bytes())
    b0 = R.read_batch(bytes(data))
    b1 = R.read_batch(bytes(data), b0.end)
    data[b1.position + 100] ^= 0x04
    log.write_bytes(data)
    code, fs, _ = findings(log)
    assert code == 1
    (f,) = [f for f in fs if f["kind"] == "crc_mismatch"]
    assert f["position"] == b1.position and f["end"] == b1.end and f["offset"] == b1.last_offset
    # the rest of the segment is still verified: only one finding
    assert len(fs) == 1


@pytest.mark.parametrize("cut", [9, 30, 61, 200])
def test_truncated_tail(partition, cut):
    log = _log(partition, 1)
    data = log.read_bytes()
    last = list(R.iter_batches(data))[-1]
    cut = min(cut, last.size - 1)
    log.write_bytes(data[: last.position + cut])
    code, fs, _ = findings(log)
    assert code == 1
    (f,) = fs
    assert (
        f["kind"] == "truncated_tail" and f["position"] == last.position and f["end"] == last.position + cut
    )


def test_garbage_and_zero_tails(partition):
    log = _log(partition, 1)
    data = log.read_bytes()
    log.write_bytes(data + b"\xde\xad\xbe\xef" * 10)
    code, fs, _ = findings(log)
    assert [(f["kind"], f["position"]) for f in fs] == [("garbage_tail", len(data))]
    log.write_bytes(data + bytes(4096))
    code, fs, _ = findings(log)
    assert [(f["kind"], f["position"], f["end"], f["severity"]) for f in fs] == [
        ("zero_tail", len(data), len(data) + 4096, "warning")
    ]
    assert code == 1
    assert findings("--fail-on", "error", log)[0] == 0


def test_wrong_magic_and_absurd_lengths(partition):
    log = _log(partition)
    data = bytearray(log.read_bytes())
    b1 = R.read_batch(bytes(data), R.read_batch(bytes(data)).end)
    bad = bytearray(data)
    bad[b1.position + 16] = 7
    log.write_bytes(bad)
    _, fs, _ = findings(log)
    assert (
        fs[0]["kind"] == "bad_magic"
        and fs[0]["position"] == b1.position + 16 - 16
        or fs[0]["position"] == b1.position + 16
    )
    bad = bytearray(data)
    struct.pack_into(">i", bad, b1.position + 8, -5)
    log.write_bytes(bad)
    _, fs, _ = findings(log)
    assert fs[0]["kind"] == "bad_length" and fs[0]["position"] == b1.position
    assert fs[0]["end"] == b1.end  # resynchronised on the next batch
    bad = bytearray(data)
    struct.pack_into(">i", bad, b1.position + 8, 2**31 - 1)
    log.write_bytes(bad)
    _, fs, _ = findings(log)
    assert fs[0]["position"] == b1.position and fs[0]["end"] == b1.end


def test_empty_files(tmp_path):
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    for suffix in (".log", ".index", ".timeindex"):
        (pdir / f"{0:020d}{suffix}").write_bytes(b"")
    code, fs, _ = findings(pdir)
    assert code == 0 and fs == []


def test_index_problems(partition):
    log = _log(partition)
    idx = log.with_suffix(".index")
    entries = idx.read_bytes()
    assert len(entries) >= 16
    # entry pointing past the log
    bad = bytearray(entries)
    struct.pack_into(">i", bad, len(bad) - 4, log.stat().st_size + 100)
    idx.write_bytes(bad)
    _, fs, _ = findings(partition)
    assert [f["kind"] for f in fs] == ["index_past_log"] and fs[0]["position"] == len(bad) - 8
    # entry not at a batch boundary
    bad = bytearray(entries)
    pos = struct.unpack_from(">i", bad, 4)[0]
    struct.pack_into(">i", bad, 4, pos + 1)
    idx.write_bytes(bad)
    _, fs, _ = findings(partition)
    assert [f["kind"] for f in fs] == ["index_not_batch_boundary"]
    # wrong offset for the position
    bad = bytearray(entries)
    rel = struct.unpack_from(">i", bad, 0)[0]
    struct.pack_into(">i", bad, 0, rel - 1)
    idx.write_bytes(bad)
    _, fs, _ = findings(partition)
    assert [f["kind"] for f in fs] == ["index_offset_mismatch"]
    # garbage after a zero slot, partial entry
    idx.write_bytes(entries + bytes(8) + b"\x01" * 8)
    _, fs, _ = findings(partition)
    assert "index_zero_slot" in [f["kind"] for f in fs]
    idx.write_bytes(entries + b"\x01\x02\x03")
    _, fs, _ = findings(partition)
    assert [f["kind"] for f in fs] == ["index_partial_entry"]
    # preallocated zero tail: fine on the active (last) segment, a warning on older ones
    idx.write_bytes(entries + bytes(800))
    _, fs, _ = findings(partition)
    assert [(f["kind"], f["severity"]) for f in fs] == [("index_not_trimmed", "warning")]
    idx.write_bytes(entries)
    last_idx = _log(partition, 1).with_suffix(".index")
    last_idx.write_bytes(last_idx.read_bytes() + bytes(800))
    code, fs, _ = findings(partition)
    assert fs == [] and code == 0


def test_time_index_problems(partition):
    tidx = _log(partition).with_suffix(".timeindex")
    entries = tidx.read_bytes()
    bad = bytearray(entries)
    ts = struct.unpack_from(">q", bad, 0)[0]
    struct.pack_into(">q", bad, 0, ts + 1)
    tidx.write_bytes(bad)
    _, fs, _ = findings(partition)
    assert [f["kind"] for f in fs] == ["timeindex_timestamp_mismatch"]
    bad = bytearray(entries)
    struct.pack_into(">i", bad, 8, struct.unpack_from(">i", bad, 8)[0] - 1)
    tidx.write_bytes(bad)
    _, fs, _ = findings(partition)
    assert [f["kind"] for f in fs] == ["timeindex_offset_not_found"]
    bad = bytearray(entries)
    struct.pack_into(">q", bad, 12, 5)  # second timestamp not increasing
    tidx.write_bytes(bad)
    _, fs, _ = findings(partition)
    assert fs and fs[0]["kind"].startswith("index_timestamp_not_increasing")


def test_offsets_across_segments(tmp_path):
    pdir = tmp_path / "t-0"
    write_segment(pdir, make_batches(5, start=0))
    write_segment(pdir, make_batches(5, start=40))  # a gap is fine (compaction)
    code, fs, _ = findings(pdir)
    assert code == 0
    write_segment(pdir, make_batches(5, start=70), base_offset=70)
    write_segment(pdir, make_batches(3, start=92), base_offset=95)  # overlaps the previous one
    code, fs, _ = findings(pdir)
    assert code == 1 and {f["kind"] for f in fs} >= {"segment_overlap", "offset_below_segment_base"}


def test_offsets_not_increasing_inside_a_segment(tmp_path):
    pdir = tmp_path / "t-0"
    bs = make_batches(3, start=0) + make_batches(1, start=2)
    write_segment(pdir, bs)
    _, fs, _ = findings(pdir)
    assert [f["kind"] for f in fs if f["kind"] == "offset_not_increasing"]


def test_legacy_inner_message_crc(tmp_path):
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    data = bytearray(R.build_legacy_message_set([b"aaaa", b"bbbb"], magic=1, codec=0, base_offset=0))
    data[-1] ^= 1  # the second message's value: its CRC fails
    (pdir / f"{0:020d}.log").write_bytes(bytes(data))
    _, fs, _ = findings(pdir / f"{0:020d}.log")
    assert [(f["kind"], f["offset"]) for f in fs] == [("crc_mismatch", 1)]


def test_a_compressed_inner_message_is_record_corrupt_and_kept_by_recovery(tmp_path):
    """A wrapper whose inner message is itself compressed: a produce answers INVALID_RECORD
    (Kafka's InvalidRecordException), verify still reports record_corrupt (its records cannot
    be decoded as Kafka reads them), and recovery, which reads no inner message (Kafka's
    LogSegment.recover: the wrapper's CRC), keeps it."""
    from kafkatool.formats import compression
    from kafkatool.log.segment import scan_for_recovery

    deeper = R.encode_legacy_message(1, b"k", b"v", offset=0, timestamp=5)
    inner = R.encode_legacy_message(1, b"k0", b"v0", offset=0, timestamp=5) + R.encode_legacy_message(
        1, None, compression.compress(2, deeper, magic=1), offset=1, timestamp=5, attributes=2
    )
    data = R.encode_legacy_message(1, None, compression.compress(2, inner, magic=1), offset=1, attributes=2)
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(data)
    _, fs, _ = findings(pdir / f"{0:020d}.log")
    assert [(f["kind"], f["position"], f["offset"]) for f in fs] == [("record_corrupt", 0, 1)]
    assert "Inner messages must not be compressed (inner message 1 " in fs[0]["message"]
    assert scan_for_recovery(data, 0, 4096).valid_bytes == len(data)


def test_deep_checks_find_what_the_crc_cannot(tmp_path):
    # a producer bug: count says 3, records area holds 2 (CRC computed over the lie)
    b = bytearray(R.build_record_batch([b"a", b"b"], base_offset=0, last_offset_delta=2))
    struct.pack_into(">i", b, 57, 3)
    import crc32c

    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    (pdir / f"{0:020d}.log").write_bytes(bytes(b))
    _, fs, _ = findings(pdir)
    assert [f["kind"] for f in fs] == ["record_corrupt", "index_missing"]
    code, fs, _ = findings("--quick", pdir / f"{0:020d}.log")
    assert fs == [] and code == 0


def test_snapshot_checkpoint_and_metadata_files(partition):
    snap = partition / f"{0:020d}.snapshot"
    good = S.encode_snapshot([S.ProducerSnapshotEntry(7, 0, 4, 4, 4, 1, -1, -1)])
    snap.write_bytes(good[:5] + bytes([good[5] ^ 1]) + good[6:])
    (partition / "leader-epoch-checkpoint").write_bytes(C.encode_leader_epoch_checkpoint([(0, 0)]))
    (partition / "partition.metadata").write_bytes(b"version: 0\ntopic_id: not-a-uuid")
    logdir = partition.parent
    (logdir / "recovery-point-offset-checkpoint").write_bytes(b"0\n2\ntopic 0 5\n")
    (logdir / "meta.properties").write_bytes(b"version=1\nnode.id=1\n")
    code, fs, _ = findings(logdir)
    kinds = {f["kind"] for f in fs}
    assert kinds == {"snapshot_crc_mismatch", "metadata_invalid", "checkpoint_invalid"}, fs
    assert code == 1


def test_special_dirs_are_noted_not_failed(partition):
    (partition.parent / "topic-1.0123456789abcdef0123456789abcdef-delete").mkdir()
    code, fs, _ = findings(partition.parent)
    assert code == 0 and [(f["kind"], f["severity"]) for f in fs] == [("delete_dir", "info")]


def test_bad_usage_exit_codes(tmp_path):
    res = run(tmp_path / "missing")
    assert res.exit_code == 2
    (tmp_path / "x.txt").write_text("hi")
    res = run(tmp_path / "x.txt")
    assert res.exit_code == 2
    res = run("--fail-on", "bogus", tmp_path)
    assert res.exit_code == 2


def test_subprocess_one_line_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "kafkatool", "verify", str(tmp_path / "nope.log")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "nope.log" in out.stderr and "Traceback" not in out.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_damage_never_crashes(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("fuzz")
    pdir = make_partition(root, segments=1, batches_per_segment=6)
    log = _log(pdir)
    blob = bytearray(log.read_bytes())
    for _ in range(data.draw(st.integers(1, 5))):
        op = data.draw(st.sampled_from(["flip", "cut", "append", "zero"]))
        if op == "flip" and blob:
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "cut":
            blob = blob[: data.draw(st.integers(0, len(blob)))]
        elif op == "append":
            blob += data.draw(st.binary(max_size=200))
        elif op == "zero" and blob:
            i = data.draw(st.integers(0, len(blob) - 1))
            blob[i:] = bytes(len(blob) - i)
    log.write_bytes(bytes(blob))
    results = list(V.verify_path(pdir))
    seg = results[0].segment
    assert 0 <= seg.valid_end <= len(blob)
    for r in results:
        for f in r.findings:
            assert f.position is None or 0 <= f.position <= max(len(blob), r.size)


def test_leader_epochs_against_checkpoint(tmp_path):
    pdir = tmp_path / "t-0"
    b = [
        R.build_record_batch([b"x"], base_offset=o, partition_leader_epoch=e)
        for o, e in ((5, 0), (6, 0), (7, 2))
    ]
    write_segment(pdir, b, base_offset=0)
    # epoch 0's first batches compacted away (log starts it at 5, checkpoint at 0): fine
    (pdir / "leader-epoch-checkpoint").write_bytes(C.encode_leader_epoch_checkpoint([(0, 0), (2, 7)]))
    code, fs, _ = findings(pdir)
    assert fs == [] and code == 0
    # epoch 2 batches before the checkpoint says epoch 2 began
    (pdir / "leader-epoch-checkpoint").write_bytes(C.encode_leader_epoch_checkpoint([(0, 0), (2, 9)]))
    _, fs, _ = findings(pdir)
    assert [(f["kind"], f["offset"]) for f in fs] == [("leader_epoch_mismatch", 7)]
    (pdir / "leader-epoch-checkpoint").write_bytes(C.encode_leader_epoch_checkpoint([(0, 0)]))
    _, fs, _ = findings(pdir)
    assert [(f["kind"], f["offset"]) for f in fs] == [("leader_epoch_missing", 7)]


def test_an_offset_gap_is_a_warning_outside_the_cleaned_range(tmp_path):
    """A batch whose lastOffsetDelta runs past its last record: normal where the log cleaner
    has been (it keeps a cleaned batch's range), a rewritten header anywhere else."""
    from kafkatool.formats import records as R

    pdir = tmp_path / "data" / "t-0"
    pdir.mkdir(parents=True)
    data = R.build_record_batch([b"a", b"b"], base_offset=0) + R.build_record_batch(
        [b"c", b"d"], base_offset=2, offset_deltas=[0, 1], last_offset_delta=1_000
    )
    (pdir / "00000000000000000000.log").write_bytes(data)
    res = runner.invoke(app, ["verify", "--json", str(pdir.parent)])
    gaps = [f for f in map(json.loads, res.stdout.splitlines()) if f.get("kind") == "offset_gap"]
    assert res.exit_code == 1 and len(gaps) == 1, res.output
    assert gaps[0]["severity"] == "warning" and "999 offsets skipped" in gaps[0]["message"]
    (pdir.parent / "cleaner-offset-checkpoint").write_text("0\n1\nt 0 1003\n")
    res = runner.invoke(app, ["verify", "--json", str(pdir.parent)])
    assert not [f for f in map(json.loads, res.stdout.splitlines()) if f.get("kind") == "offset_gap"]


def test_a_control_batch_whose_offsets_run_past_its_record_is_an_error(tmp_path):
    """A transaction marker whose lastOffsetDelta was rewritten (CRC recomputed), as the last
    batch of its log where no later offset contradicts it: Kafka's writers and its cleaner
    never leave a gap in a control batch (the cleaner keeps one whole or empties it, keeping
    its one offset), so verify reports it wherever the cleaner has been (a data batch's gap is
    only a warning, and none inside the cleaned range)."""
    pdir = tmp_path / "data" / "t-0"
    data = R.build_record_batch(
        [b"a", b"b"], base_offset=0, producer_id=7, producer_epoch=0, is_transactional=True
    )
    marker = bytearray(R.build_control_batch(R.COMMIT, base_offset=2, producer_id=7, producer_epoch=0))
    write_segment(pdir, [data, bytes(marker)])
    res = runner.invoke(app, ["verify", "--json", str(pdir.parent)])
    assert res.exit_code == 0, res.output
    struct.pack_into(">i", marker, 23, 1 << 30)  # lastOffsetDelta
    struct.pack_into(">I", marker, 17, crc32c(bytes(marker[21:])))
    write_segment(pdir, [data, bytes(marker)])
    (pdir.parent / "cleaner-offset-checkpoint").write_text(f"0\n1\nt 0 {(1 << 30) + 10}\n")
    res = runner.invoke(app, ["verify", "--json", str(pdir.parent)])
    bad = [f for f in map(json.loads, res.stdout.splitlines()) if f.get("kind") == "bad_offset_range"]
    assert res.exit_code == 1 and len(bad) == 1, res.output
    assert bad[0]["severity"] == "error" and bad[0]["offset"] == 2 + (1 << 30)
    assert bad[0]["position"] == len(data) and "its last record is at 2" in bad[0]["message"]
    # the cleaner's emptied marker keeps its one offset; one spanning more holds no record
    (pdir.parent / "cleaner-offset-checkpoint").unlink()
    for delta, seen in ((0, 0), (7, 1)):
        empty = R.build_record_batch(
            [],
            base_offset=2,
            producer_id=7,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
            offset_deltas=[],
            last_offset_delta=delta,
        )
        write_segment(pdir, [data, empty])
        res = runner.invoke(app, ["verify", "--json", str(pdir.parent)])
        bad = [f for f in map(json.loads, res.stdout.splitlines()) if f.get("kind") == "bad_offset_range"]
        assert (res.exit_code, len(bad)) == (seen, seen), res.output
    assert bad[0]["offset"] == 9 and "it holds no record" in bad[0]["message"]


def test_a_header_key_that_is_not_utf8_is_a_note_with_its_place(tmp_path):
    """Kafka never refuses a header key that is not UTF-8: a Java client reads it as a String
    with U+FFFD (formats/java_utf8).  verify notes it (info: exit 0 under the default
    --fail-on), naming the file, the record's offset and byte position, in the JSON and the
    human view, counted in the summary; one note per batch, with how many keys it holds."""
    ts = 1_700_000_000_000
    plain = R.build_record_batch([R.SimpleRecord(b"v", b"k", [("ok-é", b"1")], ts)], base_offset=0)
    bad_keys = [
        R.SimpleRecord(b"v", b"k1", [("fine", b"1")], ts),
        # an encoded surrogate: one U+FFFD in Java (three in Python's "replace")
        R.SimpleRecord(b"v", b"k2", [("fine", b"1"), (b"trace-\xed\xa0\x80", b"2")], ts),
        R.SimpleRecord(b"v", b"k3", [(b"\xff", None)], ts),
    ]
    bad = R.build_record_batch(bad_keys, base_offset=1)
    zipped = R.build_record_batch([R.SimpleRecord(b"v", b"k", [(b"\xc3", b"")], ts)], base_offset=4, codec=1)
    log = write_segment(tmp_path / "t-0", [plain, bad, zipped])
    code, fs, summary = findings(log)
    assert code == 0 and summary["clean"] and summary["errors"] == summary["warnings"] == 0
    assert summary["infos"] == 2 and summary["kinds"] == {"header_key_not_utf8": 2}
    first, second = fs
    data = log.read_bytes()
    b1 = R.read_batch(data, len(plain))
    rec = list(b1.records())[1]
    assert first["file"] == str(log) and first["severity"] == "info" and first["offset"] == 2
    # an uncompressed record: the key's own bytes in the file (its length varint just before)
    key = b"trace-\xed\xa0\x80"
    at = data.index(key, rec.position)
    assert (first["position"], first["end"]) == (at, at + len(key)) and data[at - 1] == 2 * len(key)
    assert f"header 1 key of the record at offset 2 (at byte {at})" in first["message"]
    assert "74 72 61 63 65 2d ed a0 80" in first["message"] and "'trace-\ufffd'" in first["message"]
    assert "2 header keys of this batch" in first["message"]
    # a compressed batch: the batch's bytes, the record's place in the decompressed stream
    b2 = R.read_batch(data, b1.end)
    assert (second["position"], second["end"], second["offset"]) == (b2.position, b2.end, 4)
    stream = b2.record_data()
    zat = bytes(stream).index(b"\xc3")
    assert f"(at byte {zat} of the decompressed records)" in second["message"]
    assert "'\ufffd'" in second["message"]
    res = run(log)
    assert res.exit_code == 0
    assert "header_key_not_utf8" in res.stdout and f"@ byte {at}" in res.stdout
    assert "2 notes" in res.stdout
    # --quick decodes no record: nothing to note
    code, fs, _ = findings("--quick", log)
    assert code == 0 and fs == []


def _legacy_wrapper(inner: bytes, offset: int) -> bytes:
    from kafkatool.formats import compression

    value = compression.compress(compression.GZIP, inner, magic=1)
    return R.encode_legacy_message(1, None, value, offset=offset, timestamp=5, attributes=compression.GZIP)


def _verify_one(tmp_path, data: bytes):
    pdir = tmp_path / "t-0"
    pdir.mkdir(parents=True)
    (pdir / f"{0:020d}.log").write_bytes(data)
    return findings(pdir / f"{0:020d}.log")


def test_legacy_sets_a_produce_refuses_are_still_reported(tmp_path):
    """What the produce path refuses as Kafka 3.7 does, verify reads and reports: an inner
    message's own CRC (CORRUPT_MESSAGE there), a wrapper offset below its last inner offset and
    a wrapper of no messages (the deep iterator's InvalidRecordException)."""
    m0 = R.encode_legacy_message(1, b"k0", b"v0", offset=0, timestamp=5)
    bad = bytearray(R.encode_legacy_message(1, b"k1", b"v1", offset=1, timestamp=5))
    bad[-1] ^= 1
    _, fs, _ = _verify_one(tmp_path / "crc", _legacy_wrapper(m0 + bytes(bad), 1))
    assert [(f["kind"], f["offset"]) for f in fs] == [("crc_mismatch", 1)]
    m3 = R.encode_legacy_message(1, b"k1", b"v1", offset=3, timestamp=5)
    _, fs, _ = _verify_one(tmp_path / "off", _legacy_wrapper(m0 + m3, 2))
    assert [f["kind"] for f in fs] == ["record_corrupt"]
    assert "wrapper offset '2' is less than the last inner message offset '3'" in fs[0]["message"]
    _, fs, _ = _verify_one(tmp_path / "empty", _legacy_wrapper(b"", 0))
    assert [f["kind"] for f in fs] == ["record_corrupt"] and "no inner records" in fs[0]["message"]


def test_bytes_after_a_wrappers_last_whole_inner_message_are_reported(tmp_path):
    """Kafka's deep iterator ends a wrapper's set where a message is cut short (a produce takes
    it, a consumer never sees the rest); verify says how many bytes are not read."""
    m0 = R.encode_legacy_message(1, b"k0", b"v0", offset=0, timestamp=5)
    cut = R.encode_legacy_message(1, b"k1", b"v1", offset=1, timestamp=5)[:-2]
    code, fs, _ = _verify_one(tmp_path, _legacy_wrapper(m0 + cut, 1))
    assert code == 1
    assert [(f["kind"], f["position"]) for f in fs] == [("record_corrupt", 0)]
    assert fs[0]["message"].startswith(f"{len(cut)} bytes after the last whole inner message")


def _forged(magic: int, fields: bytes, offset: int) -> bytes:
    """A message whose bytes after the header are ``fields``, its CRC valid (the v1 layout at
    any magic but 0, as Kafka's LegacyRecord reads it)."""
    import zlib

    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", 5) if magic else b"") + fields
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_messages_a_produce_cannot_read_are_reported_and_kept_by_recovery(tmp_path):
    """CRC-valid messages Kafka keeps in a log (LogSegment.recover: ensureValid, the size of a v0
    message and the CRC) but whose key or value LegacyRecord cannot read (a produce's
    UNKNOWN_SERVER_ERROR), a v1 message smaller than its header among them; bytes after a
    value (ignored by Kafka); an inner message of magic 2 (a produce's record error): verify
    reads on past each and reports it, recovery keeps them all."""
    from kafkatool.log.segment import scan_for_recovery

    m0 = R.encode_legacy_message(1, b"k0", b"v0", offset=0, timestamp=5)
    after = R.encode_legacy_message(1, b"k9", b"v9", offset=9, timestamp=5)
    cases = [
        ("short", _forged(1, b"", 1), "length field"),
        (
            "key-past",
            _forged(1, struct.pack(">i", 40) + b"k1" + struct.pack(">i", 2) + b"v1", 1),
            "runs past",
        ),
        (
            "value-past",
            _forged(0, struct.pack(">i", 2) + b"k1" + struct.pack(">i", 9) + b"v1", 1),
            "runs past",
        ),
        (
            "tail",
            _forged(1, struct.pack(">i", 2) + b"k1" + struct.pack(">i", 2) + b"v1xyz", 1),
            "3 bytes after",
        ),
        ("magic-2", _legacy_wrapper(m0 + _forged(2, struct.pack(">ii", -1, -1), 1), 1), "has magic 2"),
    ]
    for name, bad, text in cases:
        data = m0 + bad + after
        assert scan_for_recovery(data, 0, 4096).valid_bytes == len(data), name
        code, fs, summary = _verify_one(tmp_path / name, data)
        assert code == 1, name
        assert [(f["kind"], f["position"]) for f in fs] == [("record_corrupt", len(m0))], name
        assert text in fs[0]["message"], (name, fs[0]["message"])
