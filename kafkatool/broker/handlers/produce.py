"""Produce (0) and InitProducerId (22).

The hot path never decodes records: the batch header is read in place, the
CRC is checked once, and the bytes go to the segment as they came.  Records
are decoded only by the log: its record rules (log/validator.py: a compacted
topic's keys, a CreateTime topic's timestamp limits) when a batch might break
them, and LogValidator's rebuild of a legacy message set or of a batch whose
codec the topic's compression.type overrides (validator.rebuild_codec).
Idempotent producers are checked by the log itself (Log.append_as_leader with
Kafka's CLIENT origin): a retry of one of a producer's last five batches gets
the original offsets, an old epoch or a sequence gap an error.
"""

from __future__ import annotations

import asyncio
import logging

from kafkatool.broker import read_only
from kafkatool.broker.handlers.metadata import current_leader, node_endpoint
from kafkatool.broker.network import AfterWrite
from kafkatool.broker.txn import check_transactional_produce
from kafkatool.broker.txn import verification as txn_verification
from kafkatool.errors import KafkatoolError
from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.log.log import RecordBatchTooLargeError, RecordTooLargeError
from kafkatool.log.producer_state import ProducerStateError
from kafkatool.log.validator import RecordValidationError
from kafkatool.protocol.errors import ErrorCode, record_error_code
from kafkatool.protocol.generated import InitProducerIdResponse, ProduceResponse
from kafkatool.protocol.generated.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)

log = logging.getLogger("kafkatool.broker")

#: ProduceError codes FailedProduceRequestsPerSec counts: thrown by the append, not one of the
#: exceptions ReplicaManager.appendToLocalLog leaves out (NotLeader, RecordTooLarge, Corrupt...)
_FAILED_PRODUCE = frozenset({ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.INVALID_TXN_STATE})

#: v10 adds the KIP-951 leader hints, v11 TRANSACTION_ABORTABLE (a failed KIP-890 verification)
MAX_VERSION = 11
LEADER_HINTS_FROM = 10


class ProduceError(KafkatoolError):
    """A partition's produce error.  ``detail`` says what failed (the broker's debug line);
    ``message`` is the answer's error_message, which Kafka fills only where ReplicaManager has
    a custom one (hasCustomErrorMessage: a failed transaction verification; a record
    validation is RecordValidationError), else null."""

    def __init__(self, code: int, detail: str, *, message: str | None = None):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.message = message


def _validate(ctx, lg, records):
    """The request's records: parsed (batch headers only), ProduceRequest.validateRecords' rules
    for the version, then the log's size and CRC checks (Log.analyze_and_validate); returns the
    parsed batches.  LogValidator's batch and record rules run in the log's append."""
    if records is None or len(records) == 0:
        raise ProduceError(ErrorCode.INVALID_RECORD, "no records")
    v = ctx.version
    try:
        batches = list(R.iter_batches(records))
    except FormatError as exc:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if not batches or batches[-1].end != len(records):
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, "records end inside a batch")
    if v >= 3:
        # ProduceRequest.validateRecords, in its order (KafkaApis, before the log)
        b0 = batches[0]
        if b0.magic != 2:
            raise ProduceError(ErrorCode.INVALID_RECORD, f"Produce v{v} needs record batches of magic 2")
        if v < 7 and b0.codec == compression.ZSTD:
            raise ProduceError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Produce v{v} may not use zstd")
        if len(batches) != 1:
            raise ProduceError(ErrorCode.INVALID_RECORD, f"Produce v{v} needs exactly one record batch")
    # size, CRC and codec, batch by batch, before anything looks at producer state (a corrupt
    # duplicate is CORRUPT_MESSAGE)
    lg.analyze_and_validate(batches)
    return batches


