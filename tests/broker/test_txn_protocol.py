"""Transaction coordinator on the wire: state machine, error codes, fencing, timeouts, restart
durability, ``__transaction_state`` records and the ``.txnindex`` (``kafkatool serve`` subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from kafkatool.broker.group.hashing import partition_for
from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic
from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.conftest import REPO
from tests.broker.test_protocol import create_topic
from tests.broker.wire import WireClient

TXN_PARTITIONS = 3
OVERRIDES = [
    "num.partitions=1",
    f"transaction.state.log.num.partitions={TXN_PARTITIONS}",
    "offsets.topic.num.partitions=3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
]


def init_pid(c, tid, timeout_ms=60000, version=4, pid=-1, epoch=-1):
    req = G.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
    )
    return c.request(22, version, req)


def add_partitions(c, tid, pid, epoch, topic, parts, version=3):
    req = G.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=list(parts))],
    )
    resp = c.request(24, version, req)
    return {
        (t.name, r.partition_index): r.partition_error_code
        for t in resp.results_by_topic_v3_and_below
        for r in t.results_by_partition
    }


def end_txn(c, tid, pid, epoch, commit, version=3):
    req = G.EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return c.request(26, version, req).error_code


def describe(c, tid):
    return c.request(65, 0, G.DescribeTransactionsRequest(transactional_ids=[tid])).transaction_states[0]


def txn_produce(c, topic, pid, epoch, seq, n=3, partition=0, tid=None, transactional=True, version=9):
    """A Produce of ``n`` records; the transactional id is the tests' ``<topic>-t``."""
    tid = tid or f"{topic}-t"
    now = int(time.time() * 1000)
    data = R.build_record_batch(
        [R.SimpleRecord(b"v%d" % i, b"k", (), now) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )
    req = G.ProduceRequest(
        transactional_id=tid if transactional else None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=data)])
        ],
    )
    return c.request(0, version, req).responses[0].partition_responses[0]


def list_offset(c, topic, isolation, partition=0):
    req = G.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1)
                ],
            )
        ],
    )
    return c.request(2, 7, req).topics[0].partitions[0].offset


def fetch(c, topic, isolation, offset=0, partition=0):
    req = G.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return c.request(1, 11, req).responses[0].partitions[0]


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory):
    from tests.broker.conftest import BrokerProcess

    b = BrokerProcess(tmp_path_factory.mktemp("tbroker") / "data", extra=OVERRIDES).start()
    yield b
    b.stop()


