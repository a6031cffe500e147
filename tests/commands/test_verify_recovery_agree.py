"""verify and start-up recovery give one answer to "where does valid data end in this
segment": verify's valid_end is the recovery scan's valid_bytes (0 where recovery empties the
segment), on seeded damage of every kind, and verify says what lies beyond."""

from __future__ import annotations

import random
import struct

import pytest
from segments import make_partition

from kafkatool.forensics.verify import DEFAULT_INDEX_INTERVAL, verify_segment
from kafkatool.formats import records as R
from kafkatool.log.file_records import FileRecords
from kafkatool.log.segment import scan_for_recovery


def recovery_end(path) -> int:
    base = int(path.name[:20])
    with FileRecords(path) as fr:
        scan = scan_for_recovery(fr.buf, base, DEFAULT_INDEX_INTERVAL)
    return 0 if scan.invalid_offset else scan.valid_bytes


def damage(buf: bytearray, rng: random.Random) -> bytearray:
    kind = rng.randrange(5)
    pos = rng.randrange(len(buf))
    if kind == 0:  # bit flip
        buf[pos] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        del buf[pos:]
    elif kind == 2:  # garbage tail
        buf[pos:] = rng.randbytes(len(buf) - pos)
    elif kind == 3:  # zero tail
        buf[pos:] = bytes(len(buf) - pos)
    else:  # an absurd size field at a batch boundary
        starts = [0]
        while starts[-1] + 12 <= len(buf):
            nxt = starts[-1] + 12 + struct.unpack_from(">i", buf, starts[-1] + 8)[0]
            if nxt >= len(buf):
                break
            starts.append(nxt)
        at = rng.choice(starts)
        struct.pack_into(">i", buf, at + 8, rng.choice([0, 5, 0x7FFFFFFF, -1]))
    return buf


@pytest.mark.parametrize("seed", range(40))
def test_verify_valid_end_is_the_recovery_scans(tmp_path, seed):
    rng = random.Random(seed)
    pdir = make_partition(tmp_path, "t-0", segments=1, batches_per_segment=12, codec_cycle=(0, 1, 3))
    seg = sorted(pdir.glob("*.log"))[0]
    seg.write_bytes(bytes(damage(bytearray(seg.read_bytes()), rng)))
    rep = verify_segment(seg, deep=True)
    end = recovery_end(seg)
    assert rep.valid_end == end, (seed, rep.findings)
    if end < rep.size:
        assert any(f.severity in ("error", "warning") and f.position == end for f in rep.findings)


def test_index_offsets_going_backwards_empty_the_segment_in_both(tmp_path):
    """Kafka's recovery empties a segment whose offsets go backwards at an index entry
    (InvalidOffsetException); verify reports the whole segment, not only the batch."""
    batches = [R.build_record_batch([R.SimpleRecord(value=b"x" * 5000)], base_offset=o) for o in (0, 1, 2)]
    batches.append(R.build_record_batch([R.SimpleRecord(value=b"y" * 5000)], base_offset=1))
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    seg.parent.mkdir()
    seg.write_bytes(b"".join(bytes(b) for b in batches))
    assert recovery_end(seg) == 0
    rep = verify_segment(seg)
    assert rep.valid_end == 0
    assert [f.kind for f in rep.findings if f.severity == "error"][0] == "invalid_offset"
