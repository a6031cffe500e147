"""kafkatool health (issue 15) against a real `kafkatool serve`: nothing on a healthy cluster,
each planted problem found with its subject and fix (a lagging group, throttles left behind,
a replication factor below the stated minimum, a skewed partition, a hanging transaction, a last
stable offset a long transaction holds back).

One broker for the module (transaction.partition.verification.enable=false, the only way a
leader takes the hanging transaction's late batch: tests/commands/test_transactions.py); each
test makes its own topics and counts what it expects relative to what the cluster held before
it, so any one of them runs alone or in any order."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.commands.test_transactions import KILLED_PRODUCER, MINUTE, stray_batch

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["health", *map(str, args)])


def findings(res) -> list[dict]:
    return [json.loads(x) for x in res.stdout.splitlines() if x.startswith('{"type": "finding"')]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from confluent_kafka.admin import AdminClient

    b = BrokerProcess(
        tmp_path_factory.mktemp("health") / "data",
        port=free_port(),
        extra=[
            "num.partitions=1",
            "transaction.partition.verification.enable=false",
            "transaction.state.log.num.partitions=3",
        ],
    ).start()
    try:
        yield b, AdminClient({"bootstrap.servers": b.bootstrap})
    finally:
        b.stop()


def _produce(bootstrap, topic: str, counts: dict[int, int]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part, n in counts.items():
        for _ in range(n):
            p.produce(topic, value=b"x" * 100, partition=part)
    assert p.flush(15) == 0


def test_healthy_then_each_planted_problem(broker):
    """The whole cluster: healthy, then the planted problems of this test's topic ht and group
    slow found (the topics other tests made are counted and judged too: taken from the cluster
    before this test adds its own)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    b, admin = broker
    before = admin.list_topics(timeout=10).topics
    partitions_before = sum(len(t.partitions) for t in before.values())
    groups_before = len(admin.list_consumer_groups().result(15).valid)
    for f in admin.create_topics([NewTopic("ht", 3, 1)]).values():
        f.result(15)
    _produce(b.bootstrap, "ht", {0: 200, 1: 20, 2: 20})
    ok = run("--bootstrap-server", b.bootstrap, "--skew-min-bytes", 10**9)
    assert ok.exit_code == 0, ok.output
    assert (
        f"healthy: 1 brokers, {len(before) + 1} topics, {partitions_before + 3} partitions, "
        f"{groups_before} consumer groups checked, nothing found"
    ) in ok.stdout

    # a lagging group: committed at 5 of 200
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "slow", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("ht", 0, 5)], asynchronous=False)
    c.close()
    # throttles nobody cleared
    node = str(next(iter(admin.list_topics(timeout=10).brokers)))
    res_b = ConfigResource(
        ResourceType.BROKER, node,
        incremental_configs=[ConfigEntry("leader.replication.throttled.rate", "1000", incremental_operation=AlterConfigOpType.SET)],
    )  # fmt: skip
    res_t = ConfigResource(
        ResourceType.TOPIC, "ht",
        incremental_configs=[ConfigEntry("leader.replication.throttled.replicas", "0:" + node, incremental_operation=AlterConfigOpType.SET)],
    )  # fmt: skip
    try:
        for f in admin.incremental_alter_configs([res_b, res_t]).values():
            f.result(15)

        res = run(
            "--bootstrap-server", b.bootstrap, "--json", "--max-lag", "100", "--min-replication-factor", "2",
            "--skew-min-bytes", "1000", "--skew-ratio", "3",
        )  # fmt: skip
        assert res.exit_code == 1, res.output
        got = {(f["kind"], f["subject"]) for f in findings(res)}
        assert got == {
            ("consumer_lag", "group slow"),
            ("leftover_throttle", "topic ht"),
            ("leftover_throttle", f"broker {node}"),
            ("replication_factor_below_minimum", "topic ht"),
            ("replication_factor_below_minimum", "topic __consumer_offsets"),  # created by the commit
            ("partition_skew", "ht-0"),
            # every topic another test made has one replica too
            *(("replication_factor_below_minimum", f"topic {t}") for t in before),
        }, res.output
        lag = next(f for f in findings(res) if f["kind"] == "consumer_lag")
        assert "195 records behind" in lag["message"] and "kafkatool groups" in lag["fix"]
        # warnings only: --fail-on error passes
        assert run("--bootstrap-server", b.bootstrap, "--max-lag", "100", "--fail-on", "error").exit_code == 0
    finally:
        # the broker's throttle is a finding whatever --topic says: cleared for the other tests
        res_b = ConfigResource(
            ResourceType.BROKER, node,
            incremental_configs=[ConfigEntry("leader.replication.throttled.rate", None, incremental_operation=AlterConfigOpType.DELETE)],
        )  # fmt: skip
        for f in admin.incremental_alter_configs([res_b]).values():
            f.result(15)


