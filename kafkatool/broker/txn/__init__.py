"""The transaction coordinator (``coordinator``), its ``__transaction_state`` records
(``state_log``) and TxnOffsetCommit on the group side (``offsets``)."""

from __future__ import annotations


def check_transactional_produce(broker, tp: tuple[str, int], batch):
    """None when the produce path may append ``batch`` (a magic-2 batch with a producer id),
    else (error code, message): transactional batches need an ongoing transaction that
    holds the partition, and a producer with an open transaction here may not write
    non-transactional batches (ProducerAppendInfo's INVALID_TXN_STATE)."""
    from kafkatool.protocol.errors import ErrorCode

    if batch.is_transactional:
        from kafkatool.broker.txn.coordinator import txn_coordinator

        if not broker.config.bool("transaction.partition.verification.enable") or broker.replicas is not None:
            # KIP-890's verification off, or cluster mode (the coordinator is usually another
            # broker; verification would need AddPartitionsToTxn v4 between brokers): the log's
            # producer state (epochs, sequences) decides, as in Kafka before 3.6
            return None

        return txn_coordinator(broker).check_transactional_produce(
            tp, batch.producer_id, batch.producer_epoch
        )
    lg = broker.get_log(*tp)
    entry = lg.producer_state.producers.get(batch.producer_id) if lg is not None else None
    if entry is not None and entry.current_txn_first_offset >= 0:
        return (
            ErrorCode.INVALID_TXN_STATE,
            f"expected a transactional write from producer {batch.producer_id} (open transaction)",
        )
    return None