def test_state_machine_and_error_codes(tbroker):
    with WireClient(tbroker.bootstrap) as c:
        create_topic(c, "sm", 2)
        assert init_pid(c, "").error_code == ErrorCode.INVALID_REQUEST
        assert init_pid(c, "sm-t", timeout_ms=900001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        r = init_pid(c, "sm-t")
        assert r.error_code == 0 and r.producer_epoch == 0
        pid = r.producer_id
        r2 = init_pid(c, "sm-t")  # a new instance: same producer id, epoch bumped
        assert (r2.error_code, r2.producer_id, r2.producer_epoch) == (0, pid, 1)
        # KIP-360: a retry of the bump that succeeded gets the current epoch back
        r3 = init_pid(c, "sm-t", pid=pid, epoch=0)
        assert (r3.error_code, r3.producer_id, r3.producer_epoch) == (0, pid, 1)
        r3 = init_pid(c, "sm-t", pid=pid, epoch=1)  # the current epoch: bumped
        assert (r3.error_code, r3.producer_id, r3.producer_epoch) == (0, pid, 2)
        # KIP-360 with a stale epoch: fenced (47 before v4)
        assert init_pid(c, "sm-t", pid=pid, epoch=0).error_code == ErrorCode.PRODUCER_FENCED
        assert init_pid(c, "sm-t", version=3, pid=pid, epoch=0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        # nothing to end in Empty
        assert end_txn(c, "sm-t", pid, 2, True) == ErrorCode.INVALID_TXN_STATE
        # unknown id / producer id
        assert add_partitions(c, "nope", pid, 2, "sm", [0]) == {
            ("sm", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING
        }
        assert add_partitions(c, "sm-t", pid + 1000, 1, "sm", [0]) == {
            ("sm", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING
        }
        # an old epoch: 90 from v2, 47 before
        assert add_partitions(c, "sm-t", pid, 0, "sm", [0]) == {("sm", 0): ErrorCode.PRODUCER_FENCED}
        assert add_partitions(c, "sm-t", pid, 0, "sm", [0], version=1) == {
            ("sm", 0): ErrorCode.INVALID_PRODUCER_EPOCH
        }
        # an unknown partition fails alone; the others are not attempted
        assert add_partitions(c, "sm-t", pid, 2, "sm", [0, 7]) == {
            ("sm", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("sm", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        # transactional produce before the partition is added
        assert txn_produce(c, "sm", pid, 2, 0).error_code == ErrorCode.INVALID_TXN_STATE
        assert add_partitions(c, "sm-t", pid, 2, "sm", [0]) == {("sm", 0): 0}
        d = describe(c, "sm-t")
        assert (d.error_code, d.transaction_state, d.producer_epoch) == (0, "Ongoing", 2)
        assert [(t.topic, t.partitions) for t in d.topics] == [("sm", [0])]
        r = txn_produce(c, "sm", pid, 2, 0)
        assert r.error_code == 0 and r.base_offset == 0
        # partition 1 is not in the transaction
        assert txn_produce(c, "sm", pid, 2, 0, partition=1).error_code == ErrorCode.INVALID_TXN_STATE
        # an older epoch on the produce path
        assert txn_produce(c, "sm", pid, 0, 3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        # a non-transactional write while the producer's transaction is open
        assert txn_produce(c, "sm", pid, 2, 3, transactional=False).error_code == ErrorCode.INVALID_TXN_STATE
        # read_committed stops at the LSO (the open transaction's first offset)
        assert list_offset(c, "sm", 1) == 0
        assert list_offset(c, "sm", 0) == 3
        f = fetch(c, "sm", 1)
        assert (f.high_watermark, f.last_stable_offset, f.records) == (3, 0, b"")
        assert end_txn(c, "sm-t", pid, 2, True) == 0
        assert end_txn(c, "sm-t", pid, 2, True) == 0  # a retry after the completion
        assert end_txn(c, "sm-t", pid, 2, False) == ErrorCode.INVALID_TXN_STATE
        assert describe(c, "sm-t").transaction_state == "CompleteCommit"
        assert list_offset(c, "sm", 1) == 4  # 3 records + the COMMIT marker
        f = fetch(c, "sm", 1)
        assert f.last_stable_offset == 4 and f.aborted_transactions == []
        # a second transaction, aborted: read_committed lists it as aborted
        assert add_partitions(c, "sm-t", pid, 2, "sm", [0]) == {("sm", 0): 0}
        assert txn_produce(c, "sm", pid, 2, 3, n=2).base_offset == 4
        assert end_txn(c, "sm-t", pid, 2, False, version=1) == 0
        f = fetch(c, "sm", 1)
        assert f.last_stable_offset == 7
        assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == [(pid, 4)]
        assert fetch(c, "sm", 0).aborted_transactions is None
        # ListTransactions
        lt = c.request(
            66,
            1,
            G.ListTransactionsRequest(
                state_filters=["CompleteAbort", "Bogus"], producer_id_filters=[], duration_filter=-1
            ),
        )
        assert [(t.transactional_id, t.transaction_state) for t in lt.transaction_states] == [
            ("sm-t", "CompleteAbort")
        ]
        assert lt.unknown_state_filters == ["Bogus"]
        missing = describe(c, "missing")
        assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_new_instance_aborts_the_ongoing_transaction(tbroker):
    with WireClient(tbroker.bootstrap) as c:
        create_topic(c, "fence", 1)
        r = init_pid(c, "fence-t")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "fence-t", pid, epoch, "fence", [0]) == {("fence", 0): 0}
        assert txn_produce(c, "fence", pid, epoch, 0).error_code == 0
        # the new instance: the open transaction is aborted with a bumped epoch, the client retries
        assert init_pid(c, "fence-t").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        d = describe(c, "fence-t")
        assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", epoch + 1)
        r = init_pid(c, "fence-t")
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)
        # the zombie is fenced everywhere
        assert txn_produce(c, "fence", pid, epoch, 3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert end_txn(c, "fence-t", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
        assert end_txn(c, "fence-t", pid, epoch, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
        f = fetch(c, "fence", 1)
        assert f.last_stable_offset == 4
        assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == [(pid, 0)]


def test_timed_out_transaction_is_aborted(tbroker):
    with WireClient(tbroker.bootstrap) as c:
        create_topic(c, "tmo", 1)
        r = init_pid(c, "tmo-t", timeout_ms=500)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "tmo-t", pid, epoch, "tmo", [0]) == {("tmo", 0): 0}
        assert txn_produce(c, "tmo", pid, epoch, 0).error_code == 0
        assert list_offset(c, "tmo", 1) == 0
        deadline = time.monotonic() + 10
        while describe(c, "tmo-t").transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, describe(c, "tmo-t")
            time.sleep(0.1)
        assert describe(c, "tmo-t").producer_epoch == epoch + 1
        assert list_offset(c, "tmo", 1) == 4
        assert end_txn(c, "tmo-t", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
        assert txn_produce(c, "tmo", pid, epoch, 3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def _kafkatool(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )


def test_restart_durability_dump_log_and_txnindex(make_broker, tmp_path):
    data = tmp_path / "data"
    b = make_broker(data, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "dur", 1)
        r = init_pid(c, "dur-t")
        pid = r.producer_id
        assert add_partitions(c, "dur-t", pid, 0, "dur", [0]) == {("dur", 0): 0}
        assert txn_produce(c, "dur", pid, 0, 0).error_code == 0
        assert end_txn(c, "dur-t", pid, 0, True) == 0
        # a second transaction stays open across a crash
        assert add_partitions(c, "dur-t", pid, 0, "dur", [0]) == {("dur", 0): 0}
        assert txn_produce(c, "dur", pid, 0, 3, n=2).error_code == 0
    b.kill()
    b = make_broker(data, port=b.port, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        d = describe(c, "dur-t")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
        assert [(t.topic, t.partitions) for t in d.topics] == [("dur", [0])]
        assert list_offset(c, "dur", 1) == 4  # still held by the open transaction
        # a new instance fences and aborts it
        assert init_pid(c, "dur-t").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        r = init_pid(c, "dur-t")
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, 2)
        assert list_offset(c, "dur", 1) == 7
        # producer ids are not reused after a restart
        other = init_pid(c, "dur-other")
        assert other.producer_id != pid
    assert b.stop() == 0
    b = make_broker(data, port=b.port, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        d = describe(c, "dur-t")
        assert (d.transaction_state, d.producer_epoch, d.topics) == ("Empty", 2, [])
        f = fetch(c, "dur", 1)
        assert f.last_stable_offset == 7
        assert [(a.producer_id, a.first_offset) for a in f.aborted_transactions] == [(pid, 4)]
    assert b.stop() == 0
    # the partition (with its .txnindex) verifies clean
    part = data / "dur-0"
    assert (part / "00000000000000000000.txnindex").stat().st_size == 34
    v = _kafkatool("verify", "--json", str(part))
    assert v.returncode == 0, v.stdout + v.stderr
    # __transaction_state as kafka-dump-log --transaction-log-decoder prints it
    seg = data / f"__transaction_state-{partition_for('dur-t', TXN_PARTITIONS)}" / "00000000000000000000.log"
    out = _kafkatool("dump-log", "--transaction-log-decoder", str(seg))
    assert out.returncode == 0, out.stderr
    payloads = [line for line in out.stdout.splitlines() if "transactionalId=dur-t" in line]
    states = [line.split("state=")[1].split(",")[0] for line in payloads]
    assert states == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
        "Ongoing",
        "PrepareAbort",
        "CompleteAbort",
        "Empty",
    ]
    assert "partitions=[dur-0]" in payloads[1]
    assert f"producerId:{pid},producerEpoch:1,state=PrepareAbort" in payloads[5]
    js = _kafkatool("dump-log", "--json", "--transaction-log-decoder", str(seg))
    assert js.returncode == 0, js.stderr
    assert "CompleteAbort" in js.stdout
    # the markers in the data partition
    dl = _kafkatool("dump-log", "--json", str(part / "00000000000000000000.log"))
    controls = [o for o in map(json.loads, dl.stdout.splitlines()) if o.get("isControl")]
    assert len(controls) == 2, dl.stdout[-2000:]


def add_offsets(c, tid, pid, epoch, group, version=3):
    req = G.AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
    )
    return c.request(25, version, req).error_code


def txn_offset_commit(c, tid, pid, epoch, group, topic, offsets, version=3, generation=-1, member=""):
    from kafkatool.protocol.generated.txn_offset_commit_request import (
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )

    req = G.TxnOffsetCommitRequest(
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata="m"
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    resp = c.request(28, version, req)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def offset_fetch(c, group, topic, parts, require_stable=False):
    from kafkatool.protocol.generated.offset_fetch_request import OffsetFetchRequestTopic

    deadline = time.monotonic() + 10
    while True:
        f = c.request(
            9,
            7,
            G.OffsetFetchRequest(
                group_id=group,
                topics=[OffsetFetchRequestTopic(name=topic, partition_indexes=list(parts))],
                require_stable=require_stable,
            ),
        )
        if f.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert f.error_code == 0, f
    return {p.partition_index: (p.committed_offset, p.error_code) for p in f.topics[0].partitions}


def test_txn_offset_commit_across_restart(make_broker, tmp_path):
    data = tmp_path / "data"
    b = make_broker(data, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "src", 2)
        r = init_pid(c, "etl-t")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_offsets(c, "etl-t", pid, epoch, "etl-g") == 0
        assert txn_offset_commit(c, "etl-t", pid, epoch, "etl-g", "src", {0: 17, 1: 3}) == {
            ("src", 0): 0,
            ("src", 1): 0,
        }
        # pending until the marker: invisible, and unstable for require_stable readers
        assert offset_fetch(c, "etl-g", "src", [0]) == {0: (-1, 0)}
        assert (
            offset_fetch(c, "etl-g", "src", [0], require_stable=True)[0][1]
            == ErrorCode.UNSTABLE_OFFSET_COMMIT
        )
        # a fenced epoch
        assert txn_offset_commit(c, "etl-t", pid, epoch - 1, "etl-g", "src", {0: 1}) == {
            ("src", 0): ErrorCode.PRODUCER_FENCED
        }
        # v3 with a generation of a group that has none
        assert txn_offset_commit(
            c, "etl-t", pid, epoch, "etl-g", "src", {0: 1}, generation=4, member="m"
        ) == {("src", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    b.kill()
    b = make_broker(data, port=b.port, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        assert offset_fetch(c, "etl-g", "src", [0, 1]) == {0: (-1, 0), 1: (-1, 0)}  # groups loaded
        assert end_txn(c, "etl-t", pid, epoch, True) == 0
        assert offset_fetch(c, "etl-g", "src", [0, 1], require_stable=True) == {0: (17, 0), 1: (3, 0)}
        # an aborted offset commit changes nothing
        assert add_offsets(c, "etl-t", pid, epoch, "etl-g") == 0
        assert txn_offset_commit(c, "etl-t", pid, epoch, "etl-g", "src", {0: 99}) == {("src", 0): 0}
        assert end_txn(c, "etl-t", pid, epoch, False) == 0
        assert offset_fetch(c, "etl-g", "src", [0], require_stable=True) == {0: (17, 0)}
    assert b.stop() == 0
    b = make_broker(data, port=b.port, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        assert offset_fetch(c, "etl-g", "src", [0, 1]) == {0: (17, 0), 1: (3, 0)}
    b.stop()


def test_txn_offset_commit_without_generation_to_an_empty_group(tbroker):
    """Kafka's one validateOffsetCommit (isTransactional=true): generation -1 on an empty group
    commits even with a member id, as a plain OffsetCommit does (no member lookup)."""
    with WireClient(tbroker.bootstrap) as c:
        create_topic(c, "gen-src", 1)
        r = init_pid(c, "gen-t")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_offsets(c, "gen-t", pid, epoch, "gen-g") == 0
        assert txn_offset_commit(c, "gen-t", pid, epoch, "gen-g", "gen-src", {0: 5}, member="m") == {
            ("gen-src", 0): 0
        }
        # a generation names a member, and this group has none
        assert txn_offset_commit(
            c, "gen-t", pid, epoch, "gen-g", "gen-src", {0: 6}, generation=0, member="m"
        ) == {("gen-src", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert end_txn(c, "gen-t", pid, epoch, True) == 0
        assert offset_fetch(c, "gen-g", "gen-src", [0], require_stable=True) == {0: (5, 0)}


def test_idle_transactional_id_expires(make_broker, tmp_path):
    data = tmp_path / "data"
    extra = OVERRIDES + [
        "transactional.id.expiration.ms=300",
        "transaction.remove.expired.transaction.cleanup.interval.ms=100",
    ]
    b = make_broker(data, extra=extra).start()
    with WireClient(b.bootstrap) as c:
        r = init_pid(c, "idle-t")
        assert r.error_code == 0
        deadline = time.monotonic() + 10
        while describe(c, "idle-t").error_code == 0:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert describe(c, "idle-t").error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert b.stop() == 0
    seg = data / f"__transaction_state-{partition_for('idle-t', TXN_PARTITIONS)}" / "00000000000000000000.log"
    out = _kafkatool("dump-log", "--transaction-log-decoder", str(seg))
    lines = [line for line in out.stdout.splitlines() if "transactionalId=idle-t" in line]
    assert "state=Empty" in lines[0] and "payload: <DELETE>" in lines[-1], out.stdout
    b = make_broker(data, port=b.port, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        assert describe(c, "idle-t").error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    b.stop()


def test_corrupt_coordinator_logs_under_a_clean_shutdown(make_broker, tmp_path):
    """A corrupt batch after the valid ones in __transaction_state and __consumer_offsets,
    under a clean-shutdown marker (start-up does not recover them, as Kafka's does not): each
    coordinator logs one line naming the file and the byte, and the broker serves on. The
    transaction coordinator keeps the ids it read before the damage and the group
    coordinator installs nothing of the partition (Kafka's TransactionStateManager and
    GroupMetadataManager); the broker used to die (exit 2) on the first and log a traceback
    for the second (found by a corruption fuzz of whole log dirs)."""
    from tests.broker.test_group_protocol import commit

    data = tmp_path / "data"
    b = make_broker(data, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        create_topic(c, "cz", 1)
        pid = init_pid(c, "cz-t").producer_id
        assert add_partitions(c, "cz-t", pid, 0, "cz", [0]) == {("cz", 0): 0}
        assert txn_produce(c, "cz", pid, 0, 0).error_code == 0
        assert end_txn(c, "cz-t", pid, 0, True) == 0
        r = commit(c, 8, "cz-g", {("cz", 0): 2})
        assert r.topics[0].partitions[0].error_code == 0
    assert b.stop() == 0
    damaged = {}
    for name in (
        f"__transaction_state-{partition_for('cz-t', TXN_PARTITIONS)}",
        f"__consumer_offsets-{partition_for('cz-g', 3)}",
    ):
        seg = sorted((data / name).glob("*.log"))[-1]
        damaged[name] = (seg, seg.stat().st_size)
        with open(seg, "ab") as f:
            f.write(bytes(40))  # a batch of length 0: Kafka's "Record size 0 is less than the minimum"
    b = make_broker(data, port=b.port, extra=OVERRIDES).start()
    with WireClient(b.bootstrap) as c:
        d = describe(c, "cz-t")
        assert (d.error_code, d.transaction_state, d.producer_id) == (0, "CompleteCommit", pid)
        r = c.request(9, 7, G.OffsetFetchRequest(group_id="cz-g", topics=None, require_stable=False))
        assert r.error_code == 0 and r.topics == []
    text = b.log_text()
    for name, (seg, size) in damaged.items():
        line = f"failed to load {name}: entry size 0 is smaller than the minimum 14 in {seg} (at byte {size})"
        assert len([x for x in text.splitlines() if line in x and "level=error" in x]) == 1, text
    assert "Traceback" not in text
    assert b.alive() and b.stop() == 0
