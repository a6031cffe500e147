"""kafkatool transactions (kafka-transactions.sh) against a real `kafkatool serve`, with real
confluent-kafka transactional producers, and offline on the stopped broker's log dir.

The hanging transaction is made as it happens in Kafka (KIP-664, the race KIP-890 closes): a
producer's transactional batch lands on a partition that was never added to its transaction
through AddPartitionsToTxn, so the coordinator will never write that partition's marker. The
broker runs with transaction.partition.verification.enable=false (a pre-3.6 broker, or one
with KIP-890's check off), the only way a leader accepts such a batch; the producer is a
confluent-kafka one that began a transaction, wrote, and was SIGKILLed, and its late batch is
a raw Produce with its id and epoch.  Its other partition stays an open transaction the
coordinator holds as ongoing (it would time it out): not hanging."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.cli_result import json_rows as rows
from tests.cli_result import run

ck = pytest.importorskip("confluent_kafka")

MINUTE = 60_000

KILLED_PRODUCER = """
import sys, confluent_kafka as ck
p = ck.Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "t-hang",
                 "transaction.timeout.ms": 600000, "linger.ms": 0})
p.init_transactions(15)
p.begin_transaction()
for i in range(3):
    p.produce("hang", value=b"h%d" % i, partition=0)
assert p.flush(15) == 0
print("written", flush=True)
sys.stdin.read()  # until SIGKILL
"""


def stray_batch(bootstrap: str, topic: str, pid: int, epoch: int, ts: int) -> None:
    """The zombie's late batch: transactional, sequence 0, on a partition never added."""
    from kafkatool.assign.kafka_client import KafkaAdmin
    from kafkatool.formats import records as R
    from kafkatool.protocol.generated import ProduceRequest
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    batch = R.build_record_batch(
        [R.SimpleRecord(b"late", None, (), ts)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    req = ProduceRequest(
        transactional_id="t-hang",
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=batch)])
        ],
    )
    with KafkaAdmin(bootstrap) as admin:
        resp = admin.request(0, req)
    assert resp.responses[0].partition_responses[0].error_code == 0