def _append_partition(
    broker,
    ctx,
    topic_name: str,
    index: int,
    records,
    acks: int,
    waits: list | None = None,
    txn_errors: dict | None = None,
    writes: list | None = None,
) -> PartitionProduceResponse:
    resp = PartitionProduceResponse(
        index=index,
        error_code=0,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[],
    )
    t = broker.topic(topic_name)
    lg, resp.error_code = broker.partition_log(t, index)
    if lg is None:
        return resp
    # BrokerTopicMetrics (ReplicaManager.appendToLocalLog): the topic's and the broker's
    stats = broker.metrics.topics
    tc, ac = stats.topic(topic_name), stats.all
    tc.total_produce += 1
    ac.total_produce += 1
    not_leader = broker.leader_error(topic_name, index)
    if not_leader is not None:
        resp.error_code = not_leader
        return resp
    detail = None
    failed = False  # an error FailedProduceRequestsPerSec counts (not one of Kafka's "known" ones)
    try:
        if broker.read_only:
            read_only.log_refusal("produce to", topic_name, ctx.header.client_id)
            msg = read_only.READ_ONLY_MSG
            raise ProduceError(ErrorCode.POLICY_VIOLATION, msg, message=msg)
        if txn_errors and (topic_name, index) in txn_errors:
            # KIP-890: the coordinator did not verify the partition (ReplicaManager answers
            # these before it appends anything)
            code, msg = txn_errors[(topic_name, index)]
            raise ProduceError(code, msg or ErrorCode(code).name, message=msg)
        if acks == -1 and broker.replicas is not None:
            # Partition.appendRecordsToLeader; a broker of its own (RF 1) always has the
            # effective min ISR, min(min.insync.replicas, RF) = 1 (Kafka 3.7)
            ok, isr_size, need = broker.replicas.enough_replicas(topic_name, index)
            if not ok:
                raise ProduceError(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    f"The size of the current ISR {isr_size} is insufficient to satisfy the min.isr "
                    f"requirement of {need} for partition {topic_name}-{index}",
                )
        batches = _validate(ctx, lg, records)
        b0 = batches[0]
        if b0.magic >= 2 and b0.producer_id >= 0:
            txn_err = check_transactional_produce(broker, (topic_name, index), b0)
            if txn_err is not None:
                raise ProduceError(*txn_err)
        # LogValidator (a legacy set's or a forced codec's rebuild included) and producer state
        # (duplicates, epochs, sequences) are the log's: UnifiedLog.append
        writer = broker.append_writer
        info = lg.append_as_leader(
            records, t.leader_epoch(index), validated=True, batches=batches, writer=writer
        )
        if writer is not None:
            # the answer waits for the write (Kafka answers acks=1 once the page cache has the
            # bytes); a duplicate's original may still be queued: the last write queued so far,
            # and the answer fails with a failed write of the active segment (the original's:
            # a roll waits for the queued writes and fails with them)
            if info.write_seq:
                writes.append((resp, lg, info.write_seq, info.write_seq, tc, info, len(records), None))
            elif info.duplicate and writer.submitted:
                seg = lg.active_segment
                writes.append((resp, lg, writer.submitted, 0, tc, info, len(records), seg))
        resp.base_offset = info.first_offset
        resp.log_append_time_ms = info.log_append_time if info.log_append_time is not None else -1
        resp.log_start_offset = lg.log_start_offset
        stats.appended(tc, info, len(records))
        if waits is not None and acks == -1:
            # DelayedProduce: answered once the ISR has it (broker/cluster/replica.await_replication)
            waits.append((resp, topic_name, index, info.last_offset + 1))
    except ProducerStateError as exc:
        failed = True
        resp.error_code = (
            ErrorCode.INVALID_PRODUCER_EPOCH
            if exc.kind == "invalid_producer_epoch"
            else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        )
        detail = exc.message
    except ProduceError as exc:
        failed = exc.code in _FAILED_PRODUCE
        resp.error_code = exc.code
        resp.error_message = exc.message
        detail = exc.detail
    except RecordValidationError as exc:
        # ReplicaManager: a RecordValidationException's error, own message and record errors
        failed = True
        resp.error_code = ErrorCode[exc.error_name]
        resp.error_message = detail = exc.message
        resp.record_errors = [
            BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
            for i, m in exc.record_errors
        ]
    # the rest answer without a message, as Kafka's (hasCustomErrorMessage = false)
    except RecordBatchTooLargeError as exc:
        resp.error_code = ErrorCode.RECORD_LIST_TOO_LARGE
        detail = str(exc)
    except RecordTooLargeError as exc:
        tc.bytes_rejected += len(records)  # UnifiedLog: bytesRejectedRate.mark(records.sizeInBytes)
        ac.bytes_rejected += len(records)
        resp.error_code = ErrorCode.MESSAGE_TOO_LARGE
        detail = str(exc)
    except FormatError as exc:
        # an unknown codec, a negative timestamp to rebuild, a compressed stream its codec
        # cannot read (KafkaException: a legacy wrapper's or a v2 batch's), a legacy key or
        # value that LegacyRecord cannot read (the ByteBuffer's exceptions): ReplicaManager's
        # catch-all, UNKNOWN_SERVER_ERROR; else CORRUPT_MESSAGE or INVALID_RECORD
        resp.error_code = record_error_code(exc)
        failed = resp.error_code != ErrorCode.CORRUPT_MESSAGE
        detail = str(exc)
    except OSError as exc:
        # UnifiedLog.append's maybeHandleIOException: the log dir goes offline
        broker.report_log_error(lg, "appending records to", exc)
        resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        detail = str(exc)
    if resp.error_code:
        resp.base_offset = -1
        if failed:
            tc.failed_produce += 1
            ac.failed_produce += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "produce error topic=%s partition=%d code=%d msg=%s",
                topic_name,
                index,
                resp.error_code,
                detail,
            )
    return resp


