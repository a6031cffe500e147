"""Dynamic broker configs in a ZooKeeper-mode cluster: /config/brokers/<default> and
/config/brokers/<id> are two layers every broker reads (DynamicBrokerConfig), described with
their own sources; each broker answers DescribeConfigs for itself, and `kafkatool configs` and
`health` ask each broker about itself, as Kafka's AdminClient does."""

from __future__ import annotations

import json
import time

import pytest

from kafkatool.zk import paths
from tests.broker.test_broker_configs import describe, inc
from tests.broker.wire import WireClient
from tests.cluster.conftest import kafkatool, wait_for, zk_json

RATE = "follower.replication.throttled.rate"


def _stop(k, broker) -> None:
    """The test's ZooKeeper client, then its in-process Broker's storage and ZooKeeper session."""
    k.stop()
    k.close()
    if broker is not None and broker.manager is not None:
        broker.close_storage()
    if broker is not None and broker.cluster is not None:
        broker.cluster.zk.close()


def _chroot_writer(zk_module: str):
    """A fresh chroot, a started client, and ``put(path, config)``: a config znode's JSON
    (``{"version": 1, "config": ...}``) written at ``chroot + path``, created if missing."""
    import uuid

    from kazoo.client import KazooClient

    chroot = f"/c{uuid.uuid4().hex[:8]}"
    k = KazooClient(hosts=zk_module, timeout=10)
    k.start(timeout=10)

    def put(path: str, config: dict[str, str]) -> None:
        data = json.dumps({"version": 1, "config": config}).encode()
        if k.exists(chroot + path):
            k.set(chroot + path, data)
        else:
            k.create(chroot + path, data, makepath=True)

    return chroot, k, put


