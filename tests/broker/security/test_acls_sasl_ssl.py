"""ACLs over SASL_SSL (SCRAM-SHA-512) with confluent-kafka (issue 14): transactional ids
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), admin APIs (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED,
DESCRIBE_CONFIGS implied by ALTER_CONFIGS), an ACL change seen by a consumer that stays connected
(no restart), and ``allow.everyone.if.no.acl.found`` on a PLAINTEXT listener."""

from __future__ import annotations

import time
import uuid

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.security.certs import CA

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

runner = CliRunner()
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
E = ck.KafkaError


def _allow(rtype, name, principal, op, pattern=ResourcePatternType.LITERAL, perm=AclPermissionType.ALLOW):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


@pytest.fixture(scope="module")
def tls_secured(tmp_path_factory):
    d = tmp_path_factory.mktemp("acls-ssl")
    ca = CA(d / "pki")
    srv = ca.issue("broker")
    data = d / "data"
    plain, sasl_ssl = free_port(), free_port()
    opts = [
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={srv.p12_path}",
        f"ssl.keystore.password={srv.p12_password}",
        "num.partitions=1",
        "offsets.topic.num.partitions=2",
        "transaction.state.log.num.partitions=2",
        "group.initial.rebalance.delay.ms=0",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:admin",
    ]
    BrokerProcess(data, port=plain, extra=opts).start().stop()  # lays out the log dir
    for user, pw in USERS.items():
        res = runner.invoke(
            app,
            ["users", "alter", "--log-dir", str(data), "--user", user, "--add-config", f"SCRAM-SHA-512=[password={pw}]"],
        )  # fmt: skip
        assert res.exit_code == 0, res.output
    b = BrokerProcess(data, port=plain, extra=opts).start()
    b.sasl_ssl, b.ca = f"127.0.0.1:{sasl_ssl}", ca
    try:
        admin = AdminClient(_conf(b, "admin"))
        for f in admin.create_topics([NewTopic("ledger", 1, 1)]).values():
            f.result(15)
        T, G, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
        P = ResourcePatternType.PREFIXED
        acls = [
            _allow(T, "ledger", "User:alice", AclOperation.WRITE),
            _allow(T, "ledger", "User:alice", AclOperation.READ),
            _allow(T, "ledger", "User:alice", AclOperation.ALTER_CONFIGS),
            _allow(G, "app-", "User:alice", AclOperation.READ, P),
            _allow(X, "tx-alice-", "User:alice", AclOperation.WRITE, P),
            _allow(T, "ledger", "User:bob", AclOperation.WRITE),
            # carol's WRITE on ledger is taken back by a DENY prefix that dominates it
            _allow(T, "ledger", "User:carol", AclOperation.WRITE),
            _allow(T, "led", "User:carol", AclOperation.WRITE, P, AclPermissionType.DENY),
        ]
        for f in admin.create_acls(acls).values():
            f.result(15)
        yield b
    finally:
        b.stop()


def _conf(b, user: str, **extra) -> dict:
    conf = {
        "bootstrap.servers": b.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(b.ca.path),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }
    conf.update(extra)
    return conf


def _code(fut, timeout=15):
    try:
        fut.result(timeout)
    except ck.KafkaException as exc:
        return exc.args[0].code()
    return None


def test_transactional_id_needs_write_on_it(tls_secured):
    b = tls_secured
    p = ck.Producer(_conf(b, "alice", **{"transactional.id": f"tx-alice-{uuid.uuid4().hex[:6]}"}))
    p.init_transactions(20)
    p.begin_transaction()
    p.produce("ledger", b"in a transaction")
    p.commit_transaction(20)
    # bob may write the topic but owns no transactional id; alice none outside her prefix
    for user, tid in (("bob", "tx-bob"), ("alice", "tx-other")):
        p = ck.Producer(_conf(b, user, **{"transactional.id": tid}))
        with pytest.raises(ck.KafkaException) as exc:
            p.init_transactions(20)
        assert exc.value.args[0].code() == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, (user, exc.value)