def _unknown_codec_below_v7(broker, req) -> bool:
    """ProduceRequest.validateRecords below v7 reads the compression type of the first batch
    of every partition the metadata knows (its zstd rule), once the batch is whole and of magic
    2: bits that name no codec throw CompressionType.forId's IllegalArgumentException, which is
    no ApiException, out of KafkaApis.handleProduceRequest (read at 3.7.0).  Only the topics
    the principal may write are validated (authorization comes first there): ``req`` holds only
    those when ACLs are on."""
    for td in req.topic_data:
        t = broker.topic(td.name)
        if t is None:
            continue
        for p in td.partition_data:
            rec = p.records
            if rec is None or not 0 <= p.index < t.partitions or len(rec) < R.RECORD_BATCH_OVERHEAD:
                continue
            b = R.RecordBatch(rec, 0)  # the header's fields (only a magic-2 one is looked at)
            if b.magic == 2 and not compression.is_known(b.codec) and b.end <= len(rec):
                return True
    return False


def _whole_request_error(req, code: int, broker=None):
    """Every partition of the request answered with ``code`` and no message: an invalid acks
    (ReplicaManager.appendRecords; with ``broker``, a partition the metadata does not know
    answers UNKNOWN_TOPIC_OR_PARTITION, as KafkaApis sets those aside before the append), or
    RequestHandlerHelper.handleError's ProduceRequest.getErrorResponse (ApiError.fromThrowable:
    no message for UNKNOWN_SERVER_ERROR); acks=0 has no answer, the connection is closed."""

    def code_of(name: str, index: int) -> int:
        if broker is None:
            return code
        t = broker.topic(name)
        return code if t is not None and 0 <= index < t.partitions else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    if req.acks == 0:
        from kafkatool.broker.network import CloseConnection

        raise CloseConnection(f"error during produce request with acks=0 ({ErrorCode(code).name})")
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=td.name,
                partition_responses=[
                    PartitionProduceResponse(
                        index=p.index,
                        error_code=code_of(td.name, p.index),
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                    )
                    for p in td.partition_data
                ],
            )
            for td in req.topic_data
        ],
        throttle_time_ms=0,
    )