def test_default_and_per_broker_layers_in_zookeeper(cluster):
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    # the default through a broker (kafka-configs --bootstrap-server --entity-default: the brokers
    # are running, so Kafka 3.7's --zookeeper refuses it), broker 2's own through its API; both
    # are kept in ZooKeeper
    r = kafkatool(
        "configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config", f"{RATE}=1000",
        "--bootstrap-server", b1.bootstrap,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert zk_json(cluster, "/config/brokers/<default>")["config"] == {RATE: "1000"}
    with WireClient(b2.bootstrap) as c:
        assert inc(c, 4, "2", (RATE, 0, "2000")) == (0, None)
    assert zk_json(cluster, "/config/brokers/2")["config"] == {RATE: "2000"}

    def seen(broker, node, want) -> bool:
        with WireClient(broker.bootstrap) as c:
            e = describe(c, node, keys=[RATE], rtype=4)[1].get(RATE)
            return e is not None and (e.value, e.config_source) == want

    wait_for(lambda: seen(b1, "1", ("1000", 3)), 15, "broker 1 to read the default")
    wait_for(lambda: seen(b2, "2", ("2000", 2)), 15, "broker 2 to read its own value")
    with WireClient(b2.bootstrap) as c:
        _, d = describe(c, "", rtype=4)
        assert {n: (e.value, e.config_source) for n, e in d.items()} == {RATE: ("1000", 3)}
        e = describe(c, "2", keys=[RATE], rtype=4)[1][RATE]
        assert [(s.value, s.source) for s in e.synonyms] == [("2000", 2), ("1000", 3)]
        res, _ = describe(c, "1", rtype=4)  # a broker answers for itself only
        assert res.error_code == 42 and "expected 2 or empty string" in res.error_message
        assert inc(c, 4, "1", (RATE, 0, "5")) == (42, "Unexpected broker id, expected 2, but received 1")
    # kafka-configs --describe of broker 2 and --entity-default, asked through broker 1's address
    r = kafkatool(
        "configs", "describe", "--entity-type", "brokers", "--entity-name", "2", "--json",
        "--bootstrap-server", b1.bootstrap,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {x["name"]: x for x in map(json.loads, r.stdout.splitlines())}
    assert rows[RATE]["value"] == "2000" and rows[RATE]["source"] == "DYNAMIC_BROKER_CONFIG"
    r = kafkatool(
        "configs", "describe", "--entity-type", "brokers", "--entity-default", "--json",
        "--bootstrap-server", b1.bootstrap,
    )  # fmt: skip
    assert [json.loads(x)["name"] for x in r.stdout.splitlines()] == [RATE]
    # health describes every broker (each at its own address) and names the throttles left behind
    r = kafkatool("health", "--bootstrap-server", cluster.bootstrap, "--json")
    assert "Traceback" not in r.stderr and "DescribeConfigs" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert RATE in r.stdout


RUNNING = (
    "Broker configuration operations using ZooKeeper are only supported if the affected broker(s) are "
    "not running."
)


def test_configs_through_zookeeper_wait_for_the_broker_to_stop_and_apply_at_its_start(cluster):
    """Kafka 3.7's validateBrokersNotRunning against serve's own registrations: kafka-configs
    --zookeeper refuses a running broker's configs and the default while any broker runs (exit 2,
    Kafka's words, nothing written); once broker 3 stopped, its configs go to /config/brokers/3
    and it starts with them (DynamicBrokerConfig's per-broker layer), the default still refused."""
    z = ["--zookeeper", cluster.connect]
    alter = ["configs", "alter", "--entity-type", "brokers"]
    r = kafkatool(*alter, "--entity-name", "2", "--add-config", f"{RATE}=2000", *z)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        "kafkatool: error: requirement failed: --bootstrap-server option must be specified to update brokers "
        f"configs: {{add: {{{RATE}=2000}}, delete: List()}} - broker 2 is running. {RUNNING}"
    )
    r = kafkatool(*alter, "--entity-default", "--add-config", f"{RATE}=1000", *z)
    assert r.returncode == 2 and f"- 3 brokers are running. {RUNNING}" in r.stderr, r.stdout + r.stderr
    k = cluster.kazoo()
    try:
        assert k.exists("/config/brokers/2") is None and k.exists("/config/brokers/<default>") is None
        assert cluster.brokers[3].stop() == 0
        wait_for(lambda: k.exists("/brokers/ids/3") is None, 15, "broker 3's registration to go")
    finally:
        k.stop()
        k.close()
    r = kafkatool(*alter, "--entity-name", "3", "--add-config", f"{RATE}=3000", *z)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "Completed updating config for entity: brokers '3'."
    r = kafkatool(*alter, "--entity-default", "--add-config", f"{RATE}=1000", *z)
    assert r.returncode == 2 and f"- 2 brokers are running. {RUNNING}" in r.stderr, r.stdout + r.stderr
    assert zk_json(cluster, "/config/brokers/3")["config"] == {RATE: "3000"}
    cluster.brokers[3].start(timeout=60)
    with WireClient(cluster.brokers[3].bootstrap) as c:
        e = describe(c, "3", keys=[RATE], rtype=4)[1][RATE]
        assert (e.value, e.config_source) == ("3000", 2)


def test_log_defaults_written_to_zookeeper_by_kafka_tooling_reach_every_broker(cluster):
    """/config/brokers/<default> and a change notification as AdminZkClient.changeBrokerConfig
    writes them (a ZooKeeper-mode broker handling IncrementalAlterConfigs of the default; Kafka
    3.7's kafka-configs --zookeeper only while no broker runs): every broker takes the log defaults at once
    (DynamicLogConfig), drops a value Kafka's definition refuses (removeInvalidConfigs), and
    /config/brokers/<id> wins for that broker only."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("dl", 1, 3)])["dl"].result(20)
    k = cluster.kazoo()

    def kafka_configs(entity: str, config: dict[str, str]) -> None:
        # AdminZkClient's bytes: the entity's znode, then a sequential change notification
        data = json.dumps({"version": 1, "config": config}).encode()
        if k.exists(f"/config/brokers/{entity}"):
            k.set(f"/config/brokers/{entity}", data)
        else:
            k.create(f"/config/brokers/{entity}", data, makepath=True)
        note = json.dumps({"version": 2, "entity_path": f"brokers/{entity}"}).encode()
        k.create("/config/changes/config_change_", note, sequence=True, makepath=True)

    def seen(broker, want) -> bool:
        with WireClient(broker.bootstrap) as c:
            e = describe(c, "dl", keys=["retention.ms", "segment.bytes"])[1]
            return {n: (x.value, x.config_source) for n, x in e.items()} == want

    try:
        kafka_configs("<default>", {"log.retention.ms": "3600000", "log.segment.bytes": "5"})
        want = {"retention.ms": ("3600000", 3), "segment.bytes": ("1073741824", 5)}
        for b in cluster.brokers.values():
            wait_for(lambda b=b: seen(b, want), 15, f"broker {b.port} to take the default")
        assert "log.segment.bytes in /config/brokers/<default> ignored" in b1.log_text()
        kafka_configs("<default>", {"log.retention.ms": "3600000", "log.segment.bytes": "2048"})
        kafka_configs("2", {"log.retention.ms": "7200000"})
        wait_for(
            lambda: seen(b2, {"retention.ms": ("7200000", 2), "segment.bytes": ("2048", 3)}),
            15,
            "broker 2 to take its own value",
        )
        wait_for(
            lambda: seen(b1, {"retention.ms": ("3600000", 3), "segment.bytes": ("2048", 3)}),
            15,
            "broker 1 to keep the default",
        )
        # the logs roll at 2048 bytes: the leader's and the followers' alike
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(20):
            p.produce("dl", value=b"v" * 300, key=b"%d" % i)
            p.flush(10)
        assert p.flush(20) == 0
        for b in cluster.brokers.values():
            wait_for(lambda b=b: len(list((b.data_dir / "dl-0").glob("*.log"))) >= 3, 15, "segments")
        kafka_configs("<default>", {})
        kafka_configs("2", {})
        for b in cluster.brokers.values():
            want = {"retention.ms": ("604800000", 5), "segment.bytes": ("1073741824", 5)}
            wait_for(lambda b=b, want=want: seen(b, want), 15, "the defaults to come back")
    finally:
        k.stop()
        k.close()


def test_unclean_election_enabled_at_runtime_elects_an_offline_partition(cluster):
    """KafkaController.enableDefaultUncleanLeaderElection: unclean.leader.election.enable turned
    on as the cluster default elects a partition whose only live replica is out of the ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.cluster.test_replication import partition_state

    ctl = zk_json(cluster, "/controller")["brokerid"]
    a, b = (x for x in sorted(cluster.brokers) if x != ctl)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("unc", 1, replica_assignment=[[a, b]])])["unc"].result(20)
    wait_for(lambda: sorted(partition_state(cluster, "unc", 0)["isr"]) == [a, b], 20, "an ISR of 2")
    assert cluster.brokers[b].stop() == 0  # controlled shutdown: b leaves the ISR
    wait_for(lambda: partition_state(cluster, "unc", 0)["isr"] == [a], 20, "b out of the ISR")
    assert cluster.brokers[a].stop() == 0  # the last of the ISR: the partition goes offline
    wait_for(lambda: partition_state(cluster, "unc", 0)["leader"] == -1, 20, "no leader")
    cluster.brokers[b].start(timeout=60)
    time.sleep(2.0)
    assert partition_state(cluster, "unc", 0)["leader"] == -1  # b is not in the ISR: no clean leader
    r = kafkatool(
        "configs", "alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "unclean.leader.election.enable=true", "--bootstrap-server", cluster.brokers[b].bootstrap,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: partition_state(cluster, "unc", 0)["leader"] == b, 20, "the unclean election")


def _in_process_config(zookeeper: str, data_dir):
    """Broker 1 of the ZooKeeper ``zookeeper`` (with its chroot), for an in-process Broker whose
    storage a test opens before it listens."""
    from kafkatool.broker.config import BrokerConfig

    return BrokerConfig.load(
        None,
        [
            "broker.id=1",
            f"zookeeper.connect={zookeeper}",
            "zookeeper.session.timeout.ms=6000",
            f"log.dirs={data_dir}",
            "listeners=PLAINTEXT://127.0.0.1:0",
        ],
    )


def test_zookeeper_dynamic_defaults_govern_the_logs_from_their_load(tmp_path, zk_module, caplog):
    """KafkaServer.startup initializes DynamicBrokerConfig from ZooKeeper before it creates the
    LogManager: a partition on disk has the stored topic defaults in its LogConfig as soon as
    the storage is open, before the broker listens (no wait, no reload); a value Kafka's
    definition refuses is logged once and left out, the rest applies."""
    import logging
    import uuid

    from kazoo.client import KazooClient

    from kafkatool.broker.server import Broker
    from tests.segments import make_partition

    chroot = f"/c{uuid.uuid4().hex[:8]}"
    k = KazooClient(hosts=zk_module, timeout=10)
    k.start(timeout=10)
    try:
        for entity, config in (
            (
                "<default>",
                {"log.retention.ms": "3600000", "log.cleanup.policy": "compact", "log.segment.bytes": "5"},
            ),
            ("1", {"log.segment.bytes": "2048"}),
            ("2", {"log.retention.ms": "1"}),  # another broker's: not this one's
        ):
            data = json.dumps({"version": 1, "config": config}).encode()
            k.create(f"{chroot}/config/brokers/{entity}", data, makepath=True)
    finally:
        k.stop()
        k.close()
    data_dir = tmp_path / "data"
    make_partition(data_dir, "events-0", segments=2, batches_per_segment=3)
    cfg = _in_process_config(zk_module + chroot, data_dir)
    broker = Broker(cfg)
    caplog.set_level(logging.WARNING, logger="kafkatool")
    try:
        broker.open_storage()
        lg = broker.manager.logs[("events", 0)]
        got = (lg.config.retention_ms, lg.config.cleanup_policy, lg.config.segment_bytes)
        assert got == (3_600_000, ("compact",), 2048)
        assert broker.manager.config == lg.config  # and a log made later starts with them too
        ignored = "dynamic broker config log.segment.bytes in /config/brokers/<default> ignored"
        assert [r.getMessage() for r in caplog.records if ignored in r.getMessage()] == [
            f"{ignored}: Invalid value 5 for configuration log.segment.bytes: Value must be at least 14"
        ]
        # the reload start() makes finds nothing new to say
        broker.cluster._load_broker_configs()
        assert sum(ignored in r.getMessage() for r in caplog.records) == 1
    finally:
        broker.close_storage()
        broker.cluster.zk.close()


def test_zookeeper_topic_overrides_govern_the_logs_from_their_load(tmp_path, zk_module, caplog):
    """KafkaServer.startup hands the LogManager the topic config overrides of /config/topics
    (fetchTopicConfigOverrides): a compacted topic's log is loaded, recovered and checked with
    its own policy from the start, before the broker listens and before any LeaderAndIsr; later
    changes of the broker defaults and of the topic's znode reach such a log too. A
    kafkatool-dynamic-broker-configs.json in the dir is not a source in cluster mode (ZooKeeper
    is the one store of dynamic broker configs): ignored, and said once."""
    import logging

    from kafkatool.broker.cluster.membership import ClusterError
    from kafkatool.broker.config import BrokerConfig
    from kafkatool.broker.server import Broker
    from kafkatool.log import topic_settings as ts
    from tests.segments import make_partition

    chroot, k, put = _chroot_writer(zk_module)

    data_dir = tmp_path / "data"
    for name in ("events-0", "events-1", "plain-0"):
        make_partition(data_dir, name, segments=2, batches_per_segment=3)
    (data_dir / ts.DYNAMIC_CONFIGS_FILE).write_text(
        json.dumps(
            {
                "version": 1,
                "broker": 1,
                "configs": {"log.retention.ms": "1000"},
                "default_configs": {"log.segment.bytes": "4096"},
            }
        )
    )
    broker = None
    try:
        put("/config/topics/events", {"cleanup.policy": "compact", "retention.ms": "3600000"})
        put("/config/topics/absent", {"cleanup.policy": "compact"})  # no log here: not read
        # above log.retention.ms: Kafka takes it at start-up (no reconfigurable is registered yet)
        put("/config/brokers/<default>", {"log.retention.ms": "7200000", "log.local.retention.ms": "9000000"})
        cfg = _in_process_config(zk_module + chroot, data_dir)
        caplog.set_level(logging.INFO, logger="kafkatool")
        broker = Broker(cfg)
        broker.open_storage()
        assert broker.bound == [] and broker.cluster.broker_epoch == -1  # not listening, not registered

        def policies() -> dict[str, tuple]:
            return {
                f"{t}-{p}": (lg.config.cleanup_policy, lg.config.retention_ms, lg.config.segment_bytes)
                for (t, p), lg in broker.manager.logs.items()
            }

        assert policies() == {
            "events-0": (("compact",), 3_600_000, 1 << 30),
            "events-1": (("compact",), 3_600_000, 1 << 30),
            "plain-0": (("delete",), 7_200_000, 1 << 30),
        }
        assert (cfg.dynamic, cfg.dynamic_default) == (
            {},
            {"log.retention.ms": "7200000", "log.local.retention.ms": "9000000"},
        )
        said = [
            r.getMessage() for r in caplog.records if f"{ts.DYNAMIC_CONFIGS_FILE} ignored" in r.getMessage()
        ]
        assert len(said) == 1 and "/config/brokers/1" in said[0], said
        assert any(
            "1 topics have some, 1 of the 2 with a local log" in r.getMessage() for r in caplog.records
        )
        # a new cluster default reaches the logs the controller has not named yet; the override wins
        put("/config/brokers/<default>", {"log.retention.ms": "1800000", "log.cleanup.policy": "compact"})
        broker.cluster._load_broker_configs(paths.DEFAULT_ENTITY)
        assert policies()["plain-0"] == (("compact",), 1_800_000, 1 << 30)
        assert policies()["events-0"] == (("compact",), 3_600_000, 1 << 30)
        # with the logs open, DynamicLogConfig.validateReconfiguration checks a reload: not applied
        put(
            "/config/brokers/<default>",
            {
                "log.retention.ms": "1800000",
                "log.cleanup.policy": "compact",
                "log.local.retention.ms": "3600000",
            },
        )
        broker.cluster._load_broker_configs(paths.DEFAULT_ENTITY)
        assert "log.local.retention.ms" not in cfg.dynamic_default
        refused = (
            "dynamic broker configs in /config/brokers/<default> not applied: Invalid value 3600000 for "
            "configuration log.local.retention.ms: Value must not be more than log.retention.ms property value: 1800000"
        )
        assert refused in [r.getMessage() for r in caplog.records]
        # a change notification carrying remote.storage.enable=true is logged, nothing of it applied
        broker.cluster._apply_topic_configs(
            "events", {"cleanup.policy": "delete", "remote.storage.enable": "true"}
        )
        assert policies()["events-1"] == (("compact",), 3_600_000, 1 << 30)
        assert any(
            r.levelname == "ERROR" and "topic configs of events in ZooKeeper not applied" in r.getMessage()
            for r in caplog.records
        )
        # TopicConfigHandler: a change of /config/topics/events too
        broker.cluster._apply_topic_configs("events", {"cleanup.policy": "delete"})
        assert policies()["events-1"] == (("delete",), 1_800_000, 1 << 30)
        assert broker.manager.config_for("events") == broker.manager.logs[("events", 1)].config
        assert sum(f"{ts.DYNAMIC_CONFIGS_FILE} ignored" in r.getMessage() for r in caplog.records) == 1
        broker.close_storage()
        broker.cluster.zk.close()
        # an override the log engine refuses refuses the start, naming its znode (Kafka's
        # LogConfig throws out of LogManager.startup), before any log is loaded
        put("/config/topics/events", {"cleanup.policy": "shred"})
        broker = Broker(BrokerConfig.load(None, [f"{k}={v}" for k, v in cfg.explicit.items()]))
        with pytest.raises(
            ClusterError,
            match=r"^/config/topics/events: Invalid value shred for configuration cleanup.policy",
        ):
            broker.open_storage()
        assert broker.manager is None
        # so does a stored remote.storage.enable=true (ZkConfigManager.startup's fatal error)
        if broker.cluster is not None:
            broker.cluster.zk.close()
        put("/config/topics/events", {"cleanup.policy": "compact", "remote.storage.enable": "true"})
        broker = Broker(BrokerConfig.load(None, [f"{k}={v}" for k, v in cfg.explicit.items()]))
        with pytest.raises(ClusterError, match=r"^/config/topics/events: .*remote"):
            broker.open_storage()
        assert broker.manager is None
        # every topic of the cluster is read (KafkaServer.startup: getAllTopicsInCluster), one
        # without a log here too; /config/topics/absent names no topic and is still not read
        put("/config/topics/events", {"cleanup.policy": "compact"})
        put("/brokers/topics/elsewhere", {})
        for stored, refusal in (
            ({"remote.storage.enable": "true"}, r"^/config/topics/elsewhere: .*remote"),
            (
                {"cleanup.policy": "shred"},
                r"^/config/topics/elsewhere: Invalid value shred for configuration cleanup.policy",
            ),
        ):
            put("/config/topics/elsewhere", stored)
            if broker.cluster is not None:
                broker.cluster.zk.close()
            broker = Broker(BrokerConfig.load(None, [f"{k}={v}" for k, v in cfg.explicit.items()]))
            with pytest.raises(ClusterError, match=refusal):
                broker.open_storage()
            assert broker.manager is None
        put("/config/topics/elsewhere", {"retention.ms": "5000"})
        if broker.cluster is not None:
            broker.cluster.zk.close()
        caplog.clear()
        broker = Broker(BrokerConfig.load(None, [f"{k}={v}" for k, v in cfg.explicit.items()]))
        broker.open_storage()
        assert (
            "elsewhere" not in broker.unnamed_topic_configs
            and "elsewhere" not in broker.manager.topic_configs
        )
        assert policies()["events-0"][0] == ("compact",)
        assert any(
            "2 topics have some, 1 of the 2 with a local log" in r.getMessage() for r in caplog.records
        )
    finally:
        _stop(k, broker)


def test_a_broker_takes_change_notifications_of_its_own_entity_and_the_default_only(cluster):
    """BrokerConfigHandler (ZkConfigManager's handler of brokers/ notifications): broker N takes
    a notification for brokers/<default> (the default layer only: updateDefaultConfig) or
    brokers/N (its own layer: updateBrokerConfig); one for another broker changes nothing here,
    though /config/brokers/N changed meanwhile without a notification of its own."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    k = cluster.kazoo()

    def write(entity: str, config: dict[str, str], *, notify: bool = True) -> None:
        data = json.dumps({"version": 1, "config": config}).encode()
        if k.exists(f"/config/brokers/{entity}"):
            k.set(f"/config/brokers/{entity}", data)
        else:
            k.create(f"/config/brokers/{entity}", data, makepath=True)
        if notify:
            note = json.dumps({"version": 2, "entity_path": f"brokers/{entity}"}).encode()
            k.create("/config/changes/config_change_", note, sequence=True, makepath=True)

    def seen(broker, node: str, key: str):
        with WireClient(broker.bootstrap) as c:
            e = describe(c, node, keys=[key], rtype=4)[1].get(key)
            return None if e is None else (e.value, e.config_source)

    try:
        write("1", {RATE: "777"}, notify=False)
        write("2", {RATE: "222"})
        wait_for(lambda: seen(b2, "2", RATE) == ("222", 2), 15, "broker 2 to take its own value")
        # a later notification broker 1 acts on: it has handled the one of brokers/2 before it
        write("<default>", {"log.retention.ms": "3600000"})
        wait_for(
            lambda: seen(b1, "1", "log.retention.ms") == ("3600000", 3), 15, "broker 1 to take the default"
        )
        assert seen(b1, "1", RATE) is None, "broker 1 reloaded its layer at another broker's notification"
        write("1", {RATE: "777"})
        wait_for(lambda: seen(b1, "1", RATE) == ("777", 2), 15, "broker 1 to take its own value")
        assert seen(b2, "2", RATE) == ("222", 2)
    finally:
        k.stop()
        k.close()


def test_refused_alters_answer_as_zookeeper_mode_kafka(cluster):
    """KafkaApis preprocesses a BROKER resource in ZooKeeper mode too (ConfigAdminManager:
    INVALID_REQUEST with the inner message); a TOPIC goes to ZkAdminManager, whose INVALID_CONFIG
    puts a ConfigException's message behind the resource and an InvalidConfigurationException's
    not; both APIs, validate_only or not."""
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated import alter_configs_request as AC
    from kafkatool.protocol.generated.metadata_request import MetadataRequest
    from tests.broker.test_admin import create

    def legacy(c, rtype, name, configs, validate_only=False):
        res = AC.AlterConfigsResource(
            resource_type=rtype,
            resource_name=name,
            configs=[AC.AlterableConfig(name=n, value=v) for n, v in configs],
        )
        req = G.AlterConfigsRequest(resources=[res], validate_only=validate_only)
        r = c.request(33, 2, req).responses[0]
        return r.error_code, r.error_message

    with WireClient(cluster.brokers[1].bootstrap) as c:
        ctl = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)).controller_id
    b = cluster.brokers[ctl]
    node = str(ctl)
    with WireClient(b.bootstrap) as c:
        assert create(c, "zkalter", 1, rf=1).error_code == 0
        wait_for(
            lambda: inc(c, 2, "zkalter", ("retention.ms", 0, "60000"), validate_only=True)[0] == 0,
            15,
            "topic",
        )
        for validate_only in (True, False):
            assert inc(c, 4, node, ("num.partitions", 0, "3"), validate_only=validate_only) == (
                42,
                "Cannot update these configs dynamically: Set(num.partitions)",
            )
            assert legacy(c, 4, node, [(RATE, "-5")], validate_only) == (
                42,
                f"Invalid value -5 for configuration {RATE}: Value must be at least 0",
            )
            prefix = "Invalid config value for resource ConfigResource(type=TOPIC, name='zkalter'): "
            assert inc(c, 2, "zkalter", ("retention.ms", 0, "abc"), validate_only=validate_only) == (
                40,
                prefix + "Invalid value abc for configuration retention.ms: Not a number of type LONG",
            )
            assert legacy(c, 2, "zkalter", [("segment.bytes", "5")], validate_only) == (
                40,
                prefix + "Invalid value 5 for configuration segment.bytes: Value must be at least 14",
            )
            # ThrottledReplicaListValidator's ConfigException, behind the resource
            throttled = "leader.replication.throttled.replicas"
            assert inc(c, 2, "zkalter", (throttled, 0, "*,0:1"), validate_only=validate_only) == (
                40,
                prefix + f"Invalid value [*, 0:1] for configuration {throttled}: {throttled} must be the "
                "literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
            )
            assert inc(c, 2, "zkalter", (throttled, 0, "0:1 , 1:2"), validate_only=True) == (0, None)
            lags = [("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")]
            assert legacy(c, 2, "zkalter", lags, validate_only) == (
                40,
                "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
            )
            assert inc(c, 2, "zkalter", ("segment.bytes", 2, "5"), validate_only=validate_only) == (
                40,
                "Config value append is not allowed for config key: segment.bytes",
            )
            # a name LogConfig lacks (prepareIncrementalConfigs, then AdminZkClient.validateTopicConfig):
            # SET refused by LogConfig.validateNames, its message as it is (an
            # InvalidConfigurationException, not a ConfigException); DELETE a no-op;
            # APPEND/SUBTRACT throw NoSuchElementException out of the Scala map lookup:
            # UNKNOWN_SERVER_ERROR with no message, for a BROKER resource too
            assert inc(c, 2, "zkalter", ("no.such.config", 0, "1"), validate_only=validate_only) == (
                40,
                "Unknown topic config name: no.such.config",
            )
            assert inc(c, 2, "zkalter", ("no.such.config", 1, None), validate_only=validate_only) == (0, None)
            for op in (2, 3):
                assert inc(c, 2, "zkalter", ("no.such.config", op, "a"), validate_only=validate_only) == (
                    -1,
                    None,
                )
                assert inc(c, 4, node, ("no.such.config", op, "a"), validate_only=validate_only) == (-1, None)
            assert inc(c, 2, "nope", ("retention.ms", 0, "1"), validate_only=validate_only) == (
                3,
                "The topic 'nope' does not exist.",
            )
            # ZkAdminManager.incrementalAlterConfigs runs prepareIncrementalConfigs on a missing
            # topic's (empty) overrides before alterTopicConfigs checks that it exists, and the
            # values after that: the operations' errors come first, a value's after existence
            for op in (2, 3):
                assert inc(c, 2, "nope", ("no.such.config", op, "a"), validate_only=validate_only) == (
                    -1,
                    None,
                )
            assert inc(c, 2, "nope", ("segment.bytes", 2, "5"), validate_only=validate_only) == (
                40,
                "Config value append is not allowed for config key: segment.bytes",
            )
            for bad in (("retention.ms", 0, "abc"), ("no.such.config", 0, "1"), ("cleanup.policy", 2, "x")):
                assert inc(c, 2, "nope", bad, validate_only=validate_only) == (
                    3,
                    "The topic 'nope' does not exist.",
                )
            assert legacy(c, 2, "nope", [("retention.ms", "abc")], validate_only) == (
                3,
                "The topic 'nope' does not exist.",
            )
            assert inc(c, 2, "", ("no.such.config", 2, "a"), validate_only=validate_only) == (
                42,
                "Default topic resources are not allowed.",
            )
            assert legacy(c, 2, "", [("retention.ms", "1")], validate_only) == (
                42,
                "Default topic resources are not allowed.",
            )
            assert legacy(c, 2, "zkalter", [("retention.ms", None)], validate_only) == (
                42,
                "Null value not supported for : retention.ms",
            )
        # nothing refused was stored
        assert "retention.ms" not in (zk_json(cluster, "/config/topics/zkalter") or {}).get("config", {})


def _leader_and_isr(broker, topics, partitions=(0,), epoch: int = 0):
    """The controller's LeaderAndIsr (controller 1, epoch 1) making broker 1 the only replica
    and leader of each topic's partitions, handled in process; its answer."""
    from kafkatool.formats.schema import ZERO_UUID
    from kafkatool.protocol.generated import LeaderAndIsrRequest
    from kafkatool.protocol.generated.leader_and_isr_request import (
        LeaderAndIsrPartitionState,
        LeaderAndIsrTopicState,
    )

    states = [
        LeaderAndIsrTopicState(
            topic_name=t,
            topic_id=ZERO_UUID,
            partition_states=[
                LeaderAndIsrPartitionState(
                    topic_name=t,
                    partition_index=p,
                    controller_epoch=1,
                    leader=1,
                    leader_epoch=epoch,
                    isr=[1],
                    partition_epoch=epoch,
                    replicas=[1],
                    is_new=True,
                )
                for p in partitions
            ],
        )
        for t in topics
    ]
    req = LeaderAndIsrRequest(
        controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=states, live_leaders=[]
    )
    return broker.replicas.handle_leader_and_isr(req)


def _update_metadata(broker, topic: str, partitions: int, epoch: int = 0) -> int:
    """The controller's UpdateMetadata: broker 1 alive, leader of the topic's first
    ``partitions`` partitions (none: only the live brokers), handled in process; its error."""
    from kafkatool.formats.schema import ZERO_UUID
    from kafkatool.protocol.generated import UpdateMetadataRequest
    from kafkatool.protocol.generated.update_metadata_request import (
        UpdateMetadataBroker,
        UpdateMetadataPartitionState,
        UpdateMetadataTopicState,
    )

    states = [
        UpdateMetadataPartitionState(
            topic_name=topic,
            partition_index=p,
            controller_epoch=1,
            leader=1,
            leader_epoch=epoch,
            isr=[1],
            zk_version=epoch,
            replicas=[1],
        )
        for p in range(partitions)
    ]
    req = UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=1,
        broker_epoch=-1,
        topic_states=[UpdateMetadataTopicState(topic_name=topic, topic_id=ZERO_UUID, partition_states=states)]
        if states
        else [],
        live_brokers=[UpdateMetadataBroker(id_=1, endpoints=[], rack=None)],
    )
    return broker.replicas.handle_update_metadata(req).error_code


