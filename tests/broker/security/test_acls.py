"""ACLs in `kafkatool serve` (issue 14): Kafka's AclAuthorizer semantics proven with real
clients over SASL_PLAINTEXT (SCRAM): a user allowed and a user denied, a super user, DENY over
ALLOW, prefixed and wildcard patterns, the ACL APIs through confluent-kafka's AdminClient, and
ACLs that survive a restart."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicCollection  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

runner = CliRunner()
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def _opts(plain: int, sasl: int) -> list[str]:
    return [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
        "num.partitions=1",
        "offsets.topic.num.partitions=2",
        "group.initial.rebalance.delay.ms=0",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:admin",
    ]


def _conf(port: int, user: str, **extra) -> dict:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }
    conf.update(extra)
    return conf


def add_users(data) -> None:
    """USERS' SCRAM credentials into a stopped broker's log dir (the users command, offline)."""
    for user, pw in USERS.items():
        res = runner.invoke(
            app,
            [
                "users",
                "alter",
                "--log-dir",
                str(data),
                "--user",
                user,
                "--add-config",
                f"SCRAM-SHA-256=[password={pw}]",
            ],
        )
        assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    data = tmp_path_factory.mktemp("acls") / "data"
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(data, port=plain, extra=_opts(plain, sasl)).start()
    b.stop()
    add_users(data)
    b = BrokerProcess(data, port=plain, extra=_opts(plain, sasl)).start()
    try:
        admin = AdminClient(_conf(sasl, "admin"))
        for f in admin.create_topics([NewTopic("orders", 2, 1), NewTopic("secret", 1, 1)]).values():
            f.result(15)
        acls = [
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "app-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        ]  # fmt: skip
        for f in admin.create_acls(acls).values():
            f.result(15)
        yield b, plain, sasl, data
    finally:
        b.stop()


def _produce(port: int, user: str, topic: str):
    p = ck.Producer(_conf(port, user, **{"linger.ms": 0, "message.timeout.ms": 8000}))
    errors = []
    p.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    return errors[0] if errors else "no delivery report"


def test_allowed_and_denied_produce(secured):
    _, _, sasl, _ = secured
    assert _produce(sasl, "alice", "orders") is None
    err = _produce(sasl, "bob", "orders")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = _produce(sasl, "alice", "secret")  # no ACL names it: nobody but the super user
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(sasl, "admin", "secret") is None


def test_consume_with_a_prefixed_group_acl(secured):
    _, _, sasl, _ = secured
    assert _produce(sasl, "alice", "orders") is None
    c = ck.Consumer(_conf(sasl, "alice", **{"group.id": "app-billing", "auto.offset.reset": "earliest"}))
    c.subscribe(["orders"])
    got, deadline = None, time.monotonic() + 30
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m
    assert got is not None
    c.commit(asynchronous=False)
    c.close()
    # a group outside the prefix: GROUP_AUTHORIZATION_FAILED
    c = ck.Consumer(_conf(sasl, "alice", **{"group.id": "other", "auto.offset.reset": "earliest"}))
    c.subscribe(["orders"])
    err, deadline = None, time.monotonic() + 20
    while err is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is not None:
            err = m.error()
    c.close()
    assert err is not None and err.code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_metadata_shows_only_what_the_user_may_describe(secured):
    _, _, sasl, _ = secured
    alice = AdminClient(_conf(sasl, "alice"))
    assert set(alice.list_topics(timeout=10).topics) == {"orders"}  # READ/WRITE imply DESCRIBE
    admin = AdminClient(_conf(sasl, "admin"))
    assert {"orders", "secret"} <= set(admin.list_topics(timeout=10).topics)
    # creating a topic needs CREATE: alice has none
    fut = alice.create_topics([NewTopic("alices", 1, 1)])["alices"]
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(15)
    assert exc.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_apis_deny_wins_and_restart(secured):
    b, plain, sasl, data = secured
    admin = AdminClient(_conf(sasl, "admin"))
    deny = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.ALL, AclPermissionType.DENY)  # fmt: skip
    admin.create_acls([deny])[deny].result(15)
    err = _produce(sasl, "alice", "orders")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    flt = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    listed = admin.describe_acls(flt).result(15)
    assert len(listed) == 3
    # a user without cluster ALTER cannot change ACLs
    alice = AdminClient(_conf(sasl, "alice"))
    with pytest.raises(ck.KafkaException):
        alice.create_acls([deny])[deny].result(15)
    # the deny goes; the ACLs survive a restart
    only_deny = AclBindingFilter(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", None, AclOperation.ALL, AclPermissionType.DENY)  # fmt: skip
    deleted = admin.delete_acls([only_deny])[only_deny].result(15)
    assert len(deleted) == 1
    b.stop()
    b2 = BrokerProcess(data, port=plain, extra=_opts(plain, sasl)).start()
    try:
        assert _produce(sasl, "alice", "orders") is None
        err = _produce(sasl, "bob", "orders")
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        b.proc, b._log = b2.proc, b2._log  # the module fixture stops what runs


def test_without_an_authorizer_the_acl_apis_say_security_disabled(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=["num.partitions=1"]).start()
    try:
        res = runner.invoke(app, ["acls", "--list", "--bootstrap-server", b.bootstrap])
        assert res.exit_code == 2 and "SECURITY_DISABLED" in res.output, res.output
    finally:
        b.stop()


def test_the_acls_command_live_and_offline(secured, tmp_path):
    b, plain, sasl, data = secured
    conf = tmp_path / "admin.properties"
    conf.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";\n'
    )
    live = ["--bootstrap-server", f"127.0.0.1:{sasl}", "--command-config", conf]
    res = runner.invoke(app, ["acls", "--add", "--allow-principal", "User:bob", "--consumer", "--topic", "orders", "--group", "bob-", "--resource-pattern-type", "PREFIXED", *live])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED)`:"
        in res.output
    )
    res = runner.invoke(
        app, ["acls", "--list", "--topic", "orders", "--principal", "User:bob", "--json", *live]
    )
    ops = sorted(json.loads(x)["operation"] for x in res.stdout.splitlines())
    assert ops == ["DESCRIBE", "READ"], res.output
    # bob may now read orders (prefixed topic pattern) but still not write it
    err = _produce(sasl, "bob", "orders")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    res = runner.invoke(app, ["acls", "--remove", "--allow-principal", "User:bob", "--topic", "orders", "--group", "bob-", "--resource-pattern-type", "PREFIXED", *live])  # fmt: skip
    assert res.exit_code == 0 and "Removing ACLs" in res.output, res.output
    # unauthenticated: refused as Kafka refuses (CLUSTER_AUTHORIZATION_FAILED for DescribeAcls)
    res = runner.invoke(app, ["acls", "--list", "--bootstrap-server", f"127.0.0.1:{plain}"])
    assert res.exit_code == 2 and "CLUSTER_AUTHORIZATION_FAILED" in res.output, res.output
    # offline on a copy of the stopped dir: the same bindings, and a change under the dir's lock
    b.stop()
    try:
        res = runner.invoke(app, ["acls", "--list", "--log-dir", data, "--json"])
        assert res.exit_code == 0, res.output
        names = {(json.loads(x)["name"], json.loads(x)["principal"]) for x in res.stdout.splitlines()}
        assert ("orders", "User:alice") in names and ("app-", "User:alice") in names
        dry = runner.invoke(app, ["acls", "--add", "--allow-principal", "User:carol", "--operation", "Read", "--topic", "secret", "--log-dir", data, "--dry-run"])  # fmt: skip
        assert dry.exit_code == 1, dry.output
        res = runner.invoke(app, ["acls", "--list", "--topic", "secret", "--log-dir", data, "--json"])
        assert res.stdout.strip() == ""  # the dry run wrote nothing
        bad = runner.invoke(app, ["acls", "--add", "--allow-principal", "User:carol", "--operation", "Read", "--cluster", "--log-dir", data])  # fmt: skip
        assert bad.exit_code == 1 and "invalid operation READ for resource type CLUSTER" in bad.output, (
            bad.output
        )
    finally:
        b2 = BrokerProcess(data, port=plain, extra=_opts(plain, sasl)).start()
        b.proc, b._log = b2.proc, b2._log


#: AclEntry.supportedOperations: what a principal allowed everything gets, bit N for operation code N
TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {
    "CREATE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
}
GROUP_OPS = {"READ", "DELETE", "DESCRIBE"}
OMITTED = -(2**31)


def _bits(names) -> int:
    return sum(1 << AclOperation[n].value for n in names)


def _ops(described) -> set[str]:
    return {op.name for op in described.authorized_operations or []}


def _describe_all(conf: dict, topic: str, group: str) -> tuple[set, set, set]:
    """(topic, cluster, group) authorized operations as confluent-kafka's AdminClient reads them."""
    admin = AdminClient(conf)
    t = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(15)
    c = admin.describe_cluster(include_authorized_operations=True).result(15)
    g = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(15)
    return _ops(t), _ops(c), _ops(g)