def hanging_batch(bootstrap: str, topic: str, pid: int, epoch: int, ts: int) -> None:
    """The zombie's late batch on partition 0 of ``topic``, then a record after it (so the
    partition's last stable offset stays on the late batch)."""
    stray_batch(bootstrap, topic, pid, epoch, ts)
    after = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    after.produce(topic, value=b"after", partition=0)
    assert after.flush(15) == 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker; topics open, hang, stray, stray2 (1 partition each); an open transaction
    of t-open (this process's producer) on open-0; t-hang's producer killed with its
    transaction open on hang-0."""
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path_factory.mktemp("txn") / "data"
    b = BrokerProcess(
        data,
        port=free_port(),
        extra=[
            "transaction.partition.verification.enable=false",
            "transaction.state.log.num.partitions=3",
            "offsets.topic.num.partitions=1",
        ],
    ).start()
    killed = None
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics(
            [NewTopic(t, 1, 1) for t in ("open", "hang", "stray", "stray2")]
        ).values():
            f.result(15)
        p = ck.Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "transactional.id": "t-open",
                "linger.ms": 0,
                "transaction.timeout.ms": 600000,
            }
        )
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("open", value=b"o1", partition=0)
        p.produce("open", value=b"o2", partition=0)
        assert p.flush(15) == 0
        killed = subprocess.Popen(
            [sys.executable, "-c", KILLED_PRODUCER, b.bootstrap],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert killed.stdout.readline().strip() == "written"
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        yield b, p
    finally:
        if killed is not None and killed.poll() is None:
            killed.kill()
            killed.wait(10)
        b.stop()


def test_open_transaction_shows_everywhere(broker):
    b, _ = broker
    res = run("transactions", "list", "--bootstrap-server", b.bootstrap, "--json")
    assert res.exit_code == 0, res.output
    listed = {r["transactional_id"]: r for r in rows(res)}
    assert listed["t-open"]["state"] == "Ongoing" and listed["t-hang"]["state"] == "Ongoing"

    res = run(
        "transactions",
        "describe",
        "--bootstrap-server",
        b.bootstrap,
        "--transactional-id",
        "t-open",
        "--json",
    )
    assert res.exit_code == 0, res.output
    (d,) = rows(res)
    assert d["state"] == "Ongoing" and d["partitions"] == [{"topic": "open", "partition": 0}]
    assert d["producer_id"] == listed["t-open"]["producer_id"] and d["duration_ms"] >= 0

    res = run(
        "transactions",
        "describe-producers",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "open",
        "--partition",
        0,
    )
    assert res.exit_code == 0, res.output
    head, line = res.stdout.splitlines()
    # ToolsUtils.prettyPrintTable: each cell padded to its column and followed by a tab
    assert head.startswith("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\t")
    cells = line.split("\t")
    assert cells[0].strip() == str(d["producer_id"]) and cells[3].strip() == "1" and cells[5].strip() == "0"
    assert cells[2].strip() == "-1"  # no marker yet: the coordinator epoch is unknown
    # the same answer from the replica named by --broker-id (the coordinator's broker: the only one)
    res = run(
        "transactions",
        "describe-producers",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "open",
        "--partition",
        0,
        "--broker-id",
        d["coordinator"],
    )
    assert res.exit_code == 0 and res.stdout.splitlines() == [head, line], res.output
    res = run(
        "transactions",
        "describe-producers",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "open",
        "--partition",
        0,
        "--broker-id",
        99,
    )
    assert res.exit_code == 2
    assert res.stderr.startswith(
        "kafkatool: error: Failed to describe producers for partition open-0 on broker 99: "
    )

    # open for more than 0 minutes, but the coordinator holds it as ongoing on open-0: not hanging
    res = run(
        "transactions",
        "find-hanging",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "open",
        "--max-transaction-timeout",
        0,
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)\t"
    ]

    res = run("transactions", "describe", "--bootstrap-server", b.bootstrap, "--transactional-id", "nobody")
    assert res.exit_code == 1
    assert "failed because the ID could not be found" in res.stderr


def test_usage_refusals_in_kafkas_words(broker):
    b, _ = broker
    res = run("transactions", "find-hanging", "--bootstrap-server", b.bootstrap)
    assert res.exit_code == 2
    assert "requires either --topic or --broker-id to limit the scope of the search" in res.stderr
    res = run("transactions", "find-hanging", "--bootstrap-server", b.bootstrap, "--partition", 0)
    assert res.exit_code == 2 and "The --partition argument requires --topic to be provided" in res.stderr
    res = run("transactions", "find-hanging", "--bootstrap-server", b.bootstrap, "--topic", "nope")
    assert res.exit_code == 2
    assert res.stderr == (
        "kafkatool: error: Failed to describe 1 topics: UNKNOWN_TOPIC_OR_PARTITION (topic 'nope'). "
        "Enable debug logging for additional detail.\n"
    )
    res = run("transactions", "abort", "--bootstrap-server", b.bootstrap, "--topic", "hang", "--partition", 0)
    assert res.exit_code == 2 and "must be identified either with --start-offset" in res.stderr
    res = run(
        "transactions",
        "abort",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "hang",
        "--partition",
        0,
        "--producer-id",
        5,
    )
    assert res.exit_code == 2 and "Missing required argument --producer-epoch" in res.stderr
    res = run(
        "transactions",
        "abort",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "hang",
        "--partition",
        0,
        "--start-offset",
        99,
    )
    assert res.exit_code == 2
    assert "Could not find any open transactions starting at offset 99 on partition hang-0" in res.stderr


def test_a_partition_without_a_leader_is_asked_for_until_the_api_timeout(broker, tmp_path):
    """describe-producers of a partition the cluster does not have: Kafka's admin asks the
    metadata again (UNKNOWN_TOPIC_OR_PARTITION is retriable for a partition's leader) until
    default.api.timeout.ms, here --command-config's 1.5 s, then fails the call."""
    b, _ = broker
    config = tmp_path / "admin.properties"
    config.write_text("default.api.timeout.ms=1500\nrequest.timeout.ms=1000\n")
    args = ["--bootstrap-server", b.bootstrap, "--command-config", str(config)]
    started = time.monotonic()
    res = run("transactions", "describe-producers", *args, "--topic", "hang", "--partition", 99)
    took = time.monotonic() - started
    assert res.exit_code == 2, res.output
    assert "UNKNOWN_TOPIC_OR_PARTITION: timed out after default.api.timeout.ms 1500" in res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output
    # asked until the deadline, not once (retry.backoff.ms 100 doubling to 1 s: 4 tries)
    assert took >= 1.4, took


def test_hanging_found_then_aborted(broker):
    b, _ = broker
    res = run(
        "transactions",
        "describe",
        "--bootstrap-server",
        b.bootstrap,
        "--transactional-id",
        "t-hang",
        "--json",
    )
    (d,) = rows(res)
    assert d["state"] == "Ongoing" and d["partitions"] == [{"topic": "hang", "partition": 0}]
    pid, epoch, node = d["producer_id"], d["producer_epoch"], d["coordinator"]
    old = int(time.time() * 1000) - 3 * MINUTE
    hanging_batch(b.bootstrap, "stray", pid, epoch, old)

    # hang-0: open and in the coordinator's transaction (it will time it out): not hanging;
    # stray-0: open 3 minutes, never added: hanging once the max timeout is below its age
    res = run(
        "transactions",
        "find-hanging",
        "--bootstrap-server",
        b.bootstrap,
        "--broker-id",
        node,
        "--max-transaction-timeout",
        0,
        "--json",
    )
    assert res.exit_code == 1, res.output
    found = [r for r in rows(res) if r["type"] == "hanging"]
    assert [(r["topic"], r["partition"], r["producer_id"], r["start_offset"]) for r in found] == [
        ("stray", 0, pid, 0)
    ]
    assert found[0]["transactional_id"] == "t-hang" and found[0]["duration_min"] == 3
    res = run(
        "transactions",
        "find-hanging",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray",
        "--max-transaction-timeout",
        5,
    )
    assert res.exit_code == 0, res.output  # younger than 5 minutes: not a candidate
    res = run(
        "transactions",
        "find-hanging",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray",
        "--partition",
        0,
        "--max-transaction-timeout",
        2,
    )
    assert res.exit_code == 1, res.output
    cells = [c.strip() for c in res.stdout.splitlines()[1].split("\t")]
    assert cells == ["stray", "0", str(pid), str(epoch), "-1", "0", str(old), "3", ""]

    # the same, offline on the running broker's dir (read-only)
    res = run("transactions", "find-hanging", "--log-dir", b.data_dir, "--topic", "stray", "--json")
    assert res.exit_code == 0, res.output  # "now" is the newest record ("after"): 3 minutes
    res = run(
        "transactions", "find-hanging", "--log-dir", b.data_dir, "--max-transaction-timeout", 2, "--json"
    )
    assert res.exit_code == 1, res.output
    assert [(r["topic"], r["producer_id"], r["last_stable_offset"]) for r in rows(res)[:-1]] == [
        ("stray", pid, 0)
    ]

    # the open transaction pins the last stable offset: a read_committed reader sees nothing
    res = run(
        "consume",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray",
        "--from-beginning",
        "--isolation-level",
        "read_committed",
        "--exit-at-end",
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert rows(res) == []

    res = run(
        "transactions",
        "abort",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray",
        "--partition",
        0,
        "--start-offset",
        0,
    )
    assert res.exit_code == 0, res.output
    res = run(
        "transactions",
        "describe-producers",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray",
        "--partition",
        0,
        "--json",
    )
    assert [r["current_transaction_start_offset"] for r in rows(res) if r["producer_id"] == pid] == [None]
    # a marker of an older epoch is refused by the partition's producer state, in Kafka's words
    res = run(
        "transactions",
        "abort",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "hang",
        "--partition",
        0,
        "--producer-id",
        pid,
        "--producer-epoch",
        epoch - 1,
        "--coordinator-epoch",
        -1,
    )
    spec = f"AbortTransactionSpec(topicPartition=hang-0, producerId={pid}, producerEpoch={epoch - 1}, coordinatorEpoch=0)"
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        f"kafkatool: error: Failed to abort transaction {spec}: WriteTxnMarkers request with {spec} failed due an "
        "invalid producer epoch. Enable debug logging for additional detail."
    )

    c = ck.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "txn-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([ck.TopicPartition("stray", 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not got:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [b"after"]  # past the aborted batch
    finally:
        c.close()
    res = run(
        "transactions",
        "find-hanging",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray",
        "--max-transaction-timeout",
        0,
    )
    assert res.exit_code == 0, res.output


def test_offline_on_the_stopped_broker(broker):
    """What it reads offline it makes itself on the module's broker (the fixture's open
    transactions on open-0 and hang-0): t-hang's late batch on stray2-0, hanging, and one on
    stray3-0 aborted by the tool, past which an "after" record was written; it runs alone or
    after the tests above (which leave stray-0's transaction aborted: not hanging either)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    b, _ = broker
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("stray3", 1, 1)]).values():
        f.result(15)
    res = run(
        "transactions",
        "describe",
        "--bootstrap-server",
        b.bootstrap,
        "--transactional-id",
        "t-hang",
        "--json",
    )
    (d,) = rows(res)
    old = int(time.time() * 1000) - 2 * MINUTE
    hanging_batch(b.bootstrap, "stray3", d["producer_id"], d["producer_epoch"], old)
    res = run(
        "transactions",
        "abort",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        "stray3",
        "--partition",
        0,
        "--start-offset",
        0,
    )
    assert res.exit_code == 0, res.output
    stray_batch(b.bootstrap, "stray2", d["producer_id"], d["producer_epoch"], old)
    live = {}
    for t in ("open", "hang", "stray3", "stray2"):
        res = run(
            "transactions",
            "describe-producers",
            "--bootstrap-server",
            b.bootstrap,
            "--topic",
            t,
            "--partition",
            0,
            "--json",
        )
        assert res.exit_code == 0, res.output
        live[t] = rows(res)
    b.stop()
    data = b.data_dir
    for t in ("open", "hang", "stray3", "stray2"):
        res = run(
            "transactions", "describe-producers", "--log-dir", data, "--topic", t, "--partition", 0, "--json"
        )
        assert res.exit_code == 0, res.output
        offline = rows(res)
        assert [
            {k: v for k, v in r.items() if k not in ("last_stable_offset", "log_end_offset")} for r in offline
        ] == live[t]
    # the open transactions pin their partitions' last stable offsets at their first offsets
    lso = {
        t: rows(
            run(
                "transactions",
                "describe-producers",
                "--log-dir",
                data,
                "--topic",
                t,
                "--partition",
                0,
                "--json",
            )
        )[0]["last_stable_offset"]
        for t in ("open", "hang", "stray3", "stray2")
    }
    assert lso == {"open": 0, "hang": 0, "stray3": 3, "stray2": 0}

    # "now" is the newest record: stray2's late batch is 2 minutes older than it
    res = run("transactions", "find-hanging", "--log-dir", data, "--max-transaction-timeout", 1, "--json")
    assert res.exit_code == 1, res.output
    found = [r for r in rows(res) if r["type"] == "hanging"]
    assert [
        (
            r["topic"],
            r["start_offset"],
            r["transactional_id"],
            r["coordinator_state"],
            r["last_stable_offset"],
        )
        for r in found
    ] == [("stray2", 0, "t-hang", "Ongoing", 0)]
    summary = rows(res)[-1]
    assert summary["coordinator_note"] is None and old + MINUTE < summary["now_ms"] <= time.time() * 1000
    res = run(
        "transactions", "find-hanging", "--log-dir", data, "--max-transaction-timeout", 0, "--topic", "hang"
    )
    assert res.exit_code == 0, res.output  # the coordinator's state holds hang-0 as ongoing
    res = run(
        "transactions",
        "find-hanging",
        "--log-dir",
        data,
        "--max-transaction-timeout",
        1,
        "--now",
        old + MINUTE // 2,
    )
    assert res.exit_code == 0, res.output  # as of 30 s after the late batch: not yet a candidate

    res = run("transactions", "list", "--log-dir", data, "--json")
    assert {r["transactional_id"]: r["state"] for r in rows(res)} == {
        "t-open": "Ongoing",
        "t-hang": "Ongoing",
    }
    assert "WARNING" not in res.stderr  # every __transaction_state partition is here


def test_offline_without_the_coordinators_partitions(broker, tmp_path):
    """A dir without __transaction_state (its coordinator was another broker, or its state is
    lost): an open transaction no transactional id here holds is reported, with a note."""
    import shutil

    b, _ = broker
    b.stop()
    copy = tmp_path / "copy"
    shutil.copytree(b.data_dir, copy, ignore=shutil.ignore_patterns("__transaction_state-*"))
    res = run(
        "transactions", "find-hanging", "--log-dir", copy, "--topic", "hang", "--max-transaction-timeout", 0
    )
    assert res.exit_code == 1, res.output
    head, line = res.stdout.splitlines()
    assert head.endswith("LastStableOffset\tTransactionalId\tCoordinatorState\t")
    assert [c.strip() for c in line.split("\t")][-4:] == ["0", "-", "-", ""]
    assert "the log dirs hold no __transaction_state partition" in res.stderr


def test_offline_with_a_coordinator_partition_missing(broker, tmp_path):
    """A backup that lost one __transaction_state partition: the partition count the dir keeps
    (serve's embedded metadata: transaction.state.log.num.partitions=3) says which is missing, one
    warning line on stderr, not a coordinator's view taken as complete. Without a count in the
    dir (a ZooKeeper-mode broker's dir), transaction.state.log.num.partitions' default, 50."""
    import shutil

    b, _ = broker
    b.stop()
    copy = tmp_path / "copy"
    shutil.copytree(b.data_dir, copy, ignore=shutil.ignore_patterns("__transaction_state-1"))
    res = run("transactions", "list", "--log-dir", copy, "--json")
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [
        f"kafkatool: WARNING: the log dirs hold 2 of the 3 __transaction_state partitions "
        f"({copy / 'kafkatool-cluster.json'}); missing: 1. The transactional ids those partitions hold "
        "are unknown here, not absent"
    ]
    res = run("transactions", "find-hanging", "--log-dir", copy, "--json")
    assert "missing: 1." in res.stderr and "missing: 1." in rows(res)[-1]["coordinator_note"]
    res = run("transactions", "describe", "--log-dir", copy, "--transactional-id", "t-open")
    assert "missing: 1." in res.stderr
    res = run("transactions", "describe-producers", "--log-dir", copy, "--topic", "open", "--partition", 0)
    assert res.exit_code == 0 and "WARNING" not in res.stderr  # the coordinator is not asked
    (copy / "kafkatool-cluster.json").unlink()
    res = run("transactions", "list", "--log-dir", copy)
    assert (
        "the log dirs hold 2 of the 50 __transaction_state partitions (transaction.state.log.num.partitions' "
        in res.stderr
    )
    assert "missing: 1,3-49." in res.stderr
