"""The Prometheus endpoint of a `kafkatool serve` process (kafkatool.metrics.prometheus.listener):
Kafka 3.7's MBeans as the JMX exporter's stock rules (kafka-2_0_0.yml) name them, moved by real
clients (confluent-kafka) and checked against figures the endpoint does not make (the segment
file on disk, the records produced, the client's own counts)."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kafkatool.formats import records as R
from kafkatool.protocol.errors import ErrorCode
from tests.broker.conftest import REPO, BrokerProcess
from tests.broker.test_protocol import create_topic, produce
from tests.broker.wire import WireClient
from tests.ports import free_port

N = 200
VALUE = b"v" * 100


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    port = free_port()
    b = BrokerProcess(
        tmp_path_factory.mktemp("metrics") / "data",
        extra=[
            "num.partitions=1",
            "log.cleaner.backoff.ms=100",
            f"kafkatool.metrics.prometheus.listener=http://127.0.0.1:{port}",
        ],
    ).start()
    b.metrics_url = f"http://127.0.0.1:{port}/metrics"
    yield b
    b.stop()


def scrape_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return r.read().decode()


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample, parsed by prometheus_client's own text parser: (name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(scrape_text(url)):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def produce_and_consume(bootstrap: str, topic: str) -> int:
    """N records to ``topic`` partition 0, then all of them read back; returns how many were read."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": False})
    for i in range(N):
        p.produce(topic, VALUE, key=b"k%04d" % i, partition=0)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-g", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    deadline = time.monotonic() + 20
    try:
        while got < N and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        c.commit(asynchronous=False)  # a group and an offset in the coordinator
    finally:
        c.close()
    return got


def test_produce_and_fetch_move_kafkas_meters(served):
    with WireClient(served.bootstrap) as w:
        create_topic(w, "mt", 1)
    before = scrape(served.metrics_url)
    assert produce_and_consume(served.bootstrap, "mt") == N
    after = scrape(served.metrics_url)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    segment = served.data_dir / "mt-0" / "00000000000000000000.log"
    on_disk = segment.stat().st_size  # the batches as the producer sent them, appended in place
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic="mt") == N
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic="mt") == on_disk
    assert delta("kafka_server_brokertopicmetrics_bytesout_total", topic="mt") == on_disk
    assert delta("kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="mt") >= 1
    # the broker-wide meters (no topic label) count every topic's: here also the group's commit
    # to __consumer_offsets, an append Kafka counts as it counts a produce
    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic="__consumer_offsets") >= 1
    for meter in ("messagesin", "bytesin", "bytesout", "totalproducerequests", "totalfetchrequests"):
        name = f"kafka_server_brokertopicmetrics_{meter}_total"
        per_topic = sum(
            v - before.get((n, lb), 0.0)
            for (n, lb), v in after.items()
            if n == name and dict(lb).get("topic")
        )
        assert delta(name) == per_topic, meter
    assert value(after, "kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    produces = sum(
        v - value(before, n, **dict(lb))
        for (n, lb), v in after.items()
        if n == "kafka_network_requestmetrics_requests_total" and dict(lb)["request"] == "Produce"
    )
    assert produces >= 1
    # one partition per Produce request: TotalProduceRequestsPerSec counts partitions appended to
    assert delta("kafka_server_brokertopicmetrics_totalproducerequests_total", topic="mt") == produces
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.999") >= 0
    part = {"topic": "mt", "partition": "0"}
    assert value(after, "kafka_log_log_logendoffset", **part) == N
    assert value(after, "kafka_log_log_logstartoffset", **part) == 0
    assert value(after, "kafka_log_log_size", **part) == on_disk
    assert value(after, "kafka_log_log_numlogsegments", **part) == 1
    # every partition is this broker's, led here (mt, and __consumer_offsets made for the group)
    hosted = sum(1 for p in served.data_dir.iterdir() if p.is_dir() and p.name.rpartition("-")[2].isdigit())
    assert value(after, "kafka_server_replicamanager_partitioncount") == hosted
    assert value(after, "kafka_server_replicamanager_leadercount") == hosted
    assert value(after, "kafka_controller_kafkacontroller_globalpartitioncount") == hosted
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_server_replicamanager_offlinereplicacount") == 0
    assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(after, "kafka_server_kafkaserver_brokerstate") == 3  # RUNNING
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numoffsets") >= 1
    # the assign-only consumer's group holds offsets and no members: Empty
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1
    by_state = sum(
        value(after, f"kafka_coordinator_group_groupmetadatamanager_numgroups{s}")
        for s in ("preparingrebalance", "completingrebalance", "stable", "dead", "empty")
    )
    assert by_state == value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups")


