"""Fetch (1): long polls without busy loops, zero-copy segment slices.

Reads follow Kafka's ``readFromLog``: per partition up to
``min(partition_max_bytes, bytes left of max_bytes)`` starting with the whole
batch that contains the fetch offset, and the first batch is returned even
when larger than the limits (KIP-74).  When fewer than ``min_bytes`` are
available the request parks on a future that the log's append listener
resolves, bounded by ``max_wait_ms``.  Incremental fetch sessions (KIP-227)
are broker/fetch_session.py's: its context says which partitions a request
reads (an incremental one reads every partition of its session) and, once read
(after any long poll), which of them the answer carries and its session id.

The response is encoded by the generated codec with a unique 16-byte token in
each ``records`` field; the tokens (and their length prefixes) are then
replaced by the real length and the segment slices, which go out with
sendfile.  What a version may receive is decided once the fetch session has taken the
answer (``_fit_to_version``, Kafka's ``maybeConvertFetchedData``): below v10 a topic whose
compression.type is zstd answers UNSUPPORTED_COMPRESSION_TYPE; Fetch v0-3 gets the batches
down-converted to message format v0/v1, a compressed batch as one wrapper message of its codec,
the answer as long as LazyDownConversionRecords makes it (UNSUPPORTED_VERSION for a client where
the topic's message.downconversion.enable is false); Fetch v0-5 gets KAFKA_STORAGE_ERROR (a log
read's I/O error) as NOT_LEADER_OR_FOLLOWER.  From v13 topics are named by id (an unknown id is UNKNOWN_TOPIC_ID
for each of its partitions); from v16 a NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH partition carries the current leader and the response the
leader's endpoint (KIP-951), as Kafka's ``KafkaApis.handleFetchRequest`` does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time

from kafkatool.broker.handlers.metadata import current_leader, from_wire_uuid, node_endpoint
from kafkatool.broker.handlers.offsets import check_leader_epoch
from kafkatool.broker.network import CloseConnection, FileSlice, Parts, RequestFailed
from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.formats.schema import uvarint_bytes
from kafkatool.log.log import (
    ISOLATION_COMMITTED,
    ISOLATION_HIGH_WATERMARK,
    ISOLATION_LOG_END,
    OffsetOutOfRangeError,
)
from kafkatool.protocol.errors import ErrorCode, read_error_code, record_error_code
from kafkatool.protocol.framing import encode_response
from kafkatool.protocol.generated import FetchResponse
from kafkatool.protocol.generated.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)

API_KEY = 1
MAX_VERSION = 17
FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13
REPLICA_STATE_FROM = 15
LEADER_HINTS_FROM = 16
#: KafkaApis.maybeDownConvertStorageError: up to this version KAFKA_STORAGE_ERROR is answered
#: as NOT_LEADER_OR_FOLLOWER (an older client takes the former for a fatal unknown error)
STORAGE_ERROR_AS_NOT_LEADER_TO = 5
_HINTED = frozenset((ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH))
#: below this many bytes in total, slices are read and inlined (cheaper than splicing + sendfile)
INLINE_MAX = 64 * 1024
_TOKEN_LEN = 16
_I32 = struct.Struct(">i")

log = logging.getLogger("kafkatool.broker")


class _Read:
    __slots__ = (
        "topics",
        "bytes",
        "errors",
        "tps",
        "slices",
        "leaders",
        "logs",
        "follower",
        "storage_errors",
        "sized",
        "throttled",
    )

    def __init__(self):
        self.topics = []
        self.bytes = 0
        self.errors = False
        self.tps = []
        self.slices = {}  # id(PartitionData) -> [FileSlice]
        self.leaders = set()  # node ids named in current_leader hints (v16+)
        # id(PartitionData) -> (LogConfig, fetch offset) of a partition whose log is here
        # (ReplicaManager.getLogConfig: whatever the partition's answer)
        self.logs = {}
        self.storage_errors = False
        self.follower = False
        #: (id(PartitionData), the topic's TopicCounters, bytes read) for BytesOut, counted
        #: once the answer is made (_count_bytes_out)
        self.sized = []
        #: id(PartitionData) of a follower's partitions the leader's replication quota throttles
        #: (in sync or not): their size is recorded as the answer is made
        self.throttled = set()


def fetch_replica_id(req, version: int) -> int:
    """FetchRequest.replicaId: a follower's broker id (0 or more), -1 for a consumer."""
    if version >= REPLICA_STATE_FROM:
        return req.replica_state.replica_id if req.replica_state is not None else -1
    return req.replica_id


