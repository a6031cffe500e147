"""Transactions of the project's producer (assign/producer) and `perf produce
--transaction-duration-ms / --transactional-id` (Kafka 3.7's ProducerPerformance) against a real
`kafkatool serve`: what read_committed readers (kafkatool consume and librdkafka) see of committed
and aborted transactions, a producer fenced by another with its transactional id (one line, exit
1), a killed run's open transaction aborted by the next producer of its id, and the options'
rules."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from kafkatool.assign.kafka_client import KafkaAdmin
from kafkatool.assign.producer import Producer
from kafkatool.assign.producer_config import producer_settings
from kafkatool.cli import app
from kafkatool.formats.records import SimpleRecord
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.cli_result import one_line_error

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

runner = CliRunner()
PARTITIONS = 3
TOTAL = re.compile(r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), .* ms 99\.9th\.$")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("perftxn") / "data",
        port=free_port(),
        extra=[
            f"num.partitions={PARTITIONS}",
            "transaction.state.log.num.partitions=2",
            "offsets.topic.num.partitions=2",
            "group.initial.rebalance.delay.ms=0",
        ],
    ).start()
    try:
        yield b
    finally:
        b.stop()


def create(bootstrap: str, topic: str, partitions: int = PARTITIONS, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)


def log_end_offsets(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> list[int]:
    """Each partition's high watermark (read_uncommitted: librdkafka's default, read_committed,
    answers the last stable offset, which an open transaction holds back)."""
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "txn-check", "isolation.level": "read_uncommitted"}
    )
    try:
        return [
            c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        ]
    finally:
        c.close()


def librdkafka_values(
    bootstrap: str, topic: str, isolation: str, partitions: int = PARTITIONS
) -> list[bytes]:
    """Every record value librdkafka reads at ``isolation`` up to each partition's end (its
    high watermark read_uncommitted, the last stable offset read_committed: the partition EOF)."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    out: list[bytes] = []
    ended: set[int] = set()
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while len(ended) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 0.1):
                if m.error():
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        ended.add(m.partition())
                    continue
                out.append(m.value())
    finally:
        c.close()
    assert len(ended) == partitions, "librdkafka did not reach every partition's end"
    return out


def kafkatool_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    res = subprocess.run(
        [sys.executable, "-m", "kafkatool", "consume", "--bootstrap-server", bootstrap, "--topic", topic,
         "--isolation-level", isolation, "--from-beginning", "--exit-at-end"],
        cwd=REPO, capture_output=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def perf(*args):
    return runner.invoke(app, ["perf", *map(str, args)])


def perf_cmd(bootstrap: str, *args) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kafkatool",
        "perf",
        "produce",
        "--bootstrap-server",
        bootstrap,
        *map(str, args),
    ]