def test_admin_apis_denied_and_allowed(tls_secured, tmp_path):
    b = tls_secured
    alice, bob = AdminClient(_conf(b, "alice")), AdminClient(_conf(b, "bob"))
    topic = ConfigResource(ConfigResource.Type.TOPIC, "ledger")
    node = next(iter(alice.list_topics(timeout=10).brokers))
    broker = ConfigResource(ConfigResource.Type.BROKER, str(node))
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS; WRITE does not
    assert _code(alice.describe_configs([topic])[topic]) is None
    assert _code(bob.describe_configs([topic])[topic]) == E.TOPIC_AUTHORIZATION_FAILED
    # broker configs are the cluster's
    assert _code(alice.describe_configs([broker])[broker]) == E.CLUSTER_AUTHORIZATION_FAILED
    # deleting needs DELETE on the topic, creating CREATE, deleting a group DELETE on it
    assert _code(bob.delete_topics(["ledger"])["ledger"]) == E.TOPIC_AUTHORIZATION_FAILED
    assert (
        _code(alice.create_topics([NewTopic("alice-new", 1, 1)])["alice-new"]) == E.TOPIC_AUTHORIZATION_FAILED
    )
    assert _code(alice.delete_consumer_groups(["app-none"])["app-none"]) == E.GROUP_AUTHORIZATION_FAILED
    # the ACL APIs need the cluster's ALTER / DESCRIBE
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    # (librdkafka 2.16 drops DescribeAcls' top-level error and hands back an empty list, so the
    # broker's answer is read through kafkatool's own client)
    assert bob.describe_acls(flt).result(15) == []
    conf = tmp_path / "bob.properties"
    conf.write_text(
        f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.truststore.type=PEM\nssl.truststore.location={b.ca.path}\n"
        f"sasl.username=bob\nsasl.password={USERS['bob']}\n"
    )
    res = runner.invoke(app, ["acls", "--list", "--bootstrap-server", b.sasl_ssl, "--command-config", conf])
    assert res.exit_code == 2 and "CLUSTER_AUTHORIZATION_FAILED" in res.output, res.output
    acl = _allow(ResourceType.TOPIC, "ledger", "User:bob", AclOperation.READ)
    assert _code(bob.create_acls([acl])[acl]) == E.CLUSTER_AUTHORIZATION_FAILED
    admin = AdminClient(_conf(b, "admin"))
    assert len(admin.describe_acls(flt).result(15)) == 8


def _poll_until(c, want, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if want(m):
            return m
    return None


def test_an_acl_change_reaches_a_connected_consumer(tls_secured):
    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))
    p = ck.Producer(_conf(b, "admin", **{"linger.ms": 0}))
    p.produce("ledger", b"first")
    assert p.flush(15) == 0
    c = ck.Consumer(
        _conf(
            b, "alice", **{"group.id": "app-live", "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100}
        )
    )
    c.subscribe(["ledger"])
    try:
        assert _poll_until(c, lambda m: m.error() is None) is not None
        deny = _allow(
            ResourceType.TOPIC, "ledger", "User:alice", AclOperation.READ, perm=AclPermissionType.DENY
        )
        admin.create_acls([deny])[deny].result(15)
        # a fetch already waiting was authorized when it arrived (as Kafka's DelayedFetch): let it end
        time.sleep(1.0)
        p.produce("ledger", b"hidden")
        assert p.flush(15) == 0
        m = _poll_until(c, lambda m: m.error() is not None or m.value() == b"hidden")
        assert m is not None and m.error() is not None, m and m.value()
        assert m.error().code() == E.TOPIC_AUTHORIZATION_FAILED
        # the DENY goes: the same consumer reads on, no restart
        flt = AclBindingFilter(ResourceType.TOPIC, "ledger", ResourcePatternType.LITERAL, "User:alice", None, AclOperation.READ, AclPermissionType.DENY)  # fmt: skip
        assert len(admin.delete_acls([flt])[flt].result(15)) == 1
        m = _poll_until(c, lambda m: m.error() is None and m.value() == b"hidden")
        assert m is not None
    finally:
        c.close()


def test_allow_everyone_if_no_acl_found(tmp_path):
    """No ACL names a resource: everyone may use it; the first ACL naming it closes it to others."""
    b = BrokerProcess(
        tmp_path / "data",
        extra=[
            "num.partitions=1",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found=true",
        ],
    ).start()
    try:

        def produce(topic):
            p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "message.timeout.ms": 8000})
            out = []
            p.produce(topic, b"x", on_delivery=lambda err, msg: out.append(err))
            p.flush(10)
            return out[0] if out else "no delivery report"

        assert produce("open") is None  # auto-created: no ACL names the cluster or the topic
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # User:ANONYMOUS
        acl = _allow(ResourceType.TOPIC, "open", "User:alice", AclOperation.WRITE)
        admin.create_acls([acl])[acl].result(15)
        err = produce("open")
        assert err is not None and err.code() == E.TOPIC_AUTHORIZATION_FAILED
        assert produce("still-open") is None
        assert "open" not in admin.list_topics(timeout=10).topics  # no DESCRIBE for ANONYMOUS now
    finally:
        b.stop()


