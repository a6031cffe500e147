"""Issue 12: offline commands read a topic's configs from ZooKeeper /config/topics/T (real ZooKeeper)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kafkatool.log import topic_settings as ts
from tests.segments import make_partition
from tests.zk.kafka_layout import default_spec, seed_cluster

REPO = Path(__file__).resolve().parents[2]


def test_retention_reads_zookeeper_topic_config(zk_chroot, tmp_path):
    hosts, chroot = zk_chroot.split("/", 1)
    spec = default_spec()
    spec.topics["orders"].config["cleanup.policy"] = "compact"
    cluster = seed_cluster(hosts, "/" + chroot, spec)
    try:
        d = tmp_path / "logs"
        make_partition(d, "orders-0", segments=3, batches_per_segment=5)
        make_partition(d, "events-0", segments=3, batches_per_segment=5)
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafkatool",
                "retention",
                "--dry-run",
                "--retention-ms",
                "1",
                "--now",
                "2100-01-01T00:00:00Z",
                "--zookeeper",
                zk_chroot,
                str(d),
                "--json",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        cluster.close()
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    parts = {x["partition"]: x for x in lines if x["type"] == "partition"}
    assert parts["orders-0"]["settings"]["cleanup.policy"] == {
        "value": "compact",
        "source": ts.SOURCE_ZOOKEEPER,
    }
    # events has a /config/topics node without overrides: described, so no "no source" note
    assert parts["events-0"]["settings"]["cleanup.policy"] == {"value": "delete", "source": "default"}
    assert not any("no source holds" in n for n in parts["events-0"]["notes"])
    deleted = {x["partition"] for x in lines if x["type"] == "segment"}
    assert deleted == {"events-0"} and p.returncode == 1, p.stderr


def test_dynamic_broker_configs_override_server_properties(zk_chroot, tmp_path):
    """/config/brokers/<default> (kafka-configs --entity-default) beats server.properties: with a
    static log.retention.hours=1 and a dynamic cluster-wide log.retention.ms of ~14 years, Kafka
    keeps the data, so retention must too."""
    hosts, chroot = zk_chroot.split("/", 1)
    spec = default_spec()
    spec.broker_configs["<default>"]["log.retention.ms"] = str(5000 * 86400 * 1000)
    cluster = seed_cluster(hosts, "/" + chroot, spec)
    try:
        d = tmp_path / "logs"
        make_partition(d, "events-0", segments=3, batches_per_segment=5)
        props = tmp_path / "server.properties"
        props.write_text("log.retention.hours=1\n")
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafkatool",
                "retention",
                "--dry-run",
                "--config",
                str(props),
                "--now",
                "2030-01-01T00:00:00Z",
                "--zookeeper",
                zk_chroot,
                str(d),
                "--json",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        cluster.close()
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    (part,) = [x for x in lines if x["type"] == "partition"]
    assert part["settings"]["retention.ms"] == {
        "value": 432000000000,
        "source": f"{ts.SOURCE_ZOOKEEPER}: dynamic broker config (log.retention.ms)",
    }
    assert not [x for x in lines if x["type"] == "segment"] and p.returncode == 0, p.stderr


def test_an_invalid_dynamic_broker_config_in_zookeeper_is_skipped_with_a_warning(zk_chroot, tmp_path):
    """A value Kafka's definition refuses in /config/brokers/<default> is left out as a broker
    leaves it out (DynamicBrokerConfig.removeInvalidConfigs), with a warning; the valid one in
    the same znode still applies (before: the whole run stopped with exit 2)."""
    hosts, chroot = zk_chroot.split("/", 1)
    spec = default_spec()
    spec.broker_configs["<default>"].update(
        {"log.retention.ms": str(5000 * 86400 * 1000), "log.cleanup.policy": "bogus"}
    )
    cluster = seed_cluster(hosts, "/" + chroot, spec)
    try:
        d = tmp_path / "logs"
        make_partition(d, "events-0", segments=3, batches_per_segment=5)
        p = subprocess.run(
            [sys.executable, "-m", "kafkatool", "retention", "--dry-run", "--now", "2030-01-01T00:00:00Z",
             "--zookeeper", zk_chroot, str(d), "--json"],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        cluster.close()
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    (part,) = [x for x in lines if x["type"] == "partition"]
    assert part["settings"]["retention.ms"]["value"] == 432000000000
    assert part["settings"]["cleanup.policy"] == {"value": "delete", "source": "default"}
    assert [x["message"] for x in lines if x["type"] == "warning"] == [
        "dynamic broker config log.cleanup.policy in /config/brokers/<default> ignored: Invalid value "
        "bogus for configuration log.cleanup.policy: String must be one of: compact, delete"
    ]
    assert not [x for x in lines if x["type"] == "segment"] and p.returncode == 0, p.stderr
