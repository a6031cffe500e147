"""kafkatool perf produce / perf consume (kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh)
against a real `kafkatool serve`: exact record counts and bytes (the topic's log end offsets, a
librdkafka consumer's view of the payloads, the group's commits), a throttle that holds in
records, Kafka's output lines, the rules behind them (SplittableRandom, Java's %f and
SimpleDateFormat against vectors a JDK printed, Stats' latency sampling, ThroughputThrottler's
float arithmetic), and bad options in one line, exit 2."""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from kafkatool.assign import perf as P
from kafkatool.cli import app
from kafkatool.formats.java_format import JavaFormatError, SimpleDateFormat, fixed
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.broker.security.test_sasl import command_config, secured  # noqa: F401 (its SASL_SSL broker)
from tests.cli_result import one_line_error

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

runner = CliRunner()
PARTITIONS = 3

#: ProducerPerformance's lines (Stats.printWindow, printTotal)
WINDOW = re.compile(
    r"^(\d+) records sent, (\d+\.\d|NaN|Infinity) records/sec \((\d+\.\d\d|NaN|Infinity) MB/sec\), "
    r"(\d+\.\d|NaN) ms avg latency, (\d+\.\d) ms max latency\.$"
)
TOTAL = re.compile(
    r"^(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d\d) MB/sec\), (\d+\.\d\d) ms avg latency, "
    r"(\d+\.\d\d) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)
#: ConsumerPerformance's header and lines
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
NUM4 = r"(\d+\.\d{4}|NaN|Infinity)"
CONSUMED = re.compile(
    rf"^({STAMP}), ({STAMP}), {NUM4}, {NUM4}, (\d+), {NUM4}, (\d+), (-?\d+), {NUM4}, {NUM4}$"
)
DETAILED = re.compile(rf"^({STAMP}), 0, {NUM4}, {NUM4}, (\d+), {NUM4}, (\d+), (-?\d+), {NUM4}, {NUM4}$")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(
        tmp_path_factory.mktemp("perf") / "data",
        port=free_port(),
        extra=[
            f"num.partitions={PARTITIONS}",
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=3",
        ],
    ).start()
    try:
        yield b
    finally:
        b.stop()


def create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def log_end_offsets(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "perf-check"})
    try:
        return [
            c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        ]
    finally:
        c.close()


def values(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> list[bytes]:
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False}
    )
    out: list[bytes] = []
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(1000, 0.1):
                if not m.error():
                    out.append(m.value())
    finally:
        c.close()
    return out


def perf(*args):
    return runner.invoke(app, ["perf", *map(str, args)])


def ok(res) -> list[str]:
    assert res.exit_code == 0, (res.output, res.exception)
    return res.stdout.splitlines()


# ----------------------------------------------------------------------------- produce
def test_produce_sends_exactly_num_records_and_prints_kafkas_line(broker):
    create(broker.bootstrap, "pp")
    lines = ok(
        perf(
            "produce", "--topic", "pp", "--num-records", 3000, "--record-size", 100, "--throughput", -1,
            "--producer-props", f"bootstrap.servers={broker.bootstrap}", "batch.size=4096",
        )
    )  # fmt: skip
    m = TOTAL.match(lines[-1])
    assert m, lines
    assert int(m[1]) == 3000
    assert sum(log_end_offsets(broker.bootstrap, "pp")) == 3000
    got = values(broker.bootstrap, "pp", 3000)
    assert len(got) == 3000
    assert all(len(v) == 100 and re.fullmatch(rb"[A-Z]{100}", v) for v in got)
    assert len(set(got)) == 3000  # a new payload per record
    p50, p95, p99, p999 = (int(m[i]) for i in range(6, 10))
    assert p50 <= p95 <= p99 <= p999 <= float(m[5])


def test_produce_json_payload_file_and_its_choices(broker, tmp_path):
    create(broker.bootstrap, "pf")
    payloads = tmp_path / "payloads.txt"
    payloads.write_bytes("one|two|dreiß||".encode())
    res = perf(
        "produce", "--topic", "pf", "--num-records", 500, "--payload-file", payloads,
        "--payload-delimiter", r"\|", "--throughput", -1, "--json",
        "--bootstrap-server", broker.bootstrap,
    )  # fmt: skip
    rows = [json.loads(x) for x in ok(res)]
    summary = rows[-1]
    assert summary["type"] == "summary" and summary["records"] == 500
    assert f"Reading payloads from: {payloads}" in res.stderr and "Number of messages read: 3" in res.stderr
    # the choices of Kafka's tool: SplittableRandom(0).nextInt(3) per record
    rnd = P.SplittableRandom(0)
    chosen = [[b"one", b"two", "dreiß".encode()][rnd.next_int_bound(3)] for _ in range(500)]
    assert summary["bytes"] == sum(map(len, chosen))
    assert sum(log_end_offsets(broker.bootstrap, "pf")) == 500
    assert sorted(values(broker.bootstrap, "pf", 500)) == sorted(chosen)