def test_idempotent_producer_needs_write_on_some_topic(tls_secured):
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on some
    topic by AclAuthorizer.authorizeByResourceType (a DENY prefix dominating the ALLOW cancels it)."""
    b = tls_secured
    p = ck.Producer(_conf(b, "bob", **{"enable.idempotence": True, "message.timeout.ms": 8000}))
    out = []
    p.produce("ledger", b"once", on_delivery=lambda err, msg: out.append(err))
    p.flush(15)
    assert out == [None]
    # carol: librdkafka raises the fatal error InitProducerId answered
    p = ck.Producer(_conf(b, "carol", **{"enable.idempotence": True, "message.timeout.ms": 8000}))
    p.produce("ledger", b"never")
    with pytest.raises(ck.KafkaException) as exc:
        p.flush(15)
    err = exc.value.args[0]
    assert err.fatal() and err.code() == E.CLUSTER_AUTHORIZATION_FAILED, err


def test_offset_fetch_per_group_and_per_topic(tls_secured):
    """OffsetFetch as KafkaApis answers it: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED, per
    group from v8), and a named partition of a topic the principal may not DESCRIBE gets
    TOPIC_AUTHORIZATION_FAILED (Kafka's UNAUTHORIZED_PARTITION) while the others are answered."""
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.offset_fetch_request import (
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopic,
        OffsetFetchRequestTopics,
    )
    from tests.broker.wire import WireClient

    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))
    G, T = ResourceType.GROUP, ResourceType.TOPIC
    acls = [
        _allow(G, "anon-g", "User:ANONYMOUS", AclOperation.DESCRIBE),
        _allow(T, "ledger", "User:ANONYMOUS", AclOperation.DESCRIBE),
    ]
    for f in admin.create_acls(acls).values():
        f.result(15)
    req = API_BY_KEY[9].request
    try:
        with WireClient(b.bootstrap) as c:  # the PLAINTEXT listener: User:ANONYMOUS
            named = [OffsetFetchRequestTopic(name="ledger", partition_indexes=[0]), OffsetFetchRequestTopic(name="hidden", partition_indexes=[0, 1])]  # fmt: skip
            r = c.request(9, 7, req(group_id="anon-g", topics=named))
            assert r.error_code == 0
            got = {
                (t.name, p.partition_index): (p.error_code, p.committed_offset)
                for t in r.topics
                for p in t.partitions
            }
            assert got == {("ledger", 0): (0, -1), ("hidden", 0): (29, -1), ("hidden", 1): (29, -1)}, got
            r = c.request(9, 7, req(group_id="other-g", topics=named))
            assert (r.error_code, r.topics) == (30, [])
            r = c.request(9, 1, req(group_id="other-g", topics=named))  # before v2: every partition
            assert {p.error_code for t in r.topics for p in t.partitions} == {30} and len(r.topics) == 2
            topics = [OffsetFetchRequestTopics(name="hidden", partition_indexes=[0])]
            r = c.request(9, 8, req(groups=[OffsetFetchRequestGroup(group_id=g, topics=topics) for g in ("anon-g", "other-g")]))  # fmt: skip
            by_group = {g.group_id: g for g in r.groups}
            assert by_group["other-g"].error_code == 30 and by_group["other-g"].topics == []
            assert by_group["anon-g"].error_code == 0
            assert [(t.name, [p.error_code for p in t.partitions]) for t in by_group["anon-g"].topics] == [
                ("hidden", [29])
            ]
    finally:  # the module's other tests count the ACLs
        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:ANONYMOUS", None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        admin.delete_acls([flt])[flt].result(15)


