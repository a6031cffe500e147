"""ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21)."""

from __future__ import annotations

import logging

from kafkatool.formats.errors import FormatError
from kafkatool.log.log import (
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    OffsetOutOfRangeError,
)
from kafkatool.protocol.errors import ErrorCode, read_error_code
from kafkatool.protocol.generated import (
    DeleteRecordsResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
)
from kafkatool.protocol.generated.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from kafkatool.protocol.generated.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from kafkatool.protocol.generated.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)

log = logging.getLogger("kafkatool.broker")

#: ListOffsetsRequest.CONSUMER_REPLICA_ID: a client's request (-2 is the debugging one)
CONSUMER_REPLICA_ID = -1


def offset_by_spec(lg, spec: int, upper: int) -> tuple[tuple[int, int, int] | None, int, FormatError | None]:
    """One partition's ListOffsets lookup by the broker's rule, for serve and for the offline
    reader of a log dir (``topics get-offsets --log-dir``): (timestamp, offset, leader epoch)
    or None, then an error code and, for damaged data, the codec's error.  A negative
    timestamp that names no offset is INVALID_REQUEST; damaged stored data (a time or offset
    index entry into a batch, a batch that does not parse) is KafkaApis' "Error while
    responding to offset request" with the partition's Errors.forException (read_error_code).
    An OSError goes to the caller (serve takes the log dir offline: KAFKA_STORAGE_ERROR)."""
    try:
        return lg.list_offset(spec, upper), 0, None
    except ValueError:
        return None, ErrorCode.INVALID_REQUEST, None
    except FormatError as exc:
        return None, read_error_code(exc), exc


def check_leader_epoch(t, partition: int, requested: int) -> int:
    """A request's current leader epoch against the partition's (Partition's
    localLogWithEpochOrThrow, for Fetch, ListOffsets and OffsetForLeaderEpoch): newer is
    UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH, -1 (not sent) or equal 0."""
    if requested < 0:
        return 0
    ours = t.leader_epoch(partition)
    if requested > ours:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if requested < ours:
        return ErrorCode.FENCED_LEADER_EPOCH
    return 0


