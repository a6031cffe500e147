"""KIP-890 part 1: transaction.partition.verification.enable (default true) decides whether a
transactional produce to a partition never added to the transaction is refused; the newest
transaction API versions (InitProducerId v5, EndTxn v4) drive a whole transaction."""

from __future__ import annotations

from kafkatool.protocol.errors import ErrorCode
from tests.broker.test_protocol import create_topic
from tests.broker.test_txn_protocol import OVERRIDES, add_partitions, end_txn, init_pid, txn_produce
from tests.broker.wire import WireClient


def test_verification_off_accepts_unadded_partition_newest_versions(make_broker, tmp_path):
    b = make_broker(
        tmp_path / "off", extra=[*OVERRIDES, "transaction.partition.verification.enable=false"]
    ).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "ver", 2)
        r = init_pid(c, "ver-t", version=5)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "ver-t", pid, epoch, "ver", [0]) == {("ver", 0): 0}
        assert txn_produce(c, "ver", pid, epoch, 0).error_code == 0
        # partition 1 was never added: accepted because verification is off
        assert txn_produce(c, "ver", pid, epoch, 0, partition=1).error_code == 0
        assert end_txn(c, "ver-t", pid, epoch, True, version=4) == 0
    b.stop()


def test_verification_on_refuses_unadded_partition(make_broker, tmp_path):
    b = make_broker(tmp_path / "on", extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "ver", 2)
        r = init_pid(c, "ver-t", version=5)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "ver-t", pid, epoch, "ver", [0]) == {("ver", 0): 0}
        # Produce v9 (the helper's version): INVALID_TXN_STATE, with ReplicaManager's own message
        r = txn_produce(c, "ver", pid, epoch, 0, partition=1)
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_TXN_STATE,
            "Partition was not added to the transaction",
        )
        # Produce v11 knows TRANSACTION_ABORTABLE (KIP-890); no custom message there
        r = txn_produce(c, "ver", pid, epoch, 0, partition=1, version=11)
        assert (r.error_code, r.error_message) == (ErrorCode.TRANSACTION_ABORTABLE, None)
        assert end_txn(c, "ver-t", pid, epoch, False, version=4) == 0
    b.stop()