def test_offset_for_leader_epoch_per_topic(tls_secured):
    """KIP-320's truncation check by a consumer: DESCRIBE per topic, denied partitions answered
    TOPIC_AUTHORIZATION_FAILED beside the served ones (a follower would need CLUSTER_ACTION)."""
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.offset_for_leader_epoch_request import (
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )
    from tests.broker.wire import WireClient

    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))
    acl = _allow(ResourceType.TOPIC, "ledger", "User:ANONYMOUS", AclOperation.DESCRIBE)
    admin.create_acls([acl])[acl].result(15)
    try:
        with WireClient(b.bootstrap) as c:
            topics = [
                OffsetForLeaderTopic(
                    topic=n, partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=0)]
                )
                for n in ("ledger", "hidden")
            ]
            r = c.request(23, 4, API_BY_KEY[23].request(replica_id=-1, topics=topics))
            got = {t.topic: [(p.partition, p.error_code) for p in t.partitions] for t in r.topics}
            assert got == {"ledger": [(0, 0)], "hidden": [(0, 29)]}, got
        # CLUSTER_ACTION (what a follower holds) serves every partition, no topic ACL needed
        ca = _allow(ResourceType.BROKER, "kafka-cluster", "User:ANONYMOUS", AclOperation.CLUSTER_ACTION)
        admin.create_acls([ca])[ca].result(15)
        with WireClient(b.bootstrap) as c:
            r = c.request(23, 4, API_BY_KEY[23].request(replica_id=-1, topics=topics))
            got = {t.topic: [(p.partition, p.error_code) for p in t.partitions] for t in r.topics}
            assert got == {"ledger": [(0, 0)], "hidden": [(0, 3)]}, got  # hidden: UNKNOWN_TOPIC_OR_PARTITION
    finally:
        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:ANONYMOUS", None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        admin.delete_acls([flt])[flt].result(15)


def test_delete_records_per_topic(tls_secured):
    """DeleteRecords: DELETE per topic; a denied topic's partitions get TOPIC_AUTHORIZATION_FAILED
    and low watermark -1 beside the served ones."""
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.delete_records_request import DeleteRecordsPartition, DeleteRecordsTopic
    from tests.broker.wire import WireClient

    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))
    acl = _allow(ResourceType.TOPIC, "ledger", "User:ANONYMOUS", AclOperation.DELETE)
    admin.create_acls([acl])[acl].result(15)
    try:
        with WireClient(b.bootstrap) as c:
            topics = [
                DeleteRecordsTopic(name=n, partitions=[DeleteRecordsPartition(partition_index=0, offset=0)])
                for n in ("ledger", "hidden")
            ]
            r = c.request(21, 2, API_BY_KEY[21].request(topics=topics, timeout_ms=5000))
            got = {t.name: [(p.error_code, p.low_watermark) for p in t.partitions] for t in r.topics}
            assert got == {"ledger": [(0, 0)], "hidden": [(29, -1)]}, got
    finally:
        flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:ANONYMOUS", None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
        admin.delete_acls([flt])[flt].result(15)


def _drop_anonymous_acls(admin) -> None:
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:ANONYMOUS", None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    admin.delete_acls([flt])[flt].result(15)


def test_describe_producers_per_topic(tls_secured):
    """DescribeProducers: READ per topic; a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED
    (with Kafka's message) beside the served ones, in the request's order; an invalid name is
    INVALID_TOPIC_EXCEPTION whatever the ACLs (Kafka validates the name first)."""
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.describe_producers_request import TopicRequest
    from tests.broker.wire import WireClient

    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))
    acl = _allow(ResourceType.TOPIC, "ledger", "User:ANONYMOUS", AclOperation.READ)
    admin.create_acls([acl])[acl].result(15)
    try:
        with WireClient(b.bootstrap) as c:
            topics = [
                TopicRequest(name="hidden", partition_indexes=[0, 1]),
                TopicRequest(name="ledger", partition_indexes=[0]),
                TopicRequest(name="bad name!", partition_indexes=[0]),
            ]
            r = c.request(61, 0, API_BY_KEY[61].request(topics=topics))
            got = [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics]
            assert got == [
                ("hidden", [(0, 29), (1, 29)]),
                ("ledger", [(0, 0)]),
                ("bad name!", [(0, 17)]),
            ], got
            assert r.topics[0].partitions[0].error_message == "Topic authorization failed."
            # checkValidTopic's ApiError: InvalidTopicException's message as Topic.validate words it
            assert r.topics[2].partitions[0].error_message == (
                "Topic name is invalid: 'bad name!' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'"
            )
    finally:
        _drop_anonymous_acls(admin)