def _commit(conf: dict, group: str, topic: str) -> None:
    c = ck.Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        c.close()


def test_authorized_operations_without_an_authorizer(tmp_path):
    """Asked for, the authorized operations are every operation Kafka supports on the resource
    type; not asked for (or Metadata v11+ for the cluster), -2147483648."""
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.describe_topic_partitions_request import TopicRequest as DescribeTopic
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
    from tests.broker.wire import WireClient

    b = BrokerProcess(tmp_path / "data", extra=["num.partitions=1"]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(15)
        _commit({"bootstrap.servers": b.bootstrap}, "plain-g", "plain")
        assert _describe_all({"bootstrap.servers": b.bootstrap}, "plain", "plain-g") == (
            TOPIC_OPS,
            CLUSTER_OPS,
            GROUP_OPS,
        )
        md = API_BY_KEY[3].request
        with WireClient(b.bootstrap) as c:
            topics = [MetadataRequestTopic(name="plain")]
            for v, ask_cluster, ask_topic, want in (
                (8, True, True, (_bits(TOPIC_OPS), _bits(CLUSTER_OPS))),
                (10, False, False, (OMITTED, OMITTED)),
                (12, False, True, (_bits(TOPIC_OPS), OMITTED)),  # v11+ carries no cluster operations
            ):
                req = md(topics=topics, include_cluster_authorized_operations=ask_cluster, include_topic_authorized_operations=ask_topic)  # fmt: skip
                r = c.request(3, v, req)
                assert (r.topics[0].topic_authorized_operations, r.cluster_authorized_operations) == want, v
            r = c.request(
                15, 5, API_BY_KEY[15].request(groups=["plain-g"], include_authorized_operations=False)
            )
            assert r.groups[0].authorized_operations == OMITTED
            for ask, want in ((True, _bits(CLUSTER_OPS)), (False, OMITTED)):
                req = API_BY_KEY[60].request(include_cluster_authorized_operations=ask, endpoint_type=1)
                assert c.request(60, 1, req).cluster_authorized_operations == want
            # DescribeTopicPartitions always tells them (Kafka's DescribeTopicPartitionsRequestHandler)
            r = c.request(75, 0, API_BY_KEY[75].request(topics=[DescribeTopic(name="plain")]))
            assert r.topics[0].topic_authorized_operations == _bits(TOPIC_OPS)
    finally:
        b.stop()


def test_authorized_operations_follow_the_acls(secured):
    """Each operation the principal's ACLs allow on the resource (implied ones included), over the
    operations the type supports; the cluster's only to who may DESCRIBE it (0 to the others)."""
    from kafkatool.protocol.apis import API_BY_KEY
    from tests.broker.wire import WireClient

    _, plain, sasl, _ = secured
    _commit(_conf(sasl, "alice"), "app-ops", "orders")
    # alice: READ and WRITE on orders, READ on groups app-*; nothing on the cluster
    assert _describe_all(_conf(sasl, "alice"), "orders", "app-ops") == (
        {"READ", "WRITE", "DESCRIBE"},
        set(),
        {"READ", "DESCRIBE"},
    )
    assert _describe_all(_conf(sasl, "admin"), "orders", "app-ops") == (TOPIC_OPS, CLUSTER_OPS, GROUP_OPS)
    with WireClient(f"127.0.0.1:{plain}") as c:  # User:ANONYMOUS: no ACL at all
        r = c.request(3, 10, API_BY_KEY[3].request(topics=[], include_cluster_authorized_operations=True))
        assert r.cluster_authorized_operations == 0
        r = c.request(3, 10, API_BY_KEY[3].request(topics=[], include_cluster_authorized_operations=False))
        assert r.cluster_authorized_operations == OMITTED


def test_every_served_api_has_its_acl_rule():
    """A new API must say which ACL it needs (else only super users may call it)."""
    from kafkatool.broker.config import BrokerConfig
    from kafkatool.broker.security.acl_rules import RULES, UNCHECKED
    from kafkatool.broker.server import Broker

    served = set(Broker(BrokerConfig({}, {})).router.routes)
    assert served - set(RULES) - UNCHECKED == set()


def _alice():
    """alice's SASL settings for the project's own wire client."""
    from kafkatool.broker.security.client import ClientSecurity

    return ClientSecurity(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
        }
    )


