"""TxnOffsetCommit on the group coordinator (Kafka's ``GroupCoordinator.handleTxnCommitOffsets``).

The offsets are written to the group's ``__consumer_offsets`` partition in a
transactional batch of the producer (as ``GroupMetadataManager.storeOffsets``
does: baseSequence 0) and kept pending in the group's offset store until the
transaction's marker reaches that partition (``write_markers`` then calls
``OffsetStore.complete_txn``).  The group loader already honours such batches
and their markers at start-up.
"""

from __future__ import annotations

import logging

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.coordinator import EMPTY, Group, now_ms
from kafkatool.broker.group.offsets import OffsetAndMetadata, oversized_metadata
from kafkatool.formats import records as R
from kafkatool.log.log import ORIGIN_COORDINATOR, RecordTooLargeError
from kafkatool.log.validator import RecordValidationError
from kafkatool.protocol.errors import ErrorCode

log = logging.getLogger("kafkatool.broker.txn")


def txn_commit_offsets(
    gc,
    *,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
    offsets: dict[tuple[str, int], OffsetAndMetadata],
) -> dict[tuple[str, int], int]:
    err = gc._validate_status(group_id, allow_empty=False)
    if err is not None:
        return dict.fromkeys(offsets, err)
    group = gc.consumer.groups.get(group_id)
    if group is not None:
        # ConsumerGroup.validateOffsetCommit(isTransactional=true): any member epoch check fails
        # as ILLEGAL_GENERATION, the code TxnOffsetCommit clients know
        err = group.validate_offset_commit(member_id, generation_id, 9)
        if err == ErrorCode.STALE_MEMBER_EPOCH:
            err = ErrorCode.ILLEGAL_GENERATION
    else:
        group = gc.groups.get(group_id)
        if group is None:
            group = gc.groups[group_id] = Group(group_id, gc.partition_for(group_id), EMPTY)
        err = group.validate_offset_commit(member_id, instance_id, generation_id, transactional=True)
    if err is not None:
        return dict.fromkeys(offsets, err)
    result, valid = oversized_metadata(offsets, gc._cfg("offset.metadata.max.bytes"))
    if not valid:
        return result
    broker = gc.broker
    lg = broker.get_log(P.OFFSETS_TOPIC, group.partition)
    t = broker.topic(P.OFFSETS_TOPIC)
    code = ErrorCode.NONE
    if lg is None or t is None or broker.read_only:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        ts = now_ms()
        batch = R.build_record_batch(
            [
                R.SimpleRecord(P.offset_commit_value(om), P.offset_commit_key(group_id, tp[0], tp[1]), (), ts)
                for tp, om in valid.items()
            ],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        try:
            info = lg.append_as_leader(batch, t.leader_epoch(group.partition), origin=ORIGIN_COORDINATOR)
            broker.metrics.topics.coordinator_append(P.OFFSETS_TOPIC, info, len(batch))
        except RecordTooLargeError:
            code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
        except RecordValidationError as exc:
            # maybeConvertOffsetCommitError passes LogValidator's error on as it is
            code = ErrorCode[exc.error_name]
        except OSError as exc:
            broker.report_log_error(lg, "appending records to", exc)
            code = ErrorCode.NOT_COORDINATOR
    if code == ErrorCode.NONE:
        pending = group.offsets.pending_txn.setdefault(producer_id, {})
        pending.update(valid)
    for tp in valid:
        result[tp] = code
    return result


def complete_txn_offsets(
    gc, lg, partition: int, producer_id: int, first: int, marker: int, commit: bool
) -> None:
    """Apply the marker just written at ``marker`` in ``__consumer_offsets-partition`` to the loaded groups.

    The pending offsets are re-read from the log (the transaction's batches from its first
    offset up to the marker, through the group loader's own replay), so offsets written
    before a broker restart still become visible at COMMIT.  A partition still loading
    picks the marker up from the log itself.
    """
    if partition in gc.loading:
        return
    loaded = {}
    if commit and first >= 0:
        loader = P.PartitionLoader()
        for batch in lg.batches(first):
            if batch.base_offset > marker:
                break
            if batch.magic >= 2 and batch.producer_id == producer_id and batch.is_transactional:
                loader.feed(batch)  # the marker batch itself applies the pending offsets
        for msg in loader.skipped:
            log.warning("%s-%d: skipped an undecodable record at %s", P.OFFSETS_TOPIC, partition, msg)
        loaded = loader.groups
    for g in [*gc.groups.values(), *gc.consumer.groups.values()]:
        if g.partition == partition:
            g.offsets.complete_txn(producer_id, False)
    for gid, lgroup in loaded.items():
        if not lgroup.offsets.offsets:
            continue
        group = gc.consumer.groups.get(gid) or gc.groups.get(gid)
        if group is None:
            group = gc.groups[gid] = Group(gid, partition, EMPTY)
        for tp, om in lgroup.offsets.offsets.items():
            group.offsets.put(tp, om)
