"""kafkatool produce's producer configs (--producer.config, --producer-property) with
kafka-console-producer.sh 3.7's precedence and Kafka's producer checks, --line-reader and
--reader-config, --broker-list (produce and topics get-offsets), and the idempotent producer's
KIP-360 recovery against a real `kafkatool serve` that lost acknowledged batches (the log cut
after a SIGKILL, as an unclean election leaves it): OUT_OF_ORDER_SEQUENCE_NUMBER, an epoch bump,
the batch sent again from sequence 0 and appended once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkatool.assign.producer import idempotent_retry, partition_for_key
from kafkatool.assign.producer_config import ProducerConfigError, console_producer_props, producer_settings
from kafkatool.formats.records import iter_batches
from kafkatool.protocol.errors import ErrorCode
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.broker.security.test_sasl import command_config, secured  # noqa: F401 (its SASL_SSL broker)
from tests.commands.test_produce import _Via, consume, create, json_rows, one_line, produce, proxied  # noqa: F401

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("produce-configs") / "data",
        port=free_port(),
        extra=["num.partitions=1", "auto.create.topics.enable=false"],
    ).start()
    try:
        yield b
    finally:
        b.stop()


def batches(broker, topic: str, partition: int = 0) -> list:
    data = (Path(broker.data_dir) / f"{topic}-{partition}" / "00000000000000000000.log").read_bytes()
    return list(iter_batches(data))


def warnings(res) -> list[str]:
    return [x for x in res.stderr.decode().splitlines() if x.startswith("kafkatool: warning: ")]


# ----------------------------------------------------------------------------- precedence (pure)


def settings_of(file_props=None, props=None, options=None, codec="none"):
    notes: list[str] = []
    merged = console_producer_props(
        file_props or {}, props or {}, list((options or {}).items()), codec, notes
    )
    s = producer_settings(merged)
    s.notes[:0] = notes
    return s


def test_console_producer_precedence():
    # the file, a property over it, an option given over both; an option not given only fills in
    # its ConsoleProducer default where nothing is set
    s = settings_of(
        {"batch.size": "100", "linger.ms": "7", "retries": "9", "client.id": "mine"},
        {"batch.size": "200"},
        {"batch.size": None, "linger.ms": "5", "retries": None, "request.timeout.ms": None},
    )
    assert (s.batch_size, s.linger_ms, s.retries, s.request_timeout_ms, s.client_id) == (
        200,
        5,
        9,
        1500,
        "mine",
    )
    s = settings_of({}, {}, {"batch.size": None, "linger.ms": None, "acks": None, "retries": None})
    assert (s.batch_size, s.linger_ms, s.acks, s.retries, s.client_id) == (
        16384,
        1000,
        -1,
        3,
        "console-producer",
    )
    assert s.idempotence and s.max_in_flight == 5 and s.delivery_timeout_ms == 120000
    # compression.type is --compression-codec's, whatever the configs say (3.7's producerProps)
    s = settings_of({"compression.type": "gzip"}, {}, {}, codec="none")
    assert s.codec == 0 and "replaced by --compression-codec (none)" in s.notes[0]


@pytest.mark.parametrize(
    "props, message",
    [
        ({"enable.idempotence": "true", "acks": "1"},
         "Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence."),
        ({"enable.idempotence": "true", "retries": "0"},
         "Must set retries to non-zero when using the idempotent producer."),
        ({"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"},
         "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent producer."),
        ({"delivery.timeout.ms": "1000", "linger.ms": "500", "request.timeout.ms": "600"},
         "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"),
        ({"linger.ms": "soon"}, "Invalid value soon for configuration linger.ms: Not a number of type LONG"),
        ({"batch.size": "-1"}, "Invalid value -1 for configuration batch.size: Value must be at least 0"),
        ({"retries": "2147483648"}, "Invalid value 2147483648 for configuration retries: Not a number of type INT"),
        ({"acks": "2"}, "Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1"),
        ({"enable.idempotence": "yes"},
         "Invalid value yes for configuration enable.idempotence: Expected value to be either true or false"),
        ({"max.in.flight.requests.per.connection": "0"},
         "Invalid value 0 for configuration max.in.flight.requests.per.connection: Value must be at least 1"),
        ({"transactional.id": "t", "enable.idempotence": "false"},
         "Cannot set a transactional.id without also enabling idempotence."),
    ],
)  # fmt: skip
def test_kafkas_config_exceptions(props, message):
    with pytest.raises(ProducerConfigError) as exc:
        producer_settings(props)
    assert str(exc.value) == message


def test_defaulted_idempotence_is_turned_off_not_refused():
    s = producer_settings({"acks": "1"})
    assert not s.idempotence and s.acks == 1 and not s.notes  # Kafka logs this one at INFO
    s = producer_settings({"max.in.flight.requests.per.connection": "6"})
    assert not s.idempotence and s.notes == [
        "Idempotence will be disabled because max.in.flight.requests.per.connection is set to 6, which is "
        "greater than 5. Please note that in v4.0.0 and onward, this will become an error."
    ]
    # an unset delivery.timeout.ms below linger + request timeout is raised to it, with Kafka's warning
    s = producer_settings({"linger.ms": "100000", "request.timeout.ms": "30000"})
    assert s.delivery_timeout_ms == 130000 and "Setting it to 130000." in s.notes[0]


def test_names_unknown_taken_and_security():
    s = producer_settings(
        {"buffer.memory": "1", "foo.bar": "x", "security.protocol": "SSL", "ssl.truststore.location": "/t"}
    )
    assert s.notes == ["The configuration 'foo.bar' was supplied but isn't a known config."]
    assert s.security == {"security.protocol": "SSL", "ssl.truststore.location": "/t"}


def test_console_producer_memory_socket_and_metadata_options():
    """ConsoleProducer 3.7's --max-partition-memory-bytes, --socket-buffer-size, --max-memory-bytes,
    --metadata-expiry-ms and --max-block-ms: batch.size, send.buffer.bytes, buffer.memory,
    metadata.max.age.ms and max.block.ms by maybeMergeOptions, with ConsoleProducer's defaults
    where nothing sets them (send.buffer.bytes 102400, not the producer's 131072), and
    ProducerConfig's checks."""
    from kafkatool.commands.produce import OPTION_CONFIGS

    def merged(**given):
        return [(config, given.get(key)) for key, config in OPTION_CONFIGS]

    notes: list[str] = []
    s = producer_settings(console_producer_props({}, {}, merged(), "none", notes))
    assert (s.batch_size, s.send_buffer, s.receive_buffer, s.buffer_memory, s.metadata_max_age_ms,
            s.max_block_ms) == (16384, 102400, 32768, 33554432, 300000, 60000)  # fmt: skip
    # --max-partition-memory-bytes is merged after --batch-size: it wins when both are given
    s = producer_settings(
        console_producer_props(
            {}, {}, merged(batch_size="100", max_partition_memory_bytes="200"), "none", notes
        )
    )
    assert s.batch_size == 200
    s = producer_settings(console_producer_props({}, {"batch.size": "300"}, merged(), "none", notes))
    assert s.batch_size == 300  # neither given: the config stays
    s = producer_settings(
        console_producer_props(
            {"send.buffer.bytes": "-1", "buffer.memory": "5"},
            {},
            merged(socket_buffer_size="4096", metadata_expiry_ms="10", max_block_ms="20"),
            "none",
            notes,
        )
    )
    assert (s.send_buffer, s.buffer_memory, s.metadata_max_age_ms, s.max_block_ms) == (4096, 5, 10, 20)
    for props, message in [
        ({"send.buffer.bytes": "-2"}, "Invalid value -2 for configuration send.buffer.bytes: Value must be at least -1"),
        ({"buffer.memory": "lots"}, "Invalid value lots for configuration buffer.memory: Not a number of type LONG"),
        ({"max.block.ms": "-1"}, "Invalid value -1 for configuration max.block.ms: Value must be at least 0"),
    ]:  # fmt: skip
        with pytest.raises(ProducerConfigError) as exc:
            producer_settings(props)
        assert str(exc.value) == message
    assert not notes


def test_compression_levels_are_kafka_38s_so_37_warns_and_writes_its_default(broker):
    """compression.gzip.level (KIP-390) is Kafka 3.8's: Kafka 3.7's producer warns that it is not
    a known config and compresses at its default level (GZIPOutputStream's 6), and so do we."""
    from kafkatool.formats import compression as Z

    create(broker, "levels", 1)
    lines = [b"level %d " % i + b"abcdefgh" * (i % 40) for i in range(200)]
    res = produce(broker, "--topic", "levels", "--compression-codec", "gzip",
                  "--producer-property", "compression.gzip.level=1", stdin=b"\n".join(lines) + b"\n")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert warnings(res) == [
        "kafkatool: warning: The configuration 'compression.gzip.level' was supplied but isn't a known config."
    ]
    (batch, *_) = batches(broker, "levels")
    payload = bytes(batch.raw()[61:])
    plain = Z.decompress(Z.GZIP, payload)
    assert payload == Z.compress(Z.GZIP, plain) != Z.compress(Z.GZIP, plain, level=1)


def test_idempotent_retry_is_transaction_managers_can_retry():
    oos, upid = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID
    kw = {"log_start_offset": 0, "sequence_reset": False, "base_sequence": 20, "last_acked_sequence": 19}
    assert idempotent_retry(oos, **kw) == (True, True)  # the next batch: a gap, bump
    assert idempotent_retry(oos, **{**kw, "base_sequence": 25}) == (True, False)  # not the next one
    assert idempotent_retry(oos, **{**kw, "sequence_reset": True}) == (True, False)
    assert idempotent_retry(upid, **kw) == (True, True)
    assert idempotent_retry(upid, **{**kw, "log_start_offset": -1}) == (True, False)
    assert idempotent_retry(upid, **{**kw, "sequence_reset": True}) == (True, False)
    assert idempotent_retry(ErrorCode.NOT_LEADER_OR_FOLLOWER, **kw) == (True, False)
    assert idempotent_retry(ErrorCode.INVALID_PRODUCER_EPOCH, **kw) == (False, False)


# ----------------------------------------------------------------------------- on a broker


def test_configs_reach_the_producer(broker, tmp_path):
    create(broker, "cfg", 1)
    lines = b"".join(b"line %d\n" % i for i in range(12))
    # batch.size from the file, overridden by a property: batches of 120 bytes, not of 16 KiB
    f = tmp_path / "producer.properties"
    f.write_text("batch.size=16384\nlinger.ms=5\nacks=all\n")
    res = produce(
        broker, "--topic", "cfg", "--producer.config", f, "--producer-property", "batch.size=120", stdin=lines
    )
    assert res.returncode == 0, res.stderr
    got = batches(broker, "cfg")
    assert len(got) == 3 and sum(b.count for b in got) == 12
    assert all(b.producer_id >= 0 for b in got)  # idempotent by default
    # --batch-size given wins over the property; acks=1 from the file turns idempotence off
    f.write_text("acks=1\n")
    res = produce(
        broker, "--topic", "cfg", "--producer.config", f, "--producer-property", "batch.size=120",
        "--batch-size", 16384, stdin=lines,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    new = batches(broker, "cfg")[len(got) :]
    assert len(new) == 1 and new[0].count == 12 and new[0].producer_id == -1
    # --request-required-acks given wins over acks=1 of the file: idempotent again
    res = produce(
        broker, "--topic", "cfg", "--producer.config", f, "--request-required-acks", "all", stdin=b"x\n"
    )
    assert res.returncode == 0, res.stderr
    assert batches(broker, "cfg")[-1].producer_id >= 0
    # enable.idempotence=false by property; compression.type replaced by --compression-codec
    res = produce(
        broker, "--topic", "cfg", "--producer-property", "enable.idempotence=false",
        "--producer-property", "compression.type=gzip", "--compression-codec", "lz4",
        "--producer-property", "no.such.config=1", stdin=b"y\n",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    last = batches(broker, "cfg")[-1]
    assert last.producer_id == -1 and last.codec == 3  # lz4
    assert warnings(res) == [
        "kafkatool: warning: compression.type=gzip of the producer configs is replaced by "
        "--compression-codec (lz4), as kafka-console-producer.sh does",
        "kafkatool: warning: The configuration 'no.such.config' was supplied but isn't a known config.",
    ]
    # max.request.size: a record over it is refused by the producer, named by its line
    res = produce(
        broker, "--topic", "cfg", "--producer-property", "max.request.size=500", stdin=b"a\n" + b"z" * 600
    )
    assert res.returncode == 1
    assert "line 2: RecordTooLargeException: The message is" in res.stderr.decode()
    assert "which is the value of the max.request.size configuration" in res.stderr.decode()


def test_partitioner_ignore_keys(broker):
    create(broker, "nokeys", 4)
    keys = [b"k%d" % i for i in range(40)]
    stdin = b"".join(k + b"\t" + k + b"\n" for k in keys)
    assert len({partition_for_key(k, 4) for k in keys}) == 4
    res = produce(broker, "--topic", "nokeys", "--property", "parse.key=true", "--producer-property",
                  "partitioner.ignore.keys=true", "--json", stdin=stdin)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert len({r["partition"] for r in json_rows(res)}) == 1  # one sticky partition, keys or not
    assert len(consume(broker, "nokeys", 40, partitions=4)) == 40


def test_config_conflicts_are_one_line(broker, tmp_path):
    create(broker, "conflict", 1)
    cases = [
        (["--producer-property", "enable.idempotence=true", "--request-required-acks", "1"],
         "Must set acks to all in order to use the idempotent producer."),
        (["--idempotence", "--producer-property", "max.in.flight.requests.per.connection=6"],
         "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent producer."),
        (["--producer-property", "delivery.timeout.ms=10", "--timeout", "100"],
         "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"),
        (["--producer-property", "transactional.id=tx"], "initTransactions"),
        (["--producer-property", "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner"],
         "built-in partitioner"),
        (["--producer-property", "linger.ms"], "--producer-property 'linger.ms': expected KEY=VALUE"),
        (["--producer.config", tmp_path / "missing.properties"], "missing.properties: No such file or directory"),
        (["--producer-property", "security.protocol=SSLX"], "security.protocol 'SSLX'"),
    ]  # fmt: skip
    for args, words in cases:
        assert words in one_line(produce(broker, "--topic", "conflict", *args, stdin=b"x\n")), args
    assert batches(broker, "conflict") == []  # nothing was sent


def test_line_reader_and_reader_config(broker, tmp_path):
    create(broker, "reader", 1)
    f = tmp_path / "reader.properties"
    f.write_text("parse.key=true\nkey.separator=|\n")
    for cls in ("kafka.tools.ConsoleProducer$LineMessageReader", "org.apache.kafka.tools.LineMessageReader"):
        # --property takes precedence over the file
        res = produce(broker, "--topic", "reader", "--line-reader", cls, "--reader-config", f,
                      "--property", "key.separator=:", stdin=b"k1:v1\n")  # fmt: skip
        assert res.returncode == 0, res.stderr
    got = consume(broker, "reader", 2, partitions=1)
    assert [(r[2], r[3]) for r in got] == [(b"k1", b"v1")] * 2
    line = one_line(
        produce(broker, "--topic", "reader", "--line-reader", "kafka.tools.LineMessageReader", stdin=b"x")
    )
    assert line == (
        "kafkatool: error: --line-reader kafka.tools.LineMessageReader: kafkatool reads lines with "
        "LineMessageReader only (kafka.tools.ConsoleProducer$LineMessageReader or "
        "org.apache.kafka.tools.LineMessageReader)"
    )
    f.write_text("parse.kee=true\n")
    assert "unknown property 'parse.kee'" in one_line(
        produce(broker, "--topic", "reader", "--reader-config", f)
    )


def test_broker_list_is_bootstrap_servers_deprecated_alias(broker):
    create(broker, "listed", 1)

    def run(*args, stdin=b""):
        cmd = [sys.executable, "-m", "kafkatool", *map(str, args)]
        return subprocess.run(cmd, input=stdin, capture_output=True, cwd=REPO, timeout=60)

    dead = f"127.0.0.1:{free_port()}"
    res = run("produce", "--topic", "listed", "--broker-list", broker.bootstrap, stdin=b"a\nb\n")
    assert res.returncode == 0 and not warnings(res), res.stderr  # no warning: ConsoleProducer prints none
    # --bootstrap-server given: --broker-list ignored (here unreachable)
    res = run("produce", "--topic", "listed", "--broker-list", dead, "--bootstrap-server", broker.bootstrap,
              stdin=b"c\n")  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = run("topics", "get-offsets", "--topic", "listed", "--broker-list", broker.bootstrap)
    assert (res.returncode, res.stdout, res.stderr) == (0, b"listed:0:3\n", b"")
    res = run(
        "topics",
        "get-offsets",
        "--topic",
        "listed",
        "--broker-list",
        dead,
        "--bootstrap-server",
        broker.bootstrap,
    )
    assert res.stdout == b"listed:0:3\n"
    assert "no bootstrap server reachable" in one_line(run("topics", "get-offsets", "--broker-list", dead))
    assert "Missing required option(s) [bootstrap-server]" in one_line(run("produce", "--topic", "listed"))


def test_security_configs_from_the_producer_config(secured, tmp_path):  # noqa: F811
    """SASL_SSL through --producer.config alone (ConsoleProducer hands every config to the
    producer), as --command-config does."""
    cfg = command_config(secured, tmp_path / "client.properties")
    via = _Via(secured.sasl_ssl)
    res = produce(via, "--topic", "secured-config", "--producer.config", cfg, "--json", stdin=b"s1\ns2\n")
    assert res.returncode == 0, res.stderr
    assert not warnings(res)  # the security configs are known, none is "supplied but isn't a known config"
    assert [r["offset"] for r in json_rows(res)] == [0, 1]


# ----------------------------------------------------------------------------- several in flight


@pytest.mark.parametrize("in_flight, idempotent", [(5, True), (1, True), (5, False)])
def test_requests_in_flight_and_a_lost_answer(proxied, in_flight, idempotent):  # noqa: F811
    """max.in.flight.requests.per.connection requests written back to back (the proxy sees them
    unanswered together); the first answer is lost and the connection closed, so the requests
    behind it are unanswered too: sent again, the idempotent producer's batches are each appended
    once, in order (the broker answers a resent batch from its last five); without idempotence
    the same fault appends batches twice (the control)."""
    b, proxy = proxied
    lines = [b"r%03d" % i for i in range(100)]
    proxy.armed = 1
    res = produce(
        _Via(b.client_bootstrap), "--topic", "inflight", "--batch-size", 150, "--json",
        "--producer-property", f"max.in.flight.requests.per.connection={in_flight}",
        "--producer-property", f"enable.idempotence={str(idempotent).lower()}",
        stdin=b"\n".join(lines) + b"\n",
    )  # fmt: skip
    assert proxy.dropped == 1 and res.returncode == 0, res.stderr
    assert proxy.max_outstanding == 1 if in_flight == 1 else proxy.max_outstanding >= 2
    values = [r[3] for r in consume(_Via(b.bootstrap), "inflight", len(lines), partitions=1)]
    if idempotent:
        assert values == lines
        assert [r["offset"] for r in json_rows(res)] == list(range(len(lines)))
    else:
        assert len(values) > len(lines) and sorted(set(values)) == lines


# ----------------------------------------------------------------------------- KIP-360


def test_lost_acknowledged_batches_bump_the_epoch(tmp_path):
    """The broker loses the producer's last acknowledged batch (SIGKILL, the log cut back before
    it, as a leader elected uncleanly holds less): the next batch's sequence is out of order for
    the broker's producer state. The producer bumps its epoch, sends the batch again from sequence
    0 and goes on: every later line once, in order; the lost batch stays lost (acknowledged data an
    unclean election takes away)."""
    b = BrokerProcess(tmp_path / "data", port=free_port(), extra=["num.partitions=1"]).start()
    create(b, "lost", 1)
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", b.bootstrap,
           "--topic", "lost", "--timeout", "30", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    rows = []
    try:
        groups = [[b"before %d.%d" % (g, i) for i in range(5)] for g in range(3)]
        for group in groups:  # three batches, each acknowledged before the next is written
            proc.stdin.write(b"\n".join(group) + b"\n")
            proc.stdin.flush()
            rows += [json.loads(proc.stdout.readline()) for _ in group]
        assert [r["offset"] for r in rows] == list(range(15))
        b.kill()
        log = Path(b.data_dir) / "lost-0" / "00000000000000000000.log"
        first = list(iter_batches(log.read_bytes()))
        assert [x.count for x in first] == [5, 5, 5] and [x.base_sequence for x in first] == [0, 5, 10]
        with open(log, "r+b") as fh:
            fh.truncate(first[-1].position)  # the third batch is gone
        for snap in log.parent.glob("*.snapshot"):
            snap.unlink()
        b.spawn().await_ready()
        after = [b"after %d" % i for i in range(5)]
        proc.stdin.write(b"\n".join(after) + b"\n")
        proc.stdin.close()
        code = proc.wait(60)
        err = proc.stderr.read().decode()
        assert code == 0, err
        rows += [json.loads(x) for x in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        b.stop()
    assert err.splitlines()[-1].startswith("kafkatool: 20 records, ") and err.endswith(" 0 errors\n"), err
    b.start()
    try:
        got = consume(b, "lost", 15, partitions=1)
        final = batches(b, "lost")
    finally:
        b.stop()
    assert [r[3] for r in got] == groups[0] + groups[1] + after
    assert [r["offset"] for r in rows[15:]] == [10, 11, 12, 13, 14]
    epoch = first[0].producer_epoch
    assert [(x.producer_id, x.producer_epoch, x.base_sequence) for x in final] == [
        (first[0].producer_id, epoch, 0),
        (first[0].producer_id, epoch, 5),
        (first[0].producer_id, epoch + 1, 0),  # the bump: same producer id, sequence 0
    ]


def _line(stream, timeout: float = 30.0) -> bytes:
    """One line of a child's pipe, waiting at most ``timeout`` seconds."""
    import os
    import select

    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        assert left > 0 and select.select([stream], [], [], left)[0], f"no line within {timeout}s: {buf!r}"
        chunk = os.read(stream.fileno(), 1)
        assert chunk, f"the stream ended: {buf!r}"
        buf += chunk
    return buf


def test_a_newer_epoch_of_its_producer_id_fails_a_batch_and_is_passed(broker):
    """Another writer appends with the producer's id at a higher epoch (a zombie's mirror image):
    the broker answers the producer's next batch INVALID_PRODUCER_EPOCH, a failed batch (Kafka's
    InvalidProducerEpochException, not retried) named by its lines; the producer bumps its epoch,
    meets OUT_OF_ORDER_SEQUENCE_NUMBER there (the other writer's sequence 0 is taken), bumps again
    and goes on at sequence 0 of the epoch after."""
    from kafkatool.assign.kafka_client import KafkaAdmin
    from kafkatool.formats.records import SimpleRecord, build_record_batch
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    create(broker, "fenced", 1)
    cmd = [sys.executable, "-m", "kafkatool", "produce", "--bootstrap-server", broker.bootstrap,
           "--topic", "fenced", "--timeout", "30", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        proc.stdin.write(b"first 0\nfirst 1\n")
        proc.stdin.flush()
        assert [json.loads(_line(proc.stdout))["offset"] for _ in range(2)] == [0, 1]
        [mine] = batches(broker, "fenced")
        other = build_record_batch(
            [SimpleRecord(b"other", None, (), int(time.time() * 1000))],
            producer_id=mine.producer_id,
            producer_epoch=mine.producer_epoch + 1,
            base_sequence=0,
        )
        req = API_BY_KEY[0].request(
            transactional_id=None, acks=-1, timeout_ms=5000,
            topic_data=[TopicProduceData(name="fenced", partition_data=[PartitionProduceData(index=0, records=other)])],
        )  # fmt: skip
        with KafkaAdmin(broker.bootstrap) as admin:
            [answer] = admin.request(0, req).responses[0].partition_responses
        assert (answer.error_code, answer.base_offset) == (0, 2)
        proc.stdin.write(b"second 0\nsecond 1\n")
        proc.stdin.flush()
        errors = [_line(proc.stderr).decode() for _ in range(2)]
        assert [e.split(":")[2].strip() for e in errors] == ["line 3", "line 4"], errors
        assert all("INVALID_PRODUCER_EPOCH" in e for e in errors), errors
        proc.stdin.write(b"third 0\nthird 1\n")
        proc.stdin.close()
        assert proc.wait(60) == 1  # some records failed
        rows = [json.loads(x) for x in proc.stdout.read().splitlines()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert [(r["line"], r["offset"]) for r in rows] == [(5, 3), (6, 4)]
    got = [(x.producer_id, x.producer_epoch, x.base_sequence, x.count) for x in batches(broker, "fenced")]
    pid, epoch = mine.producer_id, mine.producer_epoch
    assert got == [(pid, epoch, 0, 2), (pid, epoch + 1, 0, 1), (pid, epoch + 2, 0, 2)]
    values = [r[3] for r in consume(broker, "fenced", 5, partitions=1)]
    assert values == [b"first 0", b"first 1", b"other", b"third 0", b"third 1"]
