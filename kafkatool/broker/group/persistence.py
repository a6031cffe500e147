"""``__consumer_offsets`` as the group coordinator writes and replays it.

The records' bytes come from the one codec, :mod:`kafkatool.formats.internal_topics`:

* offset commit: key OffsetCommitKey v1 ``{group, topic, partition}``, value
  OffsetCommitValue v3 (v1 when the commit carried an explicit expire
  timestamp); a null value deletes the offset;
* group metadata: key GroupMetadataKey (record type 2), value
  GroupMetadataValue v3; a null value deletes the group.

Each write is one uncompressed v2 batch with CreateTime = now, appended through
the partition's :class:`~kafkatool.log.log.Log` like any produce, so
``kafkatool dump-log --offsets-decoder`` (and Kafka's ``kafka-dump-log``)
read it, and the log cleaner compacts it.  :class:`PartitionLoader` replays a
partition at start-up: last value per key wins, tombstones delete, and
transactional offset commits count only once their COMMIT marker is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkatool.broker.group.offsets import OffsetAndMetadata, OffsetStore
from kafkatool.formats import internal_topics as IT
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import GroupMetadataValue
from kafkatool.formats.generated.group_metadata_value import MemberMetadata
from kafkatool.formats.schema import SchemaDecodeError
from kafkatool.log.log import RecordTooLargeError
from kafkatool.log.validator import RecordValidationError
from kafkatool.protocol.errors import ErrorCode

#: what a failed append to ``__consumer_offsets`` raises (see :func:`append_error_code`)
APPEND_ERRORS = (LookupError, OSError, RecordTooLargeError, RecordValidationError)


def append_error_code(exc: Exception) -> int:
    """The error a group write that failed with ``exc`` answers: Kafka's
    GroupMetadataManager.storeGroup mapping, which the KIP-848 coordinator's
    GroupCoordinatorService.normalizeException repeats.  The partition gone
    (UNKNOWN_TOPIC_OR_PARTITION) -> COORDINATOR_NOT_AVAILABLE; a storage error
    (KAFKA_STORAGE_ERROR) -> NOT_COORDINATOR; a record or batch too large ->
    UNKNOWN_SERVER_ERROR; LogValidator's own error as it is."""
    if isinstance(exc, RecordTooLargeError):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if isinstance(exc, RecordValidationError):
        return ErrorCode[exc.error_name]
    if isinstance(exc, LookupError):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if isinstance(exc, OSError):
        return ErrorCode.NOT_COORDINATOR
    raise TypeError(f"not an append failure: {exc!r}")


__all__ = [
    "APPEND_ERRORS",
    "append_error_code",
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSETS_TOPIC",
    "MemberMetadata",
    "PartitionLoader",
    "build_batch",
    "group_metadata_key",
    "group_metadata_value",
    "offset_commit_key",
    "offset_commit_value",
]

OFFSETS_TOPIC = "__consumer_offsets"
CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_METADATA_KEY_VERSION = IT.GROUP_METADATA_KEY_VERSION
GROUP_METADATA_VALUE_VERSION = IT.GROUP_METADATA_VALUE_VERSION
offset_commit_key = IT.offset_commit_key
group_metadata_key = IT.group_metadata_key


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    return IT.offset_commit_value(
        om.offset, om.leader_epoch, om.metadata, om.commit_timestamp, om.expire_timestamp
    )


def group_metadata_value(
    *,
    protocol_type: str | None,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int,
    members: list[MemberMetadata],
) -> bytes:
    return IT.group_metadata_value(
        GroupMetadataValue(
            protocol_type=protocol_type or "",
            generation=generation,
            protocol=protocol,
            leader=leader,
            current_state_timestamp=current_state_timestamp,
            members=members,
        )
    )


def build_batch(records: list[tuple[bytes, bytes | None]], now_ms: int) -> bytes:
    """One uncompressed v2 batch, CreateTime ``now_ms`` on every record (offsets assigned by the log)."""
    return R.build_record_batch([R.SimpleRecord(value, key, (), now_ms) for key, value in records])


@dataclass
class LoadedGroup:
    group_id: str
    #: the last GroupMetadataValue, or None (never written, or deleted by a tombstone)
    metadata: GroupMetadataValue | None = None
    #: the offset of that record (0 when none)
    metadata_offset: int = -1
    offsets: OffsetStore = field(default_factory=OffsetStore)
    #: KIP-848 consumer-group records in log order: (record type, key, value or None)
    consumer_records: list = field(default_factory=list)


class PartitionLoader:
    """Replays one ``__consumer_offsets`` partition batch by batch (Kafka's ``doLoadGroupsAndOffsets``)."""

    def __init__(self):
        self.groups: dict[str, LoadedGroup] = {}
        #: producer id -> [(group, (topic, partition), offset or None)] of open transactions
        self._pending: dict[int, list[tuple[str, tuple[str, int], OffsetAndMetadata | None]]] = {}
        self.records = 0
        self.skipped: list[str] = []

    def _group(self, group_id: str) -> LoadedGroup:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = LoadedGroup(group_id)
        return g

    def feed(self, batch) -> None:
        if batch.magic < 2:
            txn, control, pid = False, False, -1
        else:
            txn, control, pid = batch.is_transactional, batch.is_control, batch.producer_id
        for rec in batch.records():
            self.records += 1
            if control:
                ctl = R.parse_control_record(rec)
                if ctl.type in (R.COMMIT, R.ABORT):
                    for group_id, tp, om in self._pending.pop(pid, []):
                        if ctl.type == R.COMMIT:
                            store = self._group(group_id).offsets
                            if om is None:
                                store.remove(tp)
                            else:
                                store.put(tp, om)
                continue
            try:
                self._apply(rec, txn, pid)
            except (FormatError, SchemaDecodeError) as exc:
                # Kafka fails the load on an undecodable record; a forensics-minded broker keeps
                # going and says where
                self.skipped.append(f"offset {rec.offset}: {exc}")

    def _apply(self, rec, txn: bool, pid: int) -> None:
        if rec.key is None:
            raise FormatError("record without a key", rec.position)
        record_type, key = IT.read_offsets_key(rec.key)
        if record_type in (0, 1):
            tp = (key.topic, key.partition)
            om = None
            if rec.value is not None:
                version, v = IT.read_offsets_value(record_type, rec.value)
                om = OffsetAndMetadata(
                    v.offset,
                    v.leader_epoch if version >= 3 else -1,
                    v.metadata or "",
                    v.commit_timestamp,
                    v.expire_timestamp if version == 1 and v.expire_timestamp != -1 else None,
                )
            if txn:
                self._pending.setdefault(pid, []).append((key.group, tp, om))
                return
            store = self._group(key.group).offsets
            if om is None:
                store.remove(tp)
            else:
                store.put(tp, om)
        elif record_type == GROUP_METADATA_KEY_VERSION:
            g = self._group(key.group)
            g.metadata = None if rec.value is None else IT.read_offsets_value(record_type, rec.value)[1]
            g.metadata_offset = rec.offset
        elif record_type in IT.CONSUMER_GROUP_RECORDS:
            value = None if rec.value is None else IT.read_offsets_value(record_type, rec.value)[1]
            self._group(key.group_id).consumer_records.append((record_type, key, value))
        # other record types (share groups) are not ours: skipped as Kafka does

    def result(self) -> dict[str, LoadedGroup]:
        """Groups with metadata or offsets (a group deleted by tombstones and without offsets is gone)."""
        return {
            gid: g
            for gid, g in self.groups.items()
            if g.metadata is not None or len(g.offsets) or g.consumer_records
        }
