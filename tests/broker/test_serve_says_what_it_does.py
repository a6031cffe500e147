"""Issue 12, "serve says what it does": unknown properties, --strict, --read-only groups and
refusals, typed JSON logs.  Real ``kafkatool serve`` subprocesses and real clients."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkatool.broker.config import BROKER_CONFIGS, unknown_configs
from kafkatool.broker.log_lines import json_value
from kafkatool.protocol.errors import ErrorCode
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.broker.test_protocol import batch, produce
from tests.broker.wire import WireClient

KCAT = shutil.which("kcat")


def _digest(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ----------------------------------------------------------------------------- unknown properties
def test_issue12_unknown_properties_warn_at_startup(tmp_path):
    """Cases: port, a misspelt key, a KRaft quorum setting were silently ignored."""
    props = tmp_path / "server.properties"
    props.write_text("port=9092\nlog.retention.hour=1\n")
    port = free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkatool", "serve", "--no-banner", "--config", str(props)]
            + ["-o", f"listeners=PLAINTEXT://127.0.0.1:{port}", "-o", f"log.dirs={tmp_path / 'data'}"]
            + ["-o", "controller.quorum.voters=1@127.0.0.1:9093", "-o", "num.partitions=2"],
            cwd=REPO,
            stdout=log,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 20
            while "broker started" not in log_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.05)
        finally:
            proc.terminate()
            assert proc.wait(20) == 0
    text = log_path.read_text()
    warnings = [line for line in text.splitlines() if "level=warning" in line and "ignoring config" in line]
    assert {re.search(r"name=(\S+)", w).group(1) for w in warnings} == {
        "port",
        "log.retention.hour",
        "controller.quorum.voters",
    }
    assert any("did you mean 'log.retention.hours'" in w for w in warnings)
    assert any("use listeners=PLAINTEXT://host:port" in w for w in warnings)
    assert not any("num.partitions" in w for w in warnings)


def test_strict_refuses_unknown_properties(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "kafkatool", "serve", "--strict", "-o", "log.segmnt.bytes=1000"]
        + ["-o", f"log.dirs={tmp_path / 'd'}", "-o", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "log.segmnt.bytes" in p.stderr and "log.segment.bytes" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "d").exists()


def test_unknown_configs_is_one_table():
    """The class: every name outside BROKER_CONFIGS is reported; every name in it is not."""
    assert unknown_configs(list(BROKER_CONFIGS)) == []
    names = ["process.roles", "port", "advertised.host.name", "num.partitons", "whatever.x"]
    got = dict(unknown_configs(names))
    assert set(got) == set(names)
    assert "did you mean 'num.partitions'" in got["num.partitons"]


def test_every_setting_a_coordinator_reads_is_a_known_config():
    """The coordinators read their settings with Kafka's defaults of their own (int_or); each
    name must be in BROKER_CONFIGS with the same default, or setting it in server.properties
    is warned as unknown while it takes effect (transaction.abort.timed.out.transaction.cleanup
    .interval.ms was)."""
    from kafkatool.broker.group import consumer, coordinator
    from kafkatool.broker.txn import coordinator as txn

    for defaults in (txn.DEFAULTS, coordinator.DEFAULTS, consumer.CONSUMER_DEFAULTS):
        for name, default in defaults.items():
            assert name in BROKER_CONFIGS, name
            assert str(BROKER_CONFIGS[name].default) == str(default), name
    assert unknown_configs(list(txn.DEFAULTS)) == []


def test_serve_help_lists_supported_properties():
    p = subprocess.run(
        [sys.executable, "-m", "kafkatool", "serve", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    flat = " ".join(p.stdout.split())
    for name in BROKER_CONFIGS:
        assert name in flat, name
    assert "--strict" in flat


# ----------------------------------------------------------------------------- JSON logs
def test_json_log_values_are_typed(tmp_path):
    port = free_port()
    log_path = tmp_path / "json.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkatool", "serve", "--no-banner", "--log-format", "json"]
            + ["-o", f"listeners=PLAINTEXT://127.0.0.1:{port}", "-o", f"log.dirs={tmp_path / 'd'}"],
            cwd=REPO,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 20
        while "broker started" not in log_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("typed", 2, 1, config={"cleanup.policy": "compact"})])["typed"].result(
            20
        )
        proc.terminate()
        assert proc.wait(20) == 0
    lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.startswith("{")]
    started = next(x for x in lines if x["msg"] == "broker started")
    assert started["partitions"] == 0 and started["read_only"] is False
    done = next(x for x in lines if x["msg"] == "shutdown complete")
    assert done["clean"] is True
    created = next(x for x in lines if x["msg"] == "topic created")
    assert created["partitions"] == 2 and created["configs"] == {"cleanup.policy": "compact"}


def test_split_fields_keeps_values_whole():
    from kafkatool.broker.log_lines import split_fields

    assert split_fields("append failed topic=t partition=0 error=disk full: no space left") == (
        "append failed",
        {"topic": "t", "partition": 0, "error": "disk full: no space left"},
    )
    assert split_fields('startup note="a b=c"') == ("startup", {"note": "a b=c"})
    assert split_fields("shutting down") == ("shutting down", {})


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("-12", -12),
        ("1.5", 1.5),
        ("true", True),
        ("false", False),
        ('"a b"', "a b"),
        ("007", "007"),
        ("1.2.3", "1.2.3"),
        ("abc", "abc"),
    ],
)
def test_json_value(text, value):
    assert json_value(text) == value and type(json_value(text)) is type(value)


# ----------------------------------------------------------------------------- --read-only
@pytest.fixture(scope="module")
def read_only_broker(tmp_path_factory):
    """A log dir with data (written by a real serve), then served --read-only."""
    from confluent_kafka import Producer

    data = tmp_path_factory.mktemp("ro") / "data"
    w = BrokerProcess(data, extra=["num.partitions=2"]).start()
    p = Producer({"bootstrap.servers": w.bootstrap, "linger.ms": 5})
    for i in range(400):
        p.produce("events", key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(20) == 0
    assert w.stop() == 0
    before = _digest(data)
    # no initial rebalance delay: each group consumer's join is not held 3 s for other members
    b = BrokerProcess(data, read_only=True, extra=["group.initial.rebalance.delay.ms=0"]).start()
    yield b
    b.stop()
    assert _digest(data) == before, "a read-only broker wrote to its log dir"


def test_issue12_read_only_confluent_group_consumer(read_only_broker):
    """Case: group consumers rebalanced forever with error 15 storing the assignment."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": read_only_broker.bootstrap,
            "group.id": "ro-ck",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe(["events"])
        got = 0
        deadline = time.monotonic() + 30
        while got < 400 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        assert got == 400
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("events", 0), TopicPartition("events", 1)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [200, 200]
    finally:
        c.close()
    assert "groups and committed offsets in memory only" in read_only_broker.log_text()
    assert "read-only: nothing is written to the log dirs" in read_only_broker.log_text()


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_issue12_read_only_kcat_group_consumer(read_only_broker):
    p = subprocess.run(
        [KCAT, "-b", read_only_broker.bootstrap, "-G", "ro-kcat", "events", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 400


def test_issue12_read_only_produce_refused_with_message(read_only_broker):
    """Case: produce gave only "Policy violation"; the response's message and the log say read-only."""
    from confluent_kafka import KafkaError, Producer

    with WireClient(read_only_broker.bootstrap, client_id="ro-wire") as c:
        r = produce(c, "events", batch(1))
        assert r.error_code == ErrorCode.POLICY_VIOLATION
        assert "read-only" in r.error_message
    errors = []
    p = Producer({"bootstrap.servers": read_only_broker.bootstrap, "client.id": "ro-ck-producer"})
    t0 = time.monotonic()
    p.produce("events", value=b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(20)
    assert errors and errors[0].code() == KafkaError.POLICY_VIOLATION and time.monotonic() - t0 < 10
    log = read_only_broker.log_text()
    assert "read-only: refused produce to topic=events client_id=ro-wire" in log
    assert "client_id=ro-ck-producer" in log


def test_issue12_read_only_unknown_topic_fails_at_once(read_only_broker):
    """Case: producing to an unknown topic hung (message.timeout.ms / max.block.ms)."""
    from confluent_kafka import KafkaError, Producer

    errors = []
    p = Producer({"bootstrap.servers": read_only_broker.bootstrap})
    t0 = time.monotonic()
    p.produce("no-such-topic", value=b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(25)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert time.monotonic() - t0 < 10
    assert "refused auto-creation of topic=no-such-topic" in read_only_broker.log_text()
    # an internal topic is not the producer's to create: plainly unknown, no refusal logged
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

    with WireClient(read_only_broker.bootstrap) as c:
        md = c.request(
            3,
            12,
            G.MetadataRequest(
                topics=[MetadataRequestTopic(name="__transaction_state")], allow_auto_topic_creation=True
            ),
        )
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if KCAT is not None:
        t0 = time.monotonic()
        k = subprocess.run(
            [KCAT, "-P", "-b", read_only_broker.bootstrap, "-t", "no-such-topic-2"],
            input="x\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert k.returncode != 0 and time.monotonic() - t0 < 10


# Apache Kafka 3.x config/server.properties (ZooKeeper) and config/kraft/server.properties, keys as shipped
KAFKA_ZK_PROPERTIES = """
broker.id=0
listeners=PLAINTEXT://127.0.0.1:9092
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""
KAFKA_KRAFT_PROPERTIES = """
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (KAFKA_ZK_PROPERTIES, set()),
        (
            KAFKA_KRAFT_PROPERTIES,
            {
                "process.roles",
                "controller.quorum.voters",
                "inter.broker.listener.name",
                "controller.listener.names",
                "listener.security.protocol.map",
            },
        ),
    ],
)
def test_kafkas_own_server_properties_warn_only_for_what_is_not_served(text, expected):
    from kafkatool.formats.properties import parse_properties_text

    got = dict(unknown_configs(parse_properties_text(text)))
    # names another helper's work may make supported (cluster mode, listeners) drop out; nothing else warns
    assert set(got) <= expected
    assert all("isn't a known config" not in m for m in got.values()), got