def _read(
    broker,
    req,
    topics,
    version: int,
    denied: set[str] | frozenset = frozenset(),
    *,
    again: bool = False,
    quota_cap: int | None = None,
) -> _Read:
    """``topics``: FetchTopic-shaped, what the fetch context reads; ``denied``: topics the
    authorizer refused (TOPIC_AUTHORIZATION_FAILED, nothing read).  ``again``: a parked fetch
    read once more (DelayedFetch's completion): a follower's fetch state was recorded by its
    first read and is not recorded again (Kafka's updateFollowerFetchState runs once per
    fetch, in fetchMessages, never in DelayedFetch.onComplete)."""
    out = _Read()
    if version >= 4 and req.isolation_level == 1:
        isolation = ISOLATION_COMMITTED
    else:
        isolation = ISOLATION_HIGH_WATERMARK
    replica_id = fetch_replica_id(req, version)
    if replica_id >= 0:
        isolation = ISOLATION_LOG_END
        out.follower = True
    remaining = req.max_bytes if version >= 3 else 2**31 - 1
    if remaining <= 0:
        remaining = 2**31 - 1
    if quota_cap is not None and not out.follower:
        # a consumer under consumer_byte_rate asks for no more than the quota window holds
        # (KafkaApis: getMaxValueInQuotaWindow), else its answer is throttled whatever it reads
        remaining = min(remaining, quota_cap)
    min_one = True
    by_id = version >= TOPIC_IDS_FROM
    stats = broker.metrics.topics
    for ft in topics:
        t, name = _topic_of(broker, ft, by_id)
        tc = None  # the topic's BrokerTopicMetrics, looked up at its first partition read
        parts = []
        for fp in ft.partitions:
            idx = fp.partition
            pd = _partition_response(idx, 0)
            parts.append(pd)
            if t is None and by_id:
                pd.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                out.errors = True
                continue
            if name in denied:
                pd.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                out.errors = True
                if version < 10:
                    # Kafka converts every partition of the answer, a refused one too
                    lg = broker.get_log(name, idx)
                    if lg is not None:
                        out.logs[id(pd)] = (lg.config, fp.fetch_offset)
                continue
            out.tps.append((name, idx))
            lg, pd.error_code = broker.partition_log(t, idx)
            if lg is None:
                out.errors = True
                if pd.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    out.storage_errors = True  # an offline dir's partition
                continue
            if tc is None:
                tc = stats.topic(name)
            if not again:
                # ReplicaManager.fetchMessages marks every partition it reads, once per request
                tc.total_fetch += 1
                stats.all.total_fetch += 1
            if version < 10:
                out.logs[id(pd)] = (lg.config, fp.fetch_offset)
            not_leader = broker.leader_error(name, idx)
            if not_leader is not None:
                pd.error_code = not_leader
                out.errors = True
                if version >= LEADER_HINTS_FROM:
                    _hint(broker, out, pd, t, idx)
                continue
            if version >= 9 and fp.current_leader_epoch >= 0:
                pd.error_code = check_leader_epoch(t, idx, fp.current_leader_epoch)
                if pd.error_code:
                    out.errors = True
                    if version >= LEADER_HINTS_FROM:
                        _hint(broker, out, pd, t, idx)
                    continue
            if version >= 12 and fp.last_fetched_epoch >= 0 and lg.leader_epoch_cache.entries:
                # Partition.readRecords (KIP-595 style truncation in fetch, IBP 2.7+): a follower
                # whose last epoch ends earlier here gets the divergence point, not records
                e, o = lg.leader_epoch_cache.end_offset_for(fp.last_fetched_epoch, lg.log_end_offset)
                if e < 0 or fp.fetch_offset < lg.log_start_offset:
                    pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    out.errors = True
                    continue
                if e < fp.last_fetched_epoch or o < fp.fetch_offset:
                    pd.diverging_epoch = EpochEndOffset(epoch=e, end_offset=o)
                    pd.high_watermark = lg.high_watermark
                    pd.log_start_offset = lg.log_start_offset
                    pd.last_stable_offset = lg.last_stable_offset
                    out.errors = True
                    continue
            limit = min(fp.partition_max_bytes, remaining)
            try:
                info = lg.read(fp.fetch_offset, max(limit, 0), isolation=isolation, min_one_message=min_one)
            except OffsetOutOfRangeError:
                pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                pd.high_watermark = lg.high_watermark
                pd.last_stable_offset = lg.last_stable_offset
                pd.log_start_offset = lg.log_start_offset
                out.errors = True
                continue
            except OSError as exc:
                # LocalLog.read's I/O error is a KafkaStorageException: the partition answers
                # KAFKA_STORAGE_ERROR and nothing else (readFromLog's createLogReadResult)
                broker.report_log_error(lg, "reading from", exc)
                pd.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                out.errors = True
                out.storage_errors = True
                continue
            except FormatError as exc:
                # damaged data on the way to the fetch offset (an index entry that points
                # into a batch, a corrupt batch header): ReplicaManager.readFromLocalLog's
                # catch-all logs it and answers the partition Errors.forException (a
                # CorruptRecordException: CORRUPT_MESSAGE); the rest of the fetch is served
                log.error(
                    "Error processing fetch from offset %d on partition %s-%d: %s",
                    fp.fetch_offset,
                    name,
                    idx,
                    exc,
                )
                tc.failed_fetch += 1
                stats.all.failed_fetch += 1
                pd.error_code = read_error_code(exc)
                out.errors = True
                continue
            pd.high_watermark = info.high_watermark
            pd.last_stable_offset = info.last_stable_offset
            pd.log_start_offset = info.log_start_offset
            if replica_id >= 0 and broker.replicas is not None and not again:
                # Partition.updateFollowerFetchState: the follower's log end offset is its fetch offset
                broker.replicas.record_follower_fetch(
                    name, idx, replica_id, fp.fetch_offset, fp.log_start_offset
                )
            if isolation == ISOLATION_COMMITTED:
                pd.aborted_transactions = [
                    AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in (info.aborted_transactions or [])
                ]
            if out.follower and broker.replicas is not None:
                rm = broker.replicas
                if rm.leader_quota.is_throttled(name, idx):
                    out.throttled.add(id(pd))
                    if rm.should_leader_throttle(name, idx, replica_id):
                        continue  # the read's records replaced by none (readFromLog's checkFetchDataInfo)
            size = 0
            slices = []
            for s in info.slices:
                if s.size > 0:
                    slices.append(FileSlice(s.segment.fileno(), s.position, s.size))
                    size += s.size
            if size:
                out.slices[id(pd)] = slices
                out.sized.append((id(pd), tc, size))
                out.bytes += size
                remaining -= size
                min_one = False
        if by_id:
            out.topics.append(FetchableTopicResponse(topic_id=ft.topic_id, partitions=parts))
        else:
            out.topics.append(FetchableTopicResponse(topic=ft.topic, partitions=parts))
    return out