def test_leader_and_isr_answers_a_partition_whose_stored_overrides_are_refused(tmp_path, zk_module, caplog):
    """Overrides written to /config/topics/T behind the brokers' back that the log engine refuses
    (Kafka's LogConfig.fromProps throws a ConfigException creating the log in makeLeader /
    makeFollower): the partition answers UNKNOWN_SERVER_ERROR (Errors.forException) with one
    error line of the state-change log, no traceback, nothing of the topic left behind; the
    request's other partitions are served. Kafka's metadata cache holds no configs: the topic is
    in Metadata all the same, with the controller's partitions, and UpdateMetadata logs nothing.
    A change notification with overrides the engine takes applies them to the topic, and creates
    no log (TopicConfigHandler only updates the logs there are): the next LeaderAndIsr does; one
    fixed in ZooKeeper with no notification is read again at the log's creation, as Kafka's
    fetchLogConfig reads it each time."""
    import logging

    from kafkatool.broker.handlers.metadata import topic_entry
    from kafkatool.broker.server import Broker
    from tests.segments import make_partition

    chroot, k, put = _chroot_writer(zk_module)

    def leader_and_isr(epoch: int, *topics: str, partition: int = 0):
        r = _leader_and_isr(broker, topics, (partition,), epoch)
        return r.error_code, {(e.topic_name, e.partition_index): e.error_code for e in r.partition_errors}

    broker = None
    try:
        # a log loaded at start-up with its overrides keeps them (Kafka reads a topic's configs
        # only to create a log), whatever is stored later
        make_partition(tmp_path / "data", "kept-0", segments=1, batches_per_segment=2)
        put("/config/topics/kept", {"cleanup.policy": "compact"})
        broker = Broker(_in_process_config(zk_module + chroot, tmp_path / "data"))
        broker.open_storage()
        put("/config/topics/kept", {"cleanup.policy": "shred"})
        from kafkatool.broker.cluster.fetcher import FetcherManager

        broker.replicas.fetchers = FetcherManager(
            broker.replicas
        )  # start() without a loop: leaders only here
        put("/config/topics/bad", {"cleanup.policy": "shred"})
        put("/config/topics/good", {"cleanup.policy": "compact"})
        caplog.set_level(logging.INFO, logger="kafkatool")
        assert leader_and_isr(1, "good", "bad", "other", "kept") == (
            0,
            {("good", 0): 0, ("bad", 0): -1, ("other", 0): 0, ("kept", 0): 0},
        )
        assert broker.manager.logs[("kept", 0)].config.cleanup_policy == ("compact",)
        assert broker.metadata.topics["kept"].configs == {"cleanup.policy": "compact"}
        assert broker.manager.logs[("good", 0)].config.cleanup_policy == ("compact",)
        assert ("bad", 0) not in broker.manager.logs and ("other", 0) in broker.manager.logs
        # registered with its stored overrides, no LogConfig of them
        assert broker.metadata.topics["bad"].configs == {"cleanup.policy": "shred"}
        assert "bad" not in broker.manager.topic_configs
        assert ("bad", 0) not in broker.replicas.local
        errors = [r for r in caplog.records if r.levelname == "ERROR"]
        assert [r.getMessage() for r in errors] == [
            "Error while processing LeaderAndIsr request received from controller epoch 1 for "
            "partition bad-0: /config/topics/bad: Invalid value shred for configuration cleanup.policy: "
            "String must be one of: compact, delete"
        ]
        assert all(r.exc_info is None for r in caplog.records)
        # a refused notification for a topic whose overrides were taken: its log keeps them
        # (LogManager.updateTopicConfig threw), a log made later reads ZooKeeper again
        # (getOrCreateLog -> fetchLogConfig) and is refused; on main it got the old ones
        put("/config/topics/good", {"cleanup.policy": "shred"})
        broker.cluster._apply_topic_configs("good", {"cleanup.policy": "shred"})
        assert broker.manager.logs[("good", 0)].config.cleanup_policy == ("compact",)
        assert broker.metadata.topics["good"].configs == {"cleanup.policy": "shred"}
        assert leader_and_isr(1, "good", partition=1) == (0, {("good", 1): -1})
        assert ("good", 1) not in broker.manager.logs
        put("/config/topics/good", {"cleanup.policy": "delete"})  # fixed: the next one is made
        assert leader_and_isr(2, "good", partition=1) == (0, {("good", 1): 0})
        assert broker.manager.logs[("good", 1)].config.cleanup_policy == ("delete",)
        assert broker.manager.logs[("good", 0)].config.cleanup_policy == ("compact",)
        # UpdateMetadata: the partition is cached, the answer NONE
        caplog.clear()
        assert _update_metadata(broker, "bad", 2, epoch=1) == 0
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
        # Metadata (every topic, as ZkMetadataCache) shows it with the controller's partitions
        assert "bad" in broker.metadata.topics
        entry = topic_entry(broker, broker.metadata.topics["bad"])
        assert entry.error_code == 0
        assert [
            (p.partition_index, p.error_code, p.leader_id, p.replica_nodes) for p in entry.partitions
        ] == [
            (0, 0, 1, [1]),
            (1, 0, 1, [1]),
        ]
        assert ("bad", 0) not in broker.manager.logs
        # a broker default change skips it (no log, no LogConfig of it)
        broker.reconfigure_logs()
        assert "bad" not in broker.manager.topic_configs
        # a change notification still refused: logged, nothing applied
        caplog.clear()
        broker.cluster._apply_topic_configs("bad", {"cleanup.policy": "shred,compact"})
        assert "bad" not in broker.manager.topic_configs
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
            "topic configs of bad in ZooKeeper not applied: Invalid value shred for configuration "
            "cleanup.policy: String must be one of: compact, delete"
        ]
        # one the engine takes applies to the topic; no log is made before the next LeaderAndIsr
        put("/config/topics/bad", {"cleanup.policy": "compact"})
        broker.cluster._apply_topic_configs("bad", {"cleanup.policy": "compact"})
        assert broker.metadata.topics["bad"].configs == {"cleanup.policy": "compact"}
        assert broker.manager.topic_configs["bad"].cleanup_policy == ("compact",)
        assert ("bad", 0) not in broker.manager.logs
        assert leader_and_isr(2, "bad") == (0, {("bad", 0): 0})
        assert broker.manager.logs[("bad", 0)].config.cleanup_policy == ("compact",)
        # fixed in ZooKeeper with no notification: read again when its log is to be made
        put("/config/topics/worse", {"cleanup.policy": "shred"})
        assert leader_and_isr(1, "worse") == (0, {("worse", 0): -1})
        assert "worse" in broker.metadata.topics and ("worse", 0) not in broker.manager.logs
        put("/config/topics/worse", {"cleanup.policy": "compact,delete"})
        assert leader_and_isr(2, "worse") == (0, {("worse", 0): 0})
        assert broker.manager.logs[("worse", 0)].config.cleanup_policy == ("compact", "delete")
        assert broker.metadata.topics["worse"].configs == {"cleanup.policy": "compact,delete"}
    finally:
        _stop(k, broker)