def handle_list_offsets(ctx, req):
    broker = ctx.broker
    v = ctx.version
    topics = []
    seen = set()
    for rt in req.topics:
        t = broker.topic(rt.name)
        parts = []
        for rp in rt.partitions:
            pr = ListOffsetsPartitionResponse(
                partition_index=rp.partition_index,
                error_code=0,
                old_style_offsets=[],
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            parts.append(pr)
            key = (rt.name, rp.partition_index)
            if key in seen:
                pr.error_code = ErrorCode.INVALID_REQUEST
                continue
            seen.add(key)
            lg, pr.error_code = broker.partition_log(t, rp.partition_index)
            if lg is None:
                continue
            not_leader = broker.leader_error(rt.name, rp.partition_index)
            if not_leader is not None:
                pr.error_code = not_leader
                continue
            if v >= 4:
                pr.error_code = check_leader_epoch(t, rp.partition_index, rp.current_leader_epoch)
                if pr.error_code:
                    continue
            committed = v >= 2 and req.isolation_level == 1
            upper = lg.last_stable_offset if committed else lg.high_watermark
            ts = rp.timestamp
            if req.replica_id >= 0:
                upper = lg.log_end_offset
            # Partition.fetchOffsetForTimestamp: a client asking a new leader whose high watermark
            # still lags the start of its epoch gets OFFSET_NOT_AVAILABLE (retriable) for the
            # latest offset and for a lookup that finds nothing below it, not a stale answer
            lagging = (
                v >= 1
                and req.replica_id == CONSUMER_REPLICA_ID
                and broker.replicas is not None
                and broker.replicas.lagging_epoch_start(key) is not None
            )
            # UnifiedLog.fetchOffsetByTimestamp runs in maybeHandleIOException: an I/O error
            # reading the time index or the segment takes the log dir offline and the
            # partition answers KAFKA_STORAGE_ERROR (ReplicaManager.fetchOffset)
            try:
                found, code, damage = offset_by_spec(lg, ts, upper)
            except OSError as exc:
                broker.report_log_error(lg, "fetching offset by timestamp for", exc)
                pr.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if damage is not None:
                log.error(
                    "Error while responding to offset request for %s-%d: %s",
                    rt.name,
                    rp.partition_index,
                    damage,
                )
            if code:
                pr.error_code = code
                continue
            stamp, offset, epoch = found if found is not None else (-1, -1, -1)
            lookup_missed = found is None and (ts >= 0 or ts == MAX_TIMESTAMP)
            if lagging and (ts == LATEST_TIMESTAMP or lookup_missed):
                pr.error_code, pr.offset, pr.timestamp = ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1
                continue
            if v == 0:
                pr.old_style_offsets = [offset] if offset >= 0 else []
                continue
            pr.offset = offset
            pr.timestamp = stamp
            if offset >= 0 and v >= 4:
                pr.leader_epoch = epoch
        topics.append(ListOffsetsTopicResponse(name=rt.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def handle_offset_for_leader_epoch(ctx, req):
    broker = ctx.broker
    v = ctx.version
    out = []
    for rt in req.topics:
        t = broker.topic(rt.topic)
        parts = []
        for rp in rt.partitions:
            r = EpochEndOffset(error_code=0, partition=rp.partition, leader_epoch=-1, end_offset=-1)
            parts.append(r)
            lg, r.error_code = broker.partition_log(t, rp.partition)
            if lg is None:
                continue
            not_leader = broker.leader_error(rt.topic, rp.partition)
            if not_leader is not None:
                r.error_code = not_leader
                continue
            if v >= 2:
                r.error_code = check_leader_epoch(t, rp.partition, rp.current_leader_epoch)
                if r.error_code:
                    continue
            if not lg.leader_epoch_cache.entries and 0 <= rp.leader_epoch <= t.leader_epoch(rp.partition):
                # no leader-epoch-checkpoint (a copied dir without it): on a single node there is
                # no divergent history, so the whole log is the current epoch; -1/-1 would make
                # consumers assume truncation and reset their offsets
                r.leader_epoch, r.end_offset = t.leader_epoch(rp.partition), lg.log_end_offset
                continue
            # memory only, as Kafka's endOffsetForEpoch (no I/O error to report here)
            epoch, end = lg.leader_epoch_cache.end_offset_for(rp.leader_epoch, lg.log_end_offset)
            r.leader_epoch, r.end_offset = epoch, end
        out.append(OffsetForLeaderTopicResult(topic=rt.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=out)


def delete_segments_below_start(lg) -> None:
    """Kafka's deleteLogStartOffsetBreachedSegments: segments wholly below the log start offset."""
    segs = lg.segments
    doomed = []
    for seg, nxt in zip(segs, segs[1:], strict=False):
        if nxt.base_offset <= lg.log_start_offset:
            doomed.append(seg)
        else:
            break
    if doomed:
        lg.delete_segments(doomed)


def handle_delete_records(ctx, req):
    broker = ctx.broker
    out = []
    changed = False
    waits = []  # (result, partition, requested offset): DelayedDeleteRecords in cluster mode
    for rt in req.topics:
        t = broker.topic(rt.name)
        parts = []
        for rp in rt.partitions:
            r = DeleteRecordsPartitionResult(
                partition_index=rp.partition_index, low_watermark=-1, error_code=0
            )
            parts.append(r)
            lg, r.error_code = broker.partition_log(t, rp.partition_index)
            if lg is None:
                continue
            not_leader = broker.leader_error(rt.name, rp.partition_index)
            if not_leader is not None:
                r.error_code = not_leader
                continue
            if broker.read_only:
                r.error_code = ErrorCode.POLICY_VIOLATION
                continue
            offset = lg.high_watermark if rp.offset == -1 else rp.offset
            if offset < 0:
                r.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                if lg.increment_log_start_offset(offset):
                    changed = True
                    delete_segments_below_start(lg)
                    log.info(
                        "records deleted topic=%s partition=%d log_start_offset=%d",
                        rt.name,
                        rp.partition_index,
                        lg.log_start_offset,
                    )
            except OffsetOutOfRangeError:
                r.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            r.low_watermark = lg.log_start_offset
            if broker.replicas is not None:
                # ReplicaManager.deleteRecords: the answer is the low watermark (the smallest log
                # start offset of the live replicas), waited for until it reaches the offset
                key = (rt.name, rp.partition_index)
                low = broker.replicas.low_watermark(key)
                r.low_watermark = low if low is not None else r.low_watermark
                if low is not None and low < offset:
                    waits.append((r, key, offset))
        out.append(DeleteRecordsTopicResult(name=rt.name, partitions=parts))
    if changed:
        broker.manager.checkpoint_log_start_offsets()
    if waits:

        async def replicated():
            await broker.replicas.await_low_watermark(waits, req.timeout_ms)
            return DeleteRecordsResponse(throttle_time_ms=0, topics=out)

        return replicated()
    return DeleteRecordsResponse(throttle_time_ms=0, topics=out)


def register(router) -> None:
    # Kafka 3.9's maxima (the release this snapshot's stable versions match; Python clients infer
    # the broker release from them): v10 (4.0, KIP-1075 remote-lookup timeout) is not advertised
    router.register(2, 0, 9, handle_list_offsets)
    router.register(23, 0, 4, handle_offset_for_leader_epoch)
    router.register(21, 0, 2, handle_delete_records)