def test_a_batch_over_max_message_bytes_is_rejected_bytes(served):
    data = R.build_record_batch([R.SimpleRecord(b"x" * 2000, None, [], 1)])
    with WireClient(served.bootstrap) as w:
        create_topic(w, "mt-small", 1, configs={"max.message.bytes": "1000"})
        before = scrape(served.metrics_url)
        assert produce(w, "mt-small", data).error_code == ErrorCode.MESSAGE_TOO_LARGE
        now = scrape(served.metrics_url)
        assert (
            value(
                now,
                "kafka_server_socket_server_metrics_connection_count",
                listener="PLAINTEXT",
                networkProcessor="0",
            )
            >= 1
        )
    for labels in ({"topic": "mt-small"}, {}):
        got = value(now, "kafka_server_brokertopicmetrics_bytesrejected_total", **labels)
        assert got - value(before, "kafka_server_brokertopicmetrics_bytesrejected_total", **labels) == len(
            data
        )
        # a known error: not a failed produce (ReplicaManager leaves RecordTooLarge out)
        assert value(now, "kafka_server_brokertopicmetrics_failedproducerequests_total", **labels) == 0
    assert value(now, "kafka_server_brokertopicmetrics_messagesin_total", topic="mt-small") == 0
    assert value(now, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic="mt-small") == 1