def test_metadata_has_a_topic_from_the_controllers_update_metadata_only(tmp_path, zk_module):
    """Kafka's ZkMetadataCache is fed by UpdateMetadata alone (getTopicMetadata lists the topics
    and partitions of its partitionStates). The controller sends a new topic's LeaderAndIsr
    before its UpdateMetadata, and the LeaderAndIsr makes the logs here at once: between the two
    Metadata must not show the topic with the partitions this broker replicates and no leader (a
    client would take it for a smaller topic, a partitioner would map keys by it), nor a partition
    added later before the controller's UpdateMetadata tells of it. (Seen under load by the
    cluster test below: broker 1 answered [(0, -1, LEADER_NOT_AVAILABLE)] for a 2-partition topic.)"""
    from kafkatool.broker.cluster.fetcher import FetcherManager
    from kafkatool.broker.server import Broker
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.errors import ErrorCode
    from kafkatool.protocol.framing import encode_request, parse_response
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
    from tests.broker.wire import DispatchConn

    chroot, k, put = _chroot_writer(zk_module)
    # the topic as the admin client wrote it (no controller runs here: the test is its requests)
    put("/config/topics/fresh", {"retention.ms": "1234"})
    k.create(chroot + "/brokers/topics/fresh", b'{"version":2,"partitions":{"0":[1],"1":[1]}}', makepath=True)
    broker = None

    def leader_and_isr(partition: int) -> int:
        return _leader_and_isr(broker, ["fresh"], (partition,)).partition_errors[0].error_code

    def update_metadata(partitions: int) -> int:
        return _update_metadata(broker, "fresh", partitions)

    def metadata(topics, auto: bool = False):
        """What a client reads: (every topic's name, fresh's error and partitions)."""
        req = G.MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=auto,
        )
        frame = encode_request(3, 12, 1, "test", req)[4:]
        resp = parse_response(broker.router.dispatch(DispatchConn(), bytearray(frame))[4:], 3, 12)[1]
        fresh = [(t.error_code, [(p.partition_index, p.error_code, p.leader_id) for p in t.partitions])
                 for t in resp.topics if t.name == "fresh"]  # fmt: skip
        return sorted(t.name for t in resp.topics), fresh

    try:
        broker = Broker(_in_process_config(zk_module + chroot, tmp_path / "data"))
        broker.open_storage()
        broker.replicas.fetchers = FetcherManager(broker.replicas)  # leaders only here
        assert update_metadata(0) == 0  # the controller's first: the live brokers, no partitions
        assert leader_and_isr(0) == 0
        assert ("fresh", 0) in broker.manager.logs  # made at once, as Kafka's makeLeader does
        assert metadata(None) == ([], [])
        assert metadata(["fresh"]) == (["fresh"], [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])])
        # a client that may auto-create it: LEADER_NOT_AVAILABLE (AutoTopicCreationManager on
        # TopicExistsException), and the topic's stored configs are left as they are
        assert metadata(["fresh"], auto=True) == (["fresh"], [(ErrorCode.LEADER_NOT_AVAILABLE, [])])
        assert json.loads(k.get(chroot + "/config/topics/fresh")[0])["config"] == {"retention.ms": "1234"}
        assert update_metadata(2) == 0
        whole = [(0, [(0, 0, 1), (1, 0, 1)])]
        assert metadata(None) == (["fresh"], whole)
        assert metadata(["fresh"]) == (["fresh"], whole)
        # a partition added (CreatePartitions): known once the controller's UpdateMetadata says so
        assert leader_and_isr(2) == 0
        assert metadata(["fresh"]) == (["fresh"], whole)
        assert update_metadata(3) == 0
        assert metadata(["fresh"]) == (["fresh"], [(0, [(0, 0, 1), (1, 0, 1), (2, 0, 1)])])
    finally:
        _stop(k, broker)