def test_unreachable_is_could_not_run():
    res = run("--bootstrap-server", "127.0.0.1:1")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert run().exit_code == 2


def test_hanging_transaction_and_stuck_last_stable_offset(broker):
    """t-hang's producer wrote 3 records on hang-0 in a transaction and was SIGKILLed: its
    coordinator holds hang-0 as Ongoing (a long transaction, not hanging); its late batch on
    stray-0, a partition never added, 3 minutes old, is a hanging transaction."""
    from confluent_kafka.admin import NewTopic

    from kafkatool.assign.kafka_client import KafkaAdmin
    from kafkatool.broker.txn import live

    b, admin = broker
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("hang", "stray")]).values():
        f.result(15)
    killed = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, b.bootstrap],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert killed.stdout.readline().strip() == "written"
    finally:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        killed.stdout.close()
        killed.stdin.close()
    with KafkaAdmin(b.bootstrap) as a:
        d = live.describe_transaction(a, "t-hang")
    stray_batch(b.bootstrap, "stray", d.producer_id, d.producer_epoch, int(time.time() * 1000) - 3 * MINUTE)
    sel = ["--bootstrap-server", b.bootstrap, "--topic", "hang,stray", "--no-lag"]

    # Kafka's 15 minutes: neither is old enough
    res = run(*sel)
    assert res.exit_code == 0, res.output
    assert "healthy: 1 brokers, 2 topics, 2 partitions checked, nothing found" in res.stdout

    # 2 minutes: stray-0's transaction (last written 3 minutes ago) hangs; hang-0's is seconds old
    res = run(*sel, "--max-transaction-timeout", 2)
    assert res.exit_code == 1, res.output
    abort = (
        f"kafkatool transactions abort --bootstrap-server {b.bootstrap} --topic stray --partition 0 "
        "--start-offset 0"
    )
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["ERROR", "hanging_transaction", "stray-0:"], res.output
    assert f"producer id {d.producer_id}, epoch {d.producer_epoch}, open since offset 0 " in res.stdout
    assert "the Ongoing transaction of its transactional id t-hang does not include stray-0" in res.stdout
    assert lines[1].strip() == f"fix: {abort}"
    assert lines[-1] == "1 errors, 0 warnings in 1 brokers, 2 topics, 2 partitions"

    # 0 minutes: hang-0's last stable offset, held at 0 by the transaction its coordinator still
    # holds, trails its high watermark (3): a warning, not a hanging transaction
    res = run(*sel, "--max-transaction-timeout", 0, "--json")
    assert res.exit_code == 1, res.output
    got = {(f["kind"], f["severity"], f["subject"]): f for f in findings(res)}
    assert set(got) == {
        ("hanging_transaction", "error", "stray-0"),
        ("last_stable_offset_stuck", "warning", "hang-0"),
    }, res.output
    lso = got["last_stable_offset_stuck", "warning", "hang-0"]
    assert set(lso) == {"type", "kind", "severity", "subject", "message", "fix"}
    assert "last stable offset 0 trails its high watermark 3 by 3 offsets" in lso["message"]
    assert "transactional id t-hang" in lso["message"] and "Ongoing at its coordinator" in lso["message"]
    assert (
        lso["fix"]
        == f"kafkatool transactions describe --bootstrap-server {b.bootstrap} --transactional-id t-hang"
    )
    assert got["hanging_transaction", "error", "stray-0"]["fix"] == abort
    # the warning alone does not fail --fail-on error; the hanging transaction does
    assert run(*sel, "--max-transaction-timeout", 0, "--topic", "hang", "--fail-on", "error").exit_code == 0

    # the printed fix, run as it is: the hanging transaction is gone
    fixed = runner.invoke(app, shlex.split(abort)[1:])
    assert fixed.exit_code == 0, fixed.output
    res = run(*sel, "--max-transaction-timeout", 0, "--json")
    assert res.exit_code == 1, res.output
    assert [(f["kind"], f["subject"]) for f in findings(res)] == [("last_stable_offset_stuck", "hang-0")]
    res = run(*sel, "--max-transaction-timeout", 2, "--no-transactions")
    assert res.exit_code == 0, res.output


