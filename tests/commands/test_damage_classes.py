"""Issue 18's damage classes: what verify, recover and rebuild-index say of each, and that
they agree (record count against the records present, impossible offset ranges with a
valid CRC, index lengths that are no multiple of the entry size, special files)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import pytest
from segments import make_partition
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import records as R
from kafkatool.formats.crc import crc32c
from kafkatool.formats.errors import CorruptRecordError

runner = CliRunner()

# v2 header field positions (DefaultRecordBatch)
LAST_OFFSET_DELTA = 23
RECORDS_COUNT = 57


def invoke(*args):
    return runner.invoke(app, [*map(str, args)])


def findings(res):
    return [o for o in map(json.loads, res.stdout.splitlines()) if o.get("type") == "finding"]


def second_batch(seg) -> int:
    buf = seg.read_bytes()
    return 12 + struct.unpack_from(">i", buf, 8)[0]


def patch_header(seg, pos: int, field: int, value: int) -> None:
    """Set an int32 header field of the batch at ``pos`` and recompute its CRC, as a
    buggy producer or a careful vandal would."""
    buf = bytearray(seg.read_bytes())
    struct.pack_into(">i", buf, pos + field, value)
    end = pos + 12 + struct.unpack_from(">i", buf, pos + 8)[0]
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
    seg.write_bytes(buf)


@pytest.fixture
def part(tmp_path):
    pdir = make_partition(tmp_path, "t-0", segments=2, batches_per_segment=10, codec_cycle=(0,))
    return pdir, sorted(pdir.glob("*.log"))


def test_record_count_zero_with_records_present_is_an_error(part):
    pdir, segs = part
    pos = second_batch(segs[0])
    patch_header(segs[0], pos, RECORDS_COUNT, 0)
    res = invoke("verify", "--json", pdir)
    assert res.exit_code == 1
    (f,) = [f for f in findings(res) if f["kind"] == "bad_count"]
    assert f["position"] == pos
    assert "declares 0 records" in f["message"] and "5 more whole records" in f["message"]


def test_record_count_above_offset_range_is_damage_everywhere(part, tmp_path):
    pdir, segs = part
    pos = second_batch(segs[0])
    patch_header(segs[0], pos, RECORDS_COUNT, 50)  # lastOffsetDelta 4 leaves room for 5
    res = invoke("verify", "--json", pdir)
    assert res.exit_code == 1
    assert any(f["kind"] == "bad_count" and f["position"] == pos for f in findings(res))


def test_last_offset_delta_minus_one_is_a_finding_and_recover_cuts_it(part, tmp_path):
    pdir, segs = part
    pos = second_batch(segs[0])
    patch_header(segs[0], pos, LAST_OFFSET_DELTA, -1)
    res = invoke("verify", "--json", pdir)
    assert res.exit_code == 1
    (f,) = [f for f in findings(res) if f["kind"] == "bad_offset_range"]
    assert f["position"] == pos
    # the same batch at the start of a segment used to end in an "integer overflow" exit 2
    first = make_partition(tmp_path / "first", "t-0", segments=1, batches_per_segment=5, codec_cycle=(0,))
    patch_header(sorted(first.glob("*.log"))[0], 0, LAST_OFFSET_DELTA, -1)
    for d in (pdir, first):
        dry = invoke("rebuild-index", "--dry-run", d)
        assert dry.exit_code == 1, dry.output
        cut = invoke("recover", "--all", "--json", d)
        assert cut.exit_code == 0, cut.output  # the repair succeeded: the contract's 0
        assert "overflow" not in cut.output
        assert invoke("verify", d).exit_code == 0


def test_produce_validation_rejects_the_same_batches():
    """One rule: the batch the recovery scan cuts is the batch the broker refuses."""
    raw = bytearray(R.build_record_batch([R.SimpleRecord(b"v", b"k", [], 1)] * 3, base_offset=0))
    struct.pack_into(">i", raw, LAST_OFFSET_DELTA, -1)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    batch = R.read_batch(bytes(raw))
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError) as exc:
        batch.ensure_valid()
    assert exc.value.position == LAST_OFFSET_DELTA


@pytest.mark.parametrize(("suffix", "size"), [(".index", 1), (".timeindex", 2), (".index", 13)])
def test_index_length_not_a_multiple_agrees_everywhere(part, suffix, size):
    pdir, segs = part
    os.truncate(segs[0].with_suffix(suffix), size)
    before = segs[0].with_suffix(suffix).read_bytes()
    res = invoke("verify", "--json", pdir)
    assert res.exit_code == 1
    (f,) = [f for f in findings(res) if f["kind"] == "index_partial_entry"]
    assert f["severity"] == "warning" and f["file"].endswith(suffix)
    assert invoke("recover", "--dry-run", pdir).exit_code == 1
    assert invoke("rebuild-index", "--dry-run", pdir).exit_code == 1
    assert segs[0].with_suffix(suffix).read_bytes() == before  # dry runs change nothing
    invoke("rebuild-index", pdir)
    assert invoke("verify", pdir).exit_code == 0


def test_a_fifo_named_like_a_segment_is_refused_not_read(part):
    pdir, _ = part
    fifo = pdir / "00000000000000099999.log"
    os.mkfifo(fifo)
    for cmd in (["verify"], ["dump-log"], ["dump-log", "--print-data-log"]):
        # a subprocess with a timeout: the old behaviour blocked forever on open()
        proc = subprocess.run(
            [sys.executable, "-m", "kafkatool", *cmd, str(fifo)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2, proc
        assert proc.stderr.strip().splitlines() == [
            f"kafkatool: error: {fifo}: a FIFO, not a regular file: refused"
        ]
    res = invoke("verify", "--json", pdir)
    assert res.exit_code == 1
    (f,) = [f for f in findings(res) if f["kind"] == "not_regular_file"]
    assert f["file"] == str(fifo)


def test_a_symlink_loop_is_reported(part):
    pdir, _ = part
    loop = pdir / "00000000000000099999.snapshot"
    os.symlink(loop.name, loop)
    res = invoke("verify", "--json", pdir)
    assert res.exit_code == 1
    (f,) = [f for f in findings(res) if f["kind"] == "not_regular_file"]
    assert "loop" in f["message"]
    shutil.rmtree(pdir)


# ---------------------------------------------------------------- issue 12: exact reports


def _log_dir(tmp_path, **kw):
    pdir = make_partition(tmp_path / "ld", "t-0", segments=2, batches_per_segment=10, codec_cycle=(0,), **kw)
    return pdir.parent, pdir, sorted(pdir.glob("*.log"))


def test_a_length_field_mid_file_is_bad_length_not_a_garbage_tail(tmp_path):
    _, pdir, segs = _log_dir(tmp_path)
    buf = bytearray(segs[0].read_bytes())
    p2 = second_batch(segs[0])
    p3 = p2 + 12 + struct.unpack_from(">i", buf, p2 + 8)[0]
    struct.pack_into(">i", buf, p3 + 8, 0x7FFFFFFF)
    segs[0].write_bytes(buf)
    res = invoke("verify", "--json", pdir)
    (f,) = [f for f in findings(res) if f["file"] == str(segs[0])]
    assert f["kind"] == "bad_length" and f["position"] == p3
    assert "end of the file are not" not in f["message"] and "resumes at byte" in f["message"]


def test_checkpoints_past_the_log_end_are_flagged_and_recover_lowers_them(tmp_path):
    log_dir, pdir, segs = _log_dir(tmp_path)
    (log_dir / "replication-offset-checkpoint").write_text("0\n1\nt 0 150\n")
    res = invoke("verify", "--json", log_dir)
    assert res.exit_code == 1
    (f,) = [f for f in findings(res) if f["kind"] == "checkpoint_past_log_end"]
    assert f["offset"] == 150 and "log end offset 100" in f["message"]
    # recover --all cutting the log lowers the high watermark with the recovery point
    (log_dir / "replication-offset-checkpoint").write_text("0\n1\nt 0 100\n")
    pos = second_batch(segs[0])
    patch_header(segs[0], pos, LAST_OFFSET_DELTA, -1)
    assert invoke("recover", "--all", log_dir).exit_code == 0
    assert (log_dir / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 5\n"
    assert invoke("verify", log_dir).exit_code == 0


def test_a_deleted_index_is_recreated_below_the_recovery_point(tmp_path):
    log_dir, pdir, segs = _log_dir(tmp_path)
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 100\n")
    segs[1].with_suffix(".index").unlink()
    assert invoke("verify", pdir).exit_code == 1  # index_missing
    assert invoke("recover", "--dry-run", pdir).exit_code == 1
    assert invoke("rebuild-index", "--dry-run", pdir).exit_code == 1
    assert invoke("recover", pdir).exit_code == 0
    assert segs[1].with_suffix(".index").exists()
    assert invoke("verify", pdir).exit_code == 0


def test_dump_with_key_keeps_the_batch_header_lines(tmp_path):
    _, pdir, segs = _log_dir(tmp_path)
    res = invoke("dump-log", "--key", "k13", segs[0])
    out = res.stdout.splitlines()
    i = next(n for n, x in enumerate(out) if x.startswith("| offset: 13 "))
    assert out[i - 1].startswith("baseOffset: 10 lastOffset: 14 ") and " position: " in out[i - 1]
    assert " crc: " in out[i - 1]
    assert sum(1 for x in out if x.startswith("baseOffset:")) == 1


def test_a_decode_error_in_a_compressed_batch_names_base_offset_and_no_file_position_past_the_end(tmp_path):
    pdir = make_partition(tmp_path / "z", "t-0", segments=1, batches_per_segment=4, codec_cycle=(1,))
    seg = sorted(pdir.glob("*.log"))[0]
    buf = bytearray(seg.read_bytes())
    p2 = second_batch(seg)
    end = p2 + 12 + struct.unpack_from(">i", buf, p2 + 8)[0]
    buf[end - 10] ^= 0xFF  # the gzip trailer of the second batch
    seg.write_bytes(buf)
    res = invoke("dump-log", "--deep-iteration", "--print-data-log", "--json", seg)
    problems = [json.loads(x) for x in res.stdout.splitlines() if '"problem"' in x]
    assert problems, res.stdout[-2000:]
    for p in problems:
        assert p["position"] is None or p["position"] < len(buf)
        assert "last offset" not in p["message"]


def test_verify_and_recover_agree_on_every_segment_after_the_damage(tmp_path):
    pdir = make_partition(tmp_path / "many", "t-0", segments=6, batches_per_segment=5, codec_cycle=(0,))
    segs = sorted(pdir.glob("*.log"))
    pos = second_batch(segs[0])
    buf = bytearray(segs[0].read_bytes())
    buf[pos + 100] ^= 0xFF
    segs[0].write_bytes(buf)
    res = invoke("verify", "--json", pdir)
    flagged = {f["file"] for f in findings(res) if f["kind"] == "after_damaged_segment"}
    assert flagged == {str(s) for s in segs[1:]}
    plan = invoke("recover", "--dry-run", "--all", "--json", pdir)
    dropped = {json.loads(x)["segment"] for x in plan.stdout.splitlines() if '"type": "drop_segment"' in x}
    assert dropped == flagged
