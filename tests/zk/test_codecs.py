"""Payload codecs against the JSON Kafka writes, for every version listed in notes/ops.md §3.

The inputs are literal payloads (key order as real brokers write them), not our
own encoder's output, so a decoder bug cannot hide behind a matching encoder bug.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkatool.zk import codecs, paths
from kafkatool.zk.codecs import ZkPayloadError, decode_path


def test_cluster_id_version_is_a_string():
    c = codecs.decode_cluster_id(b'{"version":"1","id":"Xb4SCF7uQ0i5WvYtA3DuLg"}')
    assert c.id == "Xb4SCF7uQ0i5WvYtA3DuLg" and c.version == "1"
    assert codecs.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'


def test_controller_v1_and_v2():
    v1 = codecs.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1700000000123"}')
    assert (v1.broker_id, v1.timestamp, v1.version, v1.kraft_controller_epoch, v1.is_kraft) == (
        2,
        1700000000123,
        1,
        -1,
        False,
    )
    v2 = codecs.decode_controller(
        b'{"version":2,"brokerid":3000,"timestamp":"1700000000123","kraftControllerEpoch":7}'
    )
    assert v2.version == 2 and v2.kraft_controller_epoch == 7 and v2.is_kraft
    assert json.loads(codecs.encode_controller(1, 5)) == {
        "version": 2,
        "brokerid": 1,
        "timestamp": "5",
        "kraftControllerEpoch": -1,
    }
    assert json.loads(codecs.encode_controller(1, 5, version=1)) == {
        "version": 1,
        "brokerid": 1,
        "timestamp": "5",
    }


def test_controller_epoch_is_plain_decimal():
    assert codecs.decode_controller_epoch(b"42") == 42
    with pytest.raises(ZkPayloadError):
        codecs.decode_controller_epoch(b'{"epoch":1}')


BROKER_V1 = b'{"jmx_port":-1,"timestamp":"1420000000000","host":"kafka1","version":1,"port":9092}'
BROKER_V2 = b'{"jmx_port":9999,"timestamp":"1450000000000","endpoints":["PLAINTEXT://kafka1:9092","SSL://kafka1:9093"],"host":"kafka1","version":2,"port":9092}'
BROKER_V3 = b'{"jmx_port":-1,"timestamp":"1460000000000","endpoints":["PLAINTEXT://kafka1:9092"],"rack":"dc1","host":"kafka1","version":3,"port":9092}'
BROKER_V4 = (
    b'{"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"PLAINTEXT"},'
    b'"endpoints":["CLIENT://kafka1.example.com:9094","REPLICATION://10.0.0.1:9092"],'
    b'"rack":"us-east-1a","jmx_port":-1,"host":"10.0.0.1","timestamp":"1600000000000","port":9092,"version":4}'
)
BROKER_V5 = (
    b'{"features":{"fetch":{"min_version":1,"max_version":3}},"listener_security_protocol_map":{"SSL":"SSL"},'
    b'"endpoints":["SSL://[2001:db8::1]:9093"],"jmx_port":-1,"port":-1,"host":null,"version":5,"timestamp":"1620000000000"}'
)


def test_broker_registration_every_version():
    v1 = codecs.decode_broker(BROKER_V1, 1)
    assert v1.version == 1 and [e.connection_string for e in v1.endpoints] == ["PLAINTEXT://kafka1:9092"]
    assert v1.timestamp == 1420000000000 and v1.rack is None

    v2 = codecs.decode_broker(BROKER_V2, 2)
    assert [(e.listener, e.security_protocol, e.host, e.port) for e in v2.endpoints] == [
        ("PLAINTEXT", "PLAINTEXT", "kafka1", 9092),
        ("SSL", "SSL", "kafka1", 9093),
    ]
    assert v2.jmx_port == 9999

    v3 = codecs.decode_broker(BROKER_V3, 3)
    assert v3.rack == "dc1" and v3.listener_security_protocol_map is None

    v4 = codecs.decode_broker(BROKER_V4, 4)
    assert [(e.listener, e.security_protocol) for e in v4.endpoints] == [
        ("CLIENT", "SASL_SSL"),
        ("REPLICATION", "PLAINTEXT"),
    ]
    assert v4.host == "10.0.0.1" and v4.rack == "us-east-1a"

    v5 = codecs.decode_broker(BROKER_V5, 5)
    assert v5.host is None and v5.port == -1
    assert v5.endpoints[0].host == "2001:db8::1" and v5.endpoints[0].port == 9093
    assert v5.endpoints[0].connection_string == "SSL://[2001:db8::1]:9093"
    assert v5.features == {"fetch": {"min_version": 1, "max_version": 3}}


def test_broker_unknown_keys_are_kept():
    b = codecs.decode_broker(b'{"version":6,"endpoints":["PLAINTEXT://h:1"],"jmx_port":-1,"new_key":[1]}', 9)
    assert b.version == 6 and b.extra == {"new_key": [1]}


def test_broker_encoder_per_version():
    eps = ["INTERNAL://h:9092", "EXTERNAL://e:9093"]
    pm = {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SSL"}
    v5 = json.loads(codecs.encode_broker(eps, timestamp_ms=7, rack="r", protocol_map=pm))
    # host/port come from the first endpoint whose security protocol is PLAINTEXT.
    assert (v5["host"], v5["port"], v5["version"], v5["rack"], v5["features"]) == ("h", 9092, 5, "r", {})
    assert v5["listener_security_protocol_map"] == pm and v5["timestamp"] == "7"
    v2 = json.loads(codecs.encode_broker(["SSL://h:9093"], version=2, timestamp_ms=7, rack="r"))
    assert "rack" not in v2 and "listener_security_protocol_map" not in v2
    assert (v2["host"], v2["port"]) == (None, -1)


def test_topic_assignment_v1_v2_v3():
    v1 = codecs.decode_topic(b'{"version":1,"partitions":{"1":[2,3],"0":[1,2]}}', "t")
    assert v1.partitions == {0: [1, 2], 1: [2, 3]} and not v1.reassigning and v1.topic_id is None
    v2 = codecs.decode_topic(
        b'{"version":2,"partitions":{"0":[2,3,1]},"adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}',
        "t",
    )
    assert v2.adding_replicas == {0: [3]} and v2.removing_replicas == {0: [1]} and v2.reassigning
    v3 = codecs.decode_topic(
        b'{"removing_replicas":{},"partitions":{"0":[1]},"topic_id":"3xTMLqBeS3y4hUbAMXz_Ng","adding_replicas":{},"version":3}',
        "t",
    )
    assert v3.version == 3 and v3.topic_id == "3xTMLqBeS3y4hUbAMXz_Ng"
    assert json.loads(codecs.encode_topic({0: [1]}, topic_id="x")) == {
        "version": 3,
        "partitions": {"0": [1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": "x",
    }
    assert json.loads(codecs.encode_topic({0: [1]}, version=1)) == {"version": 1, "partitions": {"0": [1]}}


def test_partition_state_with_and_without_recovery():
    s = codecs.decode_partition_state(
        b'{"controller_epoch":5,"leader":2,"version":1,"leader_epoch":9,"isr":[2,1]}'
    )
    assert (s.leader, s.leader_epoch, s.controller_epoch, s.isr, s.leader_recovery_state) == (
        2,
        9,
        5,
        [2, 1],
        0,
    )
    r = codecs.decode_partition_state(
        b'{"controller_epoch":5,"leader":2,"version":1,"leader_epoch":9,"isr":[2],"leader_recovery_state":1}'
    )
    assert r.leader_recovery_state == 1
    no_leader = codecs.decode_partition_state(
        b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":3,"isr":[4]}'
    )
    assert not no_leader.has_leader
    assert "leader_recovery_state" not in json.loads(codecs.encode_partition_state(1, 0, 1, [1]))
    assert (
        json.loads(codecs.encode_partition_state(1, 0, 1, [1], leader_recovery_state=1))[
            "leader_recovery_state"
        ]
        == 1
    )


def test_admin_nodes():
    r = codecs.decode_reassign_partitions(
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[3,1,2]}]}'
    )
    assert (
        r.partitions[0].topic == "a"
        and r.partitions[0].replicas == [3, 1, 2]
        and r.partitions[0].log_dirs is None
    )
    assert codecs.encode_reassign_partitions([("a", 0, [3, 1, 2])]) == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[3,1,2]}]}'
    )
    assert codecs.encode_reassign_partitions({("a", 1): [1]}) == (
        b'{"version":1,"partitions":[{"topic":"a","partition":1,"replicas":[1]}]}'
    )
    pairs = [(("b", 2), [1]), (codecs.TopicPartition("a", 0), [2, 3])]
    assert codecs.encode_reassign_partitions(pairs) == (
        b'{"version":1,"partitions":[{"topic":"b","partition":2,"replicas":[1]},'
        b'{"topic":"a","partition":0,"replicas":[2,3]}]}'
    )
    p = codecs.decode_partition_list(b'{"version":1,"partitions":[{"topic":"a","partition":3}]}', "x")
    assert p.partitions == [codecs.TopicPartition("a", 3)]


def test_notifications():
    isr = decode_path(
        "/isr_change_notification/isr_change_0000000012",
        b'{"version":1,"partitions":[{"topic":"t","partition":1}]}',
    )
    assert isr.kind == "isr_change" and isr.value.partitions == [codecs.TopicPartition("t", 1)]
    ev = decode_path(
        "/log_dir_event_notification/log_dir_event_0000000000", b'{"version":1,"broker":3,"event":1}'
    )
    assert ev.value.broker == 3 and ev.value.event_name == "LogDirFailure"
    # LogDirEventNotificationSequenceZNode.encode, as a failed broker writes it
    assert json.loads(codecs.encode_log_dir_event(3)) == {"version": 1, "broker": 3, "event": 1}
    assert codecs.decode_log_dir_event(codecs.encode_log_dir_event(7)).broker == 7
    v2 = codecs.decode_config_change(b'{"version":2,"entity_path":"users/alice/clients/app"}')
    assert v2.entity_path == "users/alice/clients/app"
    v1 = codecs.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"foo"}')
    assert (v1.version, v1.entity_path) == (1, "topics/foo")
    assert json.loads(codecs.encode_config_change("topics/foo", version=1)) == {
        "version": 1,
        "entity_type": "topics",
        "entity_name": "foo",
    }


def test_entity_config():
    c = codecs.decode_entity_config(b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert c.config == {"retention.ms": "1000"}
    assert codecs.decode_entity_config(b"").config == {}
    assert codecs.decode_entity_config(b'{"version":1,"config":{}}').config == {}


def test_acls_current_and_legacy_format():
    cur = codecs.decode_acls(
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
    )
    assert cur.acls == [codecs.Acl("User:alice", "Allow", "Read", "*")] and not cur.legacy_format
    # 0.9-1.x: sets of operations and hosts per entry.
    old = codecs.decode_acls(
        b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Deny","operations":["Read","Write"],"hosts":["h1","h2"]}]}'
    )
    assert old.legacy_format and len(old.acls) == 4
    assert codecs.Acl("User:bob", "Deny", "Write", "h2") in old.acls


def test_acl_change_nodes():
    lit = decode_path("/kafka-acl-changes/acl_changes_0000000003", b"Topic:my:topic")
    assert (lit.value.resource_type, lit.value.name, lit.value.pattern_type) == (
        "Topic",
        "my:topic",
        "LITERAL",
    )
    ext = decode_path(
        "/kafka-acl-extended-changes/acl_changes_0000000000",
        b'{"version":1,"resourceType":"GROUP","name":"app-","patternType":"PREFIXED"}',
    )
    assert (ext.value.resource_type, ext.value.name, ext.value.pattern_type) == ("GROUP", "app-", "PREFIXED")
    assert codecs.encode_acl_change("Topic", "t") == b"Topic:t"


def test_producer_id_block_feature_migration():
    b = codecs.decode_producer_id_block(b'{"version":1,"broker":2,"block_start":"5000","block_end":"5999"}')
    assert (b.broker, b.block_start, b.block_end) == (2, 5000, 5999)
    assert codecs.decode_producer_id_block(b"") is None
    f1 = codecs.decode_feature(
        b'{"version":1,"status":1,"features":{"feature_a":{"min_version_level":1,"max_version_level":2}}}'
    )
    assert f1.enabled and f1.features["feature_a"]["min_version_level"] == 1
    f2 = codecs.decode_feature(
        b'{"version":2,"status":0,"features":{"metadata.version":{"max_version_level":7}}}'
    )
    assert (
        f2.version == 2 and not f2.enabled and f2.features == {"metadata.version": {"max_version_level": 7}}
    )
    assert json.loads(codecs.encode_feature({"x": {"min_version_level": 1, "max_version_level": 3}})) == {
        "version": 2,
        "status": 1,
        "features": {"x": {"max_version_level": 3}},
    }
    m = codecs.decode_migration(
        b'{"version":0,"kraft_controller_id":3000,"kraft_controller_epoch":1,"kraft_metadata_offset":42,"kraft_metadata_epoch":1}'
    )
    assert (m.kraft_controller_id, m.kraft_metadata_offset) == (3000, 42)


def test_decode_path_dispatch():
    cases = {
        "/cluster/id": "cluster_id",
        "/controller": "controller",
        "/controller_epoch": "controller_epoch",
        "/brokers/ids/1": "broker",
        "/brokers/seqid": "empty",
        "/brokers/topics/t": "topic",
        "/brokers/topics/t/partitions": "empty",
        "/brokers/topics/t/partitions/0": "empty",
        "/brokers/topics/t/partitions/0/state": "partition_state",
        "/admin/delete_topics/t": "empty",
        "/admin/reassign_partitions": "reassign_partitions",
        "/admin/preferred_replica_election": "preferred_replica_election",
        "/config/topics/t": "entity_config",
        "/config/brokers/<default>": "entity_config",
        "/config/users/alice/clients/app": "entity_config",
        "/config/changes/config_change_0000000001": "config_change",
        "/kafka-acl/Topic/t": "acls",
        "/kafka-acl-extended/prefixed/Group/g": "acls",
        "/latest_producer_id_block": "producer_id_block",
        "/feature": "feature",
        "/migration": "migration",
        "/delegation_token/tokens/abc": "delegation_token",
        "/delegation_token/token_changes/token_change_0000000000": "token_change",
        "/consumers/g/offsets/t/0": "consumer_offset",
    }
    for path, kind in cases.items():
        assert paths.classify(path).kind == kind, path
    assert paths.classify("/zookeeper/quota") is None
    assert paths.classify("/config/users/alice/clients/app").params == {
        "entity_type": "users",
        "entity": "alice/clients/app",
    }
    assert decode_path("/consumers/g/offsets/t/0", b"1234").value == 1234
    assert decode_path("/delegation_token/token_changes/token_change_0000000000", b"tok").value == "tok"


def test_undecodable_payloads_report_position():
    d = decode_path("/brokers/topics/t/partitions/0/state", b'{"leader":1,"leader_epoch":')
    assert not d.ok and d.kind == "partition_state" and "invalid JSON" in d.error and "at byte" in d.error
    with pytest.raises(ZkPayloadError) as exc:
        codecs.decode_partition_state(b'{"leader":"1","leader_epoch":0,"controller_epoch":1,"isr":[1]}')
    assert "'leader'" in str(exc.value)
    bad_utf8 = decode_path("/controller", b'{"brokerid":\xff}')
    assert not bad_utf8.ok and "UTF-8" in bad_utf8.error
    assert not decode_path("/brokers/ids/1", b"").ok
    assert not decode_path("/brokers/ids/1", b"[1,2]").ok


def test_split_connect():
    assert paths.split_connect("h1:2181,h2:2181/kafka/prod") == ("h1:2181,h2:2181", "/kafka/prod")
    assert paths.split_connect("h1:2181") == ("h1:2181", "")
    assert paths.split_connect("h1:2181/") == ("h1:2181", "")
    assert paths.split_connect("h:1/a//b/") == ("h:1", "/a/b")


_ids = st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5)


@given(
    st.dictionaries(st.integers(0, 10_000), _ids, max_size=20),
    st.one_of(st.none(), st.text(min_size=1, max_size=22)),
)
def test_topic_roundtrip(parts, topic_id):
    a = codecs.decode_topic(codecs.encode_topic(parts, topic_id=topic_id), "t")
    assert a.partitions == dict(sorted(parts.items())) and a.topic_id == topic_id


@given(
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    _ids,
    st.sampled_from([0, 1]),
)
def test_partition_state_roundtrip(leader, epoch, cepoch, isr, lrs):
    s = codecs.decode_partition_state(
        codecs.encode_partition_state(leader, epoch, cepoch, isr, leader_recovery_state=lrs)
    )
    assert (s.leader, s.leader_epoch, s.controller_epoch, s.isr, s.leader_recovery_state) == (
        leader,
        epoch,
        cepoch,
        isr,
        lrs,
    )


@given(st.binary(max_size=64))
def test_decoders_never_raise_anything_but_payload_errors(data):
    for path in (
        "/brokers/ids/1",
        "/brokers/topics/t",
        "/controller",
        "/cluster/id",
        "/kafka-acl/Topic/t",
        "/feature",
    ):
        d = decode_path(path, data)
        assert d.ok or d.error


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = [
    "version", "id", "brokerid", "timestamp", "kraftControllerEpoch", "host", "port", "endpoints", "jmx_port", "rack",
    "listener_security_protocol_map", "features", "partitions", "adding_replicas", "removing_replicas", "topic_id",
    "leader", "leader_epoch", "controller_epoch", "isr", "leader_recovery_state", "config", "entity_path",
    "entity_type", "entity_name", "acls", "broker", "event", "block_start", "block_end", "status",
]  # fmt: skip
_PATHS = [
    "/cluster/id", "/controller", "/brokers/ids/1", "/brokers/topics/t", "/brokers/topics/t/partitions/0/state",
    "/admin/reassign_partitions", "/admin/preferred_replica_election", "/config/topics/t",
    "/config/changes/config_change_0000000000", "/kafka-acl/Topic/t", "/latest_producer_id_block", "/feature",
    "/migration", "/log_dir_event_notification/log_dir_event_0000000000",
    "/kafka-acl-extended-changes/acl_changes_0000000000",
]  # fmt: skip


@given(st.dictionaries(st.sampled_from(_KEYS), _json_values, max_size=8))
def test_wrongly_typed_json_is_a_payload_error_not_a_crash(obj):
    data = json.dumps(obj).encode()
    for path in _PATHS:
        d = decode_path(path, data)
        assert d.ok or d.error


def test_nested_entries_with_wrong_types():
    for data in (
        b'{"acls":[{"principal":"User:a","permissionType":"Allow","operations":5,"hosts":["*"]}]}',
        b'{"acls":[{"principal":"User:a","permissionType":"Allow"}]}',
        b'{"acls":[7]}',
    ):
        assert not decode_path("/kafka-acl/Topic/t", data).ok
    for data in (
        b'{"partitions":[{"topic":"a","partition":"0","replicas":[1]}]}',
        b'{"partitions":[{"topic":"a","partition":0,"replicas":"1"}]}',
        b'{"partitions":{}}',
    ):
        assert not decode_path("/admin/reassign_partitions", data).ok
    assert not decode_path("/brokers/ids/1", b'{"version":2,"endpoints":["nohostport"]}').ok
    assert not decode_path("/brokers/ids/1", b'{"version":2,"endpoints":["PLAINTEXT://h:port"]}').ok
