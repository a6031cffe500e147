"""Every record batch captured from a real client decodes to exactly the messages it carries."""

import json

import pytest
from conftest import CLIENT_BATCHES

from kafkatool.formats import records as R

CAPTURES = sorted(p.stem for p in CLIENT_BATCHES.glob("*.bin")) if CLIENT_BATCHES.is_dir() else []


def _h(x):
    return None if x is None else bytes.fromhex(x)


@pytest.mark.parametrize("name", CAPTURES)
def test_capture_decodes_exactly(name, client_batches_dir):
    meta = json.loads((client_batches_dir / f"{name}.json").read_text())
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    batches = list(R.iter_batches(data))
    assert len(batches) == meta["batches"]
    assert batches[-1].end == len(data)
    got = []
    for batch in batches:
        assert batch.magic == meta["magic"]
        batch.ensure_valid()
        assert batch.is_valid()
        for rec in batch.records():
            got.append((batch, rec))
    want = meta["messages"]
    assert len(got) == len(want)
    for (_batch, rec), msg in zip(got, want, strict=True):
        assert rec.key == _h(msg["key"]), msg["index"]
        assert rec.value == _h(msg["value"]), msg["index"]
        if meta["magic"] == 2:
            want_headers = [(k, _h(v)) for k, v in (msg["headers"] or [])]
            assert rec.headers == want_headers
        else:
            assert rec.headers == []
            assert rec.is_valid
        if msg["timestamp"] is not None:
            assert rec.timestamp == msg["timestamp"]
        if meta["magic"] == 0:
            assert rec.timestamp == -1
    codecs = {b.codec_name for b, _ in got}
    want_codecs = meta["codec"] if isinstance(meta["codec"], list) else [meta["codec"]]
    assert set(want_codecs) <= codecs | {"none"}


@pytest.mark.parametrize("name", [c for c in CAPTURES if "-v2" in c])
def test_v2_header_fields_match_capture(name, client_batches_dir):
    meta = json.loads((client_batches_dir / f"{name}.json").read_text())
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    for batch in R.iter_batches(data):
        assert batch.base_offset == 0
        assert not batch.is_transactional and not batch.is_control
        assert batch.timestamp_type == R.CREATE_TIME
        assert batch.count == batch.last_offset_delta + 1
        recs = list(batch.records())
        assert [r.offset for r in recs] == list(range(len(recs)))
        assert batch.max_timestamp == max(r.timestamp for r in recs)
        if "idem" in name:
            assert batch.producer_id >= 1000 and batch.producer_epoch == 0 and batch.base_sequence == 0
            assert batch.last_sequence == batch.last_offset_delta
            assert [r.sequence for r in recs] == list(range(len(recs)))
        else:
            assert batch.producer_id == -1
    assert meta["magic"] == 2


@pytest.mark.parametrize("name", [c for c in CAPTURES if "-v1-" in c or "-v0-" in c])
def test_legacy_wrapper_offsets(name, client_batches_dir):
    data = (client_batches_dir / f"{name}.bin").read_bytes()
    offsets = [r.offset for b in R.iter_batches(data) for r in b.records()]
    assert offsets == list(range(50))


@pytest.mark.parametrize("name", CAPTURES[:6])
def test_bit_flip_is_detected(name, client_batches_dir):
    data = bytearray((client_batches_dir / f"{name}.bin").read_bytes())
    first = next(R.iter_batches(bytes(data)))
    flip_at = first.position + first.size - 3
    data[flip_at] ^= 0x10
    batch = next(R.iter_batches(bytes(data)))
    assert not batch.is_valid()
    with pytest.raises(R.CorruptRecordError) as exc:
        batch.ensure_valid()
    assert exc.value.kind == "crc_mismatch"
    assert exc.value.position == 0
