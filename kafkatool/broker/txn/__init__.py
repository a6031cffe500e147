"""The transaction coordinator (``coordinator``), its ``__transaction_state`` records
(``state_log``) and TxnOffsetCommit on the group side (``offsets``)."""

from __future__ import annotations


def check_transactional_produce(broker, tp: tuple[str, int], batch):
    """None when the produce path may append ``batch`` (a magic-2 batch with a producer id),
    else (error code, message): a producer with an open transaction here may not write
    non-transactional batches (ProducerAppendInfo's INVALID_TXN_STATE).  Transactional batches
    were verified with their coordinator before (txn/verification.py, KIP-890); the log's
    producer state fences their epochs and sequences."""
    from kafkatool.protocol.errors import ErrorCode

    if batch.is_transactional:
        return None
    lg = broker.get_log(*tp)
    entry = lg.producer_state.producers.get(batch.producer_id) if lg is not None else None
    if entry is not None and entry.current_txn_first_offset >= 0:
        return (
            ErrorCode.INVALID_TXN_STATE,
            f"expected a transactional write from producer {batch.producer_id} (open transaction)",
        )
    return None
