"""One codec per internal-topic record (issue 12): formats/internal_topics.py writes and reads
__consumer_offsets and __transaction_state records for the coordinators and for dump-log, with
one version rule; no other module builds or parses those keys and values itself."""

from __future__ import annotations

import ast
import struct
from pathlib import Path

import pytest

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.offsets import OffsetAndMetadata
from kafkatool.broker.txn import state_log as S
from kafkatool.formats import internal_topics as IT
from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import GroupMetadataValue, TransactionLogValue

PACKAGE = Path(__file__).resolve().parents[2] / "kafkatool"


def test_offset_commit_value_version_rule_and_round_trip():
    v3 = IT.offset_commit_value(42, 7, "meta", 1000, None)
    v1 = IT.offset_commit_value(42, 7, "meta", 1000, 5000)
    assert struct.unpack_from(">h", v3)[0] == 3 and struct.unpack_from(">h", v1)[0] == 1
    version, msg = IT.read_offsets_value(1, v3)
    assert (version, msg.offset, msg.leader_epoch, msg.metadata, msg.commit_timestamp) == (
        3,
        42,
        7,
        "meta",
        1000,
    )
    version, msg = IT.read_offsets_value(1, v1)
    assert (version, msg.expire_timestamp) == (1, 5000)
    # the coordinator's writer is the codec's
    om = OffsetAndMetadata(42, 7, "meta", 1000, None)
    assert P.offset_commit_value(om) == v3
    key = IT.offset_commit_key("g", "t", 3)
    assert struct.unpack_from(">h", key)[0] == 1
    record_type, k = IT.read_offsets_key(key)
    assert (record_type, k.group, k.topic, k.partition) == (1, "g", "t", 3)


def test_group_metadata_and_unknown_record_types():
    value = IT.group_metadata_value(
        GroupMetadataValue(
            protocol_type="consumer",
            generation=3,
            protocol="range",
            leader="m",
            current_state_timestamp=9,
            members=[],
        )
    )
    assert struct.unpack_from(">h", value)[0] == 3
    record_type, key = IT.read_offsets_key(IT.group_metadata_key("g"))
    assert record_type == 2 and key.group == "g"
    assert IT.read_offsets_value(2, value)[1].generation == 3
    # KIP-848 and share-group record types are skipped, as Kafka's loader does
    assert IT.read_offsets_key(struct.pack(">h", 11) + b"\x00\x01g") == (11, None)
    # a newer offsets value version is read with the newest layout known
    newer = bytearray(IT.offset_commit_value(5, -1, "", 1, None))
    struct.pack_into(">h", newer, 0, 3)
    assert IT.read_offsets_value(1, bytes(newer))[1].offset == 5


def test_transaction_log_round_trip_and_strict_value_version():
    rec = S.TxnRecord(7, 2, 60000, S.ONGOING, [("t", 1), ("t", 0)], 100, 90)
    batch_value = S.value_bytes(rec)
    assert struct.unpack_from(">h", batch_value)[0] == 0
    tid, back = S.decode(IT.transaction_log_key("tx"), batch_value)
    assert tid == "tx" and back.partitions == [("t", 0), ("t", 1)] and back.state == S.ONGOING
    bad = bytearray(batch_value)
    struct.pack_into(">h", bad, 0, 99)
    with pytest.raises(FormatError, match="Unknown version 99"):
        IT.read_transaction_log_value(bytes(bad))
    assert IT.read_transaction_log_key(struct.pack(">h", 1) + b"\x00\x02tx") == (1, None)
    assert isinstance(IT.read_transaction_log_value(batch_value)[1], TransactionLogValue)


CODEC_ONLY = {"OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "TransactionLogKey"}


def test_no_second_codec_outside_formats():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("formats/") or rel.startswith("protocol/generated/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if name in CODEC_ONLY:
                    offenders.append(f"{rel}:{node.lineno} builds {name}")
                if (
                    isinstance(f, ast.Attribute)
                    and f.attr == "decode_from"
                    and isinstance(f.value, ast.Name)
                    and f.value.id in CODEC_ONLY | {"GroupMetadataValue", "TransactionLogValue"}
                ):
                    offenders.append(f"{rel}:{node.lineno} decodes {f.value.id}")
    assert offenders == []