def test_txn_offset_commit_fails_only_the_denied_topics(secured):
    """KafkaApis.handleTxnOffsetCommitRequest: a topic without READ gets TOPIC_AUTHORIZATION_FAILED
    on its partitions; the others are committed (the request is not failed as a whole)."""
    from kafkatool.assign.kafka_client import Connection
    from kafkatool.protocol.generated import TxnOffsetCommitRequest
    from kafkatool.protocol.generated.txn_offset_commit_request import (
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )

    _, _, sasl, _ = secured
    admin = AdminClient(_conf(sasl, "admin"))
    acl = AclBinding(
        ResourceType.TRANSACTIONAL_ID, "tx-a", ResourcePatternType.LITERAL, "User:alice", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW,
    )  # fmt: skip
    for f in admin.create_acls([acl]).values():
        f.result(15)
    sec = _alice()
    conn = Connection("127.0.0.1", sasl, timeout=10, security=sec)
    try:
        part = TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1
        )
        resp = conn.request(
            28,
            TxnOffsetCommitRequest(
                transactional_id="tx-a",
                group_id="app-txn",
                producer_id=1,
                producer_epoch=0,
                topics=[
                    TxnOffsetCommitRequestTopic(name="orders", partitions=[part]),
                    TxnOffsetCommitRequestTopic(name="secret", partitions=[part]),
                ],
            ),
            version=3,
        )
    finally:
        conn.close()
    codes = {t.name: [p.error_code for p in t.partitions] for t in resp.topics}
    assert codes["secret"] == [29]  # TOPIC_AUTHORIZATION_FAILED
    assert codes["orders"] != [29] and len(codes["orders"]) == 1


