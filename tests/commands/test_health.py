"""kafkatool health (issue 15) against a real `kafkatool serve`: nothing on a healthy cluster,
each planted problem found with its subject and fix (a lagging group, throttles left behind,
a replication factor below the stated minimum, a skewed partition)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["health", *map(str, args)])


def findings(res) -> list[dict]:
    return [json.loads(x) for x in res.stdout.splitlines() if x.startswith('{"type": "finding"')]


@pytest.fixture
def broker(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    b = BrokerProcess(tmp_path / "data", port=free_port(), extra=["num.partitions=1"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("t", 3, 1)]).values():
            f.result(15)
        yield b, admin
    finally:
        b.stop()


def _produce(bootstrap, counts: dict[int, int]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part, n in counts.items():
        for _ in range(n):
            p.produce("t", value=b"x" * 100, partition=part)
    assert p.flush(15) == 0


def test_healthy_then_each_planted_problem(broker):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    b, admin = broker
    _produce(b.bootstrap, {0: 200, 1: 20, 2: 20})
    ok = run("--bootstrap-server", b.bootstrap, "--skew-min-bytes", 10**9)
    assert ok.exit_code == 0, ok.output
    assert "healthy: 1 brokers, 1 topics, 3 partitions, 0 consumer groups checked, nothing found" in ok.stdout

    # a lagging group: committed at 5 of 200
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "slow", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
    c.close()
    # throttles nobody cleared
    node = str(next(iter(admin.list_topics(timeout=10).brokers)))
    res_b = ConfigResource(
        ResourceType.BROKER, node,
        incremental_configs=[ConfigEntry("leader.replication.throttled.rate", "1000", incremental_operation=AlterConfigOpType.SET)],
    )  # fmt: skip
    res_t = ConfigResource(
        ResourceType.TOPIC, "t",
        incremental_configs=[ConfigEntry("leader.replication.throttled.replicas", "0:" + node, incremental_operation=AlterConfigOpType.SET)],
    )  # fmt: skip
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
        ("leftover_throttle", "topic t"),
        ("leftover_throttle", f"broker {node}"),
        ("replication_factor_below_minimum", "topic t"),
        ("replication_factor_below_minimum", "topic __consumer_offsets"),  # created by the commit
        ("partition_skew", "t-0"),
    }, res.output
    lag = next(f for f in findings(res) if f["kind"] == "consumer_lag")
    assert "195 records behind" in lag["message"] and "kafkatool groups" in lag["fix"]
    # warnings only: --fail-on error passes
    assert run("--bootstrap-server", b.bootstrap, "--max-lag", "100", "--fail-on", "error").exit_code == 0


def test_unreachable_is_could_not_run():
    res = run("--bootstrap-server", "127.0.0.1:1")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert run().exit_code == 2