def test_a_topic_whose_stored_overrides_are_refused_is_in_metadata_on_every_broker(cluster):
    """A topic written with overrides the log engine refuses (kafka-topics --zookeeper and a
    hand-written /config/topics/T): the leaders' LeaderAndIsr fail its logs, yet every broker's
    Metadata lists it with the controller's partitions (Kafka's metadata cache holds no configs)
    and a produce to it answers NOT_LEADER_OR_FOLLOWER, as Kafka's partition without a log. An
    IncrementalAlterConfigs that makes the overrides acceptable reaches every broker through the
    change notification; no log is made before a LeaderAndIsr names the partition again."""
    from kafkatool.protocol.generated.metadata_request import MetadataRequest, MetadataRequestTopic
    from tests.broker.test_protocol import batch, produce

    k = cluster.kazoo()
    try:
        k.create(
            "/config/topics/zkbad",
            json.dumps({"version": 1, "config": {"cleanup.policy": "shred"}}).encode(),
            makepath=True,
        )
        k.create("/brokers/topics/zkbad", b'{"version":2,"partitions":{"0":[1],"1":[2]}}')
    finally:
        k.stop()
        k.close()

    def listed(b):
        with WireClient(b.bootstrap) as c:
            req = MetadataRequest(topics=None, allow_auto_topic_creation=False)
            md = c.request(3, 12, req)
            t = next((t for t in md.topics if t.name == "zkbad"), None)
            return t and sorted((p.partition_index, p.leader_id, p.error_code) for p in t.partitions)

    for n, b in cluster.brokers.items():
        assert wait_for(lambda b=b: listed(b), 20, f"zkbad in broker {n}'s Metadata") == [
            (0, 1, 0),
            (1, 2, 0),
        ]
    b1 = cluster.brokers[1]
    wait_for(lambda: "Error while processing LeaderAndIsr request" in b1.log_text(), 20, "the refusal logged")
    assert "Traceback" not in b1.log_text()
    with WireClient(b1.bootstrap) as c:
        # by name too: no auto-creation attempt, the topic is known
        md = c.request(
            3,
            12,
            MetadataRequest(topics=[MetadataRequestTopic(name="zkbad")], allow_auto_topic_creation=True),
        )
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 2
        assert produce(c, "zkbad", batch(1)).error_code == 6  # NOT_LEADER_OR_FOLLOWER
        # ZkAdminManager's ConfigHelper builds LogConfig.fromProps of /config/topics/T: its
        # ConfigException answers UNKNOWN_SERVER_ERROR with no message and no configs
        res, configs = describe(c, "zkbad", ["cleanup.policy"])
        assert (res.error_code, res.error_message, configs) == (-1, None, {})  # UNKNOWN_SERVER_ERROR
        assert (
            "Error processing describe configs request for resource DescribeConfigsResource("
            "resourceType=2, resourceName='zkbad', configurationKeys=[cleanup.policy]): "
            "Invalid value shred for configuration cleanup.policy"
        ) in b1.log_text()
        assert inc(c, 2, "zkbad", ("cleanup.policy", 0, "compact")) == (0, None)
    for n, b in cluster.brokers.items():
        with WireClient(b.bootstrap) as c:

            def policy(c=c):
                # a broker the change notification has not reached yet still answers the refused
                # overrides' UNKNOWN_SERVER_ERROR, no configs
                entry = describe(c, "zkbad", ["cleanup.policy"])[1].get("cleanup.policy")
                return entry is not None and entry.value == "compact"

            wait_for(policy, 15, f"broker {n} took the overrides")
    assert not list((b1.data_dir).glob("zkbad-*"))
