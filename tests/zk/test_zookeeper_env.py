"""$KAFKATOOL_ZOOKEEPER stands in for --zookeeper in every command that takes it, with one
precedence rule (commands/common.py): an explicit option beats the environment, so an explicit
--bootstrap-server (or reassign generate's --current) wins over a ZooKeeper that only came from
the environment; explicit --zookeeper wins over the environment's.  Real ZooKeeper (seeded as
ZK-mode Kafka writes it) and a real ``kafkatool serve`` for the --bootstrap-server side."""

from __future__ import annotations

import json

import pytest
import typer.main
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.log import topic_settings as ts
from tests.segments import make_partition

NOW_FAR = "2100-01-01T00:00:00Z"


def run(*args, env: str | None = None):
    r = CliRunner(env={"KAFKATOOL_ZOOKEEPER": env}).invoke(app, [*map(str, args)])
    assert "Traceback" not in r.output, r.output
    return r


def json_lines(r) -> list[dict]:
    return [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A real broker with topic envtopic (retention.ms=123456), not known to the ZooKeeper layout."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.broker.conftest import BrokerProcess

    b = BrokerProcess(tmp_path_factory.mktemp("envbroker") / "data", extra=["num.partitions=1"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics(
            [NewTopic("envtopic", 1, 1, config={"retention.ms": "123456"})]
        ).values():
            f.result(20)
        yield b
    finally:
        b.stop()


@pytest.fixture
def missing_chroot(zk_server) -> str:
    """A reachable ZooKeeper whose chroot does not exist: using it fails at once (exit 2)."""
    return f"{zk_server}/no-such-chroot"


def _zookeeper_commands():
    """(words, click command) for every command of the CLI that takes --zookeeper."""
    found = []

    def walk(cmd, words):
        if hasattr(cmd, "commands"):  # a group (typer's own click)
            for name, sub in cmd.commands.items():
                walk(sub, [*words, name])
        elif any("--zookeeper" in p.opts for p in cmd.params):
            found.append((words, cmd))

    walk(typer.main.get_command(app), [])
    return found


def test_every_zookeeper_option_reads_the_env_var_and_says_so():
    commands = _zookeeper_commands()
    names = {" ".join(w) for w, _ in commands}
    assert {"configs describe", "configs alter", "health", "leader-election", "compact", "retention"} <= names
    assert {"reassign execute", "zk brokers"} <= names
    for words, cmd in commands:
        (opt,) = [p for p in cmd.params if "--zookeeper" in p.opts]
        assert opt.envvar == "KAFKATOOL_ZOOKEEPER", words
        assert "$KAFKATOOL_ZOOKEEPER" in opt.help, words
        has_bootstrap = any("--bootstrap-server" in p.opts for p in cmd.params)
        assert ("unless --bootstrap-server" in opt.help) == has_bootstrap, (words, opt.help)


# ----------------------------------------------------------------------------- configs


def test_configs_describe_and_alter(kafka_cluster, live, missing_chroot):
    # through ZooKeeper Kafka 3.7's kafka-configs.sh takes users and brokers only, a broker only
    # while it is not registered (validateBrokersNotRunning): broker 4 is not, 1 to 3 are
    zk_describe = ["configs", "describe", "--entity-type", "brokers"]
    describe = ["configs", "describe", "--entity-type", "topics"]
    # the environment alone: ZooKeeper
    r = run(*zk_describe, "--entity-default", env=kafka_cluster.connect)
    assert r.exit_code == 2 and "- 3 brokers are running." in r.output, r.output
    r = run(
        "configs", "alter", "--entity-type", "brokers", "--entity-name", "4",
        "--add-config", "log.cleaner.threads=3", env=kafka_cluster.connect,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    got = json.loads(kafka_cluster.admin.get("/config/brokers/4")[0])["config"]
    assert got["log.cleaner.threads"] == "3"
    # an explicit --zookeeper beats the environment's
    r = run(*zk_describe, "--entity-name", "4", "-z", kafka_cluster.connect, env=missing_chroot)
    assert r.exit_code == 0 and r.stdout == "Configs for brokers '4' are log.cleaner.threads=3\n", r.output
    # an explicit --bootstrap-server beats the environment's ZooKeeper (which would fail)
    r = run(*describe, "--entity-name", "envtopic", "--bootstrap-server", live.bootstrap, env=missing_chroot)
    assert r.exit_code == 0, r.output
    assert "  retention.ms=123456 sensitive=false" in r.stdout
    # both explicit: refused as before
    r = run(
        *describe,
        "--entity-name",
        "envtopic",
        "--bootstrap-server",
        live.bootstrap,
        "-z",
        kafka_cluster.connect,
    )
    assert r.exit_code == 2 and "exactly one of --bootstrap-server and --zookeeper" in r.output


# ----------------------------------------------------------------------------- health


def test_health(kafka_cluster, live, missing_chroot):
    r = run("health", "--json", env=kafka_cluster.connect)
    assert r.exit_code == 0, r.output
    assert json_lines(r)[-1]["source"] == "ZooKeeper"
    r = run("health", "--json", "-z", kafka_cluster.connect, env=missing_chroot)
    assert r.exit_code == 0 and json_lines(r)[-1]["source"] == "ZooKeeper", r.output
    # the environment's ZooKeeper yields to --bootstrap-server: the cluster's view alone
    r = run("health", "--json", "--no-lag", "--bootstrap-server", live.bootstrap, env=kafka_cluster.connect)
    assert r.exit_code in (0, 1), r.output
    assert json_lines(r)[-1]["source"] == "the cluster's metadata"
    # both explicit: both read (the seeded brokers are registered but not in the cluster)
    r = run("health", "--json", "--no-lag", "--bootstrap-server", live.bootstrap, "-z", kafka_cluster.connect)
    assert json_lines(r)[-1]["source"] == "the cluster's metadata and ZooKeeper", r.output


# ----------------------------------------------------------------------------- leader-election


def test_leader_election(kafka_cluster, live, missing_chroot):
    path = "/admin/preferred_replica_election"
    base = ["leader-election", "--election-type", "preferred", "--topic"]
    r = run(*base, "orders", "--partition", "0", env=kafka_cluster.connect)
    assert r.exit_code == 0 and "Created preferred replica election path" in r.stdout, r.output
    assert json.loads(kafka_cluster.admin.get(path)[0])["partitions"] == [{"topic": "orders", "partition": 0}]
    kafka_cluster.admin.delete(path)
    r = run(*base, "orders", "--partition", "1", "-z", kafka_cluster.connect, env=missing_chroot)
    assert r.exit_code == 0 and kafka_cluster.admin.exists(path), r.output
    kafka_cluster.admin.delete(path)
    # --bootstrap-server: ElectLeaders at the broker, nothing written to the environment's ZooKeeper
    r = run(
        *base, "envtopic", "--partition", "0", "--bootstrap-server", live.bootstrap, env=kafka_cluster.connect
    )
    assert r.exit_code == 0 and "Valid replica already elected for partitions envtopic-0" in r.stdout, (
        r.output
    )
    assert not kafka_cluster.admin.exists(path)


# ----------------------------------------------------------------------------- compact, retention


@pytest.fixture
def orders_dir(kafka_cluster, tmp_path):
    """A log dir with orders-0; orders' ZooKeeper configs say compact."""
    kafka_cluster.admin.set(
        "/config/topics/orders",
        json.dumps(
            {"version": 1, "config": {"cleanup.policy": "compact", "retention.ms": "86400000"}}
        ).encode(),
    )
    d = tmp_path / "logs"
    make_partition(d, "orders-0", segments=3, batches_per_segment=5)
    return d


@pytest.mark.parametrize("command", ["compact", "retention"])
def test_offline_commands_read_topic_configs_from_the_env_zookeeper(
    command, kafka_cluster, live, orders_dir, missing_chroot
):
    base = [command, "--dry-run", "--json", "--now", NOW_FAR, str(orders_dir)]

    def policy(r):
        (part,) = [x for x in json_lines(r) if x["type"] == "partition"]
        return part["settings"]["cleanup.policy"]

    r = run(*base, env=kafka_cluster.connect)
    assert r.exit_code in (0, 1), r.output
    assert policy(r) == {"value": "compact", "source": ts.SOURCE_ZOOKEEPER}
    r = run(*base, "-z", kafka_cluster.connect, env=missing_chroot)
    assert r.exit_code in (0, 1) and policy(r)["source"] == ts.SOURCE_ZOOKEEPER, r.output
    # the cluster does not know orders: with the environment's ZooKeeper dropped, no source has it
    r = run(*base, "--bootstrap-server", live.bootstrap, env=kafka_cluster.connect)
    assert r.exit_code in (0, 1), r.output
    assert policy(r)["source"] != ts.SOURCE_ZOOKEEPER
    # no environment, no flag: no ZooKeeper either
    assert policy(run(*base))["source"] != ts.SOURCE_ZOOKEEPER


# ----------------------------------------------------------------------------- reassign


def test_reassign_explicit_zookeeper_is_never_taken_for_the_environments(kafka_cluster, live, tmp_path):
    """Only the environment's value yields: an explicit --zookeeper that happens to equal
    $KAFKATOOL_ZOOKEEPER, given with --bootstrap-server, is two sources (refused)."""
    r = run("reassign", "list", "-z", kafka_cluster.connect, "-b", live.bootstrap, env=kafka_cluster.connect)
    assert r.exit_code == 2 and "give --zookeeper or --bootstrap-server, not both" in r.output, r.output
    r = run("reassign", "list", "-b", live.bootstrap, "--json", env=kafka_cluster.connect)
    assert r.exit_code == 0, r.output


def test_reassign_generate_current_file_beats_the_environment(kafka_cluster, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "orders"}]}))
    current = tmp_path / "current.json"
    current.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": "orders",
                        "partition": 0,
                        "replicas": [1, 2, 3],
                        "log_dirs": ["any", "any", "any"],
                    }
                ],
            }
        )
    )
    gen = [
        "reassign",
        "generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "1,2,3",
        "--seed",
        "1",
    ]
    r = run(*gen, "--current", current, "--json", env=kafka_cluster.connect)
    assert r.exit_code == 0, r.output
    assert len(json_lines(r)[0]["current"]["partitions"]) == 1
    r = run(*gen, "--json", env=kafka_cluster.connect)  # the environment alone: ZooKeeper's 3 partitions
    assert r.exit_code == 0, r.output
    assert len(json_lines(r)[0]["current"]["partitions"]) == 3
    r = run(*gen, "--current", current, "-z", kafka_cluster.connect)
    assert r.exit_code == 2 and "exactly one of --zookeeper, --bootstrap-server and --current" in r.output