def test_the_exposition_is_the_exporters(served):
    """Names, types and labels as jmx_exporter 0.x writes the stock rules' output: a meter's
    counter TYPE line named ..._total, a histogram's percentiles as a gauge with quantile
    labels 0.50 ... 0.999 and its Count as a counter named ..._count (no _sum)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = scrape_text(served.metrics_url)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["kafka_server_brokertopicmetrics_messagesin"].type == "counter"
    assert "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter" in text
    assert fams["kafka_server_replicamanager_underreplicatedpartitions"].type == "gauge"
    assert fams["kafka_network_requestmetrics_totaltimems"].type == "gauge"
    assert "# TYPE kafka_network_requestmetrics_totaltimems_count_total counter" in text
    assert (
        "# HELP kafka_server_brokertopicmetrics_messagesin_total Attribute exposed for management "
        "kafka.server:name=MessagesInPerSec,type=BrokerTopicMetrics,attribute=Count" in text
    )
    quantiles = {
        s.labels["quantile"]
        for s in fams["kafka_network_requestmetrics_totaltimems"].samples
        if s.labels["request"] == "Metadata"
    }
    assert quantiles == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert not any(
        line.startswith("kafka_network_requestmetrics_totaltimems_sum") for line in text.splitlines()
    )
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert line.startswith("kafka_"), line
    # a request version's meter: tagged request and version, as RequestMetrics tags it
    assert any(
        s.labels.get("request") == "ApiVersions" and s.labels.get("version", "").isdigit()
        for s in fams["kafka_network_requestmetrics_requests"].samples
    )


def test_http(served):
    req = urllib.request.Request(served.metrics_url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Content-Encoding"] == "gzip"
        assert b"kafka_server_kafkaserver_brokerstate" in gzip.decompress(r.read())
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(served.metrics_url.replace("/metrics", "/nothing"), timeout=10)
    assert e.value.code == 404


@pytest.mark.parametrize("taken", [False, True], ids=["not-http-host-port", "port-taken"])
def test_a_listener_serve_cannot_use_refuses_the_start_in_one_line(tmp_path, taken):
    import socket

    with socket.socket() as held:
        if taken:
            held.bind(("127.0.0.1", 0))
            held.listen()
            value_, expect = f"http://127.0.0.1:{held.getsockname()[1]}", "address already in use"
        else:
            value_, expect = "127.0.0.1:9404", "expected http://host:port"
        cmd = [
            sys.executable,
            "-m",
            "kafkatool",
            "serve",
            "--no-banner",
            "-o",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "-o",
            f"log.dirs={tmp_path / 'd'}",
            "-o",
            f"kafkatool.metrics.prometheus.listener={value_}",
        ]
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if "kafkatool.metrics.prometheus.listener" in x]
    assert len(lines) == 1 and expect in lines[0], r.stderr


def test_each_process_of_a_broker_of_several_has_its_own_endpoint(tmp_path):
    """kafkatool.processes=2: process k's endpoint at port + k x step, each the node clients see
    (its own partitions and leaders); the first is the controller, so the nodes' figures add
    up as a Kafka cluster's do (one active controller, every partition led once)."""
    from tests.broker.test_processes import free_base_port

    step = 5
    port, mport = free_base_port(2, step), free_base_port(2, step)
    b = BrokerProcess(
        tmp_path / "data",
        port=port,
        extra=[
            "kafkatool.processes=2",
            f"kafkatool.processes.port.step={step}",
            "num.partitions=1",
            f"kafkatool.metrics.prometheus.listener=http://127.0.0.1:{mport}",
        ],
    ).start(timeout=40)
    try:
        with WireClient(b.bootstrap) as w:
            create_topic(w, "mp", 8)
        urls = [f"http://127.0.0.1:{mport + k * step}/metrics" for k in range(2)]
        got = [scrape(u) for u in urls]
        assert [value(s, "kafka_controller_kafkacontroller_activecontrollercount") for s in got] == [1, 0]
        assert value(got[0], "kafka_controller_kafkacontroller_globalpartitioncount") == 8
        leaders = [value(s, "kafka_server_replicamanager_leadercount") for s in got]
        assert sum(leaders) == 8 and all(leaders)  # crc32 ownership gives each some of 8
        for s in got:
            logs = {dict(lb)["partition"] for (n, lb), _ in s.items() if n == "kafka_log_log_logendoffset"}
            assert len(logs) == value(s, "kafka_server_replicamanager_partitioncount")
    finally:
        assert b.stop() == 0


def test_bad_http_input_is_answered_or_closed_without_a_traceback(served):
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(served.metrics_url)
    for raw in (b"BREW /metrics HTCPCP/1.0\r\n\r\n", b"\x00\xff garbage\r\n\r\n", b"GET /metrics"):
        with socket.create_connection((u.hostname, u.port), timeout=10) as s:
            s.sendall(raw)
            s.shutdown(socket.SHUT_WR)  # a request cut short ends at EOF
            answer = s.recv(200)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 405 "), answer
    assert "Traceback" not in served.log_text()
    assert scrape_text(served.metrics_url)  # still serving


def test_a_metrics_port_another_process_listens_on_is_refused():
    from kafkatool.broker.config import BrokerConfig, ConfigError
    from kafkatool.broker.processes import check_ports

    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            "kafkatool.processes.port.step": "10",
            "kafkatool.metrics.prometheus.listener": "http://127.0.0.1:9082",
        }
    )
    with pytest.raises(ConfigError, match=r"process 1's port 9092 is process 0's PLAINTEXT port too"):
        check_ports(cfg, 2)
    check_ports(cfg, 1)  # one process: 9082 is free of 9092


