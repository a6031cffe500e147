"""Kafka's LogValidator record rules (validateRecord): a compacted topic's records need a key, and a
CreateTime topic's record timestamps must lie within message.timestamp.before.max.ms /
after.max.ms of the broker's clock (KIP-937; the deprecated message.timestamp.difference.max.ms
where those are at their default), and no client sets LogAppendTime on a LogAppendTime topic.

Run by ``Log.append_as_leader`` for CLIENT and COORDINATOR appends alike (UnifiedLog.append runs
LogValidator for every origin but RAFT_LEADER and REPLICATION; what differs per origin is
validateBatch's client-only batch checks, which the produce handler makes before the log sees the
bytes), before producer state is looked at, on batches whose CRC was checked.

Kafka walks every record; the bytes are only passed along here, so a batch is read only when it
might break a rule: never with both limits at their default (Long.MAX_VALUE) on a topic that is
not compacted.  With a limit set every record's timestamp is read: neither end of a batch's range
is in its header (a v2 timestamp delta is signed, so baseTimestamp is not the least, and
maxTimestamp is what the client wrote, not what the records say).  A v2 batch's records are read
by the reader Kafka uses, which decides which records are refused
(``records.skip_key_value_records``, keys, values and headers skipped, a compressed batch
decompressed): DefaultRecord.readPartiallyFrom for a compressed batch kept in place (Kafka's
skipKeyValueIterator: a record's declared length is never looked at), readFrom for any other.

On a CreateTime topic Kafka then writes the batch's timestamp fields from its records
(assignOffsetsNonCompressed, and the in-place branch of validateMessagesAndAssignOffsetsCompressed:
``setMaxTimestamp(CREATE_TIME, max of the records)``): a client's LogAppendTime attribute is reset
to CreateTime (its records read as the batch's maxTimestamp, so that stays), and a batch whose
records were read gets their greatest timestamp as its maxTimestamp.  A batch nothing made us
read keeps its header's maxTimestamp (the producers' own).

A legacy set (magic 0/1) gets Kafka's checks of its messages too: a compressed wrapper's inner
messages are always read (LogValidator rebuilds the set anyway), one of another magic than the
wrapper's is a record error and an inner message's own CRC is checked (CORRUPT_MESSAGE); the deep
iterator's own refusals are the format's (``records.LegacyBatch.records``).  A message whose key or
value LegacyRecord cannot read (``records.UnreadableRecord``) fails where Kafka's read of them
throws: after the batch's checks (the rebuild reads them), inside them where hasKey or a record
error's text reads them, and before them all for an uncompressed set kept uncompressed
(estimateSizeInBytes).

A batch with record errors raises :class:`RecordValidationError` (Kafka's
RecordValidationException: processRecordErrors), one error per offending record, its index
counted from 0 in each batch; nothing of the append is written.
"""

from __future__ import annotations

from kafkatool.errors import KafkatoolError
from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.errors import CorruptRecordError, InvalidRecordError
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

    @property
    def error_name(self) -> str:
        """The partition's error as Kafka's Errors names it (protocol.errors.ErrorCode[name])."""
        return "INVALID_TIMESTAMP" if self.invalid_timestamp else "INVALID_RECORD"


def _record_string(batch, offset: int, timestamp: int, r, partial: bool) -> str:
    """Kafka's toString of a record in a record error's message.  A v2 record (``r``: its key and
    value sizes, negative for null) is DefaultRecord's (a null key or value 0 bytes), or, read by
    readPartiallyFrom (``partial``), PartialDefaultRecord's (the sizes as written).  For magic 0
    and 1 (``r``: the Record) the legacy batch entry the iterator hands out
    (AbstractLegacyRecordBatch.toString around LegacyRecord.toString: the message's own
    attributes and CRC, the timestamp type and timestamp the record reports, no timestamp at
    magic 0)."""
    if batch.magic >= 2:
        key, value = r
        if partial:
            return (
                f"PartialDefaultRecord(offset={offset}, timestamp={timestamp}, key={key} bytes, "
                f"value={value} bytes)"
            )
        return (
            f"DefaultRecord(offset={offset}, timestamp={timestamp}, key={max(key, 0)} bytes, "
            f"value={max(value, 0)} bytes)"
        )
    if isinstance(r, R.UnreadableRecord):
        raise r.error  # LegacyRecord.toString reads the key and value: it throws there
    key = 0 if r.key is None else len(r.key)
    value = 0 if r.value is None else len(r.value)
    codec = compression.CODEC_NAMES[r.attributes & R.CODEC_MASK]  # a compressed one is never handed out
    stamp = f"{R.TIMESTAMP_TYPE_NAMES[r.timestamp_type]}={r.timestamp}, " if r.magic > 0 else ""
    return (
        f"LegacyRecordBatch(offset={r.offset}, Record(magic={r.magic}, attributes={r.attributes}, "
        f"compression={codec}, crc={r.crc}, {stamp}key={key} bytes, value={value} bytes))"
    )


