"""Decoders for the records of Kafka's internal topics, rendered as DumpLogSegments prints them.

* ``__consumer_offsets`` (``--offsets-decoder``): key
  ``{"type":"<record type>","data":{...}}``, value
  ``{"version":"<value version>","data":{...}}`` or ``<DELETE>``; the
  consumer-protocol subscription/assignment bytes of GroupMetadata members are
  decoded to JSON when the group's protocol type is ``consumer``.
* ``__transaction_state`` (``--transaction-log-decoder``):
  ``transaction_metadata::transactionalId=<id>`` /
  ``producerId:<p>,producerEpoch:<e>,state=<State>,partitions=[t-0,...],...``.
* ``__cluster_metadata`` (``--cluster-metadata-decoder``):
  ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``.

JSON objects follow Kafka's generated ``*JsonConverter`` classes: camelCase
field names (schema name with a lower-case first letter), fields absent from
the version omitted, tagged fields only when not at their default, bytes as
base64, uuids in Kafka's base64 form; they are printed compactly as Jackson's
``JsonNode.toString()`` does.

Every function raises :class:`FormatError` (with a byte position inside the key
or value) for bytes it cannot decode; where DumpLogSegments prints a line
instead of failing (unknown record types), the same line is returned.
"""

from __future__ import annotations

import struct

from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import (
    METADATA_RECORDS,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    GroupMetadataKey,
    GroupMetadataValue,
    KRaftVersionRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TransactionLogKey,
    TransactionLogValue,
    VotersRecord,
)
from kafkatool.formats.java_collections import signed32, topic_partition_hash
from kafkatool.formats.schema import Message, SchemaDecodeError, json_dumps_java, r_uvarint

__all__ = [
    "TRANSACTION_STATES",
    "decode_cluster_metadata_record",
    "decode_kraft_control_record",
    "decode_offsets_record",
    "decode_transaction_log_record",
    "metadata_record_type_name",
    "offsets_record_dict",
    "cluster_metadata_record_dict",
    "transaction_log_record_dict",
]

_I16 = struct.Struct(">h")
DELETE = "<DELETE>"
CONSUMER_PROTOCOL_TYPE = "consumer"

#: TransactionState ids as written in TransactionLogValue.TransactionStatus, with Kafka's names.
TRANSACTION_STATES = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}


def _view(data) -> memoryview:
    mv = data if isinstance(data, memoryview) else memoryview(data)
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def _read_version(buf: memoryview, what: str) -> int:
    if len(buf) < 2:
        raise FormatError(f"Could not read version from {what}'s buffer.", 0, kind="truncated")
    return _I16.unpack_from(buf, 0)[0]


def _clamp(cls: type[Message], version: int) -> int:
    # Java's generated read()/write() test `_version >= N` per field, so a version above
    # the newest known one is read with the newest layout (and a negative one like v0).
    lo, hi = cls.VALID_VERSIONS
    return max(lo, min(version, hi))


def _read_message(cls: type[Message], buf: memoryview, version: int, what: str) -> Message:
    """Read ``cls`` after the 2-byte version; trailing bytes are ignored, as Kafka does."""
    try:
        msg, _ = cls.decode_from(buf, 2, len(buf), _clamp(cls, version))
    except SchemaDecodeError as e:
        raise FormatError(
            f"Could not read record with version {version} from {what}'s buffer due to: {e.message}.",
            e.position,
            kind=e.kind,
        ) from None
    return msg


# ----------------------------------------------------------------------------- __consumer_offsets


def read_consumer_protocol(cls: type[Message], raw) -> tuple[int, Message] | None:
    """A ConsumerProtocolSubscription or ConsumerProtocolAssignment blob (a classic group
    member's metadata or assignment: int16 version, then the message) -> (version, message),
    or None if it does not parse (Kafka keeps the bytes).  Versions above the newest known
    are read as the newest, as Kafka's ConsumerProtocol does."""
    buf = _view(raw)
    if len(buf) < 2:
        return None
    version = _clamp(cls, _I16.unpack_from(buf, 0)[0])
    try:
        msg, _ = cls.decode_from(buf, 2, len(buf), version)
    except (SchemaDecodeError, ValueError, IndexError):
        return None
    return version, msg