def test_every_cluster_api_has_its_acl_rule():
    """The control-plane APIs a ZooKeeper-mode broker serves need CLUSTER_ACTION."""
    from kafkatool.broker.config import BrokerConfig
    from kafkatool.broker.security.acl_rules import RULES, UNCHECKED
    from kafkatool.broker.server import Broker

    served = set(
        Broker(BrokerConfig({"zookeeper.connect": "127.0.0.1:1/x", "broker.id": "1"}, {})).router.routes
    )
    assert {4, 5, 6, 7, 27, 56} <= served
    assert served - set(RULES) - UNCHECKED == set()


def _produce_request(parts: list[tuple[str, int, bytes]], transactional_id: str | None = None):
    """A Produce request (acks=1) of one batch for each (topic, partition, records), in order."""
    from kafkatool.protocol.generated import ProduceRequest
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

    return ProduceRequest(
        transactional_id=transactional_id,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=t, partition_data=[PartitionProduceData(index=i, records=r)])
            for t, i, r in parts
        ],
    )


def test_produce_checks_the_transactional_id_only_for_transactional_records(secured):
    """RequestUtils.hasTransactionalRecords decides: plain records with a foreign transactional id
    go in; transactional records need WRITE on a transactional id (none given: refused)."""
    from kafkatool.assign.kafka_client import Connection
    from kafkatool.formats import records as R

    _, _, sasl, _ = secured
    sec = _alice()

    def produce(tid, batch) -> int:
        conn = Connection("127.0.0.1", sasl, timeout=10, security=sec)
        try:
            req = _produce_request([("orders", 0, batch)], tid)
            return conn.request(0, req, version=9).responses[0].partition_responses[0].error_code
        finally:
            conn.close()

    plain = R.build_record_batch([R.SimpleRecord(b"v", None, (), 0)])
    assert produce("not-hers", plain) == 0
    txn = R.build_record_batch(
        [R.SimpleRecord(b"v", None, (), 0)],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    assert produce(None, txn) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_describe_topic_partitions_names_each_denied_topic(secured):
    from kafkatool.assign.kafka_client import Connection
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.describe_topic_partitions_request import TopicRequest

    _, _, sasl, _ = secured
    sec = _alice()
    conn = Connection("127.0.0.1", sasl, timeout=10, security=sec)
    try:
        both = API_BY_KEY[75].request(topics=[TopicRequest(name="secret"), TopicRequest(name="orders")])
        r = conn.request(75, both, version=0)
        only = conn.request(75, API_BY_KEY[75].request(topics=[TopicRequest(name="secret")]), version=0)
    finally:
        conn.close()
    assert [(t.name, t.error_code) for t in r.topics] == [("orders", 0), ("secret", 29)]
    assert [(t.name, t.error_code) for t in only.topics] == [("secret", 29)]


def test_an_incremental_fetch_is_authorized_for_every_partition_of_its_session(secured):
    """KafkaApis authorizes the fetch context's partitions: an incremental fetch that names no
    partition still gets TOPIC_AUTHORIZATION_FAILED for a session topic its READ was taken from."""
    from kafkatool.assign.kafka_client import Connection
    from kafkatool.protocol.generated import FetchRequest
    from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic

    _, _, sasl, _ = secured
    admin = AdminClient(_conf(sasl, "admin"))
    for f in admin.create_topics([NewTopic("sess-acl", 1, 1)]).values():
        f.result(15)
    read = AclBinding(ResourceType.TOPIC, "sess-acl", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    for f in admin.create_acls([read]).values():
        f.result(15)

    def fetch(conn, session_id: int, epoch: int, names: bool):
        part = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        topics = [FetchTopic(topic="sess-acl", partitions=[part])] if names else []
        req = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            session_id=session_id, session_epoch=epoch, topics=topics, forgotten_topics_data=[], rack_id="",
        )  # fmt: skip
        return conn.request(1, req, version=12)

    conn = Connection("127.0.0.1", sasl, timeout=10, security=_alice())
    try:
        r = fetch(conn, 0, 0, True)
        assert r.session_id > 0 and r.responses[0].partitions[0].error_code == 0
        for f in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "sess-acl", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)]).values():  # fmt: skip
            f.result(15)
        r2 = fetch(conn, r.session_id, 1, False)
        assert r2.error_code == 0
        assert [(t.topic, [p.error_code for p in t.partitions]) for t in r2.responses] == [("sess-acl", [29])]
    finally:
        conn.close()