def test_offset_delete_per_topic(tls_secured):
    """OffsetDelete: DELETE on the group (else GROUP_AUTHORIZATION_FAILED at the top level, no
    topics), then READ per topic: a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED
    while the allowed ones are deleted; the coordinator's top-level error is the whole answer."""
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.offset_delete_request import (
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )
    from tests.broker.wire import WireClient

    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))
    c = ck.Consumer(_conf(b, "admin", **{"group.id": "anon-od", "enable.auto.commit": False}))
    c.commit(offsets=[ck.TopicPartition("ledger", 0, 0)], asynchronous=False)
    c.close()
    acls = [
        _allow(
            ResourceType.GROUP, "anon-", "User:ANONYMOUS", AclOperation.DELETE, ResourcePatternType.PREFIXED
        ),
        _allow(ResourceType.TOPIC, "ledger", "User:ANONYMOUS", AclOperation.READ),
    ]
    for f in admin.create_acls(acls).values():
        f.result(15)
    req = API_BY_KEY[47].request

    def topics(**parts):
        return [
            OffsetDeleteRequestTopic(
                name=n, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for n, ps in parts.items()
        ]

    try:
        with WireClient(b.bootstrap) as w:
            r = w.request(47, 0, req(group_id="anon-od", topics=topics(ledger=[0], hidden=[0, 1])))
            got = {t.name: [(p.partition_index, p.error_code) for p in t.partitions] for t in r.topics}
            assert r.error_code == 0 and got == {"ledger": [(0, 0)], "hidden": [(0, 29), (1, 29)]}, (r, got)
            r = w.request(47, 0, req(group_id="other-od", topics=topics(ledger=[0])))
            assert (r.error_code, r.topics) == (30, [])
            r = w.request(47, 0, req(group_id="anon-missing", topics=topics(hidden=[0])))
            assert (r.error_code, r.topics) == (69, [])  # GROUP_ID_NOT_FOUND
        # the allowed partition's offset is gone
        listed = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("anon-od")])
        left = listed["anon-od"].result(15).topic_partitions
        assert [(tp.topic, tp.partition) for tp in left if tp.offset >= 0] == []
    finally:
        _drop_anonymous_acls(admin)


def test_denied_acks0_produce_closes_the_connection(tls_secured):
    """A Produce with acks=0 has no answer, so a denied one closes the connection as Kafka closes it
    for any failed acks=0 produce: a topic without WRITE, a transactional id without WRITE, or one
    denied topic beside an allowed one (whose records are appended first)."""
    from kafkatool.formats import records as R
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
    from tests.broker.wire import WireClient

    b = tls_secured
    admin = AdminClient(_conf(b, "admin"))

    def produce0(topics, transactional_id=None):
        batch = R.build_record_batch(
            [R.SimpleRecord(b"v", b"k", [], int(time.time() * 1000))],
            producer_id=7 if transactional_id else -1,
            producer_epoch=0 if transactional_id else -1,
            base_sequence=0 if transactional_id else -1,
            is_transactional=transactional_id is not None,
        )
        data = [TopicProduceData(name=t, partition_data=[PartitionProduceData(index=0, records=batch)]) for t in topics]  # fmt: skip
        req = API_BY_KEY[0].request(
            transactional_id=transactional_id, acks=0, timeout_ms=5000, topic_data=data
        )
        c = WireClient(b.bootstrap)
        c.send(0, 9, req)
        return c

    def end_offset():
        cons = ck.Consumer(_conf(b, "admin", **{"group.id": "acks0-check"}))
        try:
            return cons.get_watermark_offsets(ck.TopicPartition("ledger", 0), timeout=10)[1]
        finally:
            cons.close()

    try:
        for topics, tid in ((["ledger"], None), (["ledger"], "tx-anon")):
            with produce0(topics, tid) as c:
                assert c.closed_by_peer(5), (topics, tid)
        acl = _allow(ResourceType.TOPIC, "ledger", "User:ANONYMOUS", AclOperation.WRITE)
        admin.create_acls([acl])[acl].result(15)
        before = end_offset()
        with produce0(["ledger"]) as c:  # allowed: no answer, the connection stays
            assert not c.closed_by_peer(1)
            assert c.api_versions().error_code == 0
        with produce0(["ledger", "hidden"]) as c:
            assert c.closed_by_peer(5)
        assert end_offset() == before + 2
    finally:
        _drop_anonymous_acls(admin)
