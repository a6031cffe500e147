"""kafkatool topics (issue 15): kafka-topics.sh's commands and lines against a real
`kafkatool serve`, and describe --log-dir on the dir it writes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["topics", *map(str, args)])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("topics") / "data", port=free_port(), extra=["num.partitions=1"]
    ).start()
    try:
        yield b
    finally:
        b.stop()


def test_create_list_describe_alter_delete(broker):
    boot = ["--bootstrap-server", broker.bootstrap]
    res = run(
        "create",
        "--topic",
        "orders",
        "--partitions",
        3,
        "--replication-factor",
        1,
        "--config",
        "retention.ms=1000",
        *boot,
    )
    assert res.exit_code == 0 and res.stdout.strip() == "Created topic orders.", res.output
    again = run("create", "--topic", "orders", "--partitions", 3, *boot)
    assert (
        again.exit_code == 1
        and "Error while executing topic command" in again.output
        and "already exists" in again.output
    )
    assert run("create", "--topic", "orders", "--partitions", 3, "--if-not-exists", *boot).exit_code == 0
    assert run("create", "--topic", "plain", *boot).exit_code == 0  # the broker's defaults
    assert run("list", *boot).stdout.split() == ["orders", "plain"]
    # --topic is Kafka's TopicFilter (IncludeList): ',' separates alternatives, quotes dropped
    assert run("list", "--topic", "'orders, plain'", *boot).stdout.split() == ["orders", "plain"]
    assert run("list", "--topic", "ord.*", *boot).stdout.split() == ["orders"]

    res = run("describe", "--topic", "orders", *boot)
    assert res.exit_code == 0, res.output
    head, *parts = [x for x in res.stdout.splitlines() if x.strip()]
    fields = dict(f.split(": ", 1) for f in head.split("\t"))
    assert (
        fields["Topic"] == "orders" and fields["PartitionCount"] == "3" and fields["ReplicationFactor"] == "1"
    )
    assert fields["Configs"] == "retention.ms=1000" and len(fields["TopicId"]) == 22
    assert [dict(f.split(": ", 1) for f in p.strip().split("\t"))["Partition"] for p in parts] == [
        "0",
        "1",
        "2",
    ]
    overrides = run("describe", "--topics-with-overrides", *boot)
    assert [x.split("\t")[0] for x in overrides.stdout.splitlines()] == ["Topic: orders"]
    assert run("describe", "--under-replicated-partitions", *boot).stdout.strip() == ""
    assert run("describe", "--unavailable-partitions", *boot).stdout.strip() == ""

    res = run("alter", "--topic", "orders", "--partitions", 5, *boot)
    assert res.exit_code == 0 and "Adding partitions succeeded!" in res.stdout, res.output
    js = [json.loads(x) for x in run("describe", "--topic", "orders", "--json", *boot).stdout.splitlines()]
    assert js[0]["partition_count"] == 5
    shrink = run("alter", "--topic", "orders", "--partitions", 2, *boot)
    assert (
        shrink.exit_code == 1
        and "INVALID_PARTITIONS" in shrink.output
        or "partition" in shrink.output.lower()
    )

    assert run("delete", "--topic", "plain", *boot).exit_code == 0
    assert run("list", *boot).stdout.split() == ["orders"]
    missing = run("delete", "--topic", "plain", *boot)
    assert missing.exit_code == 1 and "does not exist as expected" in missing.output
    assert run("delete", "--topic", "plain", "--if-exists", *boot).exit_code == 0


def test_describe_offline_on_the_dir(broker):
    boot = ["--bootstrap-server", broker.bootstrap]
    assert (
        run(
            "create", "--topic", "events", "--partitions", 2, "--config", "cleanup.policy=compact", *boot
        ).exit_code
        == 0
    )
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce("events", key=b"k%d" % i, value=b"v" * 50, partition=1)
    assert p.flush(15) == 0
    res = run("describe", "--topic", "events", "--log-dir", broker.data_dir, "--json")
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    topic, p0, p1 = rows
    assert topic["configs"] == {"cleanup.policy": "compact"} and topic["config_source"]
    assert (p0["log_end_offset"], p1["log_end_offset"]) == (0, 10)
    assert p1["size"] > 500 and p1["segments"] == 1 and p0["size"] == 0
    human = run("describe", "--topic", "events", "--log-dir", broker.data_dir)
    assert "\tPartition: 1\t" in human.stdout and "LogEndOffset: 10" in human.stdout


def test_bad_input_is_one_line(broker, tmp_path):
    res = run("list", "--bootstrap-server", broker.bootstrap, "--topic", "(")
    assert res.exit_code == 2 and "regular expression" in res.output
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8 not kafka")
    res = run("describe", "--log-dir", tmp_path)
    assert res.exit_code == 2 and "Traceback" not in res.output
    res = run("create", "--topic", "x", "--config", "novalue", "--bootstrap-server", broker.bootstrap)
    assert res.exit_code == 2 and "key=value" in res.output