def _has_key(r) -> bool:
    """Record.hasKey: a v2 record's (``r``: its key and value sizes) key size is not negative;
    LegacyRecord.hasKey (keySize() >= 0) throws where the key length is not in the message."""
    if type(r) is tuple:
        return r[0] >= 0
    if isinstance(r, R.UnreadableRecord):
        if r.error.has_key is None:
            raise r.error
        return r.error.has_key
    return r.key is not None


def validate_append(
    batches: list,
    client: bool,
    config: LogConfig,
    timestamp_type: str,
    now_ms: int,
    log_dir,
    target_codec: int | None,
) -> int | None:
    """LogValidator.validateMessagesAndAssignOffsets' checks of an append (``log_dir``: the
    partition's dir, whose name is Kafka's TopicPartition.toString in a message), in Kafka's
    order: a set converted uncompressed is read first (:func:`_size_converted`), then
    getFirstBatchAndMaybeValidateNoMoreBatches, then batch by batch validateBatch
    (:func:`_validate_batch`) and the batch's records (:func:`_validate_records`), whose errors
    end the append at the first batch that has any (processRecordErrors after each batch: an
    uncompressed legacy set is a batch per message).  Returns the codec LogValidator rebuilds the
    append with (:func:`rebuild_codec`), None when it is appended in place."""
    first = batches[0]
    if first.magic < 2 or len(batches) > 1:  # one test for the common single v2 batch
        _size_converted(batches, target_codec)
    codec = rebuild_codec(batches, log_dir, target_codec)
    for b in batches:
        _validate_batch(b, first, client, log_dir)
        _validate_records(b, config, timestamp_type, now_ms, log_dir, codec is None)
    return codec


def _size_converted(batches: list, target_codec: int | None) -> None:
    """convertAndAssignOffsetsNonCompressed, LogValidator's way for a set with no compressed
    batch that stays uncompressed and is not all of magic 2 (records.hasMatchingMagic), sizes the
    converted set first (AbstractRecords.estimateSizeInBytes: every record of every batch, a
    message's key() and value(), a v2 batch's records as DefaultRecord.readFrom reads them), before
    getFirstBatchAndMaybeValidateNoMoreBatches and any batch or record check: what that read
    throws wins, e.g. a legacy message whose key or value Kafka cannot read (LegacyFieldError)
    after a v2 batch is UNKNOWN_SERVER_ERROR, not the set's "more than one batch".  A set with a
    compressed batch, or recompressed, goes the compressed way (the one-batch check first, then
    its records, then the rebuild reads them: validateMessagesAndAssignOffsetsCompressed)."""
    if target_codec not in (None, compression.NONE):
        return
    if any(b.codec != compression.NONE for b in batches) or all(b.magic >= 2 for b in batches):
        return
    for b in batches:
        if b.magic < 2:
            b.key_value()
        else:
            for _ in R.skip_key_value_records(b, partial=False):
                pass


def rebuild_codec(batches: list, log_dir, target_codec: int | None) -> int | None:
    """getFirstBatchAndMaybeValidateNoMoreBatches (an append of v2 batches or of a compressed
    legacy message is one batch), then whether LogValidator rebuilds the append (one v2 batch of
    every record, ``records.rebuild_as_v2``) and with which codec, given the log's
    compression.type ``target_codec`` (None: ``producer``); None: the batches are appended as
    they are, offsets assigned in place (the produce path's common case, decided without another
    call).  With toMagic 2 (validateMessagesAndAssignOffsets): a legacy (magic 0/1) set is always
    converted, into one batch for the whole set (convertAndAssignOffsetsNonCompressed when it is
    uncompressed and stays so, buildRecordsAndAssignOffsets otherwise), with the source's codec
    unless compression.type names another; a v2 batch is rebuilt only when compression.type
    names a codec other than its own, except an uncompressed control batch (a coordinator's
    marker is never compressed)."""
    if len(batches) > 1 and (batches[0].magic >= 2 or any(b.codec != compression.NONE for b in batches)):
        # Kafka's sourceCompression is the last codec of the set that is not none
        raise InvalidRecordError(
            f"Compressed outer record has more than one batch in topic partition {log_dir.name}",
            batches[1].position,
        )
    b = batches[0]
    if b.magic >= 2:
        if target_codec is None:
            return None
        if target_codec == b.codec or (b.codec == compression.NONE and b.is_control):
            return None
        return target_codec
    # a set of several messages is uncompressed (above): the first message's codec is the set's
    return b.codec if target_codec is None else target_codec