def test_a_deleted_topic_takes_its_meters_and_log_gauges_with_it(served):
    """BrokerTopicStats.removeMetrics: the topic's series go; the broker-wide ones keep counting."""
    from kafkatool.protocol import generated as G

    data = R.build_record_batch([R.SimpleRecord(b"v", None, [], 1)])
    with WireClient(served.bootstrap) as w:
        create_topic(w, "mt-del", 1)
        assert produce(w, "mt-del", data).error_code == 0
        before = scrape(served.metrics_url)
        assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic="mt-del") == 1
        resp = w.request(20, 1, G.DeleteTopicsRequest(topic_names=["mt-del"], timeout_ms=10000))
        assert resp.responses[0].error_code == 0
    after = scrape(served.metrics_url)
    assert not [k for k in after if ("topic", "mt-del") in k[1]]
    total = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(after, total) >= value(before, total)


def test_the_cleaners_last_round_is_in_its_gauges(served):
    """LogCleaner's max-clean-time-secs and cleaner-recopy-percent (the last round's), and
    LogCleanerManager's max-dirty-percent, from the broker's cleaner: a compacted topic whose
    keys repeat is cleaned, and the round copied only part of what it read."""
    keys = [b"k%d" % i for i in range(10)]
    with WireClient(served.bootstrap) as w:
        configs = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
        create_topic(w, "mt-compact", 1, configs=configs)
        for _ in range(20):
            batch = R.build_record_batch([R.SimpleRecord(b"x" * 100, k, [], 1) for k in keys])
            assert produce(w, "mt-compact", batch).error_code == 0
    recopy = 0.0
    for _ in range(100):  # the cleaner backs off 100 ms between passes: bounded at ~20 s
        now = scrape(served.metrics_url)
        recopy = value(now, "kafka_log_logcleaner_cleaner_recopy_percent")
        if recopy:
            break
        time.sleep(0.2)
    assert 0 < recopy < 100, recopy  # duplicates dropped, the latest values copied
    assert value(now, "kafka_log_logcleaner_max_clean_time_secs") >= 0
    assert 0 <= value(now, "kafka_log_logcleanermanager_max_dirty_percent") <= 100
    assert "kafka_log_logcleanermanager_max_dirty_percent gauge" in scrape_text(served.metrics_url)


@pytest.mark.parametrize("endpoint", [True, False])
def test_the_hot_path_counts_only_for_an_endpoint(tmp_path, endpoint):
    """The endpoint's scrape is the only reader of the counters: without it a produce adds up
    no figure (broker_metrics chooses once, at start-up: the topic's marks go to one throw-away
    set, appends and request times are not recorded); with it, the same produce moves the
    topic's and the broker's meters and the request's figures (the endpoint is not started here:
    the choice is the config's)."""
    from kafkatool.broker.config import BrokerConfig
    from kafkatool.broker.server import Broker
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.framing import encode_request, parse_response
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
    from tests.broker.wire import DispatchConn

    overrides = [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]
    if endpoint:
        overrides.append(f"kafkatool.metrics.prometheus.listener=http://127.0.0.1:{free_port()}")
    b = Broker(BrokerConfig.load(None, overrides))
    b.open_storage()
    try:
        b.create_topic("m", 1, {})
        data = R.build_record_batch(
            [R.SimpleRecord(b"v%d" % i, None, (), 1_700_000_000_000) for i in range(3)]
        )
        req = G.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(name="m", partition_data=[PartitionProduceData(index=0, records=data)])
            ],
        )
        frame = bytearray(encode_request(0, 7, 1, "metrics-test", req)[4:])
        _cid, resp = parse_response(b.router.dispatch(DispatchConn(), frame)[4:], 0, 7)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        m = b.metrics
        counted = [
            m.topics.all.messages_in,
            m.topics.all.bytes_in,
            sum(t.messages_in for t in m.topics.topics.values()),
            m.requests.by_key[0].count,
            m.requests.by_key[0].versions[7],
        ]
        assert counted == ([3, len(data), 3, 1, 1] if endpoint else [0, 0, 0, 0, 0])
        if endpoint:
            assert m.topics.all.total_produce == 1
    finally:
        b.close_storage()
