"""``__transaction_state`` as the transaction coordinator writes and replays it.

The records' bytes come from the one codec, :mod:`kafkatool.formats.internal_topics`.
Key: int16 version 0 + TransactionLogKey v0 ``{transactionalId}``.  Value: int16
version 0 + TransactionLogValue v0 ``{producerId, producerEpoch,
transactionTimeoutMs, transactionStatus, transactionPartitions (null when
Empty), transactionLastUpdateTimestampMs, transactionStartTimestampMs}``
(TransactionLog.valueToBytes for ``transaction.version`` 0).  A null value is a
tombstone.  Each write is one uncompressed v2 batch, CreateTime = now, so
``kafkatool dump-log --transaction-log-decoder`` and Kafka's tools read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkatool.formats import internal_topics as IT
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import TransactionLogValue
from kafkatool.formats.generated.transaction_log_value import PartitionsSchema
from kafkatool.formats.schema import SchemaDecodeError

TRANSACTION_STATE_TOPIC = "__transaction_state"

# TransactionState ids (TransactionLogValue.TransactionStatus)
EMPTY = 0
ONGOING = 1
PREPARE_COMMIT = 2
PREPARE_ABORT = 3
COMPLETE_COMMIT = 4
COMPLETE_ABORT = 5
DEAD = 6
PREPARE_EPOCH_FENCE = 7

STATE_NAMES = IT.TRANSACTION_STATES


@dataclass
class TxnRecord:
    """The decoded value of one ``__transaction_state`` record."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: list[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def value_bytes(rec: TxnRecord) -> bytes:
    if rec.state == EMPTY:
        parts = None  # Kafka writes null partitions for Empty
    else:
        by_topic: dict[str, list[int]] = {}
        for t, p in rec.partitions:
            by_topic.setdefault(t, []).append(p)
        parts = [PartitionsSchema(topic=t, partition_ids=sorted(ps)) for t, ps in by_topic.items()]
    return IT.transaction_log_value(
        TransactionLogValue(
            producer_id=rec.producer_id,
            producer_epoch=rec.producer_epoch,
            transaction_timeout_ms=rec.timeout_ms,
            transaction_status=rec.state,
            transaction_partitions=parts,
            transaction_last_update_timestamp_ms=rec.last_update_ms,
            transaction_start_timestamp_ms=rec.start_ms,
        )
    )


def build_batch(transactional_id: str, rec: TxnRecord | None, now_ms: int) -> bytes:
    value = None if rec is None else value_bytes(rec)
    key = IT.transaction_log_key(transactional_id)
    return R.build_record_batch([R.SimpleRecord(value, key, (), now_ms)])


def decode(key, value) -> tuple[str, TxnRecord | None] | None:
    """(transactional id, record or None for a tombstone); None for a key that is not ours."""
    _, tid = IT.read_transaction_log_key(key)
    if tid is None:
        return None
    if value is None:
        return tid, None
    _, v = IT.read_transaction_log_value(value)
    parts = [(e.topic, p) for e in (v.transaction_partitions or []) for p in e.partition_ids]
    return tid, TxnRecord(
        v.producer_id,
        v.producer_epoch,
        v.transaction_timeout_ms,
        v.transaction_status,
        parts,
        v.transaction_last_update_timestamp_ms,
        v.transaction_start_timestamp_ms,
    )


class StateLoader:
    """Replays ``__transaction_state`` partitions: the last value per transactional id wins."""

    def __init__(self):
        self.txns: dict[str, TxnRecord] = {}
        self.records = 0
        self.skipped: list[str] = []

    def feed(self, batch) -> None:
        if batch.magic >= 2 and batch.is_control:
            return
        for rec in batch.records():
            self.records += 1
            try:
                got = decode(rec.key, rec.value)
            except (FormatError, SchemaDecodeError) as exc:
                self.skipped.append(f"offset {rec.offset}: {exc}")
                continue
            if got is None:
                continue
            tid, value = got
            if value is None:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = value

    def current(self) -> dict[str, TxnRecord]:
        """The transactional ids a coordinator holds after this load: a Dead one is gone
        (TransactionStateManager skips it), the rest as last written."""
        return {tid: rec for tid, rec in self.txns.items() if rec.state != DEAD}