def write_consumer_protocol(msg: Message, version: int | None = None) -> bytes:
    """The bytes of a ConsumerProtocolSubscription or ConsumerProtocolAssignment: int16 version,
    then the message (Kafka's ConsumerProtocol.serializeSubscription/serializeAssignment, which
    write the newest version unless told otherwise)."""
    if version is None:
        version = type(msg).VALID_VERSIONS[1]
    return _I16.pack(version) + msg.encode(version)


def assigned_partitions(raw) -> list[tuple[str, int]]:
    """A classic consumer group member's assignment bytes (ConsumerProtocolAssignment) as
    sorted (topic, partition) pairs; none if they do not parse (or are empty)."""
    decoded = read_consumer_protocol(ConsumerProtocolAssignment, raw or b"")
    if decoded is None:
        return []
    return sorted((tp.topic, p) for tp in decoded[1].assigned_partitions or [] for p in tp.partitions)


def _decode_embedded(cls: type[Message], raw):
    """ConsumerProtocol payload -> JSON dict, or None if it does not parse."""
    decoded = read_consumer_protocol(cls, raw)
    return None if decoded is None else decoded[1].to_json(decoded[0])


def _group_metadata_json(value: GroupMetadataValue, version: int) -> dict:
    data = value.to_json(_clamp(GroupMetadataValue, version))
    if data.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member_json, member in zip(data.get("members") or [], value.members or [], strict=False):
            if "subscription" in member_json:
                decoded = _decode_embedded(ConsumerProtocolSubscription, member.subscription)
                if decoded is not None:
                    member_json["subscription"] = decoded
            if "assignment" in member_json:
                decoded = _decode_embedded(ConsumerProtocolAssignment, member.assignment)
                if decoded is not None:
                    member_json["assignment"] = decoded
    return data


# ----------------------------------------------------------------------------- the one codec
# What the group and transaction coordinators write and read, and what dump-log decodes: one
# encoder and one reader per record, with one version rule (Kafka's GroupMetadataManager /
# TransactionLog): a key's int16 is its record type (offsets) or version (transactions);
# offsets values of an unknown newer version are read with the newest layout (_clamp), a
# transaction log value of an unknown version is an error.

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
TXN_LOG_KEY_VERSION = 0
TXN_LOG_VALUE_VERSION = 0

#: KIP-848 consumer-group records (GroupCoordinatorRecordHelpers): record type (= the key's
#: version) -> (key class, value class); every value is written as v0
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
CONSUMER_GROUP_RECORDS: dict[int, tuple[type[Message], type[Message]]] = {
    CONSUMER_GROUP_METADATA: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    CONSUMER_GROUP_PARTITION_METADATA: (
        ConsumerGroupPartitionMetadataKey,
        ConsumerGroupPartitionMetadataValue,
    ),
    CONSUMER_GROUP_MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: (
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupTargetAssignmentMetadataValue,
    ),
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: (
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMemberValue,
    ),
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: (
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupCurrentMemberAssignmentValue,
    ),
    CONSUMER_GROUP_REGULAR_EXPRESSION: (
        ConsumerGroupRegularExpressionKey,
        ConsumerGroupRegularExpressionValue,
    ),
}
CONSUMER_GROUP_VALUE_VERSION = 0


def _with_version(version: int, msg: Message) -> bytes:
    return _I16.pack(version) + msg.encode(version)


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey, record type 1 (Kafka writes 1; 0 is read as the same layout)."""
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _with_version(OFFSET_COMMIT_KEY_VERSION, key)


def offset_commit_value(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int, expire_timestamp: int | None
) -> bytes:
    """OffsetCommitValue as Kafka writes it: v1 only to keep an explicit expire timestamp
    (v3 has no field for it), v3 otherwise (with the leader epoch)."""
    version = 1 if expire_timestamp is not None else 3
    value = OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp if expire_timestamp is not None else -1,
    )
    return _with_version(version, value)


def group_metadata_key(group: str) -> bytes:
    return _with_version(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _with_version(GROUP_METADATA_VALUE_VERSION, value)


def consumer_group_record(
    record_type: int, key: Message, value: Message | None
) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone) of a KIP-848 consumer-group record."""
    return (
        _with_version(record_type, key),
        None if value is None else _with_version(CONSUMER_GROUP_VALUE_VERSION, value),
    )