def _hint(broker, out: _Read, pd, t, idx: int) -> None:
    if pd.error_code not in _HINTED:
        return
    leader, epoch = current_leader(broker, t, idx)
    if leader >= 0:
        pd.current_leader = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        out.leaders.add(leader)


def _node_endpoints(broker, conn, read: _Read) -> list:
    out = []
    for n in sorted(read.leaders):
        host, port = node_endpoint(broker, n, conn)
        out.append(NodeEndpoint(node_id=n, host=host, port=port, rack=None))
    return out


def _fit_to_version(read: _Read, version: int) -> dict:
    """KafkaApis.maybeConvertFetchedData, the one rule of what a Fetch version may receive,
    applied as Kafka applies it: to every partition of the answer the fetch session kept (after
    the session took the answer as read). Up to v5 KAFKA_STORAGE_ERROR is NOT_LEADER_OR_FOLLOWER
    (maybeDownConvertStorageError: such a client retries after a metadata refresh). For a
    partition whose log is on this broker: below v10 a topic whose compression.type is zstd
    answers UNSUPPORTED_COMPRESSION_TYPE (a follower's fetch too: the topic's config decides,
    not the batches read); below v4 the batches must be message format v0 (v0-1) or v1 (v2-3):
    a client's fetch of a topic with message.downconversion.enable=false answers
    UNSUPPORTED_VERSION, else they are down-converted. Returns id(PartitionData) -> (magic,
    fetch offset) of the partitions to down-convert."""
    convert = {}
    storage = read.storage_errors and version <= STORAGE_ERROR_AS_NOT_LEADER_TO
    if not read.logs and not storage:
        return convert
    for t in read.topics:
        for pd in t.partitions:
            if storage and pd.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                pd.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            found = read.logs.get(id(pd))
            if found is None:
                continue
            config, fetch_offset = found
            if config.target_codec == compression.ZSTD:
                _refuse(read, pd, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
            elif version < 4:
                if not read.follower and not config.message_downconversion_enable:
                    _refuse(read, pd, ErrorCode.UNSUPPORTED_VERSION)
                else:
                    convert[id(pd)] = (0 if version < 2 else 1, fetch_offset)
    return convert


def _refuse(read: _Read, pd, error: int) -> None:
    """FetchResponse.partitionResponse(partition, error): nothing but the error."""
    pd.error_code = error
    pd.high_watermark = -1
    pd.last_stable_offset = -1
    pd.log_start_offset = -1
    pd.aborted_transactions = None
    pd.preferred_read_replica = -1
    pd.records = b""
    sl = read.slices.pop(id(pd), None)
    if sl is not None:
        read.bytes -= sum(s.size for s in sl)


#: LazyDownConversionRecordsSend.MAX_READ_SIZE: after the first, batches are converted this
#: many bytes of them at a time
_CONVERT_CHUNK = 128 * 1024


def _down_convert(data: bytes, magic: int, fetch_offset: int, version: int) -> bytes | None:
    """Batches as a v0/v1 message set with the same offsets, sized as Kafka's
    LazyDownConversionRecords: the first batch that converts to something is converted at once,
    the answer is max(bytes read, that conversion) long, the rest is converted in chunks of
    128 KiB of batches (LazyDownConversionRecordsSend), cut at that length or padded with an
    overflow entry (offset -1, a length past the answer's end: a client ignores it). None: the
    first batch to convert is zstd, which has no v0/v1 form (the partition answers
    UNSUPPORTED_COMPRESSION_TYPE); a later chunk holding one ends the answer in the overflow
    entry (the client's next fetch starts there). A partial trailing batch is not converted.
    A batch that cannot be read: the first one fails the whole fetch (RequestFailed, its error
    for every partition, as Kafka's handleError answers), a later one closes the connection."""
    batches = list(R.iter_batches(data))
    i = 0
    first = b""
    while i < len(batches) and not first:
        try:
            first = R.down_convert_batch(batches[i], magic, fetch_offset)
        except FormatError as exc:
            # LazyDownConversionRecords converts its first batch in KafkaApis' handler:
            # what it throws (only UnsupportedCompressionTypeException is caught there) goes
            # to handleError, which answers the whole fetch with its error
            code = record_error_code(exc)
            raise RequestFailed(
                f"down-converting the batch at offset {batches[i].base_offset}: {exc}",
                lambda whole, code=code: _whole_request_error(whole, code, version),
            ) from None
        i += 1
        if first is None:
            return None
    if not first:
        return _overflow(R.LOG_OVERHEAD) if batches else b""
    size = max(len(data), len(first))
    out = bytearray(first)
    while i < len(batches) and len(out) < size:
        chunk = [batches[i]]
        read = batches[i].size
        i += 1
        while i < len(batches) and read + batches[i].size <= _CONVERT_CHUNK:
            chunk.append(batches[i])
            read += batches[i].size
            i += 1
        try:
            converted = [R.down_convert_batch(b, magic, fetch_offset) for b in chunk]
        except FormatError as exc:
            # LazyDownConversionRecordsSend converts the rest while the answer is being sent:
            # a failure there ends the send, and the connection
            raise CloseConnection(f"down-converting a fetched batch failed: {exc}") from None
        if None in converted:
            break
        out += b"".join(converted)
    del out[size:]
    while len(out) < size:
        out += _overflow(size - len(out))
    return bytes(out)


def _overflow(remaining: int) -> bytes:
    """LazyDownConversionRecordsSend.buildOverflowBatch, as much of it as ``remaining`` takes."""
    return R.overflow_entry(remaining, _CONVERT_CHUNK)


def _partition_response(index: int, error: int) -> PartitionData:
    """FetchResponse.partitionResponse: a partition's answer with nothing but its error (high
    watermark, last stable and log start offsets -1, no records)."""
    return PartitionData(
        partition_index=index,
        error_code=error,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )


def _whole_request_error(req, code: int, version: int) -> FetchResponse:
    """FetchRequest.getErrorResponse: every partition of the request as the client sent it
    answers ``code`` (FetchResponse.partitionResponse: nothing but the error) below v13, the
    top-level error code says it too (from v7; v13 on: only there)."""
    topics = []
    if version < 13:
        for ft in req.topics:
            parts = [_partition_response(fp.partition, code) for fp in ft.partitions]
            topics.append(FetchableTopicResponse(topic=ft.topic, topic_id=ft.topic_id, partitions=parts))
    return FetchResponse(throttle_time_ms=0, error_code=code, session_id=req.session_id, responses=topics)


def _quota_cap(broker, quota) -> int | None:
    if quota is None or not broker.quotas.fetch.enabled:
        return None
    cap = broker.quotas.fetch.max_value_in_window(quota.user, quota.client_id)
    return None if cap is None else max(0, min(int(cap), 2**31 - 1))


def _throttled(header, read: _Read, fctx, broker, conn, quota) -> bytes | None:
    """KafkaApis' consumer fetch under client quotas: the request time and the answer's bytes
    recorded; throttled, the answer is empty (the bytes unrecorded, the session untouched:
    FetchContext.getThrottledResponse) and carries the throttle time, and the connection mutes."""
    from kafkatool.broker import quotas as Q

    quota.done = True
    if read.follower:
        return None  # a replica's fetch is exempt (sendResponseExemptThrottle)
    quotas = broker.quotas
    now = Q.now_ms()
    t = quotas.request_throttle(quota, now)
    size = 0
    if quotas.fetch.enabled:
        size = answer_size(header.api_version, read.topics, read.slices)
        t = max(t, quotas.fetch.record_and_throttle(quota.user, quota.client_id, size, now))
    if t <= 0:
        return None
    if size:
        quotas.fetch.unrecord(quota.user, quota.client_id, size, now)
    Q.throttle_connection(conn, t)
    error, session_id = fctx.throttled()
    # Fetch v0 has no throttle_time_ms: the client learns nothing but the empty answer
    throttle = t if header.api_version >= 1 else 0
    resp = FetchResponse(throttle_time_ms=throttle, error_code=error, session_id=session_id, responses=[])
    return encode_response(API_KEY, header.api_version, header.correlation_id, resp)


def answer_size(version: int, topics: list, slices: dict) -> int:
    """FetchResponse.sizeOf: 4 + the size of a FetchResponse of ``topics`` (its partitions' records
    the ``slices`` of each, id(PartitionData) -> [FileSlice]), as KafkaApis sizes an answer for
    the consumer quota and the leader's replication quota."""
    out = bytearray()
    FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics).encode_into(out, version)
    size = 4 + len(out)
    if slices:
        flexible = version >= FLEXIBLE_FROM
        for t in topics:
            for pd in t.partitions:
                sl = slices.get(id(pd))
                if sl:
                    n = sum(s.size for s in sl)
                    # records encoded as b"": a length of 0 in the probe, n bytes and their length here
                    size += n + (len(uvarint_bytes(n + 1)) - 1 if flexible else 0)
    return size


