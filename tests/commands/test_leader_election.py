"""kafkatool leader-election (issue 15): kafka-leader-election.sh's options and result lines
against a real `kafkatool serve` (ElectLeaders), and ZooKeeper-mode's
/admin/preferred_replica_election on a real ZooKeeper seeded as Kafka writes it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["leader-election", *map(str, args)])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path_factory.mktemp("elect") / "data"
    b = BrokerProcess(data, port=free_port(), extra=["num.partitions=1"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("t", 2, 1)]).values():
            f.result(15)
        yield b
    finally:
        b.stop()


def test_every_partition_already_has_its_valid_leader(broker):
    res = run(
        "--bootstrap-server", broker.bootstrap, "--election-type", "preferred", "--all-topic-partitions"
    )
    assert res.exit_code == 0, res.output
    assert "Valid replica already elected for partitions t-0, t-1" in res.stdout
    res = run(
        "--bootstrap-server",
        broker.bootstrap,
        "--election-type",
        "UNCLEAN",
        "--topic",
        "t",
        "--partition",
        "1",
    )
    assert res.exit_code == 0 and res.stdout.strip() == "Valid replica already elected for partitions t-1"


def test_a_missing_partition_is_reported_and_exit_1(broker, tmp_path):
    f = tmp_path / "election.json"
    f.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 7}]}))
    res = run(
        "--bootstrap-server",
        broker.bootstrap,
        "--election-type",
        "preferred",
        "--path-to-json-file",
        f,
        "--json",
    )
    assert res.exit_code == 1, res.output
    got = [json.loads(x) for x in res.stdout.splitlines()]
    by = {(r["topic"], r["partition"]): r for r in got if r["type"] == "partition"}
    assert by[("t", 0)]["result"] == "not_needed"
    assert by[("t", 7)]["result"] == "failed" and "UNKNOWN_TOPIC_OR_PARTITION" in by[("t", 7)]["error"]
    human = run(
        "--bootstrap-server", broker.bootstrap, "--election-type", "preferred", "--path-to-json-file", f
    )
    assert (
        "Error completing leader election (PREFERRED) for partition: t-7: UNKNOWN_TOPIC_OR_PARTITION"
        in human.stdout
    )
    assert "1 replica(s) could not be elected" in human.output


def test_a_real_client_gets_kafkas_answer(broker):
    """confluent-kafka's AdminClient.elect_leaders reads the broker's ElectLeaders as Kafka's."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 0)])
    result = fut.result(15)
    (err,) = result.values()
    assert err is not None and err.code() == ck.KafkaError.ELECTION_NOT_NEEDED


def test_bad_input_is_one_line(broker, tmp_path):
    dup = tmp_path / "dup.json"
    dup.write_text(
        json.dumps({"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]})
    )
    cases = [
        (["--election-type", "preferred", "--path-to-json-file", dup], "contains duplicate partitions: t-0"),
        (["--election-type", "preferred", "--topic", "t"], "Missing required option(s): --partition"),
        (["--election-type", "preferred", "--all-topic-partitions", "--topic", "t", "--partition", "0"],
         "One and only one of the following options is required"),
        (["--election-type", "fair", "--all-topic-partitions"], "expected preferred or unclean"),
    ]  # fmt: skip
    for args, message in cases:
        res = run("--bootstrap-server", broker.bootstrap, *args)
        assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output, (
            args,
            res.output,
        )
    res = run("--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred", "--all-topic-partitions")
    assert res.exit_code == 2 and "Traceback" not in res.output