def test_throttle_holds_the_rate_in_records(broker):
    """--throughput 40: the records in the topic after a while are about 40 per second of the
    run (a generous bound); Ctrl-C then ends it with the summary and 130."""
    create(broker.bootstrap, "pt")
    cmd = [
        sys.executable, "-m", "kafkatool", "perf", "produce", "--topic", "pt", "--num-records", "100000",
        "--record-size", "10", "--throughput", "40", "--bootstrap-server", broker.bootstrap,
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        produced = 0
        for _ in range(150):  # bounded: the first records within 15 s of the start (a busy machine)
            time.sleep(0.1)
            produced = sum(log_end_offsets(broker.bootstrap, "pt"))
            if produced:
                break
        first = time.monotonic()
        time.sleep(2.5)
        produced = sum(log_end_offsets(broker.bootstrap, "pt"))
        ran = time.monotonic() - first
        total = time.monotonic() - started
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert 40 * ran * 0.5 <= produced <= 40 * total + 10, (produced, ran, total)
    assert proc.returncode == 130
    m = TOTAL.match(out.decode().splitlines()[-1])
    assert m and produced <= int(m[1]) <= produced + 40  # what went out after the count: < 1 s of it


# ----------------------------------------------------------------------------- consume
def test_consume_reads_exactly_messages_and_commits_them(broker):
    create(broker.bootstrap, "pc", 2)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(2000):
        p.produce("pc", key=b"k%d" % (i % 7), value=b"v" * 50, partition=i % 2)
    p.flush(10)
    lines = ok(
        perf(
            "consume",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "pc",
            "--messages",
            1500,
            "--group",
            "pg",
        )
    )
    assert lines[0] == HEADER
    m = CONSUMED.match(lines[1])
    assert m and len(lines) == 2, lines
    assert int(m[5]) == 1500
    assert m[3] == fixed(1500 * 52 / (1024 * 1024), 4)  # keys k0..k6 (2 bytes) and 50-byte values
    rebalance, fetch = int(m[7]), int(m[8])
    start = dt.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S:%f")
    end = dt.datetime.strptime(m[2], "%Y-%m-%d %H:%M:%S:%f")
    assert rebalance + fetch == round((end - start).total_seconds() * 1000)
    # from the start to the group's assignment (FindCoordinator, JoinGroup, SyncGroup at least)
    assert 1 <= rebalance < 10_000
    # the group committed exactly what was counted: the rest of the last poll was handed back
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("pg")])["pg"].result(15)
    assert sum(tp.offset for tp in got.topic_partitions if tp.offset >= 0) == 1500
    # the same group again: the other 500, then the timeout with Kafka's warning (ConsumerPerformance
    # prints it on stdout and exits 0); --json keeps it off stdout
    warning = (
        "WARNING: Exiting before consuming the expected number of messages: timeout (300 ms) exceeded. "
        "You can use the --timeout option to increase the timeout."
    )
    res = perf(
        "consume", "--bootstrap-server", broker.bootstrap, "--topic", "pc", "--messages", 900,
        "--group", "pg", "--timeout", 300, "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.splitlines()[-1])
    assert summary["messages"] == 500 and summary["bytes"] == 500 * 52
    assert res.stderr.splitlines() == [warning]
    res = perf(
        "consume", "--bootstrap-server", broker.bootstrap, "--topic", "pc", "--messages", 1,
        "--group", "pg-empty", "--from-latest", "--timeout", 300,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[:2] == [HEADER, warning] and len(lines) == 3 and CONSUMED.match(lines[2]), lines
    assert res.stderr == ""


def test_consume_detailed_stats_date_format_and_hidden_header(broker):
    create(broker.bootstrap, "pd", 1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(300):
        p.produce("pd", value=b"x" * 10)
        if i % 100 == 99:
            p.flush(10)
    p.flush(10)
    lines = ok(
        perf(
            "consume", "--bootstrap-server", broker.bootstrap, "--topic", "pd", "--messages", 300,
            "--show-detailed-stats", "--reporting-interval", 1, "--fetch-size", 200,
        )
    )  # fmt: skip
    assert lines[0].startswith("time, threadId, data.consumed.in.MB")
    rows = [DETAILED.match(x) for x in lines[1:]]
    assert rows and all(rows), lines  # progress lines only: no final line with detailed stats
    counts = [int(r[4]) for r in rows]
    assert counts == sorted(counts) and counts[-1] <= 300
    # --fetch-size 200 (max.partition.fetch.bytes): several fetches, so several lines
    assert len(rows) >= 2
    lines = ok(
        perf(
            "consume", "--bootstrap-server", broker.bootstrap, "--topic", "pd", "--messages", 10,
            "--hide-header", "--date-format", "yyyy'T'",
        )
    )  # fmt: skip
    assert len(lines) == 1 and re.match(r"^\d{4}T, \d{4}T, 0\.0001, ", lines[0]), lines


def test_over_sasl_ssl(secured, tmp_path):  # noqa: F811
    cfg = command_config(secured, tmp_path / "client.properties")
    res = perf(
        "produce", "--topic", "perf-secured", "--num-records", 50, "--record-size", 5, "--throughput", -1,
        "--producer.config", cfg, "--producer-props", f"bootstrap.servers={secured.sasl_ssl}",
    )  # fmt: skip
    assert TOTAL.match(ok(res)[-1])
    lines = ok(
        perf(
            "consume",
            "--bootstrap-server",
            secured.sasl_ssl,
            "--consumer.config",
            cfg,
            "--topic",
            "perf-secured",
            "--messages",
            50,
        )
    )
    assert int(CONSUMED.match(lines[1])[5]) == 50
    # without the security configs the SASL_SSL listener is not reached: one line, exit 2
    one_line_error(
        perf(
            "produce", "--topic", "perf-secured", "--num-records", 1, "--record-size", 5, "--throughput", -1,
            "--producer-props", f"bootstrap.servers={secured.sasl_ssl}", "request.timeout.ms=2000",
        )
    )  # fmt: skip


# ----------------------------------------------------------------------------- bad options
def test_bad_options_one_line_exit_2(broker, tmp_path):
    bs = f"bootstrap.servers={broker.bootstrap}"
    base = ["produce", "--topic", "pp", "--num-records", 10, "--throughput", -1]
    cases = [
        ([*base, "--producer-props", bs], "either --record-size or --payload-file"),
        ([*base, "--record-size", 1, "--payload-file", tmp_path / "x", "--producer-props", bs], "but not both"),
        ([*base, "--record-size", 1], "Either --producer-props or --producer.config must be specified."),
        ([*base, "--record-size", 1, "--producer-props", "a=b=c"], "Invalid property: a=b=c"),
        ([*base, "--record-size", 1, "--producer-props", bs, "acks"], "Invalid property: acks"),
        ([*base, "--record-size", 1, "--producer-props", "acks=1"], '"bootstrap.servers" which has no default'),
        ([*base, "--record-size", 1, "--producer-props", bs, "acks=7"], "Invalid value 7 for configuration acks"),
        ([*base, "--record-size", 1, "--producer-props", bs, "--print-metrics"], "--print-metrics"),
        ([*base, "--record-size", 1, "--producer-props", bs, "--transactional-id", "t",
          "--transaction-duration-ms", 0], "--transaction-duration-ms should be greater than zero"),
        (["produce", "--topic", "pp", "--num-records", 0, "--record-size", 1, "--throughput", -1,
          "--producer-props", bs], "--num-records 0"),
        (["produce", "--topic", "pp", "--num-records", 5, "--record-size", 1, "--throughput", 0,
          "--producer-props", bs], "--throughput 0"),
        (["consume", "--bootstrap-server", broker.bootstrap, "--topic", "nope", "--messages", 1],
         "Topic 'nope' does not exist"),
        (["consume", "--bootstrap-server", broker.bootstrap, "--topic", "pp", "--messages", 1,
          "--reporting-interval", 0], "Reporting interval must be greater than 0."),
        (["consume", "--bootstrap-server", broker.bootstrap, "--topic", "pp", "--messages", 1,
          "--date-format", "yyyy-qq"], "Illegal pattern character 'q'"),
        (["consume", "--topic", "pp", "--messages", 1], "bootstrap-server"),
    ]  # fmt: skip
    for args, words in cases:
        assert words in one_line_error(perf(*args)), args
    # a missing payload file: Kafka's "Reading payloads from" on stdout, the refusal on stderr
    res = perf(*base, "--payload-file", tmp_path / "missing", "--producer-props", bs)
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        f"kafkatool: error: --payload-file {tmp_path / 'missing'}: File does not exist or empty file provided."
    ]


# ----------------------------------------------------------------------------- the rules
def test_splittable_random_is_javas():
    # new SplittableRandom(0), OpenJDK 17.0.15: nextInt(), nextInt(26) + 65, nextInt(3)
    r = P.SplittableRandom(0)
    assert [r.next_int() for _ in range(3)] == [821115357, 1660418793, -1699405221]
    r = P.SplittableRandom(0)
    assert bytes(r.next_int_bound(26) + 65 for _ in range(12)) == b"YQHHNEBSEPDN"
    r = P.SplittableRandom(0)
    assert [r.next_int_bound(3) for _ in range(12)] == [1, 1, 0, 0, 1, 1, 2, 0, 1, 0, 1, 2]


def test_java_fixed_and_simple_date_format_as_a_jdk_printed():
    # String.format("%.1f|%.2f|%.4f|%f", d, d, d, d), OpenJDK 17.0.15
    jdk = {
        0.125: "0.1|0.13|0.1250|0.125000",
        2.675: "2.7|2.68|2.6750|2.675000",
        1.0 / 3: "0.3|0.33|0.3333|0.333333",
        -0.0: "-0.0|-0.00|-0.0000|-0.000000",
        1e20: "100000000000000000000.0|100000000000000000000.00|100000000000000000000.0000|"
        "100000000000000000000.000000",
        123456.78915: "123456.8|123456.79|123456.7892|123456.789150",
        float("nan"): "NaN|NaN|NaN|NaN",
        float("inf"): "Infinity|Infinity|Infinity|Infinity",
        0.05: "0.1|0.05|0.0500|0.050000",
        1.005: "1.0|1.01|1.0050|1.005000",
        5e-5: "0.0|0.00|0.0001|0.000050",
    }
    for value, text in jdk.items():
        assert "|".join(fixed(value, n) for n in (1, 2, 4, 6)) == text, value
    # new SimpleDateFormat(p).format(new Date(ms)) with the default zone UTC
    utc = dt.UTC
    cases = {
        (1700000000007, "yyyy-MM-dd HH:mm:ss:SSS"): "2023-11-14 22:13:20:007",
        (1700000000007, "EEE, d MMM yy h:mm a"): "Tue, 14 Nov 23 10:13 PM",
        (1700000000007, "EEEE MMMM D u k K S SSSS"): "Tuesday November 318 2 22 10 7 0007",
        (1700000000007, "'at' ''HH'' z Z X XX XXX G"): "at '22' UTC +0000 Z Z Z AD",
        (946684800000, "EEEE MMMM D u k K S SSSS"): "Saturday January 1 6 24 0 0 0000",
        (946684800000, "y yyy yyyyy M MMM"): "2000 2000 02000 1 Jan",
    }
    for (ms, pattern), text in cases.items():
        assert SimpleDateFormat(pattern).format(ms, utc) == text, pattern
    with pytest.raises(JavaFormatError, match="Illegal pattern character 'q'"):
        SimpleDateFormat("yyyy-qq")
    assert P.java_split("a\nb\n\n", "\n") == ["a", "b"]
    assert P.java_split("\nabc", "\n") == ["", "abc"]
    assert P.java_split("abc", "|") == ["a", "b", "c"]  # a regular expression, as String.split


def test_stats_samples_and_lines_as_kafkas():
    windows = []
    n = 1_000_003  # sampling = n / min(n, 500000) = 2: every second completion is a sample
    stats = P.ProducerStats(n, 10**9, windows.append)
    assert stats.sampling == 2 and len(stats.latencies) == 500_002
    for i in range(n):
        stats.record(i % 1000, 10, 0)
    total = stats.total()
    samples = sorted(i % 1000 for i in range(0, n, 2))  # iterations 0, 2, 4 ...
    assert stats.index == len(samples) == 500_002
    assert [total.p50_ms, total.p95_ms, total.p99_ms, total.p999_ms] == [
        samples[int(p * len(samples))] for p in (0.5, 0.95, 0.99, 0.999)
    ]
    assert total.records == n and total.bytes == 10 * n and total.max_latency_ms == 999.0
    assert TOTAL.match(total.line())
    # a window every reporting interval of completion times
    stats = P.ProducerStats(10, 0, windows.append)
    stats.record(7, 100, stats.window_start)
    assert len(windows) == 1 and WINDOW.match(windows[0].line())
    assert windows[0].records == 1 and windows[0].max_latency_ms == 7.0
    # no completion at all: Java's NaN average and 0 percentiles
    empty = P.ProducerStats(5, 5000, windows.append).total()
    assert "NaN ms avg latency" in empty.line() and empty.line().endswith(
        "0 ms 50th, 0 ms 95th, 0 ms 99th, 0 ms 99.9th."
    )


def test_throttler_float_rule():
    t = P.ThroughputThrottler(100, 1000)
    assert not t.should_throttle(100, 2000)  # 100 records in 1 s: at the target, not above
    assert t.should_throttle(101, 2000)
    assert not t.should_throttle(5, 1000)  # no time elapsed: never
    assert not P.ThroughputThrottler(-1, 0).should_throttle(10**9, 1)
    waited = []
    t = P.ThroughputThrottler(1000, 0)  # 1 ms a record: the deficit is slept at 2 ms
    t.throttle(waited.append)
    assert waited == []
    t.throttle(lambda s: (waited.append(s), time.sleep(s)))
    assert len(waited) >= 1 and 0 < waited[0] <= 0.002 and t.sleep_deficit_ns == 0