def test_unknown_codec_bits_below_v7_answer_every_partition_even_those_not_writable(secured):
    """KafkaApis.handleProduceRequest (3.7.0) authorizes every topic first, then runs
    ProduceRequest.validateRecords on the authorized partitions the metadata knows: below v7 an
    authorized partition's compression bits that name no codec throw IllegalArgumentException out
    of the handler, and handleError answers UNKNOWN_SERVER_ERROR for every partition of the
    request, the topic alice may not write included; the same bits in a topic she may not write
    are never looked at (TOPIC_AUTHORIZATION_FAILED, the rest appended)."""
    from kafkatool.assign.kafka_client import Connection
    from kafkatool.formats import records as R
    from kafkatool.formats.crc import crc32c
    from kafkatool.protocol.generated import ListOffsetsRequest
    from kafkatool.protocol.generated.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

    _, _, sasl, _ = secured
    good = R.build_record_batch([R.SimpleRecord(b"v", b"k", (), 0)])
    bad = bytearray(good)
    bad[21:23] = (6).to_bytes(2, "big")  # codec bits 6: no codec
    bad[17:21] = crc32c(bytes(bad[21:])).to_bytes(4, "big")
    conn = Connection("127.0.0.1", sasl, timeout=10, security=_alice())

    def end_offset() -> int:
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name="orders", partitions=[ListOffsetsPartition(partition_index=1, timestamp=-1)]
                )
            ],
        )
        return conn.request(2, req, version=1).topics[0].partitions[0].offset

    def produce(orders: bytes, secret: bytes, version: int) -> list:
        req = _produce_request([("secret", 0, secret), ("orders", 1, orders)])
        resp = conn.request(0, req, version=version)
        return sorted((t.name, p.index, p.error_code) for t in resp.responses for p in t.partition_responses)

    try:
        before = end_offset()
        for version in (3, 5, 6):
            assert produce(bytes(bad), good, version) == [("orders", 1, -1), ("secret", 0, -1)]
        assert end_offset() == before
        assert produce(good, bytes(bad), 5) == [("orders", 1, 0), ("secret", 0, 29)]
        assert end_offset() == before + 1
        # from v7 validateRecords reads no codec: the log answers for the partition alone
        assert produce(bytes(bad), good, 7) == [("orders", 1, -1), ("secret", 0, 29)]
    finally:
        conn.close()