def handle_produce(ctx, req):
    broker = ctx.broker
    acks = req.acks
    if 3 <= ctx.header.api_version < 7 and _unknown_codec_below_v7(broker, req):
        # thrown out of handleProduceRequest, after authorization (the ACL rule asked only
        # about the topics the principal may write): every partition of the request as the
        # client sent it answers, the topics it may not write too (handleError)
        from kafkatool.broker.network import RequestFailed

        log.error("produce v%d: a record batch with an unknown compression type", ctx.version)
        raise RequestFailed(
            "a record batch with an unknown compression type",
            lambda whole: _whole_request_error(whole, ErrorCode.UNKNOWN_SERVER_ERROR),
        )
    if acks not in (0, 1, -1):
        return _whole_request_error(req, ErrorCode.INVALID_REQUIRED_ACKS, broker)
    todo = txn_verification.pending(broker, req)
    txn_errors = txn_verification.verify(broker, todo, ctx.version) if todo is not None else None
    conn = ctx.connection
    gate = getattr(conn, "produce_appended", None)
    if gate is not None and gate.done():
        gate = None
    if gate is None and (txn_errors is None or not asyncio.iscoroutine(txn_errors)):
        return _append_all(broker, ctx, req, txn_errors)
    # the append waits (for the transaction coordinator on another broker, or behind an earlier
    # produce of this connection that waits): later produces of the connection append after
    # it, in request order, as behind Kafka's one-request-at-a-time channel
    appended = asyncio.get_running_loop().create_future()
    if conn is not None:
        conn.produce_appended = appended

    async def deferred(req):
        try:
            if gate is not None:
                await asyncio.wait([gate])
            errors = (await txn_errors) if asyncio.iscoroutine(txn_errors) else txn_errors
            result = _append_all(broker, ctx, req, errors)
            del req  # the request leaves this coroutine with the append (see _append_all)
        finally:
            if not appended.done():
                appended.set_result(None)
        if type(result) is AfterWrite:
            return await result.answer()
        return (await result) if asyncio.iscoroutine(result) else result

    return deferred(req)


def _append_all(broker, ctx, req, txn_errors: dict | None):
    acks = req.acks
    out = []
    waits = [] if broker.replicas is not None and acks == -1 else None
    writer = broker.append_writer
    # (answer, log, seq to wait for, own write's seq, topic counters, append info, bytes,
    # the segment a duplicate's original was queued to)
    writes = [] if writer is not None else None
    for td in req.topic_data:
        parts = []  # a loop, not a list comprehension: a comprehension is a call of its own
        for p in td.partition_data:
            parts.append(
                _append_partition(broker, ctx, td.name, p.index, p.records, acks, waits, txn_errors, writes)
            )
            # appended: the request (which the router keeps for an error answer while the
            # answer waits) lets go of its records, memoryviews of the frame's pooled buffer
            # (network.FrameBuffers), which goes back to the pool now, not when the followers
            # have the data
            p.records = None
        out.append(TopicProduceResponse(name=td.name, partition_responses=parts))
    if writes:
        # the writes were queued in order: the last is the one to wait for
        seq = max(w[2] for w in writes)
        if writer.done(seq):
            _write_failures(broker, writer, writes, waits)
        elif waits is not None:
            fut = writer.when_written(seq)
            timeout_ms = req.timeout_ms

            async def written():
                if fut is not None:
                    await fut
                _write_failures(broker, writer, writes, waits)
                if waits:
                    await broker.replicas.await_replication(waits, timeout_ms)
                return _produce_response(broker, ctx, out, acks)

            return written()
        else:
            # the answer is built once the write is done (network.Connection holds it in its
            # place among the connection's answers): acks=1's, or acks=0's nothing, or the
            # CloseConnection of a failed acks=0 produce (RequestChannel.closeConnection)
            def build():
                _write_failures(broker, writer, writes, None)
                return _produce_response(broker, ctx, out, acks)

            return AfterWrite(writer, seq, build)
    if waits:
        # the wait refers to nothing of the request (see above)
        timeout_ms = req.timeout_ms

        async def replicated():
            await broker.replicas.await_replication(waits, timeout_ms)
            return _produce_response(broker, ctx, out)

        return replicated()
    return _produce_response(broker, ctx, out, acks)


