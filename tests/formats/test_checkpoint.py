"""Text checkpoint files and .kafka_cleanshutdown (storage.md §3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats.checkpoint import (
    CheckpointError,
    CleanShutdown,
    decode_clean_shutdown,
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    decode_offset_checkpoint_entries,
    encode_clean_shutdown,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
    java_split_whitespace,
)
from kafkatool.formats.errors import FormatError


def test_offset_checkpoint_exact_bytes():
    offsets = {("my.topic_x-1", 0): 42, ("__consumer_offsets", 17): 9_000_000_000}
    assert encode_offset_checkpoint(offsets) == (
        b"0\n2\nmy.topic_x-1 0 42\n__consumer_offsets 17 9000000000\n"
    )
    assert encode_offset_checkpoint([("t", 3, 7)]) == b"0\n1\nt 3 7\n"
    assert encode_offset_checkpoint({}) == b"0\n0\n"


def test_leader_epoch_checkpoint_exact_bytes():
    assert encode_leader_epoch_checkpoint([(0, 0), (3, 120), (7, 5_000_000_000)]) == (
        b"0\n3\n0 0\n3 120\n7 5000000000\n"
    )
    assert encode_leader_epoch_checkpoint([]) == b"0\n0\n"


def test_decode_offset_checkpoint():
    data = b"0\n3\nmy.topic_x-1 0 42\nother 1 0\n__consumer_offsets 49 -1\n"
    assert decode_offset_checkpoint(data) == {
        ("my.topic_x-1", 0): 42,
        ("other", 1): 0,
        ("__consumer_offsets", 49): -1,
    }


def test_decode_leader_epoch_checkpoint():
    assert decode_leader_epoch_checkpoint(b"0\n2\n0 0\n5 1200\n") == [(0, 0), (5, 1200)]


def test_empty_and_version_only_files_read_as_empty():
    assert decode_offset_checkpoint(b"") == {}
    assert decode_offset_checkpoint(b"0\n") == {}
    assert decode_leader_epoch_checkpoint(b"0") == []


def test_reader_is_lenient_where_java_is():
    # any whitespace between fields, trailing whitespace, CR/CRLF line ends, no final newline,
    # a '+' sign (Integer.parseInt accepts it)
    data = b"0\r\n2\r\ntopic\t 0   5 \rt2 +1 +6"
    assert decode_offset_checkpoint(data) == {("topic", 0): 5, ("t2", 1): 6}


def _error(data: bytes, decoder=decode_offset_checkpoint) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        decoder(data)
    assert isinstance(info.value, FormatError)
    return info.value


def test_bad_version():
    err = _error(b"1\n0\n")
    assert err.kind == "bad_version" and err.line == 1 and err.position == 0
    err = _error(b"x\n0\n")
    assert err.line == 1 and err.kind == "malformed_checkpoint"
    err = _error(b" 0\n0\n")  # Integer.parseInt does not trim
    assert err.line == 1


def test_bad_count_line():
    err = _error(b"0\ntwo\nt 0 1\n")
    assert err.line == 2 and err.position == 2
    err = _error(b"0\n-1\n")
    assert err.line == 2 and err.kind == "count_mismatch"


@pytest.mark.parametrize(
    "line",
    [
        b"t 0",  # too few fields
        b"t 0 1 2",  # too many
        b" t 0 1",  # leading whitespace: Java's split yields an empty first field
        b"t x 1",  # partition not a number
        b"t 0 1.5",
        b"t 2147483648 1",  # partition beyond int32
        b"t 0 9223372036854775808",  # offset beyond int64
        b"",  # blank line
    ],
)
def test_malformed_entry_names_the_line(line):
    data = b"0\n2\ngood 0 1\n" + line + b"\nlast 1 1\n"
    err = _error(data)
    assert err.line == 4 and err.position == len(b"0\n2\ngood 0 1\n")
    assert "line 4" in str(err)


def test_malformed_leader_epoch_lines():
    assert _error(b"0\n1\n1 2 3\n", decode_leader_epoch_checkpoint).line == 3
    assert _error(b"0\n1\n2147483648 0\n", decode_leader_epoch_checkpoint).line == 3


def test_count_mismatch():
    err = _error(b"0\n3\nt 0 1\nt 1 1\n")
    assert err.kind == "count_mismatch" and "[3]" in str(err) and "[2]" in str(err)
    err = _error(b"0\n1\nt 0 1\nt 1 1\n")
    assert err.kind == "count_mismatch"


def test_invalid_utf8_is_a_format_error():
    err = _error(b"0\n1\nt\xff 0 1\n")
    assert err.line == 3 and err.position == len(b"0\n1\nt")


def test_duplicates_last_wins_but_count_counts_lines():
    data = b"0\n2\nt 0 1\nt 0 9\n"
    assert decode_offset_checkpoint(data) == {("t", 0): 9}
    assert decode_offset_checkpoint_entries(data) == [("t", 0, 1), ("t", 0, 9)]


def test_encoder_refuses_unreadable_values():
    with pytest.raises(ValueError):
        encode_offset_checkpoint({("has space", 0): 1})
    with pytest.raises(ValueError):
        encode_offset_checkpoint({("", 0): 1})
    with pytest.raises(ValueError):
        encode_offset_checkpoint({("t", 2**31): 1})
    with pytest.raises(ValueError):
        encode_leader_epoch_checkpoint([(0, 2**63)])


def test_java_split_whitespace():
    assert java_split_whitespace("a b") == ["a", "b"]
    assert java_split_whitespace(" a b ") == ["", "a", "b"]
    assert java_split_whitespace("") == [""]
    assert java_split_whitespace("   ") == []
    assert java_split_whitespace("a\x0bb") == ["a", "b"]
    assert java_split_whitespace("a\u00a0b") == ["a\u00a0b"]  # Java's \s is ASCII only


topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", min_size=1, max_size=40
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=30
    )
)
def test_offset_checkpoint_round_trip(offsets):
    assert decode_offset_checkpoint(encode_offset_checkpoint(offsets)) == offsets


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=30))
def test_leader_epoch_round_trip(entries):
    assert decode_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries)) == entries


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=120), st.text(alphabet="0123 \t\n\r-+ab.", max_size=60).map(str.encode)))
def test_random_input_only_raises_format_error(data):
    for decoder in (decode_offset_checkpoint, decode_leader_epoch_checkpoint, decode_clean_shutdown):
        try:
            decoder(data)
        except CheckpointError as exc:
            assert exc.line is not None and exc.position is not None
        except FormatError:
            pass


# ---------------------------------------------------------------------------
# .kafka_cleanshutdown


def test_clean_shutdown_exact_bytes():
    assert encode_clean_shutdown(42) == b'{"version":0,"brokerEpoch":42}'
    assert decode_clean_shutdown(b'{"version":0,"brokerEpoch":42}') == CleanShutdown(0, 42)


def test_clean_shutdown_variants():
    assert decode_clean_shutdown(b"") == CleanShutdown(None, None)  # pre-KIP-966 empty marker
    assert decode_clean_shutdown(b'{"version":0}') == CleanShutdown(0, None)
    assert decode_clean_shutdown(b'{"brokerEpoch":7,"extra":true}') == CleanShutdown(0, 7)
    for bad in (b"{", b"[1]", b'{"brokerEpoch":"x"}', b'{"brokerEpoch":1.5}', b"\xff"):
        with pytest.raises(FormatError):
            decode_clean_shutdown(bad)