def test_client_quota_apis_refused_as_kafkas_get_error_response(secured):
    """KafkaApis: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, AlterClientQuotas
    ALTER_CONFIGS; refused, each answers its request's getErrorResponse (broker/error_response):
    DescribeClientQuotas the error, no entries and no message (ApiError.fromThrowable leaves a
    generic message out), AlterClientQuotas each entry with Errors.message().  The ACL rules had
    builders of their own until session 26 (DescribeClientQuotas sent the message)."""
    from kafkatool.assign.kafka_client import Connection
    from kafkatool.protocol.generated import AlterClientQuotasRequest, DescribeClientQuotasRequest
    from kafkatool.protocol.generated import alter_client_quotas_request as AQ

    _, _, sasl, _ = secured
    conn = Connection("127.0.0.1", sasl, timeout=10, security=_alice())
    try:
        d = conn.request(48, DescribeClientQuotasRequest(components=[], strict=False), version=1)
        entity = [AQ.EntityData(entity_type="user", entity_name="bob")]
        ops = [AQ.OpData(key="producer_byte_rate", value=1024.0, remove=False)]
        a = conn.request(
            49,
            AlterClientQuotasRequest(entries=[AQ.EntryData(entity=entity, ops=ops)], validate_only=True),
            version=1,
        )
    finally:
        conn.close()
    assert (d.error_code, d.error_message, d.entries) == (31, None, None)
    assert [
        (e.error_code, e.error_message, [(x.entity_type, x.entity_name) for x in e.entity]) for e in a.entries
    ] == [(31, "Cluster authorization failed.", [("user", "bob")])]


def test_a_topic_id_before_metadata_v12_is_refused_before_authorization(secured):
    """KafkaApis.handleTopicMetadataRequest refuses a topic id (or a null name) below v12 before it
    authorizes anything: every topic INVALID_REQUEST, a topic the user may not describe too (the
    ACL rule took the denied ones out first and answered them TOPIC_AUTHORIZATION_FAILED)."""
    import uuid

    from kafkatool.assign.kafka_client import Connection
    from kafkatool.protocol.generated import MetadataRequest
    from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

    _, _, sasl, _ = secured
    some = uuid.UUID(int=7)
    topics = [
        MetadataRequestTopic(name="secret", topic_id=some),
        MetadataRequestTopic(name="orders", topic_id=some),
    ]
    conn = Connection("127.0.0.1", sasl, timeout=10, security=_alice())
    try:
        r = conn.request(3, MetadataRequest(topics=topics, allow_auto_topic_creation=False), version=11)
    finally:
        conn.close()
    assert [(t.name, t.error_code) for t in r.topics] == [("secret", 42), ("orders", 42)]