def _record_leader_quota(broker, read: _Read, version: int) -> None:
    """KafkaApis.sizeOfThrottledPartitions: a follower's answer (as the fetch session keeps it)
    adds the size of its throttled partitions, in sync or not, to the leader's replication
    quota (an answer with none adds the size of an empty one, as Kafka's)."""
    if read.throttled:
        picked = []
        for t in read.topics:
            parts = [pd for pd in t.partitions if id(pd) in read.throttled]
            if parts:
                picked.append(FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts))
        size = answer_size(version, picked, read.slices)
    else:
        size = _EMPTY_SIZE.get(version)
        if size is None:
            size = _EMPTY_SIZE[version] = answer_size(version, [], {})
    broker.replicas.leader_quota.record(size)


#: FetchResponse.sizeOf of an answer without partitions, per version
_EMPTY_SIZE: dict[int, int] = {}


def _encode(header, read: _Read, fctx, broker=None, conn=None, quota=None):
    version = header.api_version
    if quota is not None and not quota.done:
        answer = _throttled(header, read, fctx, broker, conn, quota)
        if answer is not None:
            return answer
    error, session_id = fctx.finish(read.topics, lambda pd: id(pd) in read.slices)
    if read.follower and broker is not None and broker.replicas is not None:
        _record_leader_quota(broker, read, version)
    convert = _fit_to_version(read, version)
    resp = FetchResponse(throttle_time_ms=0, error_code=error, session_id=session_id, responses=read.topics)
    if read.leaders:
        resp.node_endpoints = _node_endpoints(broker, conn, read)
    if not read.slices:
        return encode_response(API_KEY, version, header.correlation_id, resp)
    by_pd = {}
    for t in read.topics:
        for pd in t.partitions:
            sl = read.slices.get(id(pd))
            if sl is not None:
                by_pd[id(pd)] = (pd, sl)
    if convert or read.bytes <= INLINE_MAX:
        for key, (pd, sl) in by_pd.items():
            data = b"".join(s.read_bytes() for s in sl)
            how = convert.get(key)
            if how is not None:
                data = _down_convert(data, *how, version)
                if data is None:
                    _refuse(read, pd, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                    continue
            pd.records = data
        _count_bytes_out(broker, read, by_pd)
        return encode_response(API_KEY, version, header.correlation_id, resp)
    # splice: tokens in the encoded response are replaced by length + file slices
    tokens = []
    nonce = os.urandom(12)
    for n, (pd, sl) in enumerate(by_pd.values()):
        token = nonce + n.to_bytes(4, "big")
        pd.records = token
        tokens.append((token, sl))
    body = encode_response(API_KEY, version, header.correlation_id, resp)
    flexible = version >= FLEXIBLE_FROM
    old_prefix = len(uvarint_bytes(_TOKEN_LEN + 1)) if flexible else 4
    parts = Parts()
    pos = 4
    total = len(body) - 4
    for token, sl in tokens:
        i = body.find(token, pos)
        if i < 0:
            raise AssertionError("fetch response token not found")
        size = sum(s.size for s in sl)
        prefix = uvarint_bytes(size + 1) if flexible else _I32.pack(size)
        parts.append(body[pos : i - old_prefix])
        parts.append(prefix)
        parts.extend(s.own() for s in sl)
        pos = i + _TOKEN_LEN
        total += len(prefix) + size - old_prefix - _TOKEN_LEN
    parts.append(body[pos:])
    parts.insert(0, _I32.pack(total))
    _count_bytes_out(broker, read, by_pd)
    return parts


def _count_bytes_out(broker, read: _Read, by_pd: dict) -> None:
    """BrokerTopicStats.updateBytesOut as the answer is made (KafkaApis: "record the bytes out
    metrics only when the response is being sent"): a consumer's bytes per topic and for the
    broker, a follower's as ReplicationBytesOutPerSec (broker-wide only, as Kafka's)."""
    ac = broker.metrics.topics.all
    slices = read.slices
    if read.follower:
        ac.replication_bytes_out += sum(n for key, _, n in read.sized if key in by_pd and key in slices)
        return
    for key, tc, n in read.sized:
        if key in by_pd and key in slices:
            tc.bytes_out += n
            ac.bytes_out += n


def handle_fetch(ctx, req):
    broker = ctx.broker
    header = ctx.header
    version = header.api_version
    if getattr(ctx, "acl_denied_all", False):  # a follower fetch without CLUSTER_ACTION
        resp = FetchResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, session_id=0, responses=[]
        )
        return encode_response(API_KEY, version, header.correlation_id, resp)
    fctx = broker.fetch_sessions.new_context(req, version, fetch_replica_id(req, version) >= 0)
    if fctx.kind == fctx.ERROR:
        resp = FetchResponse(throttle_time_ms=0, error_code=fctx.error, session_id=0, responses=[])
        return encode_response(API_KEY, version, header.correlation_id, resp)
    topics = fctx.topics
    may_read = getattr(ctx, "acl_may_read", None)
    denied = _denied(broker, topics, version, may_read) if may_read is not None else frozenset()
    quota = ctx.quota
    cap = _quota_cap(broker, quota)
    read = _read(broker, req, topics, version, denied, quota_cap=cap)
    if (
        read.errors
        or not read.tps  # nothing to wait on (ReplicaManager.fetchMessages: fetchInfos.isEmpty)
        or read.bytes >= req.min_bytes
        or req.max_wait_ms <= 0
        or read.bytes > 0
        and req.min_bytes <= 1
    ):
        return _encode(header, read, fctx, broker, ctx.connection, quota)
    # DelayedFetch: parked from here, in this same step of the event loop, so no append between
    # this read and the wait goes unseen; the wait's first read is the one just made
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    park = _park(broker, loop, read.tps, deadline)
    view = _follower_view(broker, read.tps) if read.follower else None
    if quota is not None:
        quota.thread_ns = time.perf_counter_ns() - quota.start_ns  # the loop's time, not the wait
    return _long_poll(
        broker, req, fctx, header, read.tps, ctx.connection, denied, deadline, park, view, quota, cap
    )


