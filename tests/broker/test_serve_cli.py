"""``kafkatool serve`` as a command: server.properties, overrides, errors, JSON logs, signals."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from tests.broker.conftest import REPO, free_port
from tests.broker.wire import WireClient


def test_server_properties_file(tmp_path):
    port = free_port()
    data = tmp_path / "from-props"
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={data}\n"
        "broker.id=7\n"
        "num.partitions=3\n"
        "log.retention.hours=24\n"
        "auto.create.topics.enable=true\n"
    )
    cmd = [
        sys.executable,
        "-m",
        "kafkatool",
        "serve",
        "--no-banner",
        "--log-format",
        "json",
        "--config",
        str(props),
    ]
    log_path = tmp_path / "props.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    with WireClient(f"127.0.0.1:{port}") as c:
                        c.api_versions()
                    break
                except OSError:
                    assert time.monotonic() < deadline, log_path.read_text()
                    time.sleep(0.05)
            with WireClient(f"127.0.0.1:{port}") as c:
                md = c.request(3, 12, G.MetadataRequest(topics=[MetadataRequestTopic(name="auto-3")]))
                assert md.controller_id == 7 and md.brokers[0].node_id == 7
                assert len(md.topics[0].partitions) == 3
                desc = c.request(
                    32,
                    4,
                    G.DescribeConfigsRequest(
                        resources=[
                            G.describe_configs_request.DescribeConfigsResource(
                                resource_type=2, resource_name="auto-3", configuration_keys=["retention.ms"]
                            )
                        ]
                    ),
                )
                entry = desc.results[0].configs[0]
                # from log.retention.hours (static); Kafka's ConfigHelper names no source for it:
                # configSynonyms of log.retention.ms drops what precedes a log.retention.ms entry
                assert (entry.value, entry.config_source) == ("86400000", 5)
        finally:
            proc.terminate()
            assert proc.wait(20) == 0
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert any(d.get("msg") == "broker started" and d.get("listeners") == f"127.0.0.1:{port}" for d in lines)
    assert any(d.get("msg") == "shutdown complete" for d in lines)
    assert (data / ".kafka_cleanshutdown").exists()


def run_serve(*args, timeout=20):
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", "serve", "--no-banner", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_refused_kraft_topic_config_stops_the_start_before_any_log_loads(tmp_path):
    """Every topic of a KRaft dir's metadata is checked before a log loads (Kafka's
    LogManager.startup takes the topics' configs from the metadata image first): a topic with no
    local log refuses the start too, and the refusal leaves the dir's clean-shutdown marker and
    every log as they were (the next start runs no recovery)."""
    import uuid

    from kafkatool.formats import checkpoint as ck
    from kafkatool.formats.generated.config_record import ConfigRecord
    from kafkatool.formats.generated.topic_record import TopicRecord
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_topic_config_sources import _metadata_value, write_kraft_dir

    d = tmp_path / "kraft"
    extra = [
        _metadata_value(TopicRecord(name="nolog", topic_id=uuid.uuid4()), 2),
        _metadata_value(
            ConfigRecord(resource_type=2, resource_name="nolog", name="retention.ms", value="soon"), 4
        ),
    ]
    write_kraft_dir(d, "events", {"segment.bytes": "2048"}, extra=extra)  # nolog's config: offset 3
    marker = d / ck.CLEAN_SHUTDOWN_FILE
    marker.write_bytes(ck.encode_clean_shutdown(-1))
    before = {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}
    assert not (d / "nolog-0").exists()
    listen = f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"
    r = run_serve("-o", f"log.dirs={d}", "-o", listen)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    segment = d / ts.CLUSTER_METADATA_DIR / "00000000000000000000.log"
    assert r.stderr.strip().splitlines()[-1] == (
        "kafkatool: error: topic nolog: stored config refused: Invalid value soon for configuration retention.ms: "
        f"Not a number of type LONG (in {ts.SOURCE_KRAFT}: {segment}, record at offset 3, batch at byte 0)"
    )
    assert "loaded" not in r.stderr and "recover" not in r.stderr.lower(), r.stderr
    # nothing was touched: the marker, the logs, no lock or checkpoint written
    assert {p: p.read_bytes() for p in d.rglob("*") if p.is_file()} == before


def test_bad_configuration_is_one_line_exit_2(tmp_path):
    r = run_serve("-o", "listeners=SSL://127.0.0.1:1")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "kafkatool: error: configuration:"
    )
    r = run_serve("-o", "num.partitions=zero")
    assert r.returncode == 2 and "num.partitions" in r.stderr and "Traceback" not in r.stderr
    r = run_serve("-o", "novalue")
    assert r.returncode == 2 and "key=value" in r.stderr
    r = run_serve("--read-only", "-o", f"log.dirs={tmp_path / 'missing'}")
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_second_broker_on_the_same_dir_is_refused(make_broker, tmp_path):
    b = make_broker().start()
    r = run_serve("-o", f"log.dirs={b.data_dir}", "-o", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}")
    assert r.returncode == 2 and "kafkatool: error:" in r.stderr and "Traceback" not in r.stderr
    assert b.alive()
    b.stop()


def test_port_in_use_is_one_line(make_broker):
    b = make_broker().start()
    r = run_serve(
        "-o", f"listeners=PLAINTEXT://127.0.0.1:{b.port}", "-o", f"log.dirs={b.data_dir.parent / 'other'}"
    )
    assert r.returncode == 2 and "cannot listen" in r.stderr and "Traceback" not in r.stderr
    b.stop()


def test_a_refused_stored_topic_config_names_the_topic_the_value_and_its_store(make_broker, tmp_path):
    """A topic config value stored for a topic that the log engine refuses stops the start (Kafka:
    LogManager's topic LogConfig.fromProps) with one line, exit 2, naming the topic, the config
    and value, and where it is stored: serve's kafkatool-cluster.json (here edited by hand), or a
    KRaft log's ConfigRecord by file, offset and batch position, as the fleet scan's
    topic_config_refused finding says it."""
    from kafkatool.log import topic_settings as ts
    from tests.broker.test_admin import create
    from tests.broker.test_topic_config_sources import write_kraft_dir

    b = make_broker().start()
    with WireClient(b.bootstrap) as c:
        assert create(c, "cmp", 1, configs={"cleanup.policy": "compact"}).error_code == 0
    assert b.stop() == 0
    meta = b.data_dir / ts.EMBEDDED_METADATA_FILE
    doc = json.loads(meta.read_text())
    doc["topics"]["cmp"]["configs"]["cleanup.policy"] = "bogus"
    meta.write_text(json.dumps(doc))
    listen = f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"
    r = run_serve("-o", f"log.dirs={b.data_dir}", "-o", listen)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "kafkatool: error: topic cmp: stored config refused: Invalid value bogus for configuration cleanup.policy: "
        f"String must be one of: compact, delete (in {ts.SOURCE_EMBEDDED}: {meta})"
    )

    d = tmp_path / "kraft"
    write_kraft_dir(d, "events", {"segment.bytes": "2048", "retention.ms": "soon"})  # offsets 1, 2
    r = run_serve("-o", f"log.dirs={d}", "-o", listen)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    segment = d / ts.CLUSTER_METADATA_DIR / "00000000000000000000.log"
    assert r.stderr.strip().splitlines()[-1] == (
        "kafkatool: error: topic events: stored config refused: Invalid value soon for configuration retention.ms: "
        f"Not a number of type LONG (in {ts.SOURCE_KRAFT}: {segment}, record at offset 2, batch at byte 0)"
    )