def _write_failures(broker, writer, writes: list, waits: list | None) -> None:
    """The answers of partitions whose queued write failed (a duplicate's: its original's,
    still queued when it came): KAFKA_STORAGE_ERROR, as an OSError of a synchronous append
    answers (the writer reported the failure as it collected it: the dir is offline already,
    Broker._on_write_failure).  Counted as that OSError is: its bytes and records taken back
    from BytesInPerSec and MessagesInPerSec (counted at the append; Kafka marks them once the
    append returned), not a FailedProduceRequestsPerSec (ReplicaManager.appendToLocalLog leaves
    KafkaStorageException out of it, as one of its known errors)."""
    for resp, lg, _seq, own, tc, info, size, seg in writes:
        # a duplicate (no write of its own) fails with its original's write: any failed
        # write of the segment it was queued to (the dir goes offline with it anyway)
        exc = writer.failure(own) if own else seg.write_failure()
        if exc is None:
            continue
        broker.metrics.topics.unappended(tc, info, size)
        resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        resp.base_offset = -1
        resp.log_append_time_ms = -1
        resp.log_start_offset = -1
        if waits:
            waits[:] = [w for w in waits if w[0] is not resp]
        if log.isEnabledFor(logging.DEBUG):
            log.debug("produce error dir=%s code=%d msg=%s", lg.dir, resp.error_code, exc)


def _produce_response(broker, ctx, out, acks: int = -1):
    if ctx.version >= LEADER_HINTS_FROM and acks != 0:
        _leader_hints(broker, ctx.connection, out)
    if acks == 0:
        # no response; a failed acks=0 produce closes the connection, as Kafka does
        if any(p.error_code for t in out for p in t.partition_responses):
            from kafkatool.broker.network import CloseConnection

            raise CloseConnection("acks=0 produce failed")
        return None
    resp = ProduceResponse(responses=out, throttle_time_ms=0)
    if ctx.version >= LEADER_HINTS_FROM:
        leaders = {p.current_leader.leader_id for t in out for p in t.partition_responses}
        leaders.discard(-1)
        if leaders:
            resp.node_endpoints = [
                NodeEndpoint(node_id=n, host=host, port=port, rack=None)
                for n in sorted(leaders)
                for host, port in [node_endpoint(broker, n, ctx.connection)]
            ]
    return resp


def _leader_hints(broker, conn, out) -> None:
    """KIP-951 (Produce v10+): a NOT_LEADER_OR_FOLLOWER partition names the current leader."""
    for td in out:
        for p in td.partition_responses:
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                t = broker.topic(td.name)
                if t is not None:
                    leader, epoch = current_leader(broker, t, p.index)
                    if leader >= 0:
                        p.current_leader = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)


def handle_init_producer_id(ctx, req):
    broker = ctx.broker
    if req.transactional_id is not None:
        code = (
            ErrorCode.INVALID_REQUEST
            if req.transactional_id == ""
            else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    if ctx.version >= 3 and req.producer_id >= 0:
        # KIP-360: an idempotent producer asking for an epoch bump after an error
        epoch = req.producer_epoch + 1
        if epoch <= 0x7FFE:
            return InitProducerIdResponse(
                throttle_time_ms=0, error_code=0, producer_id=req.producer_id, producer_epoch=epoch
            )
    pid = broker.allocate_producer_id()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)


def register(router) -> None:
    router.register(0, 0, MAX_VERSION, handle_produce)
    router.register(22, 0, 4, handle_init_producer_id)