def _denied(broker, topics, version: int, may_read) -> set[str]:
    """The topics of this fetch (a session's too, not only those the request names) the
    principal may not READ (KafkaApis authorizes ``fetchContext.foreachPartition``)."""
    by_id = version >= TOPIC_IDS_FROM
    names = {_topic_of(broker, ft, by_id)[1] for ft in topics}
    return {n for n in names if n and not may_read(n)}


def _topic_of(broker, ft, by_id: bool):
    """(TopicMeta or None, name or None) of a FetchTopic-shaped entry: by topic id from v13."""
    if by_id:
        t = broker.metadata.topic_by_id(from_wire_uuid(ft.topic_id))
        return t, (t.name if t is not None else None)
    return broker.topic(ft.topic), ft.topic


def _park(broker, loop, tps, deadline: float) -> tuple[asyncio.Future, asyncio.TimerHandle]:
    """A waiter woken by an append or a high watermark move on one of ``tps`` (Broker.wake) or
    by the deadline, which also forgets it (a wait cancelled before it began leaves nothing)."""
    fut = broker.waiter(tps)
    return fut, loop.call_at(deadline, _expire, broker, fut, tps)


def _expire(broker, fut: asyncio.Future, tps) -> None:
    broker.drop_waiter(fut, tps)
    if not fut.done():
        fut.set_result(None)