def _validate_batch(b, first, client: bool, log_dir) -> None:
    """LogValidator.validateBatch: every batch has the first one's magic; a ``client``'s v2
    batch has a consistent offset range and record count, no control batch, and a sequence
    number when it has a producer id."""
    if b.magic != first.magic:
        raise InvalidRecordError(
            f"Batch magic {b.magic} is not the same as the first batch's magic byte {first.magic} in "
            f"topic partition {log_dir.name}",
            b.position,
        )
    if not client:
        return
    if b.magic >= 2:
        count = b.records_count
        if b.last_offset_delta + 1 != count or count <= 0:  # lastOffset - baseOffset + 1
            tp = log_dir.name
            base, last = b.base_offset, b.last_offset
            if last - base + 1 <= 0:
                why = f"Batch has an invalid offset range: [{base}, {last}]"
            elif count <= 0:
                why = f"Invalid reported count for record batch: {count}"
            else:
                why = f"Inconsistent batch offset range [{base}, {last}] and count of records {count}"
            raise InvalidRecordError(f"{why} in topic partition {tp}", b.position)
    if b.attributes & R.CONTROL_MASK:
        raise InvalidRecordError(
            f"Clients are not allowed to write control records in topic partition {log_dir.name}",
            b.position,
        )
    if b.producer_id >= 0 and b.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {b.base_sequence} in record batch with producerId {b.producer_id} "
            f"in topic partition {log_dir.name}",
            b.position,
        )


def _validate_records(
    b, config: LogConfig, timestamp_type: str, now_ms: int, log_dir, in_place: bool = True
) -> None:
    """LogValidator.validateRecord on each record of the batch ``b``: raise RecordValidationError
    when it has record errors; on a CreateTime topic, write a v2 batch's timestamp fields as Kafka
    does (above) into its buffer, which must be writable, and its parsed header, unless the append
    is rebuilt (not ``in_place``: Kafka then sets nothing on the source batch, whose records a
    rebuild reads as they came).

    A compressed legacy wrapper's inner messages are always read (the rebuild reads them anyway):
    one whose magic is not the wrapper's is a record error (INVALID_RECORD, "'s magic does not
    match outer magic"), and the others' own CRC is checked (LegacyRecord.ensureValid), a wrong
    one ending the append with CorruptRecordException (CORRUPT_MESSAGE, no record error: the
    catch around it takes InvalidRecordException only, which CorruptRecordException is not).  A
    plain legacy message's CRC is the batch's, checked before (analyzeAndValidateRecords)."""
    compacted = config.compact
    create_time = timestamp_type == "CreateTime"
    before = config.timestamp_before_max_ms if create_time else LONG_MAX
    after = config.timestamp_after_max_ms if create_time else LONG_MAX
    limited = before != LONG_MAX or after != LONG_MAX
    deep = b.magic < 2 and b.codec != compression.NONE
    set_append_time = b.timestamp_type == R.LOG_APPEND_TIME
    if not compacted and not deep and not (limited and b.magic > 0):
        if not set_append_time:
            return  # nothing to check, nothing to write: the header stays as it is
        if create_time and b.max_timestamp != R.NO_TIMESTAMP:
            if b.magic >= 2 and in_place:  # its records all read as maxTimestamp, inside no limit here
                R.set_max_timestamp(b.buf, b.position, R.CREATE_TIME, b.max_timestamp)
                b.attributes &= ~R.TIMESTAMP_TYPE_MASK
            return
    errors: list[tuple[int, str]] = []
    timestamp_error = False
    # validateMessagesAndAssignOffsetsCompressed reads a compressed batch it keeps in place with
    # skipKeyValueIterator (readPartiallyFrom), any other v2 batch is read whole (readFrom)
    partial = in_place and b.codec != compression.NONE
    if b.magic >= 2:
        stamps = ((o, ts, (k, v)) for o, ts, k, v in R.skip_key_value_records(b, partial=partial))
    else:
        # a message whose key or value does not fit is read by validateRecord's checks as far
        # as they go (its magic, CRC, keySize, timestamp), its key and value only after them
        stamps = ((r.offset, r.timestamp, r) for r in b.records(lenient=True))
    max_ts = R.NO_TIMESTAMP
    for index, (offset, ts, record) in enumerate(stamps):
        if deep:
            if record.magic != b.magic:
                errors.append(
                    (
                        index,
                        f"Record {_record_string(b, offset, ts, record, False)}'s magic does not match "
                        f"outer magic {b.magic} in topic partition {log_dir.name}",
                    )
                )
                continue
            if not record.is_valid:
                raise CorruptRecordError(
                    f"Record is corrupt (stored crc = {record.crc}, computed crc = {record.computed_crc})",
                    b.position,
                    kind="crc_mismatch",
                )
        if ts > max_ts:
            max_ts = ts
        if compacted and not _has_key(record):
            errors.append(
                (
                    index,
                    f"Compacted topic cannot accept message without key in topic partition {log_dir.name}",
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
                    f"Invalid timestamp type in message {_record_string(b, offset, ts, record, partial)}. "
                    "Producer should not set timestamp type to LogAppendTime.",
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
    if create_time and in_place and b.magic >= 2 and (set_append_time or max_ts != b.max_timestamp):
        R.set_max_timestamp(b.buf, b.position, R.CREATE_TIME, max_ts)
        b.attributes &= ~R.TIMESTAMP_TYPE_MASK
        b.max_timestamp = max_ts
