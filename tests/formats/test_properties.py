"""meta.properties (java.util.Properties), partition.metadata and Kafka's Uuid."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats.errors import FormatError
from kafkatool.formats.properties import (
    MetaProperties,
    MetaPropertiesError,
    PartitionMetadata,
    PartitionMetadataError,
    PropertiesError,
    decode_meta_properties,
    decode_partition_metadata,
    decode_properties,
    encode_meta_properties,
    encode_partition_metadata,
    encode_properties,
    format_properties_text,
    java_date_string,
    meta_properties_from_dict,
    parse_csv_map,
    parse_properties_text,
)
from kafkatool.formats.uuid import (
    METADATA_TOPIC_ID,
    ONE_UUID,
    ZERO_UUID,
    Uuid,
    UuidError,
    random_uuid,
    uuid_bytes_from_string,
    uuid_bytes_to_string,
)

DATE = "Sun Nov 22 03:01:18 UTC 2026"
DIR_ID = Uuid(bytes(range(16)))  # "AAECAwQFBgcICQoLDA0ODw"

# ---------------------------------------------------------------------------
# Uuid


def test_uuid_strings():
    assert str(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert str(ONE_UUID) == "AAAAAAAAAAAAAAAAAAAAAQ" and METADATA_TOPIC_ID == ONE_UUID
    assert str(DIR_ID) == "AAECAwQFBgcICQoLDA0ODw"
    # URL-safe alphabet: 0xFB 0xFF 0xBF encodes as "-_-_"
    assert uuid_bytes_to_string(b"\xfb\xff\xbf" * 5 + b"\xfb") == "-_-_" * 5 + "-w"
    assert Uuid.from_string("AAECAwQFBgcICQoLDA0ODw") == DIR_ID
    assert Uuid.from_string("AAECAwQFBgcICQoLDA0ODw==") == DIR_ID  # Java accepts padding


def test_uuid_bits_and_order():
    u = Uuid.from_bits(-1, 1)
    assert u.raw == b"\xff" * 8 + bytes(7) + b"\x01"
    assert u.most_significant_bits == -1 and u.least_significant_bits == 1
    assert Uuid.from_bits(0, 1) == ONE_UUID
    assert Uuid.from_bits(-1, 0) > Uuid.from_bits(1, 0)  # compareUnsigned
    assert ZERO_UUID.is_reserved and ONE_UUID.is_reserved and not DIR_ID.is_reserved


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AAAA",
        "AAECAwQFBgcICQoLDA0OD",  # 21 chars: dangling character
        "AAECAwQFBgcICQoLDA0ODwAA",  # 18 bytes
        "AAECAwQFBgcICQoLDA0ODw=",  # wrong padding
        "AAECAwQFBgcICQoLDA0OD+",  # '+' is not URL-safe base64
        "AAECAwQFBgcICQoLDA0OD/",
        "AAECAwQFBgcICQoLDA0ODw==AA",  # too long
        "AAECAwQF BgcICQoLDA0ODw",
    ],
)
def test_uuid_rejects(text):
    with pytest.raises(UuidError) as info:
        Uuid.from_string(text)
    assert isinstance(info.value, FormatError) and info.value.kind == "bad_uuid"


def test_random_uuid_rules():
    u = random_uuid(bytes(range(16)))
    assert u.raw[6] >> 4 == 4 and u.raw[8] >> 6 == 2  # version 4, IETF variant
    assert u.raw[:6] == bytes(range(6))
    # first byte 0xF8..0xFB would print with a leading '-'
    with pytest.raises(ValueError):
        random_uuid(b"\xf8" + bytes(15))
    draws = iter([b"\xfa" + bytes(15), b"\x01" * 16])
    u = random_uuid(lambda n: next(draws))
    assert u.raw[0] == 1 and not str(u).startswith("-")
    with pytest.raises(ValueError):
        random_uuid(b"short")


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(raw):
    text = uuid_bytes_to_string(raw)
    assert len(text) == 22
    assert uuid_bytes_from_string(text) == raw
    u = Uuid(raw)
    assert Uuid.from_bits(u.most_significant_bits, u.least_significant_bits) == u
    try:
        r = random_uuid(raw)
    except ValueError:
        assert str(random_uuid(lambda n, it=iter([raw, b"\x00" * 16]): next(it))) != str(ZERO_UUID)
    else:
        assert not r.is_reserved and not str(r).startswith("-")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_uuid_random_text_only_raises_uuid_error(text):
    try:
        Uuid.from_string(text)
    except UuidError:
        pass


# ---------------------------------------------------------------------------
# java.util.Properties


def test_java_date_string():
    assert java_date_string(datetime(2026, 11, 22, 3, 1, 18, tzinfo=UTC)) == DATE
    cet = timezone(timedelta(hours=1), "CET")
    assert java_date_string(datetime(2024, 2, 5, 9, 7, 3, tzinfo=cet)) == "Mon Feb 05 09:07:03 CET 2024"
    with pytest.raises(ValueError):
        java_date_string(datetime(2024, 1, 1))


def test_store_escapes_exact():
    props = {"a:b": "x=y", "key with space": " lead", "c": "#!\\\t\n\r\f", "u": "\u00e9\u20ac"}
    text = format_properties_text(props, DATE)
    assert text == (
        "#\n"
        "#Sun Nov 22 03:01:18 UTC 2026\n"
        "a\\:b=x\\=y\n"
        "c=\\#\\!\\\\\\t\\n\\r\\f\n"
        "key\\ with\\ space=\\ lead\n"
        "u=\u00e9\u20ac\n"
    )
    # Kafka writes through a UTF-8 Writer: non-ASCII raw
    assert encode_properties({"u": "\u00e9"}, DATE) == b"#\n#" + DATE.encode() + b"\nu=\xc3\xa9\n"
    # store(OutputStream) escapes, with upper-case hex, surrogate pairs for astral chars
    assert encode_properties({"u": "\u00e9\U0001f600\x01"}, DATE, escape_unicode=True) == (
        b"#\n#" + DATE.encode() + b"\nu=\\u00E9\\uD83D\\uDE00\\u0001\n"
    )
    # inner spaces of a value are not escaped, a leading one is
    assert format_properties_text({"k": " a b"}, DATE, None) == f"#{DATE}\nk=\\ a b\n"


def test_store_comment_lines():
    assert format_properties_text({}, DATE, "one\ntwo\r\n#three") == f"#one\n#two\n#three\n#{DATE}\n"
    assert format_properties_text({}, DATE, "\u0100") == f"#\\u0100\n#{DATE}\n"


def test_load_syntax():
    text = (
        "# comment\n"
        "   ! another comment\n"
        "\n"
        "plain=value\n"
        "colon:value2\n"
        "spaced   =   padded value  \n"
        "ws_sep value3\n"
        "esc\\:key\\=x=v\\:1\\=2\n"
        "space\\ key = \\ leading\n"
        "uni=caf\\u00e9 \\uD83D\\uDE00\n"
        "tabs=a\\tb\\nc\n"
        "multi=first \\\n"
        "       second \\\n"
        "  third\n"
        "odd=ends with backslash\\\\\n"
        "empty=\n"
        "novalue\n"
        "other=\\q\\#\n"
        "plain=override"
    )
    assert parse_properties_text(text) == {
        "plain": "override",
        "colon": "value2",
        "spaced": "padded value  ",
        "ws_sep": "value3",
        "esc:key=x": "v:1=2",
        "space key": " leading",
        "uni": "caf\u00e9 \U0001f600",
        "tabs": "a\tb\nc",
        "multi": "first second third",
        "odd": "ends with backslash\\",
        "empty": "",
        "novalue": "",
        "other": "q#",
    }


def test_load_line_endings_and_eof_backslash():
    assert parse_properties_text("a=1\r\nb=2\rc=3\\") == {"a": "1", "b": "2", "c": "3"}
    assert parse_properties_text("a=1\\\r\n  2") == {"a": "12"}
    # a comment line does not continue, even ending in a backslash
    assert parse_properties_text("#x\\\nb=2") == {"b": "2"}
    # a continuation line starting with '#' is not a comment
    assert parse_properties_text("a=1\\\n#2") == {"a": "1#2"}


def test_load_reads_latin1_bytes():
    assert decode_properties(b"k=caf\xe9") == {"k": "caf\u00e9"}
    # Kafka's own mismatch: a UTF-8 written value comes back as Latin-1 mojibake
    assert decode_properties(encode_properties({"k": "\u00e9"}, DATE)) == {"k": "\u00c3\u00a9"}


@pytest.mark.parametrize("bad", ["a=\\u12", "a=\\u12G4", "ok=1\nb\\uZZZZ=2"])
def test_load_malformed_unicode_escape(bad):
    with pytest.raises(PropertiesError) as info:
        parse_properties_text(bad)
    assert info.value.kind == "malformed_properties"
    assert info.value.line == (2 if bad.startswith("ok") else 1)
    assert info.value.position == (5 if bad.startswith("ok") else 0)


ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(ascii_text, ascii_text, max_size=8))
def test_properties_round_trip_ascii_bytes(props):
    assert decode_properties(encode_properties(props, DATE)) == props


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=15), st.text(max_size=15), max_size=8))
def test_properties_round_trip_unicode(props):
    props = {k: v for k, v in props.items() if not _has_surrogate(k + v)}
    assert parse_properties_text(format_properties_text(props, DATE)) == props
    assert decode_properties(encode_properties(props, DATE, escape_unicode=True)) == props


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes_only_raise_format_error(data):
    for decoder in (decode_properties, decode_meta_properties, decode_partition_metadata):
        try:
            decoder(data)
        except FormatError:
            pass


# ---------------------------------------------------------------------------
# meta.properties


def test_meta_properties_v1_exact_bytes():
    meta = MetaProperties(1, node_id=3, cluster_id="J8qXRwI-Qyi2G0guFTiuYw", directory_id=DIR_ID)
    data = encode_meta_properties(meta, DATE)
    assert data == (
        b"#\n"
        b"#Sun Nov 22 03:01:18 UTC 2026\n"
        b"cluster.id=J8qXRwI-Qyi2G0guFTiuYw\n"
        b"directory.id=AAECAwQFBgcICQoLDA0ODw\n"
        b"node.id=3\n"
        b"version=1\n"
    )
    assert decode_meta_properties(data) == meta


def test_meta_properties_v0_exact_bytes():
    meta = MetaProperties(0, node_id=5)
    data = encode_meta_properties(meta, datetime(2026, 11, 22, 3, 1, 18, tzinfo=UTC))
    assert data == b"#\n#Sun Nov 22 03:01:18 UTC 2026\nbroker.id=5\nversion=0\n"
    assert decode_meta_properties(data) == meta


def test_meta_properties_as_kafka_wrote_them_in_hash_order():
    data = (
        b"#\n#Tue Oct 15 10:00:00 UTC 2024\nnode.id=1\n"
        b"directory.id=AAECAwQFBgcICQoLDA0ODw\nversion=1\ncluster.id=abc\n"
    )
    assert decode_meta_properties(data) == MetaProperties(1, 1, "abc", DIR_ID)


def test_meta_properties_v0_variants():
    assert meta_properties_from_dict({}) == MetaProperties(0)
    assert meta_properties_from_dict({"version": "0", "cluster.id": "c"}) == MetaProperties(0, None, "c")
    # node.id means nothing in v0
    assert meta_properties_from_dict({"version": "0", "node.id": "x"}) == MetaProperties(0)
    # version is trimmed, ids are not
    assert meta_properties_from_dict({"version": " 1\t", "node.id": "2", "cluster.id": "c"}).version == 1


@pytest.mark.parametrize(
    "props",
    [
        {"version": "1", "cluster.id": "c"},  # node.id missing
        {"version": "1", "node.id": "2"},  # cluster.id missing
        {"version": "1", "node.id": "two", "cluster.id": "c"},
        {"version": "1", "node.id": "2 ", "cluster.id": "c"},  # Integer.parseInt does not trim
        {"version": "1", "node.id": "2147483648", "cluster.id": "c"},
        {"version": "0", "broker.id": ""},
        {"version": "2", "node.id": "1", "cluster.id": "c"},
        {"version": "one"},
        {"version": "0", "directory.id": "not-a-uuid"},
    ],
)
def test_meta_properties_invalid(props):
    with pytest.raises(MetaPropertiesError) as info:
        meta_properties_from_dict(props)
    assert info.value.kind == "invalid_meta_properties"


def test_meta_properties_constructor_checks():
    with pytest.raises(ValueError):
        MetaProperties(1, node_id=None, cluster_id="c")
    with pytest.raises(ValueError):
        MetaProperties(3)


# ---------------------------------------------------------------------------
# partition.metadata

TOPIC_ID = Uuid.from_string("J8qXRwI-Qyi2G0guFTiuYw")


def test_partition_metadata_exact_bytes():
    assert encode_partition_metadata(TOPIC_ID) == b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw"
    assert decode_partition_metadata(b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw") == PartitionMetadata(
        0, TOPIC_ID
    )


@pytest.mark.parametrize(
    "data",
    [
        b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw\n",  # trailing newline
        b"version: 0\r\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw\r\n",
        b"version:\t 0\ntopic_id:   J8qXRwI-Qyi2G0guFTiuYw",
        b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw\nanything after is ignored",
        b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw==",
    ],
)
def test_partition_metadata_reader_tolerates(data):
    assert decode_partition_metadata(data).topic_id == TOPIC_ID


def test_partition_metadata_newer_version_accepted():
    assert decode_partition_metadata(b"version: 1\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw").version == 1


@pytest.mark.parametrize(
    ("data", "position"),
    [
        (b"", 0),
        (b"version: 0", 10),  # no topic_id line
        (b"version: 0\n", 11),
        (b"version:0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw", 0),  # ":\s+" needs whitespace
        (b"version: -1\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw", 0),
        (b"version: x\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw", 0),
        (b"version: 0 \ntopic_id: J8qXRwI-Qyi2G0guFTiuYw", 0),
        (b"Version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw", 0),
        (b"version: 0\ntopic: J8qXRwI-Qyi2G0guFTiuYw", 11),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 11),  # the zero id
        (b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw ", 11),
        (b"version: 0\ntopic_id: J8qXRwI+Qyi2G0guFTiuYw", 11),
        (b"version: 0\ntopic_id: J8qXRwI-Qyi2G0guFTiuYw\n\xff", 44),
    ],
)
def test_partition_metadata_rejects(data, position):
    with pytest.raises(PartitionMetadataError) as info:
        decode_partition_metadata(data)
    assert info.value.position == position
    assert info.value.kind == "malformed_partition_metadata"


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=16, max_size=16))
def test_partition_metadata_round_trip(raw):
    topic_id = Uuid(raw)
    data = encode_partition_metadata(topic_id)
    assert not data.endswith(b"\n")
    if topic_id == ZERO_UUID:
        with pytest.raises(PartitionMetadataError):
            decode_partition_metadata(data)
    else:
        assert decode_partition_metadata(data) == PartitionMetadata(0, topic_id)


def test_parse_csv_map_is_kafkas_parse_csv_map():
    """CoreUtils.parseCsvMap: items split at commas with the whitespace around them (trailing
    empty items dropped, as String.split drops them), each at its LAST colon (IPv6 hosts), both
    sides trimmed; an item with no colon fails (Kafka's substring throws)."""
    assert parse_csv_map("") == []
    assert parse_csv_map(",") == []
    assert parse_csv_map("INTERNAL:PLAINTEXT , EXTERNAL : SASL_SSL,") == [
        ("INTERNAL", "PLAINTEXT"),
        ("EXTERNAL", "SASL_SSL"),
    ]
    assert parse_csv_map("::1:5,fe80::1:7") == [("::1", "5"), ("fe80::1", "7")]
    assert parse_csv_map("a:b:c") == [("a:b", "c")]
    assert parse_csv_map("k:") == [("k", "")]
    for bad in ("a:b,,c:d", ",a:b", "nocolon", " "):
        with pytest.raises(ValueError, match="is no key:value pair"):
            parse_csv_map(bad)
