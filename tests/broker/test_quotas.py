"""Client quotas (Kafka 3.7's ClientQuotaManager, ClientRequestQuotaManager,
ControllerMutationQuotaManager): the resolution rule of KIP-55's eight levels, the rate and
token-bucket arithmetic, DescribeClientQuotas/AlterClientQuotas through `kafkatool configs`,
and real librdkafka clients held near their quota by a `kafkatool serve`."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from kafkatool.broker import quotas as Q
from kafkatool.broker.quotas import DEFAULT
from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess
from tests.broker.wire import WireClient

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()


# ------------------------------------------------------------------ the pure rule
LEVELS = [
    (("alice", "app"), ("alice", "app")),  # 1 users/<u>/clients/<c>
    (("alice", DEFAULT), ("alice", "app")),  # 2 users/<u>/clients/<default>
    (("alice", None), ("alice", "")),  # 3 users/<u>
    ((DEFAULT, "app"), ("alice", "app")),  # 4 users/<default>/clients/<c>
    ((DEFAULT, DEFAULT), ("alice", "app")),  # 5 users/<default>/clients/<default>
    ((DEFAULT, None), ("alice", "")),  # 6 users/<default>
    ((None, "app"), ("", "app")),  # 7 clients/<c>
    ((None, DEFAULT), ("", "app")),  # 8 clients/<default>
]


def test_resolution_order_of_the_eight_levels():
    """Each level wins over every level below it, and its bound is the one applied; the metric
    tags say which requests share a sensor (a user's quota: all its clients together)."""
    for i, (entity, tags) in enumerate(LEVELS):
        quotas = {e: float(100 * (j + 1)) for j, (e, _) in enumerate(LEVELS) if j >= i}
        assert Q.metric_tags(quotas, "alice", "app") == tags, entity
        assert Q.quota_limit(quotas, tags) == 100.0 * (i + 1), entity
    # another user or client id falls through to the defaults, never to alice's or app's own
    quotas = {e: float(100 * (j + 1)) for j, (e, _) in enumerate(LEVELS)}
    assert Q.metric_tags(quotas, "bob", "other") == ("bob", "other")
    assert Q.quota_limit(quotas, ("bob", "other")) == 500.0  # users/<default>/clients/<default>
    assert Q.quota_limit({(None, DEFAULT): 7.0}, Q.metric_tags({(None, DEFAULT): 7.0}, "u", "c")) == 7.0
    assert Q.quota_limit({}, Q.metric_tags({}, "u", "c")) is None


def test_alter_ops_checks():
    e = ("alice", None)
    assert Q.apply_ops(e, {}, [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)]) == {
        "producer_byte_rate": "1024",
        "request_percentage": "12.5",
    }
    with pytest.raises(Q.QuotaRequestError, match="must be a LONG value"):
        Q.apply_ops(e, {}, [("consumer_byte_rate", 1.5)])
    with pytest.raises(Q.QuotaRequestError, match="Invalid configuration key foo"):
        Q.apply_ops(e, {}, [("foo", 1.0)])
    assert Q.apply_ops(e, {"producer_byte_rate": "1"}, [("producer_byte_rate", None)]) == {}
    with pytest.raises(Q.QuotaRequestError, match="Empty user not supported"):
        Q.parse_entity([("user", "")])
    with pytest.raises(Q.QuotaRequestError, match="Invalid empty client quota entity"):
        Q.parse_entity([])
    assert Q.zk_entity("users", DEFAULT, "app") == (DEFAULT, "app")
    assert Q.zk_entity_path(("alice", DEFAULT)) == ("users", "alice", DEFAULT)
    assert Q.zk_entity_path((None, "app")) == ("clients", "app", None)


# ------------------------------------------------------------------ a broker
@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("quotas") / "data", extra=["num.partitions=1"]).start()
    try:
        yield b
    finally:
        b.stop()


def configs(*args):
    return runner.invoke(app, ["configs", *map(str, args)])


def test_no_quota_no_throttle(broker):
    """With no quota anywhere, answers carry throttle_time_ms 0 and nothing is muted."""
    from kafkatool.protocol.generated.metadata_request import MetadataRequest

    with WireClient(broker.bootstrap) as c:
        t0 = time.monotonic()
        for _ in range(50):
            assert c.request(3, 12, MetadataRequest(topics=None)).throttle_time_ms == 0
        assert time.monotonic() - t0 < 5
    assert "client quotas" not in broker.log_text()