def read_offsets_key(key) -> tuple[int, Message | None]:
    """(record type, OffsetCommitKey or GroupMetadataKey); the message is None for a record
    type this codec does not know (Kafka skips those)."""
    if key is None:
        raise FormatError(
            "Failed to decode message using offset topic decoder (message had a missing key)", 0
        )
    kbuf = _view(key)
    record_type = _read_version(kbuf, "key")
    if record_type in (0, 1):
        return record_type, _read_message(OffsetCommitKey, kbuf, record_type, "key")
    if record_type == GROUP_METADATA_KEY_VERSION:
        return record_type, _read_message(GroupMetadataKey, kbuf, record_type, "key")
    classes = CONSUMER_GROUP_RECORDS.get(record_type)
    if classes is not None:
        return record_type, _read_message(classes[0], kbuf, record_type, "key")
    return record_type, None


def read_offsets_value(record_type: int, value) -> tuple[int, Message]:
    """(value version, OffsetCommitValue, GroupMetadataValue or a consumer-group value) of a
    non-null value."""
    if record_type in CONSUMER_GROUP_RECORDS:
        cls = CONSUMER_GROUP_RECORDS[record_type][1]
    elif record_type == GROUP_METADATA_KEY_VERSION:
        cls = GroupMetadataValue
    else:
        cls = OffsetCommitValue
    vbuf = _view(value)
    version = _read_version(vbuf, "value")
    return version, _read_message(cls, vbuf, version, "value")


