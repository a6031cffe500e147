"""Kafka's LogValidator record rules for a client's append (validateRecord): a compacted topic's
records need a key, and a CreateTime topic's record timestamps must lie within
message.timestamp.before.max.ms / after.max.ms of the broker's clock (KIP-937; the deprecated
message.timestamp.difference.max.ms where those are at their default), and no client sets
LogAppendTime.

Run by ``Log.append_as_leader`` for every CLIENT append, before producer state is looked at,
on batches whose CRC was checked.  Kafka walks every record; the bytes are only passed along
here, so a batch is read only when it might break a rule: never with both limits at their
default (Long.MAX_VALUE) on a topic that is not compacted, and with only the after limit set,
only when the header's maxTimestamp is beyond it.  The header has no lower bound (a v2
record's timestamp delta is signed, so baseTimestamp is the first record's, not the least),
so with a before limit every record's timestamp is read (``records.record_timestamps``: its
varints only, a compressed batch decompressed, as Kafka's skipKeyValueIterator).

A batch with record errors raises :class:`RecordValidationError` (Kafka's
RecordValidationException: processRecordErrors), one error per offending record, its index
counted from 0 in each batch; nothing of the append is written.
"""

from __future__ import annotations

from kafkatool.errors import KafkatoolError
from kafkatool.formats import records as R
from kafkatool.log.config import LONG_MAX, LogConfig

_WRAP = 1 << 64


def _java_long(n: int) -> int:
    """``n`` as a Java long holds it (the bounds Kafka prints may overflow)."""
    n %= _WRAP
    return n - _WRAP if n > LONG_MAX else n


class RecordValidationError(KafkatoolError):
    """Records of a client's batch break LogValidator's rules: ``invalid_timestamp`` (the
    partition's error is INVALID_TIMESTAMP, else INVALID_RECORD), the partition's error
    message, and ``record_errors``: (batch index, message) per offending record."""

    def __init__(self, invalid_timestamp: bool, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.invalid_timestamp = invalid_timestamp
        self.message = message
        self.record_errors = record_errors


def _record_string(batch, r: R.Record) -> str:
    """Kafka's Record.toString (DefaultRecord, LegacyRecord) in a record error's message."""
    key = 0 if r.key is None else len(r.key)
    value = 0 if r.value is None else len(r.value)
    if batch.magic >= 2:
        return (
            f"DefaultRecord(offset={r.offset}, timestamp={r.timestamp}, key={key} bytes, value={value} bytes)"
        )
    # a message of a compressed wrapper is itself uncompressed; it carries the timestamp type
    attributes = batch.attributes & ~R.CODEC_MASK
    kind = R.TIMESTAMP_TYPE_NAMES.get(batch.timestamp_type, "NoTimestampType")
    return (
        f"Record(magic={r.magic}, attributes={attributes}, compression=none, crc={r.crc}, "
        f"{kind}={r.timestamp}, key={key} bytes, value={value} bytes)"
    )


def validate_client_records(
    batches: list, config: LogConfig, timestamp_type: str, now_ms: int, log_dir
) -> None:
    """Raise RecordValidationError for the first batch of ``batches`` with record errors
    (``log_dir``: the partition's dir, whose name is Kafka's TopicPartition.toString in a
    message)."""
    compacted = config.compact
    create_time = timestamp_type == "CreateTime"
    before = config.timestamp_before_max_ms if create_time else LONG_MAX
    after = config.timestamp_after_max_ms if create_time else LONG_MAX
    lowest = now_ms - before if before != LONG_MAX else None
    highest = now_ms + after if after != LONG_MAX else None
    for b in batches:
        set_append_time = b.timestamp_type == R.LOG_APPEND_TIME
        if not compacted and not set_append_time:
            if not create_time or b.magic == 0:
                continue
            if lowest is None and (highest is None or b.max_timestamp <= highest):
                continue  # the header proves every record inside
        errors: list[tuple[int, str]] = []
        timestamp_error = False
        if compacted or set_append_time:
            stamps = ((r.offset, r.timestamp, r) for r in b.records())
        else:
            stamps = ((offset, ts, None) for offset, ts in R.record_timestamps(b))
        for index, (offset, ts, record) in enumerate(stamps):
            if compacted and record.key is None:
                errors.append(
                    (
                        index,
                        "Compacted topic cannot accept message without key in topic partition "
                        f"{log_dir.name}",
                    )
                )
            elif create_time and ts != R.NO_TIMESTAMP:
                diff = now_ms - ts
                if diff > before or -diff > after:
                    timestamp_error = True
                    errors.append(
                        (
                            index,
                            f"Timestamp {ts} of message with offset {offset} is out of range. The "
                            f"timestamp should be within [{_java_long(now_ms - before)}, "
                            f"{_java_long(now_ms + after)}]",
                        )
                    )
            elif set_append_time:
                timestamp_error = True
                errors.append(
                    (
                        index,
                        f"Invalid timestamp type in message {_record_string(b, record)}. Producer "
                        "should not set timestamp type to LogAppendTime.",
                    )
                )
        if errors:
            if timestamp_error:
                message = "One or more records have been rejected due to invalid timestamp"
            else:
                shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
                message = (
                    f"One or more records have been rejected due to {len(errors)} record errors in "
                    f"total, and only showing the first three errors at most: [{shown}]"
                )
            raise RecordValidationError(timestamp_error, message, errors)