def test_transaction_rules_on_a_view():
    """The transactions findings' judgement on data as the cluster answered it: the hanging rule
    is views.hanging (a producer no coordinator holds), a last stable offset held by a
    transaction its coordinator holds is a warning once the transaction is older than the
    threshold (its age: the coordinator's start time, else the producer's last write), a
    partition that could not be asked is a note that fails nothing, and --topic filters."""
    import re

    from kafkatool.assign import health as H
    from kafkatool.broker.txn.views import Description, PartitionProducers, Producer

    now = 10**12
    tv = H.TransactionView(
        now_ms=now,
        producers={
            ("a", 0): PartitionProducers("a", 0, [Producer(7, 1, 5, now - 10 * MINUTE, -1, 40)]),
            ("b", 0): PartitionProducers("b", 0, [Producer(8, 0, 9, now - MINUTE, 3, 100)]),
            ("c", 0): PartitionProducers("c", 0, [Producer(9, 0, 0, now - 2 * MINUTE, -1, 5)]),
        },
        offsets={("a", 0): (40, 50), ("b", 0): (100, 120), ("c", 0): (5, 6)},
        transactional_ids={8: "x"},
        descriptions={"x": Description("x", 2, 8, 0, "PrepareCommit", 60000, now - 20 * MINUTE, {("b", 0)})},
        unchecked={"DescribeProducers: TOPIC_AUTHORIZATION_FAILED": [("d", 0)]},
    )
    t = H.Thresholds(max_transaction_timeout_ms=5 * MINUTE)
    got = H.transaction_findings(tv, t, "--bootstrap-server h:1")
    assert [(f.kind, f.severity, f.subject) for f in got] == [
        ("transactions_not_checked", "info", "d-0"),
        ("hanging_transaction", "error", "a-0"),
        ("last_stable_offset_stuck", "warning", "b-0"),
    ]
    assert "no transactional id at any coordinator holds the producer id" in got[1].message
    assert (
        got[1].fix
        == "kafkatool transactions abort --bootstrap-server h:1 --topic a --partition 0 --start-offset 40"
    )
    assert (
        "by 20 offsets" in got[2].message
        and "PrepareCommit at its coordinator (broker 2) for 20 min" in got[2].message
    )
    # c-0: no coordinator holds it and its last write (2 minutes) is within the threshold; at
    # 1 minute it hangs too
    one = H.transaction_findings(tv, H.Thresholds(max_transaction_timeout_ms=MINUTE))
    assert [(f.kind, f.subject) for f in one if f.subject in ("a-0", "c-0")] == [
        ("hanging_transaction", "a-0"), ("hanging_transaction", "c-0"),
    ]  # fmt: skip
    # b-0's transaction, 20 minutes old, is within a 30-minute threshold
    assert "b-0" not in [
        f.subject for f in H.transaction_findings(tv, H.Thresholds(max_transaction_timeout_ms=30 * MINUTE))
    ]
    view = H.ClusterView(brokers={1}, controller=1, partitions=[], transactions=tv)
    assert [
        f.subject
        for f in H.check(view, H.Thresholds(max_transaction_timeout_ms=5 * MINUTE, topics=re.compile("b")))
    ] == ["b-0"]
    # the coordinators' view could not be read: nothing judged, the reason noted
    tv.transactional_ids = None
    assert [f.kind for f in H.transaction_findings(tv, t)] == ["transactions_not_checked"]