# ----------------------------------------------------------------------------- committed
def test_transactional_run_commits_exactly_its_records(broker):
    create(broker.bootstrap, "tx-commit")
    res = perf(
        "produce", "--topic", "tx-commit", "--num-records", 3000, "--record-size", 60, "--throughput", 3000,
        "--transaction-duration-ms", 200, "--transactional-id", "tx-commit-id",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}", "batch.size=2048",
    )  # fmt: skip
    assert res.exit_code == 0, (res.output, res.exception)
    assert res.stderr == ""
    lines = res.stdout.splitlines()
    m = TOTAL.match(lines[-1])
    assert m and int(m[1]) == 3000, lines
    # every record and a COMMIT marker per partition and transaction: more offsets than records
    markers = sum(log_end_offsets(broker.bootstrap, "tx-commit")) - 3000
    assert markers >= 3, markers  # about a second of transactions of 200 ms, on 3 partitions
    committed = librdkafka_values(broker.bootstrap, "tx-commit", "read_committed")
    assert len(committed) == 3000 and len(set(committed)) == 3000
    assert all(re.fullmatch(rb"[A-Z]{60}", v) for v in committed)
    assert sorted(kafkatool_values(broker.bootstrap, "tx-commit", "read_committed")) == sorted(committed)
    # the transactional id is done: nothing open at its coordinator
    out = subprocess.run(
        [sys.executable, "-m", "kafkatool", "transactions", "describe", "--bootstrap-server", broker.bootstrap,
         "--transactional-id", "tx-commit-id"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "CompleteCommit" in out.stdout, out.stdout


# ----------------------------------------------------------------------------- aborted
def test_aborted_transaction_is_invisible_to_read_committed(broker):
    """The producer's abort path: 50 records acknowledged in a transaction, then aborted; the next
    transaction's 30 committed. read_committed readers see the 30, read_uncommitted all 80."""
    create(broker.bootstrap, "tx-abort")
    settings = producer_settings(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-abort-id", "linger.ms": "5"}
    )
    outcomes = []
    with KafkaAdmin(broker.bootstrap) as admin:
        p = Producer(admin, "tx-abort", settings, partition=None, on_outcome=outcomes.append)
        p.start()
        p.begin_transaction()
        for i in range(50):
            p.append(i, SimpleRecord(b"aborted-%d" % i))
        p.send_ready(flush=True)
        assert [o.error for o in outcomes] == [None] * 50  # acknowledged: in the log
        assert p.abort_transaction() and p.fatal is None
        p.begin_transaction()
        for i in range(30):
            p.append(100 + i, SimpleRecord(b"committed-%d" % i))
        assert p.commit_transaction()
        assert (p.committed, p.aborted) == (1, 1)
    assert [o.error for o in outcomes] == [None] * 80
    want = sorted(b"committed-%d" % i for i in range(30))
    assert sorted(librdkafka_values(broker.bootstrap, "tx-abort", "read_committed")) == want
    assert sorted(kafkatool_values(broker.bootstrap, "tx-abort", "read_committed")) == want
    assert len(librdkafka_values(broker.bootstrap, "tx-abort", "read_uncommitted")) == 80
    assert len(kafkatool_values(broker.bootstrap, "tx-abort", "read_uncommitted")) == 80


def test_refused_record_aborts_the_transaction_and_ends_the_run(broker, tmp_path):
    """A record the topic refuses (MESSAGE_TOO_LARGE) makes its transaction abortable: perf
    aborts it and stops with one line, exit 1; nothing of it is visible read_committed, though
    its records sent before the refused one were acknowledged (read_uncommitted shows them).
    The transaction lasts 1 s, so those records (about 2 ms apart) are surely in the refused
    record's transaction: with 10 ms transactions a CI run saw the refused record open a
    transaction of its own, leaving nothing of it acknowledged. (Committed transactions before
    an abort: test_aborted_transaction_is_invisible_to_read_committed.)"""
    create(broker.bootstrap, "tx-refused", 1, {"max.message.bytes": "400"})
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("\n".join(["small"] * 30 + ["B" * 1000]) + "\n")
    res = perf(
        "produce", "--topic", "tx-refused", "--num-records", 5000, "--payload-file", payloads,
        "--throughput", 500, "--transaction-duration-ms", 1000, "--transactional-id", "tx-refused-id",
        "--bootstrap-server", broker.bootstrap,
    )  # fmt: skip
    assert res.exit_code == 1, (res.output, res.exception)
    assert "Traceback" not in res.output
    errors = res.stderr.splitlines()
    assert errors[-1].startswith("kafkatool: error: transactional id 'tx-refused-id': transaction aborted: "
                                 "MESSAGE_TOO_LARGE"), errors  # fmt: skip
    assert re.search(r"\((\d+) transactions committed, 1 aborted", errors[-1]), errors[-1]
    # the refused record's own line, then the run's
    assert any(re.fullmatch(r"kafkatool: error: record \d+: MESSAGE_TOO_LARGE.*", e) for e in errors[:-1])
    committed = librdkafka_values(broker.bootstrap, "tx-refused", "read_committed", 1)
    uncommitted = librdkafka_values(broker.bootstrap, "tx-refused", "read_uncommitted", 1)
    assert set(committed) <= {b"small"} and set(uncommitted) <= {b"small"}
    assert sorted(kafkatool_values(broker.bootstrap, "tx-refused", "read_committed")) == sorted(committed)
    m = TOTAL.match(res.stdout.splitlines()[-1])
    assert m and int(m[1]) == len(uncommitted)  # acknowledged: every record in the log
    assert len(uncommitted) > len(committed)  # the aborted transaction's small records, acknowledged


# ----------------------------------------------------------------------------- fencing
def test_second_producer_fences_the_first(broker):
    create(broker.bootstrap, "tx-fence")
    first = subprocess.Popen(
        perf_cmd(broker.bootstrap, "--topic", "tx-fence", "--num-records", 100000, "--record-size", 20,
                 "--throughput", 300, "--transaction-duration-ms", 300, "--transactional-id", "tx-fence-id"),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(150):  # bounded: the first commit within 15 s (a busy machine)
            time.sleep(0.1)
            if len(librdkafka_values(broker.bootstrap, "tx-fence", "read_committed")) > 0:
                break
        second = subprocess.run(
            perf_cmd(broker.bootstrap, "--topic", "tx-fence", "--num-records", 200, "--record-size", 20,
                     "--throughput", -1, "--transaction-duration-ms", 300, "--transactional-id", "tx-fence-id"),
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 0, second.stderr
        out, err = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    assert first.returncode == 1, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert re.fullmatch(
        r"kafkatool: error: transactional id 'tx-fence-id': PRODUCER_FENCED: There is a newer producer with "
        r"the same transactionalId which fences the current one\. \(\d+ transactions committed, 0 aborted"
        r"(, \d+ records failed with it)?\)",
        lines[0],
    ), lines[0]
    assert TOTAL.match(out.splitlines()[-1])
    # read_committed: the first run's committed records and the second run's 200, nothing open
    committed = librdkafka_values(broker.bootstrap, "tx-fence", "read_committed")
    assert sorted(kafkatool_values(broker.bootstrap, "tx-fence", "read_committed")) == sorted(committed)
    assert len(committed) >= 200 + 1


def test_killed_run_is_aborted_by_the_next_producer_of_its_id(broker, tmp_path):
    """kill -9 in the middle of a transaction: its records stay invisible to read_committed; the
    next run with the transactional id fences the dead one (its InitProducerId aborts the open
    transaction) and commits its own."""
    create(broker.bootstrap, "tx-kill")
    first_payloads = tmp_path / "first.txt"
    first_payloads.write_text("first\n")
    second_payloads = tmp_path / "second.txt"
    second_payloads.write_text("second\n")
    proc = subprocess.Popen(
        perf_cmd(broker.bootstrap, "--topic", "tx-kill", "--num-records", 100000, "--payload-file", first_payloads,
                 "--throughput", 300, "--transaction-duration-ms", 2000, "--transactional-id", "tx-kill-id"),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(150):  # bounded: the first commit within 15 s
            time.sleep(0.1)
            if librdkafka_values(broker.bootstrap, "tx-kill", "read_committed"):
                break
        time.sleep(1.0)  # half of the next transaction sent
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    # the open transaction holds the last stable offset back: read_committed sees the first
    # transaction only, which ended before the kill
    before = librdkafka_values(broker.bootstrap, "tx-kill", "read_committed")
    res = perf(
        "produce", "--topic", "tx-kill", "--num-records", 100, "--payload-file", second_payloads,
        "--throughput", -1, "--transaction-duration-ms", 1000, "--transactional-id", "tx-kill-id",
        "--bootstrap-server", broker.bootstrap,
    )  # fmt: skip
    assert res.exit_code == 0, (res.output, res.exception)
    committed = librdkafka_values(broker.bootstrap, "tx-kill", "read_committed")
    uncommitted = librdkafka_values(broker.bootstrap, "tx-kill", "read_uncommitted")
    assert committed.count(b"second") == 100
    first_committed = committed.count(b"first")
    assert first_committed == len(before) > 0
    assert uncommitted.count(b"first") > first_committed  # the killed transaction's records: aborted
    assert sorted(kafkatool_values(broker.bootstrap, "tx-kill", "read_committed")) == sorted(committed)


def test_ctrl_c_aborts_the_open_transaction(broker, tmp_path):
    """Ctrl-C: the open transaction is aborted (KafkaProducer.close()'s rule), at once rather than
    after transaction.timeout.ms; the summary, exit 130."""
    create(broker.bootstrap, "tx-int")
    payloads = tmp_path / "int.txt"
    payloads.write_text("interrupted\n")
    proc = subprocess.Popen(
        perf_cmd(broker.bootstrap, "--topic", "tx-int", "--num-records", 100000, "--payload-file", payloads,
                 "--throughput", 200, "--transaction-duration-ms", 600000, "--transactional-id", "tx-int-id"),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(150):  # bounded: records in the log within 15 s
            time.sleep(0.1)
            if sum(log_end_offsets(broker.bootstrap, "tx-int")) >= 20:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert TOTAL.match(out.splitlines()[-1])
    assert librdkafka_values(broker.bootstrap, "tx-int", "read_committed") == []
    assert len(librdkafka_values(broker.bootstrap, "tx-int", "read_uncommitted")) >= 20
    described = subprocess.run(
        [sys.executable, "-m", "kafkatool", "transactions", "describe", "--bootstrap-server", broker.bootstrap,
         "--transactional-id", "tx-int-id"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "CompleteAbort" in described.stdout, described.stdout


# ----------------------------------------------------------------------------- options
def test_transaction_options(broker):
    create(broker.bootstrap, "tx-opts", 1)
    base = ["produce", "--topic", "tx-opts", "--num-records", 10, "--record-size", 5, "--throughput", -1,
            "--bootstrap-server", broker.bootstrap]  # fmt: skip
    # a transactional id with a duration not above 0: Kafka 4.0's refusal
    for extra in (["--transactional-id", "x", "--transaction-duration-ms", 0],
                  ["--producer-props", "transactional.id=x", "--transaction-duration-ms", -5]):  # fmt: skip
        assert one_line_error(perf(*base, *extra)).endswith(
            "--transaction-duration-ms should be greater than zero"
        )
    # Kafka's config checks
    line = one_line_error(perf(*base, "--producer-props", "transactional.id=x", "enable.idempotence=false"))
    assert line.endswith("Cannot set a transactional.id without also enabling idempotence.")
    line = one_line_error(perf(*base, "--producer-props", "transactional.id= ", "acks=all"))
    assert line.endswith("Invalid value  for configuration transactional.id: String must be non-empty")
    # a duration of 0 without an id: no transactions (Kafka 3.7)
    res = perf(*base, "--transaction-duration-ms", 0)
    assert res.exit_code == 0 and res.stderr == "", res.output
    # a transactional.id config without a duration: transactions of 3000 ms, said once
    res = perf(*base, "--producer-props", "transactional.id=tx-opts-id")
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines() == [
        "kafkatool: warning: transactional id tx-opts-id without --transaction-duration-ms: transactions of "
        "3000 ms (Kafka 4.0's tool; 3.7's runs none with --transactional-id and fails every send with a "
        "transactional.id config)"
    ]
    # 3.7: --transactional-id (its default too) replaces the configs' transactional.id
    res = perf(*base, "--producer-props", "transactional.id=mine", "--transaction-duration-ms", 100)
    assert res.exit_code == 0, res.output
    assert "transactional.id=mine of the producer configs is replaced by --transactional-id " \
        "(performance-producer-default-transactional-id)" in res.stderr  # fmt: skip
    described = subprocess.run(
        [sys.executable, "-m", "kafkatool", "transactions", "list", "--bootstrap-server", broker.bootstrap],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "performance-producer-default-transactional-id" in described.stdout
    listed = [line.split("\t")[0].strip() for line in described.stdout.splitlines()]
    assert "tx-opts-id" in listed and "mine" not in listed
    assert len(librdkafka_values(broker.bootstrap, "tx-opts", "read_committed", 1)) == 30


def test_transactional_retry_is_transaction_managers_can_retry():
    """TransactionManager.canRetry's transactional half: a gap after the last acknowledged batch
    or a lost producer fails the batch (the transaction is aborted, the abort bumps the epoch);
    a producer whose records retention removed starts its sequences again at the same epoch."""
    from kafkatool.assign.producer import idempotent_retry
    from kafkatool.protocol.errors import ErrorCode

    kw = {"log_start_offset": 100, "sequence_reset": False, "base_sequence": 10, "last_acked_sequence": 9}
    oos, upid = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID
    txn = {**kw, "transactional": True, "last_acked_offset": 500}
    assert idempotent_retry(oos, **txn) == (False, False)
    assert idempotent_retry(oos, **{**txn, "base_sequence": 25}) == (True, False)
    assert idempotent_retry(upid, **txn) == (False, False)
    assert idempotent_retry(upid, **{**txn, "last_acked_offset": 50}) == (True, True)
    assert idempotent_retry(upid, **{**txn, "log_start_offset": -1}) == (True, False)
    assert idempotent_retry(upid, **{**kw, "last_acked_offset": 500}) == (True, True)  # idempotent: bump
    assert idempotent_retry(ErrorCode.INVALID_PRODUCER_EPOCH, **txn) == (False, False)