def transaction_log_key(transactional_id: str) -> bytes:
    return _with_version(TXN_LOG_KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def transaction_log_value(value: TransactionLogValue) -> bytes:
    return _with_version(TXN_LOG_VALUE_VERSION, value)


def read_transaction_log_key(key) -> tuple[int, str | None]:
    """(key version, transactional id); the id is None for a key version other than 0 (not a
    transaction log key: Kafka's UnknownKey, skipped)."""
    if key is None:
        raise FormatError("transaction log record has no key", 0)
    kbuf = _view(key)
    key_version = _read_version(kbuf, "key")
    if key_version != TXN_LOG_KEY_VERSION:
        return key_version, None
    return key_version, _read_message(TransactionLogKey, kbuf, key_version, "key").transactional_id


def read_transaction_log_value(value) -> tuple[int, TransactionLogValue]:
    vbuf = _view(value)
    version = _read_version(vbuf, "value")
    lo, hi = TransactionLogValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise FormatError(f"Unknown version {version} from the transaction log message value", 0)
    return version, _read_message(TransactionLogValue, vbuf, version, "value")


def offsets_record_dict(key, value) -> dict:
    """Structured form of a ``__consumer_offsets`` record.

    ``{"type": <record type>, "key": {"type": "<n>", "data": {...}} | None,
    "value": {"version": "<n>", "data": {...}} | None}``; ``key`` is None for a
    record type this decoder does not know (Kafka skips those); ``value`` is
    None for a tombstone.
    """
    record_type, key_msg = read_offsets_key(key)
    if key_msg is None:
        return {"type": record_type, "key": None, "value": None}
    out = {
        "type": record_type,
        "key": {"type": str(record_type), "data": key_msg.to_json(_clamp(type(key_msg), record_type))},
        "value": None,
    }
    if value is None:
        return out
    version, value_msg = read_offsets_value(record_type, value)
    if isinstance(value_msg, GroupMetadataValue):
        data = _group_metadata_json(value_msg, version)
    else:
        data = value_msg.to_json(_clamp(type(value_msg), version))
    out["value"] = {"version": str(version), "data": data}
    return out


def decode_offsets_record(key, value, *, offset: int = -1) -> tuple[str, str | None]:
    """(key, payload) strings printed by ``kafka-dump-log --offsets-decoder``.

    For an unknown record type the key is Kafka's skip message and the payload
    None (nothing is printed for it).
    """
    d = offsets_record_dict(key, value)
    if d["key"] is None:
        return f"Unknown record type {d['type']} at offset {offset}, skipping.", None
    key_text = json_dumps_java(d["key"])
    if d["value"] is None:
        return key_text, DELETE
    return key_text, json_dumps_java(d["value"])


# ----------------------------------------------------------------------------- __transaction_state


def _scala_table_size_for(capacity: int) -> int:
    c = max(capacity - 1, 4)
    return min((1 << (c.bit_length() - 1)) * 2, 1 << 30)


def _scala_hash_set_order(groups: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """Iteration order of the scala.collection.mutable.HashSet[TopicPartition] Kafka prints.

    TransactionLog.readTxnRecordValue adds each topic's partitions with
    ``topicPartitions ++= partitions.toSet`` (Scala 2.13): ``sizeHint`` sizes the
    table for the incoming set alone, sets of up to 4 go through ``add`` (which
    doubles the table at 3/4 load) and larger immutable sets through ``addElem``
    (which never grows it).  Iteration walks the power-of-two table in bucket
    order; each bucket is kept sorted by the spread hash ``h ^ (h >>> 16)``.
    """
    cap, size = 16, 0
    members: dict[tuple[str, int], int] = {}
    for group in groups:
        incoming = list(dict.fromkeys(group))
        target = _scala_table_size_for(int((len(incoming) + 1) / 0.75))
        if target > cap:
            cap = target
        for tp in incoming:
            if len(incoming) <= 4 and size + 1 >= int(cap * 0.75):
                cap *= 2
            if tp not in members:
                h = topic_partition_hash(tp) & 0xFFFFFFFF
                members[tp] = h ^ (h >> 16)
                size += 1
    return sorted(members, key=lambda tp: (members[tp] & (cap - 1), signed32(members[tp])))


def transaction_log_record_dict(key, value) -> dict:
    """Structured form of a ``__transaction_state`` record.

    ``{"key_version": n, "transactional_id": str | None, "value": {...} | None}``;
    ``value`` None is a tombstone; ``transactional_id`` None means a key version
    other than 0 (not a transaction log key).
    """
    key_version, tid = read_transaction_log_key(key)
    if tid is None:
        return {"key_version": key_version, "transactional_id": None, "value": None}
    out = {"key_version": key_version, "transactional_id": tid, "value": None}
    if value is None:
        return out
    version, msg = read_transaction_log_value(value)
    state = TRANSACTION_STATES.get(msg.transaction_status)
    if state is None:
        raise FormatError(f"Unknown transaction state {msg.transaction_status}", 2)
    groups: list[list[tuple[str, int]]] = []
    if state != "Empty" and msg.transaction_partitions:
        groups = [[(entry.topic, p) for p in entry.partition_ids] for entry in msg.transaction_partitions]
    partitions = _scala_hash_set_order(groups)
    out["value"] = {
        "version": version,
        "producerId": msg.producer_id,
        "producerEpoch": msg.producer_epoch,
        "state": state,
        "partitions": [f"{t}-{p}" for t, p in partitions],
        "txnLastUpdateTimestamp": msg.transaction_last_update_timestamp_ms,
        "txnStartTimestamp": msg.transaction_start_timestamp_ms,
        "txnTimeoutMs": msg.transaction_timeout_ms,
        "data": msg.to_json(version),
    }
    return out


def decode_transaction_log_record(key, value) -> tuple[str, str | None]:
    """(key, payload) strings printed by ``kafka-dump-log --transaction-log-decoder``."""
    d = transaction_log_record_dict(key, value)
    if d["transactional_id"] is None:
        return f"unknown::version={d['key_version']}", None
    key_text = f"transaction_metadata::transactionalId={d['transactional_id']}"
    v = d["value"]
    if v is None:
        return key_text, DELETE
    return key_text, (
        f"producerId:{v['producerId']},producerEpoch:{v['producerEpoch']},state={v['state']},"
        f"partitions=[{','.join(v['partitions'])}],"
        f"txnLastUpdateTimestamp={v['txnLastUpdateTimestamp']},txnTimeoutMs={v['txnTimeoutMs']}"
    )


# ----------------------------------------------------------------------------- __cluster_metadata


def metadata_record_type_name(cls: type[Message]) -> str:
    """MetadataRecordType enum name (``TopicRecord`` -> ``TOPIC_RECORD``), as Kafka's toString gives."""
    out = []
    prev_upper = True
    for ch in cls.NAME:
        if ch.isupper():
            if not prev_upper:
                out.append("_")
            out.append(ch)
            prev_upper = True
        else:
            out.append(ch.upper())
            prev_upper = False
    return "".join(out)


def _short_uvarint(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    try:
        value, after = r_uvarint(buf, pos, len(buf))
    except SchemaDecodeError as e:
        raise FormatError(f"Error while reading {what}: {e.message}", e.position, kind=e.kind) from None
    if value > 0x7FFF:
        raise FormatError(f"Value for {what} was too large.", pos)
    return value, after


def cluster_metadata_record_dict(value) -> dict:
    """``{"type": "TOPIC_RECORD", "version": n, "data": {...}}`` for a KRaft metadata record value."""
    if value is None:
        raise FormatError("metadata record has no value", 0)
    buf = _view(value)
    frame_version, pos = _short_uvarint(buf, 0, "frame version")
    if frame_version == 0:
        raise FormatError(
            "Could not deserialize metadata record with frame version 0. Note that frame version 0 "
            "indicates that the record was written by a pre-release version of Kafka.",
            0,
        )
    if frame_version != 1:
        raise FormatError(
            f"Could not deserialize metadata record due to unknown frame version {frame_version}"
            "(only frame version 1 is supported)",
            0,
        )
    api_key, pos = _short_uvarint(buf, pos, "type")
    version, pos = _short_uvarint(buf, pos, "version")
    cls = METADATA_RECORDS.get(api_key)
    if cls is None:
        raise FormatError(f"Unknown metadata id {api_key}", 1)
    eff = _clamp(cls, version)
    try:
        msg, end = cls.decode_from(buf, pos, len(buf), eff)
    except SchemaDecodeError as e:
        raise FormatError(
            f"Failed to deserialize record with type {api_key}: {e.message}", e.position
        ) from None
    if end != len(buf):
        raise FormatError(f"Found {len(buf) - end} byte(s) of garbage after {api_key}", end)
    return {"type": metadata_record_type_name(cls), "version": version, "data": msg.to_json(eff)}


def decode_cluster_metadata_record(value) -> str:
    """The payload string printed by ``kafka-dump-log --cluster-metadata-decoder`` (records have no key)."""
    return json_dumps_java(cluster_metadata_record_dict(value))


# ----------------------------------------------------------------------------- KRaft control records

#: ControlRecordType id -> (label DumpLogSegments prints, record class)
_KRAFT_CONTROL = {
    3: ("SnapshotHeader", SnapshotHeaderRecord),
    4: ("SnapshotFooter", SnapshotFooterRecord),
    5: ("KRaftVersion", KRaftVersionRecord),
    6: ("KRaftVoters", VotersRecord),
}


def decode_kraft_control_record(control_type: int, value) -> str | None:
    """``SnapshotHeader {...}`` etc. as DumpLogSegments prints KRaft control records.

    The value is the record body read at version 0 (Kafka's current version of
    these records); the JSON is written at the version the record names in its
    own ``Version`` field.  Returns None for other control types (Kafka prints
    ``controlType: <NAME>(<id>)`` for those).
    """
    entry = _KRAFT_CONTROL.get(control_type)
    if entry is None:
        return None
    label, cls = entry
    if value is None:
        raise FormatError(f"{label} control record has no value", 0)
    buf = _view(value)
    try:
        msg, _ = cls.decode_from(buf, 0, len(buf), 0)
    except SchemaDecodeError as e:
        raise FormatError(
            f"cannot read {label} control record: {e.message}", e.position, kind=e.kind
        ) from None
    return f"{label} {json_dumps_java(msg.to_json(_clamp(cls, msg.version)))}"