def test_configs_round_trips_and_refusals(broker):
    boot = ["--bootstrap-server", broker.bootstrap]
    res = configs("alter", "--entity-type", "users", "--entity-name", "alice",
                  "--add-config", "producer_byte_rate=1024,request_percentage=12.5", *boot)  # fmt: skip
    assert res.exit_code == 0 and res.stdout.strip() == "Completed updating config for user alice.", (
        res.output
    )
    res = configs("alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                  "--entity-name", "app", "--add-config", "consumer_byte_rate=20971520", *boot)  # fmt: skip
    assert res.exit_code == 0, res.output
    res = configs("alter", "--entity-type", "clients", "--entity-default",
                  "--add-config", "controller_mutation_rate=10", *boot)  # fmt: skip
    assert res.stdout.strip() == "Completed updating default config for clients in the cluster.", res.output
    res = configs("describe", "--entity-type", "users", "--entity-name", "alice", *boot)
    assert res.exit_code == 0, res.output
    # ConfigCommand's words, Java's Double.toString, the admin client's HashMap order
    assert res.stdout.splitlines() == [
        "Quota configs for user-principal 'alice' are request_percentage=12.5, producer_byte_rate=1024.0"
    ]
    res = configs("describe", "--entity-type", "users", "--entity-name", "alice",
                  "--entity-type", "clients", "--entity-name", "app", *boot)  # fmt: skip
    assert res.stdout.splitlines() == [
        "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2.097152E7"
    ]
    res = configs("describe", "--entity-type", "clients", "--entity-default", *boot)
    assert res.stdout.splitlines() == [
        "Quota configs for the default client-id are controller_mutation_rate=10.0"
    ]
    res = configs("describe", "--entity-type", "users", *boot)  # every user entity alone
    assert res.stdout.splitlines() == [
        "Quota configs for user-principal 'alice' are request_percentage=12.5, producer_byte_rate=1024.0"
    ]
    # refusals: the tool's own checks and the broker's
    res = configs("alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "foo=1", *boot)
    assert res.exit_code == 2 and "Only quota configs can be added for 'clients'" in res.output
    res = configs("alter", "--entity-type", "users", "--entity-name", "alice",
                  "--delete-config", "consumer_byte_rate", *boot)  # fmt: skip
    assert res.exit_code == 2 and "Invalid config(s): consumer_byte_rate" in res.output
    res = configs("alter", "--entity-type", "users", "--entity-name", "alice",
                  "--add-config", "consumer_byte_rate=1.5", *boot)  # fmt: skip
    assert res.exit_code == 2 and "Configuration consumer_byte_rate must be a LONG value" in res.output
    res = configs("alter", "--entity-type", "users", "--entity-name", "alice",
                  "--add-config", "producer_byte_rate=abc", *boot)  # fmt: skip
    assert (
        res.exit_code == 2
        and "Cannot parse quota configuration value for producer_byte_rate: abc" in res.output
    )
    res = configs("alter", "--entity-type", "users", "--entity-name", "alice",
                  "--delete-config", "producer_byte_rate,request_percentage", *boot)  # fmt: skip
    assert res.exit_code == 0, res.output
    res = configs("describe", "--entity-type", "users", "--entity-name", "alice", *boot)
    assert res.stdout == ""
    # the wire answers for what the tool does not send
    from kafkatool.protocol.generated import describe_client_quotas_request as D

    with WireClient(broker.bootstrap) as c:
        bad = c.request(48, 1, D.DescribeClientQuotasRequest(
            components=[D.ComponentData(entity_type="user", match_type=2, match=None)] * 2, strict=False))  # fmt: skip
        assert (bad.error_code, bad.error_message) == (42, "Duplicate user filter component entity type")
        assert bad.entries is None
        every = c.request(48, 1, D.DescribeClientQuotasRequest(components=[], strict=False))
        got = {tuple((e.entity_type, e.entity_name) for e in x.entity) for x in every.entries}
        assert got == {(("user", "alice"), ("client-id", "app")), (("client-id", None),)}
        strict = c.request(48, 1, D.DescribeClientQuotasRequest(components=[], strict=True))
        assert strict.entries == []


def _produce_flat_out(
    bootstrap: str, client_id: str, topic: str, seconds: float
) -> tuple[int, list[int], float]:
    """(bytes acknowledged, throttle times reported, span) of a producer sending 4 KiB values
    as fast as it can for ``seconds``."""
    throttles: list[int] = []
    acked = [0]

    def on_delivery(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 2,
                     "batch.size": 16384, "acks": 1, "queue.buffering.max.kbytes": 256,
                     "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})  # fmt: skip
    value = b"x" * 4096
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            p.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.05)
            continue
        p.poll(0)
    span = time.monotonic() - t0
    p.poll(0.2)
    p.purge()
    p.flush(2)
    return acked[0], throttles, span


def test_entity_names_go_to_the_entity_types_in_command_line_order(broker):
    """ConfigCommandOptions.entityNames: --entity-name and --entity-default make one list of names
    in their command-line order, matched to the --entity-types in order (users and clients in
    either order); a type left without a name is any entity of it (describe), and alter needs a
    name for every type."""
    boot = ["--bootstrap-server", broker.bootstrap]
    big = "controller_mutation_rate=1000000"  # set, never reached by the other tests
    made = [
        (["--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default"], big),
        (
            [
                "--entity-type",
                "users",
                "--entity-name",
                "erin",
                "--entity-type",
                "clients",
                "--entity-default",
            ],
            big,
        ),
        # clients first, and a default before a name: users gets the default, clients 'app9'
        (
            [
                "--entity-type",
                "clients",
                "--entity-name",
                "app9",
                "--entity-type",
                "users",
                "--entity-name",
                "fay",
            ],
            big,
        ),
        (
            [
                "--entity-type",
                "users",
                "--entity-type",
                "clients",
                "--entity-default",
                "--entity-name",
                "app9",
            ],
            big,
        ),
    ]
    try:
        for who, value in made:
            res = configs("alter", *who, "--add-config", value, *boot)
            assert res.exit_code == 0, (who, res.output)
        assert res.stdout.strip() == "Completed updating default config for users in the cluster."
        res = configs("describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients",
                      "--entity-default", *boot)  # fmt: skip
        assert res.stdout.splitlines() == [
            "Quota configs for the default user-principal, the default client-id are controller_mutation_rate=1000000.0"
        ]
        # the default user with any client id (not any user with the default client id: erin's)
        res = configs(
            "describe", "--entity-type", "users", "--entity-type", "clients", "--entity-default", *boot
        )
        assert sorted(res.stdout.splitlines()) == [
            "Quota configs for the default user-principal, client-id 'app9' are controller_mutation_rate=1000000.0",
            "Quota configs for the default user-principal, the default client-id are controller_mutation_rate=1000000.0",
        ]
        res = configs("describe", "--entity-type", "clients", "--entity-name", "app9", "--entity-type", "users",
                      "--entity-name", "fay", *boot)  # fmt: skip
        assert res.stdout.splitlines() == [
            "Quota configs for user-principal 'fay', client-id 'app9' are controller_mutation_rate=1000000.0"
        ]
        res = configs("alter", "--entity-type", "users", "--entity-type", "clients", "--entity-default",
                      "--add-config", big, *boot)  # fmt: skip
        assert res.exit_code == 2 and "An entity name must be specified for every entity type" in res.output
        res = configs("describe", "--entity-type", "users", "--entity-default", "--entity-default", *boot)
        assert res.exit_code == 2 and "More entity names specified than entity types" in res.output
        res = configs("describe", "--entity-type", "users", "--entity-type", "users", *boot)
        assert res.exit_code == 2 and "Duplicate entity type(s) specified: users" in res.output
    finally:
        for who, value in made:
            configs("alter", *who, "--delete-config", value.split("=")[0], *boot)
    res = configs("describe", "--entity-type", "users", "--entity-type", "clients", *boot)
    assert "1000000" not in res.stdout


def test_producer_held_near_its_quota(broker):
    """A real producer at producer_byte_rate = 40 kB/s: what it may send is the quota over the
    window (at least 10 s from the first record, Kafka's Rate) and the span; unthrottled it
    sends hundreds of times that here.  Its answers carry throttle_time_ms (librdkafka's throttle_cb)."""
    rate = 40_000
    res = configs("alter", "--entity-type", "clients", "--entity-name", "slow-producer",
                  "--add-config", f"producer_byte_rate={rate}", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output
    acked, throttles, span = _produce_flat_out(broker.bootstrap, "slow-producer", "held", 3.0)
    allowed = rate * (10 + span)
    assert throttles and max(throttles) > 0, "no answer carried a throttle time"
    assert rate * span * 0.5 < acked <= allowed * 1.3 + 64 * 1024, (acked, allowed)
    free, free_throttles, _ = _produce_flat_out(broker.bootstrap, "fast-producer", "held", 1.0)
    assert not free_throttles and free > 2 * allowed  # another client id: no quota, no throttle


def test_consumer_fetch_held_near_its_quota(broker):
    rate = 50_000
    res = configs("alter", "--entity-type", "clients", "--entity-name", "slow-consumer",
                  "--add-config", f"consumer_byte_rate={rate}", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output
    # batches well below the quota's window (a batch larger than quota x window could never be
    # fetched at all: Kafka's minOneMessage batch is throttled and unrecorded again and again)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "filler", "linger.ms": 5,
                     "batch.size": 16384})  # fmt: skip
    for _ in range(800):  # 3.2 MB
        p.produce("fetched", b"y" * 4096)
        p.poll(0)
    assert p.flush(15) == 0
    throttles: list[int] = []
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-consumer", "group.id": "g-slow",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})  # fmt: skip
    c.assign([ck.TopicPartition("fetched", 0, 0)])  # no group rebalance delay
    got = 0
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 4.0:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += len(m.value())
    finally:
        span = time.monotonic() - t0
        c.close()
    assert throttles and max(throttles) > 0, throttles
    assert 0 < got <= rate * (10 + span) * 1.3, (got, throttles)
    assert got < 800 * 4096


def test_topic_creation_beyond_controller_mutation_rate(broker):
    """KIP-599: CreateTopics v6+ is strict (refused with THROTTLING_QUOTA_EXCEEDED and the time
    owed once the bucket is in debt), v5 permissive (made, the throttle time in the answer)."""
    from kafkatool.protocol.generated import create_topics_request as CT

    res = configs("alter", "--entity-type", "clients", "--entity-name", "mutator",
                  "--add-config", "controller_mutation_rate=2", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output

    def create(c, name, parts, version):
        req = CT.CreateTopicsRequest(topics=[CT.CreatableTopic(name=name, num_partitions=parts, replication_factor=1,
                                                               assignments=[], configs=[])],
                                     timeout_ms=5000, validate_only=False)  # fmt: skip
        return c.request(19, version, req)

    with WireClient(broker.bootstrap, client_id="mutator") as c:
        first = create(c, "m1", 30, 7)  # the burst (22) is there: made, the bucket owes 8
        assert first.topics[0].error_code == 0
    with WireClient(broker.bootstrap, client_id="mutator") as c:
        refused = create(c, "m2", 1, 7)
        assert refused.topics[0].error_code == 89  # THROTTLING_QUOTA_EXCEEDED
        assert refused.topics[0].error_message == "The throttling quota has been exceeded."
        assert 2000 < refused.throttle_time_ms <= 4000
    with WireClient(broker.bootstrap, client_id="mutator") as c:
        permissive = create(c, "m3", 1, 5)
        assert permissive.topics[0].error_code == 0 and permissive.throttle_time_ms > 2000


def test_quotas_survive_restart(broker):
    broker.stop()
    broker.start()
    res = configs("describe", "--entity-type", "clients", "--entity-name", "slow-producer",
                  "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.stdout.splitlines() == [
        "Quota configs for client-id 'slow-producer' are producer_byte_rate=40000.0"
    ]
    assert "client quotas: " in broker.log_text()


def test_request_percentage_throttles_and_mutes(broker):
    """request_percentage: the event loop's time in a client's requests over the window; the
    throttle is capped at one window, and the connection reads nothing until it has passed."""
    from kafkatool.protocol.generated.api_versions_request import ApiVersionsRequest
    from kafkatool.protocol.generated.metadata_request import MetadataRequest

    res = configs("alter", "--entity-type", "clients", "--entity-name", "busy",
                  "--add-config", "request_percentage=0.01", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output
    with WireClient(broker.bootstrap, client_id="busy") as c:
        for _ in range(2000):
            throttle = c.request(3, 12, MetadataRequest(topics=None)).throttle_time_ms
            if throttle:
                break
        assert 0 < throttle <= 1000
        t0 = time.monotonic()
        c.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert time.monotonic() - t0 >= throttle / 1000 * 0.8


def test_a_throttled_answer_that_waited_unmutes_the_connection(broker):
    """A JoinGroup answered after its rebalance is throttled when it is done, while the
    connection already waits for the next request: the throttle's end must still unmute it
    (ClientQuotaManager's ThrottledChannelReaper ends every throttle).  It stayed muted for
    good, so the member's SyncGroup was never read (a consumer group under a request quota
    could not form)."""
    from kafkatool.protocol import generated as G
    from kafkatool.protocol.generated.join_group_request import JoinGroupRequestProtocol
    from kafkatool.protocol.generated.sync_group_request import SyncGroupRequestAssignment

    res = configs("alter", "--entity-type", "clients", "--entity-name", "held",
                  "--add-config", "request_percentage=0.00003", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output
    with WireClient(broker.bootstrap, client_id="held", timeout=10) as c:

        def join(member_id: str):
            req = G.JoinGroupRequest(
                group_id="held-group",
                session_timeout_ms=30_000,
                rebalance_timeout_ms=30_000,
                member_id=member_id,
                protocol_type="consumer",
                protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
            )
            return c.request(11, 5, req)

        j = join(join("").member_id)  # the second waits for its rebalance: an answer that waited
        assert j.error_code == 0 and j.throttle_time_ms > 0
        t0 = time.monotonic()
        sync = G.SyncGroupRequest(
            group_id="held-group",
            generation_id=j.generation_id,
            member_id=j.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=j.member_id, assignment=b"")],
        )
        s = c.request(14, 3, sync)
        assert s.error_code == 0
        assert time.monotonic() - t0 >= j.throttle_time_ms / 1000 * 0.8  # read once the throttle passed


def test_acks0_produce_mutes_without_closing(broker):
    """Produce acks=0 past producer_byte_rate: no answer, the connection stays open, and the
    next request is read only once the throttle time has passed (Kafka mutes, never closes)."""
    from kafkatool.protocol.generated.api_versions_request import ApiVersionsRequest
    from tests.broker.test_protocol import batch, produce

    res = configs("alter", "--entity-type", "clients", "--entity-name", "acks0",
                  "--add-config", "producer_byte_rate=900", "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert res.exit_code == 0, res.output
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("acks0", 1, 1)]).values():
        f.result(15)
    with WireClient(broker.bootstrap, client_id="acks0") as c:
        # about 10,100 bytes in the window's first 10 s: ~1,010 B/s against 900, ~1.2 s owed
        produce(c, "acks0", batch(1, size=10_000), acks=0)
        t0 = time.monotonic()
        assert (
            c.request(
                18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
            ).error_code
            == 0
        )
        assert 0.8 <= time.monotonic() - t0 < 5


def test_damaged_stored_quotas_are_left_out():
    """The embedded metadata's client_quotas: an entry the broker cannot take is left out and
    named (file, key path, what was found), the others kept; never a refused start."""
    from kafkatool.log import embedded_metadata

    good = {"entity": {"user": "alice"}, "configs": {"producer_byte_rate": "1024"}}
    checked = embedded_metadata.check(
        {"client_quotas": [good, {"entity": {"team": "x"}, "configs": {}}, "nope"]}, "kafkatool-cluster.json"
    )
    assert checked.data["client_quotas"] == [good]
    assert [n.split(": ")[1] for n in checked.skipped] == ["client_quotas[1]", "client_quotas[2]"]
    whole = embedded_metadata.check({"client_quotas": {"a": 1}}, "f")
    assert "client_quotas" not in whole.data and len(whole.skipped) == 1