async def _long_poll(
    broker, req, fctx, header, tps, conn, denied, deadline: float, park, view, quota=None, cap=None
):
    """Wait (``park``: :func:`_park`'s, made by the handler) until the fetch has ``min_bytes``,
    an error or its deadline, reading again after each wake-up (the waiter is this request's
    own: no wait_for, whose extra future, task wrapping and callbacks each parked follower
    fetch paid).  A follower's fetch (``view``: :func:`_follower_view` as of its last read,
    taken in the same step of the event loop; None for a consumer's) reads again only when
    that changed: the high watermark one follower's fetch moves wakes the other follower's
    parked fetch, which has nothing new (Kafka's DelayedFetch.tryComplete checks the log end
    offset, no read)."""
    loop = asyncio.get_running_loop()
    version = header.api_version
    while True:
        fut, timer = park
        try:
            await fut
        finally:
            timer.cancel()
            broker.drop_waiter(fut, tps)
        if view is not None and deadline > loop.time():
            now = _follower_view(broker, tps)
            if now == view:
                park = _park(broker, loop, tps, deadline)
                continue
            view = now
        read = _read(broker, req, fctx.topics, version, denied, again=True, quota_cap=cap)
        if read.errors or read.bytes >= req.min_bytes or deadline - loop.time() <= 0:
            try:
                return _encode(header, read, fctx, broker, conn, quota)
            except RequestFailed as exc:  # as the router answers it for a fetch answered at once
                return exc.answer(req)
        park = _park(broker, loop, tps, deadline)


def _follower_view(broker, tps) -> tuple:
    """What a follower's fetch reads besides the bytes' own limits: per partition its log (a
    failed dir's is gone), log end and log start offsets, and leadership (leader, epoch)."""
    rm = broker.replicas
    out = []
    for tp in tps:
        lg = broker.get_log(*tp)
        part = rm.local.get(tp) if rm is not None else None
        out.append(
            (
                lg,
                lg.log_end_offset if lg is not None else -1,
                lg.log_start_offset if lg is not None else -1,
                (part.leader, part.leader_epoch) if part is not None else None,
            )
        )
    return tuple(out)


def register(router) -> None:
    router.register(API_KEY, 0, MAX_VERSION, handle_fetch)
