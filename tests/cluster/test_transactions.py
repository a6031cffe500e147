"""Transactions in a three-broker cluster: the coordinator is the leader of the id's
``__transaction_state`` partition and writes markers to the partition leaders on other
brokers (WriteTxnMarkers); when the coordinator's broker is killed the coordinator moves and
the transactional id keeps working, with committed data visible and aborted data not."""

from __future__ import annotations

import time

import pytest

from tests.cluster.conftest import SHORT_ZK_SESSION, wait_for
from tests.cluster.test_replication import create_topic, partition_state

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402


def read_committed(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 60
) -> list[bytes]:
    """Every record a read_committed consumer gets from the partitions: at least ``expect`` of
    them, and then on until its position on each partition is that partition's end (ListOffsets
    at read_committed: the last stable offset, past the last transaction's marker), so whatever
    the log holds up to there that it should not show (an aborted record) is read, not missed."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[bytes] = []
        ends = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                out.append(m.value())
                continue
            if len(out) < expect:
                continue
            if ends is None:
                ends = [
                    c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                    for p in range(partitions)
                ]
            at = c.position([TopicPartition(topic, p) for p in range(partitions)])
            if all(max(tp.offset, 0) >= end for tp, end in zip(at, ends, strict=True)):
                break
        return out
    finally:
        c.close()


def txn_producer(bootstrap: str) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "tx-1", "transaction.timeout.ms": 60000}
    )


@SHORT_ZK_SESSION
def test_transactions_across_brokers_and_coordinator_failover(cluster):
    create_topic(cluster, "txt", 3, 3, min_insync_replicas=2)
    p = txn_producer(cluster.bootstrap)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce("txt", f"c{i}".encode(), partition=i % 3)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce("txt", f"a{i}".encode(), partition=i % 3)
    p.abort_transaction(60)
    got = read_committed(cluster.bootstrap, "txt", 3, 30)
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(30))
    # the coordinator of tx-1 is killed: the id is served by the new leader of its partition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    coord = admin.describe_transactions(["tx-1"]) if hasattr(admin, "describe_transactions") else None
    del coord
    k = cluster.kazoo()
    try:
        import json

        from kafkatool.broker.group.hashing import partition_for

        part = partition_for("tx-1", len(k.get_children("/brokers/topics/__transaction_state/partitions")))
        leader = json.loads(k.get(f"/brokers/topics/__transaction_state/partitions/{part}/state")[0])[
            "leader"
        ]
    finally:
        k.stop()
        k.close()
    cluster.brokers[leader].kill()
    t0 = time.monotonic()
    # a producer made before the controller moved the partition (the dead broker's ZooKeeper
    # session expires first) finds the dead coordinator and waits out its whole timeout
    wait_for(
        lambda: partition_state(cluster, "__transaction_state", part)["leader"] not in (leader, -1),
        60,
        f"__transaction_state-{part} to have a leader other than {leader}",
    )

    def again():
        q = txn_producer(cluster.bootstrap)
        try:
            q.init_transactions(15)
        except KafkaException:
            return None
        return q

    q = wait_for(again, 90, "the transactional id to be served again", step=0.5)
    print(f"transaction coordinator {leader} killed; tx-1 served again after {time.monotonic() - t0:.1f}s")
    q.begin_transaction()
    for i in range(30):
        q.produce("txt", f"d{i}".encode(), partition=i % 3)
    q.commit_transaction(60)
    got = read_committed(cluster.bootstrap, "txt", 3, 60)
    want = [f"c{i}".encode() for i in range(30)] + [f"d{i}".encode() for i in range(30)]
    assert sorted(got) == sorted(want)


def pipelined_txn_batch(c, tid, topic, partition, pid, epoch, seq, n=3) -> int:
    """Send (without reading the answer) a Produce v9 of one transactional batch."""
    from kafkatool.formats import records as R
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    data = R.build_record_batch(
        [R.SimpleRecord(b"p%d" % (seq + i), b"k", (), int(time.time() * 1000)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    req = G.ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=data)])
        ],
    )
    return c.send(0, 9, req)


def test_leaders_verify_transactional_writes_with_a_coordinator_on_another_broker(shared_cluster):
    """KIP-890 in cluster mode: a partition leader that is not the transaction coordinator asks
    the coordinator's broker (AddPartitionsToTxn v5, VerifyOnly) before it appends a
    transaction's first batch; a partition never added to the transaction is refused; a
    marker from a zombie coordinator (older coordinator epoch) is refused."""
    cluster = shared_cluster
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.errors import ErrorCode
    from tests.broker.test_txn_protocol import add_partitions, end_txn, init_pid, txn_produce
    from tests.broker.wire import WireClient

    create_topic(cluster, "ver", 9, 1)  # Kafka's placement: three partitions led by each broker
    tid = "ver-t"

    def find_coordinator():
        # the first lookup creates __transaction_state: COORDINATOR_NOT_AVAILABLE until it leads
        with WireClient(cluster.bootstrap.split(",")[0]) as c:
            r = c.request(10, 3, G.FindCoordinatorRequest(key=tid, key_type=1))
        return r.node_id if r.error_code == 0 else None

    coordinator = wait_for(find_coordinator, 30, "the transaction coordinator")
    led = {}
    for p in range(9):
        st = wait_for(lambda p=p: partition_state(cluster, "ver", p), 20, f"ver-{p}'s state")
        led.setdefault(st["leader"], []).append(p)
    other = next(b for b in led if b != coordinator)
    assert len(led[other]) >= 3, led
    p_added, p_not, p_piped = led[other][:3]
    with (
        WireClient(cluster.brokers[coordinator].bootstrap) as co,
        WireClient(cluster.brokers[other].bootstrap) as lc,
    ):
        r = init_pid(co, tid)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(co, tid, pid, epoch, "ver", [p_added]) == {("ver", p_added): 0}
        # the leader on another broker verifies with the coordinator, then appends
        assert txn_produce(lc, "ver", pid, epoch, 0, partition=p_added).error_code == 0
        assert txn_produce(lc, "ver", pid, epoch, 3, partition=p_added).error_code == 0
        # pipelined produces that both wait for the coordinator append in request order
        assert add_partitions(co, tid, pid, epoch, "ver", [p_piped]) == {("ver", p_piped): 0}
        piped = [pipelined_txn_batch(lc, tid, "ver", p_piped, pid, epoch, seq) for seq in (0, 3, 6)]
        got = [lc.recv(0, 9) for _ in piped]
        assert [corr for corr, _ in got] == piped
        answers = [r.responses[0].partition_responses[0] for _, r in got]
        assert [(a.error_code, a.base_offset) for a in answers] == [(0, 0), (0, 3), (0, 6)]
        if p_not is not None:
            assert (
                txn_produce(lc, "ver", pid, epoch, 0, partition=p_not).error_code
                == ErrorCode.INVALID_TXN_STATE
            )
            r11 = txn_produce(lc, "ver", pid, epoch, 0, partition=p_not, version=11)
            assert r11.error_code == ErrorCode.TRANSACTION_ABORTABLE
        # a transactional id the coordinator does not know for this producer
        bad = txn_produce(lc, "ver", pid, epoch, 0, partition=p_not, tid="nobody")
        assert bad.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert end_txn(co, tid, pid, epoch, True) == 0
        # a client may not send the brokers' batched form (KafkaApis: v4+ need CLUSTER_ACTION,
        # which an unsecured cluster grants everyone): it answers, per transaction
        from kafkatool.protocol.generated.add_partitions_to_txn_request import (
            AddPartitionsToTxnTopic,
            AddPartitionsToTxnTransaction,
        )

        def verify_after_commit():
            resp = co.request(
                24,
                5,
                G.AddPartitionsToTxnRequest(
                    transactions=[
                        AddPartitionsToTxnTransaction(
                            transactional_id=tid,
                            producer_id=pid,
                            producer_epoch=epoch,
                            verify_only=True,
                            topics=[AddPartitionsToTxnTopic(name="ver", partitions=[p_added])],
                        )
                    ]
                ),
            )
            assert resp.error_code == 0
            part = resp.results_by_transaction[0].topic_results[0].results_by_partition[0]
            # CONCURRENT_TRANSACTIONS while the commit's markers are being written
            assert part.partition_error_code in (
                ErrorCode.CONCURRENT_TRANSACTIONS,
                ErrorCode.TRANSACTION_ABORTABLE,
            )
            return part.partition_error_code == ErrorCode.TRANSACTION_ABORTABLE

        # the transaction was committed: the partition is no longer in it
        wait_for(verify_after_commit, 20, "the commit to complete")
    # a zombie coordinator's marker (an older coordinator epoch) is refused by the leader
    from kafkatool.protocol.generated.describe_producers_request import TopicRequest
    from kafkatool.protocol.generated.write_txn_markers_request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
    )

    with WireClient(cluster.brokers[other].bootstrap) as lc:
        dp = lc.request(
            61, 0, G.DescribeProducersRequest(topics=[TopicRequest(name="ver", partition_indexes=[p_added])])
        )
        state = next(s for s in dp.topics[0].partitions[0].active_producers if s.producer_id == pid)
        marker = WritableTxnMarker(
            producer_id=pid,
            producer_epoch=epoch,
            transaction_result=False,
            topics=[WritableTxnMarkerTopic(name="ver", partition_indexes=[p_added])],
            coordinator_epoch=state.coordinator_epoch - 1,
        )
        r = lc.request(27, 1, G.WriteTxnMarkersRequest(markers=[marker]))
        assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # the committed records are there for a read_committed reader
    got = read_committed(cluster.bootstrap, "ver", 9, 15)
    assert len(got) == 15


def test_perf_produce_transactions_with_the_coordinator_and_leaders_on_other_brokers(shared_cluster):
    """The project's transactional producer (perf produce --transaction-duration-ms) against three
    brokers: the coordinator found by FindCoordinator at whichever broker leads the id's
    __transaction_state partition, AddPartitionsToTxn there, batches to three leaders spread over
    the brokers (so markers cross brokers), many commits; a read_committed reader gets every
    record exactly once."""
    import subprocess

    from tests.broker.conftest import REPO
    from tests.commands.test_perf_transactions import perf_cmd

    cluster = shared_cluster
    create_topic(cluster, "ptx", 3, 3, min_insync_replicas=2)
    leaders = {partition_state(cluster, "ptx", p)["leader"] for p in range(3)}
    assert len(leaders) >= 2, leaders  # Kafka's placement spreads the leaders
    p = subprocess.run(
        perf_cmd(
            cluster.bootstrap,
            "--topic",
            "ptx",
            "--num-records",
            3000,
            "--record-size",
            100,
            "--throughput",
            3000,  # about a second: three or four transactions of 300 ms
            "--transactional-id",
            "perf-tx",
            "--transaction-duration-ms",
            300,
            "--producer-props",
            "acks=all",
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1].startswith("3000 records sent"), p.stdout
    got = read_committed(cluster.bootstrap, "ptx", 3, 3000)
    assert len(got) == 3000
