"""kafkatool consume (kafka-console-consumer.sh, kcat -C) against a real `kafkatool serve`, the
data produced by confluent-kafka (librdkafka): every record once, in order per partition, with
DefaultMessageFormatter's output under each print.* property and --json; the start and end
options; read_committed against an aborted and a committed transaction; --log-dir on the
broker's dir (running, then stopped) gives exactly the live output."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.test_sasl import command_config, secured  # noqa: F401 (its SASL_SSL broker)
from tests.cli_result import one_line_error

ck = pytest.importorskip("confluent_kafka")

runner = CliRunner()
T0 = 1_700_000_000_000
OVERRIDES = [
    "num.partitions=1",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
]

#: (partition, key, value, headers, timestamp) in produce order; a null key, a null value, a
#: header with a null value, bytes that are not UTF-8
RECORDS = [
    (0, b"k0", b"v0", [("h1", b"a"), ("h2", b"b")], T0),
    (0, None, b"v1", [], T0 + 1),
    (0, b"k2", None, [("hn", None)], T0 + 2),
    (0, b"k3", b"\xff\xfev3", [], T0 + 3),
    (1, b"k4", b"v4", [("x", b"y")], T0 + 4),
    (1, b"k5", b"v5", [], T0 + 5),
]
PART0 = [r for r in RECORDS if r[0] == 0]
PART1 = [r for r in RECORDS if r[0] == 1]


def consume(*args):
    return runner.invoke(app, ["consume", *map(str, args)])


def ok(res) -> bytes:
    assert res.exit_code == 0, (res.output, res.exception)
    return res.stdout_bytes


def count_line(res) -> str:
    return res.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("consume") / "data", port=free_port(), extra=OVERRIDES).start()
    try:
        yield b
    finally:
        b.stop()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


@pytest.fixture(scope="module")
def data(broker):
    bs = broker.bootstrap
    create_topic(bs, "plain", 2)
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for part, key, value, headers, ts in RECORDS:
        p.produce("plain", key=key, value=value, partition=part, headers=headers or None, timestamp=ts)
        assert p.flush(15) == 0
    create_topic(bs, "txn", 1)
    tp = ck.Producer({"bootstrap.servers": bs, "transactional.id": "consume-test", "linger.ms": 5})
    tp.init_transactions(20)
    for label, commit in (("c1", True), ("ab", False), ("c2", True)):
        tp.begin_transaction()
        for i in range(3):
            tp.produce("txn", value=f"{label}-{i}".encode(), partition=0)
        tp.flush(10)
        (tp.commit_transaction if commit else tp.abort_transaction)(20)
    # topic open: a committed record, then a transaction left open (the last stable offset stays
    # at its first offset, live and in the dir), then a plain record after it
    create_topic(bs, "open", 1)
    op = ck.Producer({"bootstrap.servers": bs, "transactional.id": "consume-open", "linger.ms": 5})
    op.init_transactions(20)
    op.begin_transaction()
    op.produce("open", value=b"done", partition=0)
    op.commit_transaction(20)
    op.begin_transaction()
    op.produce("open", value=b"pending", partition=0)
    op.flush(10)
    p.produce("open", value=b"after", partition=0)
    assert p.flush(15) == 0
    broker.open_producer = op  # kept open for the module's tests
    return broker


def live(data):
    return ["--bootstrap-server", data.bootstrap]


def test_values_once_in_order_per_partition(data):
    res = consume("--topic", "plain", "--from-beginning", "--exit-at-end", *live(data))
    out = ok(res)
    lines = out.split(b"\n")
    assert lines[-1] == b""
    lines = lines[:-1]
    # partitions interleave as fetches answer; within one, produce order
    want0 = [b"null" if v is None else v for _, _, v, _, _ in PART0]
    want1 = [v for _, _, v, _, _ in PART1]
    assert sorted(lines) == sorted(want0 + want1)
    assert [x for x in lines if x in want0] == want0 and [x for x in lines if x in want1] == want1
    assert count_line(res) == "Processed a total of 6 messages"


def expected_line(r, offset: int) -> bytes:
    """DefaultMessageFormatter's line with every print.* on, separators '|', ';', '~', null
    literal 'NIL', written out by hand for this test."""
    part, key, value, headers, ts = r
    hs = b";".join(k.encode() + b":" + (b"NIL" if v is None else v) for k, v in headers) or b"NO_HEADERS"
    return (
        b"|".join(
            [
                b"CreateTime:%d" % ts,
                b"Partition:%d" % part,
                b"Offset:%d" % offset,
                hs,
                b"NIL" if key is None else key,
                b"NIL" if value is None else value,
            ]
        )
        + b"~"
    )


def test_every_print_property(data):
    props = ["print.timestamp=true", "print.key=true", "print.partition=true", "print.offset=true",
             "print.headers=true", "key.separator=|", "line.separator=~", "headers.separator=;",
             "null.literal=NIL"]  # fmt: skip
    args = [x for p in props for x in ("--property", p)]
    out = ok(
        consume(
            "--topic", "plain", "--partition", 0, "--offset", "earliest", "--exit-at-end", *args, *live(data)
        )
    )
    assert out == b"".join(expected_line(r, i) for i, r in enumerate(PART0))
    # one property at a time, the rest at Kafka's defaults
    out = ok(consume("--topic", "plain", "--partition", 1, "--from-beginning", "--exit-at-end",
                     "--property", "print.key=true", *live(data)))  # fmt: skip
    assert out == b"k4\tv4\nk5\tv5\n"
    out = ok(consume("--topic", "plain", "--partition", 1, "--from-beginning", "--exit-at-end",
                     "--property", "print.timestamp=true", "--property", "print.value=false", *live(data)))  # fmt: skip
    assert out == b"CreateTime:%d\nCreateTime:%d\n" % (T0 + 4, T0 + 5)
    out = ok(consume("--topic", "plain", "--partition", 1, "--from-beginning", "--exit-at-end",
                     "--property", "print.headers=true", "--property", "print.offset=true", *live(data)))  # fmt: skip
    assert out == b"Offset:0\tx:y\tv4\nOffset:1\tNO_HEADERS\tv5\n"
    # StringDeserializer: Java's String of bytes that are not UTF-8 (one U+FFFD each here)
    out = ok(consume("--topic", "plain", "--partition", 0, "--offset", 3, "--max-messages", 1,
                     "--property", "value.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
                     *live(data)))  # fmt: skip
    assert out == "\ufffd\ufffdv3\n".encode()


def test_json(data):
    out = ok(
        consume(
            "--topic", "plain", "--partition", 0, "--from-beginning", "--exit-at-end", "--json", *live(data)
        )
    )
    objs = [json.loads(x) for x in out.decode().splitlines()]
    assert [o["offset"] for o in objs] == [0, 1, 2, 3]
    for o, (part, key, value, headers, ts) in zip(objs, PART0, strict=True):
        assert (o["topic"], o["partition"], o["timestamp"], o["timestamp_type"]) == (
            "plain",
            part,
            ts,
            "CreateTime",
        )
        assert o["key"] == (None if key is None else key.decode())
        if value is not None and value.startswith(b"\xff"):
            assert o["value_encoding"] == "base64" and base64.b64decode(o["value"]) == value
        else:
            assert o["value_encoding"] == "utf-8" and o["value"] == (
                None if value is None else value.decode()
            )
        assert [(h["key"], h["value"]) for h in o["headers"]] == [
            (k, None if v is None else v.decode()) for k, v in headers
        ]


def test_start_and_end_options(data):
    # --offset N needs --partition and starts there
    assert ok(consume("--topic", "plain", "--partition", 0, "--offset", 2, "--exit-at-end", *live(data))) == (
        b"null\n\xff\xfev3\n"
    )
    # latest with --exit-at-end: nothing, and the command ends
    res = consume("--topic", "plain", "--offset", "latest", "--partition", 0, "--exit-at-end", *live(data))
    assert ok(res) == b"" and count_line(res) == "Processed a total of 0 messages"
    # --max-messages stops after N
    res = consume("--topic", "plain", "--partition", 0, "--from-beginning", "--max-messages", 2, *live(data))
    assert ok(res) == b"v0\nv1\n" and count_line(res) == "Processed a total of 2 messages"
    # --timeout-ms: everything, then it ends once nothing arrives for that long
    t = time.monotonic()
    res = consume("--topic", "plain", "--from-beginning", "--timeout-ms", 700, *live(data))
    assert len(ok(res).split(b"\n")) == 7 and time.monotonic() - t < 15
    # default start is latest: a record produced after the start comes, older ones do not
    p = ck.Producer({"bootstrap.servers": data.bootstrap, "linger.ms": 0})
    import threading

    def later():
        time.sleep(1.0)
        p.produce("late", value=b"new", partition=0)
        p.flush(10)

    create_topic(data.bootstrap, "late", 1)
    p.produce("late", value=b"old", partition=0)
    p.flush(10)
    th = threading.Thread(target=later)
    th.start()
    res = consume("--topic", "late", "--max-messages", 1, "--timeout-ms", 8000, *live(data))
    th.join(15)
    assert ok(res) == b"new\n"


def test_isolation_levels(data):
    rc = ok(
        consume(
            "--topic",
            "txn",
            "--from-beginning",
            "--exit-at-end",
            "--isolation-level",
            "read_committed",
            *live(data),
        )
    )
    ru = ok(consume("--topic", "txn", "--from-beginning", "--exit-at-end", *live(data)))
    assert rc.decode().split() == [f"c1-{i}" for i in range(3)] + [f"c2-{i}" for i in range(3)]
    assert ru.decode().split() == [f"{x}-{i}" for x in ("c1", "ab", "c2") for i in range(3)]
    # an open transaction: read_committed ends at its first offset (--exit-at-end's end is the LSO)
    rc = ok(
        consume(
            "--topic",
            "open",
            "--from-beginning",
            "--exit-at-end",
            "--isolation-level",
            "read_committed",
            *live(data),
        )
    )
    ru = ok(consume("--topic", "open", "--from-beginning", "--exit-at-end", *live(data)))
    assert rc == b"done\n" and ru == b"done\npending\nafter\n"


def test_ctrl_c_exits_130_with_the_count(data):
    import signal
    import subprocess
    import sys

    from tests.broker.conftest import REPO

    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatool", "consume", "--topic", "plain", "--from-beginning", *live(data)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        lines = [proc.stdout.readline() for _ in range(6)]  # every record, then it waits for more
        assert sorted(lines) == sorted(b"%s\n" % (b"null" if v is None else v) for _, _, v, _, _ in RECORDS)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130
    assert err.decode().strip().splitlines()[-1] == "Processed a total of 6 messages"


def test_a_missing_topic_is_created_or_waited_for(data, tmp_path):
    """Kafka's console consumer does not stop at a topic the cluster lacks: its Metadata request
    asks the broker to create it (allow.auto.create.topics, default true; the broker's
    auto.create.topics.enable is true by default), and without that it waits, asking again, until
    its timeout or Ctrl-C. The command says so once on stderr, however many times it asks."""
    import subprocess
    import sys

    from confluent_kafka.admin import AdminClient

    from tests.broker.conftest import REPO

    def topics() -> set[str]:
        return set(AdminClient({"bootstrap.servers": data.bootstrap}).list_topics(timeout=10).topics)

    res = consume("--topic", "auto-made", "--from-beginning", "--exit-at-end", *live(data))
    assert ok(res) == b"" and count_line(res) == "Processed a total of 0 messages"
    assert "auto-made" in topics()

    no_create = ["--consumer-property", "allow.auto.create.topics=false"]
    began = time.monotonic()
    res = consume("--topic", "not-made", *no_create, "--timeout-ms", 1500, *live(data))
    assert time.monotonic() - began >= 1.5
    assert ok(res) == b""
    assert res.stderr.splitlines() == [
        "kafkatool: WARNING: Topic 'not-made' does not exist (UNKNOWN_TOPIC_OR_PARTITION): waiting for it, "
        "as Kafka's consumer does (until --timeout-ms or Ctrl-C)",
        "Processed a total of 0 messages",
    ]
    assert "not-made" not in topics()
    # --exit-at-end has nothing assigned to end: it waits as well
    res = consume("--topic", "plain", "--partition", 5, "--exit-at-end", "--timeout-ms", 300, *live(data))
    assert ok(res) == b"" and res.stderr.splitlines()[0].startswith(
        "kafkatool: WARNING: Topic 'plain' has no partition 5 (partitions: 2): waiting for it"
    )

    # the wait ends when the topic is made: its records are read
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatool", "consume", "--topic", "made-later", *no_create, "--from-beginning",
         "--max-messages", "1", *live(data)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert b"waiting for it" in proc.stderr.readline()
        create_topic(data.bootstrap, "made-later", 1)
        p = ck.Producer({"bootstrap.servers": data.bootstrap, "linger.ms": 0})
        p.produce("made-later", value=b"hello", partition=0)
        assert p.flush(15) == 0
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert (proc.returncode, out) == (0, b"hello\n")
    assert err.decode().splitlines() == ["Processed a total of 1 messages"]


def test_bad_input(data):
    assert one_line_error(consume("--topic", "plain", "--offset", 3, *live(data))).endswith(
        "The partition is required when offset is specified."
    )
    assert "print.nonsense" in one_line_error(
        consume("--topic", "plain", "--property", "print.nonsense=true", *live(data))
    )
    assert "KEY=VALUE" in one_line_error(consume("--topic", "plain", "--property", "print.key", *live(data)))
    assert "non-negative long" in one_line_error(
        consume("--topic", "plain", "--partition", 0, "--offset", "-5", *live(data))
    )
    assert "read_committed" in one_line_error(
        consume("--topic", "plain", "--isolation-level", "dirty", *live(data))
    )
    assert "cannot connect" in one_line_error(
        consume("--topic", "plain", "--bootstrap-server", f"127.0.0.1:{free_port()}")
    )


def test_log_dir_gives_the_live_output(data, tmp_path):
    cases = [
        ["--topic", "plain", "--property", "print.key=true", "--property", "print.offset=true",
         "--property", "print.headers=true", "--property", "print.timestamp=true"],
        ["--topic", "plain", "--json"],
        ["--topic", "txn", "--isolation-level", "read_committed"],
        ["--topic", "txn", "--isolation-level", "read_uncommitted"],
        ["--topic", "plain", "--partition", 0, "--offset", 1],
        ["--topic", "open", "--isolation-level", "read_committed"],
        ["--topic", "open", "--isolation-level", "read_uncommitted"],
    ]  # fmt: skip

    def by_partition(args, out: bytes) -> list:
        if "--json" in args:
            objs = [json.loads(x) for x in out.decode().splitlines()]
            return sorted(objs, key=lambda o: (o["partition"], o["offset"]))
        return out.split(b"\n")

    def live_out(args):
        extra = [] if "--offset" in args else ["--from-beginning"]
        # one partition at a time: the live order across partitions is the fetches' order
        if "--partition" in args or args[1] != "plain":
            return by_partition(args, ok(consume(*args, *extra, "--exit-at-end", *live(data))))
        outs = [ok(consume(*args, "--partition", p, *extra, "--exit-at-end", *live(data))) for p in (0, 1)]
        return by_partition(args, b"".join(outs))

    want = [live_out(a) for a in cases]
    offline = ["--log-dir", data.data_dir]
    # a running broker's dir, read-only
    got = [by_partition(a, ok(consume(*a, *offline))) for a in cases]
    assert got == want
    data.stop()
    got = [by_partition(a, ok(consume(*a, *offline))) for a in cases]
    assert got == want
    res = consume("--topic", "txn", *offline)
    assert count_line(res) == "Processed a total of 9 messages"
    assert "does not exist" in one_line_error(consume("--topic", "nope", *offline))


def test_leaders_on_two_nodes_and_a_restarted_leader_are_followed(tmp_path):
    """A broker of two processes (two nodes, each leading some partitions): consume reads every
    partition at its own leader, and when one node is killed (its partitions without a leader,
    then back with a new epoch) it follows them through Metadata: every record once, in order."""
    import signal
    import subprocess
    import sys

    from tests.broker.conftest import REPO
    from tests.broker.test_processes import children, produce, wait_until

    b = BrokerProcess(tmp_path / "data", extra=["kafkatool.processes=2", *OVERRIDES]).start(timeout=40)
    try:
        create_topic(b.bootstrap, "spread", 4)
        produce(b.bootstrap, "spread", 4, 10)
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkatool", "consume", "--topic", "spread", "--from-beginning",
             "--max-messages", "80", "--timeout-ms", "40000", "--property", "print.partition=true",
             "--bootstrap-server", b.bootstrap],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            first = [proc.stdout.readline() for _ in range(40)]
            [member] = children(b.proc.pid)
            os.kill(member, signal.SIGKILL)
            wait_until(lambda: [c for c in children(b.proc.pid) if c != member], timeout=30)
            produce(b.bootstrap, "spread", 4, 10)
            rest, err = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0, err
        lines = [x.decode().rstrip("\n") for x in first] + rest.decode().splitlines()
        per = {p: [v for v in lines if v.startswith(f"Partition:{p}\t")] for p in range(4)}
        for p in range(4):
            assert per[p] == [f"Partition:{p}\t{p}:{i}" for i in range(10)] * 2, per[p]
        assert err.decode().strip().splitlines()[-1] == "Processed a total of 80 messages"
    finally:
        b.stop()


def test_over_sasl_ssl_with_command_config(secured, tmp_path):  # noqa: F811
    """--command-config: consume reaches a SASL_SSL listener (ListOffsets and Fetch at the
    leader with the same security); without it, one line and exit 2."""
    p = ck.Producer({"bootstrap.servers": secured.bootstrap, "linger.ms": 0})
    for i in range(3):
        p.produce("secured-consume", key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp=T0 + i)
    assert p.flush(15) == 0
    cfg = command_config(secured, tmp_path / "client.properties")
    sec = ["--bootstrap-server", secured.sasl_ssl, "--command-config", cfg]
    out = ok(
        consume(
            "--topic",
            "secured-consume",
            "--from-beginning",
            "--exit-at-end",
            "--property",
            "print.key=true",
            *sec,
        )
    )
    assert out == b"k0\tv0\nk1\tv1\nk2\tv2\n"
    one_line_error(
        consume("--topic", "secured-consume", "--exit-at-end", "--bootstrap-server", secured.sasl_ssl)
    )
