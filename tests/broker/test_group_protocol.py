"""Group APIs over raw sockets: version-specific request and response shapes."""

from __future__ import annotations

import threading
import time

import pytest

from kafkatool.broker.group.hashing import partition_for
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode as E
from kafkatool.protocol.generated.join_group_request import JoinGroupRequestProtocol
from kafkatool.protocol.generated.leave_group_request import MemberIdentity
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from kafkatool.protocol.generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkatool.protocol.generated.offset_delete_request import (
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kafkatool.protocol.generated.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kafkatool.protocol.generated.sync_group_request import SyncGroupRequestAssignment
from tests.broker.conftest import BrokerProcess
from tests.broker.test_protocol import create_topic
from tests.broker.wire import WireClient

OFFSETS_PARTITIONS = 4


@pytest.fixture(scope="module")
def b(tmp_path_factory):
    broker = BrokerProcess(
        tmp_path_factory.mktemp("gproto") / "data",
        extra=[
            "group.initial.rebalance.delay.ms=0",
            "group.min.session.timeout.ms=100",
            f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
        ],
    ).start()
    yield broker
    broker.stop()


@pytest.fixture
def c(b):
    with WireClient(b.bootstrap, timeout=10) as client:
        yield client


def join(c, version, group, member_id="", instance=None, protocols=(("range", b"\x00\x00"),)):
    req = G.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=5000,
        rebalance_timeout_ms=5000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
    )
    return c.request(11, version, req)


def commit(c, version, group, offsets, generation=-1, member_id=""):
    req = G.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                name=t,
                partitions=[
                    OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=f"m{o}"
                    )
                ],
            )
            for (t, p), o in offsets.items()
        ],
    )
    return c.request(8, version, req)


def test_find_coordinator_all_versions_and_internal_topic(c, b):
    for v in range(0, 4):
        r = c.request(10, v, G.FindCoordinatorRequest(key="grp", key_type=0))
        assert r.error_code == 0 and r.node_id == 1 and r.port == b.port and r.host == "127.0.0.1"
    r = c.request(10, 4, G.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", "c"]))
    assert [(x.key, x.error_code, x.port) for x in r.coordinators] == [
        ("a", 0, b.port),
        ("b", 0, b.port),
        ("c", 0, b.port),
    ]
    r = c.request(10, 4, G.FindCoordinatorRequest(key_type=7, coordinator_keys=["a"]))
    assert r.coordinators[0].error_code == E.INVALID_REQUEST
    # Errors.message(), as FindCoordinatorResponse.prepareErrorResponse sets it (until session 26
    # the error's name made into a sentence: "Invalid request")
    assert r.coordinators[0].error_message.startswith(
        "This most likely occurs because of a request being malformed"
    )
    md = c.request(3, 9, G.MetadataRequest(topics=[MetadataRequestTopic(name="__consumer_offsets")]))
    t = md.topics[0]
    assert t.error_code == 0 and t.is_internal and len(t.partitions) == OFFSETS_PARTITIONS
    cfg = c.request(
        32,
        1,
        G.DescribeConfigsRequest(
            resources=[
                G.describe_configs_request.DescribeConfigsResource(
                    resource_type=2, resource_name="__consumer_offsets", configuration_keys=["cleanup.policy"]
                )
            ]
        ),
    )
    assert cfg.results[0].configs[0].value == "compact"


def test_join_v0_admits_at_once_and_v4_requires_member_id(c):
    r = join(c, 0, "g-v0")
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert r.protocol_name == "range" and len(r.members) == 1
    r = join(c, 4, "g-v4")
    assert (
        r.error_code == E.MEMBER_ID_REQUIRED
        and r.member_id.startswith("wire-test-")
        and r.generation_id == -1
    )
    r2 = join(c, 4, "g-v4", r.member_id)
    assert r2.error_code == 0 and r2.member_id == r.member_id
    r7 = join(c, 7, "g-v7", instance="static-1")
    assert r7.error_code == 0 and r7.protocol_type == "consumer" and r7.member_id.startswith("static-1-")
    assert r7.members[0].group_instance_id == "static-1"
    # SyncGroup v5 checks the protocol type and name
    bad = c.request(
        14,
        5,
        G.SyncGroupRequest(
            group_id="g-v7",
            generation_id=1,
            member_id=r7.member_id,
            group_instance_id="static-1",
            protocol_type="connect",
            protocol_name="range",
            assignments=[],
        ),
    )
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    s = c.request(
        14,
        5,
        G.SyncGroupRequest(
            group_id="g-v7",
            generation_id=1,
            member_id=r7.member_id,
            group_instance_id="static-1",
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member_id=r7.member_id, assignment=b"\x00\x01")],
        ),
    )
    assert s.error_code == 0 and s.assignment == b"\x00\x01" and s.protocol_name == "range"
    hb = c.request(
        12,
        3,
        G.HeartbeatRequest(group_id="g-v7", generation_id=1, member_id="stale", group_instance_id="static-1"),
    )
    assert hb.error_code == E.FENCED_INSTANCE_ID
    d = c.request(15, 5, G.DescribeGroupsRequest(groups=["g-v7", "nope"], include_authorized_operations=True))
    g, nope = d.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert g.members[0].group_instance_id == "static-1" and g.members[0].member_assignment == b"\x00\x01"
    assert g.members[0].client_host == "/127.0.0.1" and g.members[0].client_id == "wire-test"
    assert g.authorized_operations != -(2**31)
    assert (nope.error_code, nope.group_state, nope.members) == (0, "Dead", [])
    # batched LeaveGroup (v3+) by instance id
    lv = c.request(
        13,
        4,
        G.LeaveGroupRequest(
            group_id="g-v7",
            members=[
                MemberIdentity(member_id="", group_instance_id="static-1"),
                MemberIdentity(member_id="x"),
            ],
        ),
    )
    assert lv.error_code == 0 and [m.error_code for m in lv.members] == [0, E.UNKNOWN_MEMBER_ID]
    lv0 = c.request(13, 0, G.LeaveGroupRequest(group_id="g-v0", member_id="unknown"))
    assert lv0.error_code == E.UNKNOWN_MEMBER_ID


def test_parked_join_answers_in_order_on_one_connection(b):
    """Two members on separate connections: the first JoinGroup is parked until the second arrives."""
    with WireClient(b.bootstrap) as c1, WireClient(b.bootstrap) as c2:
        a = join(c1, 5, "parked", "", None)
        a = join(c1, 5, "parked", a.member_id)
        assert a.generation_id == 1
        got = {}

        def second():
            r = join(c2, 5, "parked")
            got["b"] = join(c2, 5, "parked", r.member_id)

        t = threading.Thread(target=second)
        t.start()
        # A learns of the rebalance from its heartbeat, then rejoins; both complete generation 2.
        # Bounded in time, not in count: a loaded machine runs the other thread's JoinGroup
        # after 100 back-to-back heartbeats of ~1 ms each (the broker had not received it)
        deadline = time.monotonic() + 20
        while True:
            hb = c1.request(
                12, 3, G.HeartbeatRequest(group_id="parked", generation_id=1, member_id=a.member_id)
            )
            if hb.error_code != E.NONE or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert hb.error_code == E.REBALANCE_IN_PROGRESS
        a2 = join(c1, 5, "parked", a.member_id)
        t.join(10)
        assert a2.generation_id == got["b"].generation_id == 2
        assert len(a2.members) == 2 and got["b"].members == []


def test_offset_commit_and_fetch_versions(c):
    create_topic(c, "otopic", 3)
    tps = {("otopic", 0): 10, ("otopic", 1): 11}
    for v in (0, 1, 2, 5, 8):
        r = commit(c, v, f"simple-{v}", tps)
        assert [p.error_code for t in r.topics for p in t.partitions] == [0, 0], v
    r = commit(c, 8, "simple-x", {("otopic", 9): 1, ("missing", 0): 1})
    assert [p.error_code for t in r.topics for p in t.partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION] * 2
    # v1: an unknown group with a real generation is refused
    r = commit(c, 2, "never-joined", tps, generation=3, member_id="m")
    assert {p.error_code for t in r.topics for p in t.partitions} == {E.ILLEGAL_GENERATION}
    for v in (1, 3, 5, 7):
        f = c.request(
            9,
            v,
            G.OffsetFetchRequest(
                group_id="simple-2",
                topics=[OffsetFetchRequestTopic(name="otopic", partition_indexes=[0, 1, 2])],
            ),
        )
        parts = f.topics[0].partitions
        assert [(p.committed_offset, p.metadata, p.error_code) for p in parts] == [
            (10, "m10", 0),
            (11, "m11", 0),
            (-1, "", 0),
        ]
    # v2+: null topics = every committed partition
    f = c.request(9, 2, G.OffsetFetchRequest(group_id="simple-2", topics=None))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in f.topics] == [("otopic", [0, 1])]
    # v8: several groups in one request
    f = c.request(
        9,
        8,
        G.OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(group_id="simple-8", topics=None),
                OffsetFetchRequestGroup(
                    group_id="simple-5",
                    topics=[OffsetFetchRequestTopics(name="otopic", partition_indexes=[1])],
                ),
                OffsetFetchRequestGroup(group_id="nobody", topics=None),
            ]
        ),
    )
    assert [g.group_id for g in f.groups] == ["simple-8", "simple-5", "nobody"]
    assert [p.committed_offset for p in f.groups[0].topics[0].partitions] == [10, 11]
    assert f.groups[1].topics[0].partitions[0].committed_offset == 11
    assert f.groups[2].topics == [] and f.groups[2].error_code == 0
    # ListGroups v4 with a state filter, DeleteGroups, OffsetDelete
    lg = c.request(16, 4, G.ListGroupsRequest(states_filter=["Empty"]))
    names = {g.group_id: g for g in lg.groups}
    assert "simple-8" in names and names["simple-8"].group_state == "Empty"
    assert all(g.group_state == "Empty" for g in lg.groups)
    od = c.request(
        47,
        0,
        G.OffsetDeleteRequest(
            group_id="simple-8",
            topics=[
                OffsetDeleteRequestTopic(
                    name="otopic", partitions=[OffsetDeleteRequestPartition(partition_index=0)]
                )
            ],
        ),
    )
    assert od.error_code == 0 and od.topics[0].partitions[0].error_code == 0
    dg = c.request(42, 2, G.DeleteGroupsRequest(groups_names=["simple-8", "simple-8-not-there"]))
    assert [(r.group_id, r.error_code) for r in dg.results] == [
        ("simple-8", 0),
        ("simple-8-not-there", E.GROUP_ID_NOT_FOUND),
    ]
    f = c.request(
        9, 8, G.OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="simple-8", topics=None)])
    )
    assert f.groups[0].topics == []


@pytest.mark.parametrize("version", [2, 3, 4])
def test_a_retention_time_past_long_max_wraps_as_kafka_adds_it(c, b, version):
    """OffsetCommit v2-v4's retention time: GroupCoordinatorAdapter.commitOffsets takes the
    expire timestamp as currentTimeMs + retentionTimeMs in a Java long, which wraps; the
    commit is stored (OffsetCommitValue v1 with that timestamp) and answered.  The sum did not
    fit the record's int64 and the handler failed (the connection was closed)."""
    from kafkatool.formats import internal_topics as IT
    from kafkatool.formats import records as R

    create_topic(c, f"wrap-{version}", 1)
    group = f"wrap-retention-{version}"
    before = int(time.time() * 1000)
    req = G.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=2**63 - 1,
        topics=[
            OffsetCommitRequestTopic(
                name=f"wrap-{version}",
                partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=7)],
            )
        ],
    )
    r = c.request(8, version, req)
    assert [p.error_code for t in r.topics for p in t.partitions] == [0]
    after = int(time.time() * 1000)
    f = c.request(
        9,
        3,
        G.OffsetFetchRequest(
            group_id=group, topics=[OffsetFetchRequestTopic(name=f"wrap-{version}", partition_indexes=[0])]
        ),
    )
    assert f.topics[0].partitions[0].committed_offset == 7
    seg = (
        b.data_dir
        / f"__consumer_offsets-{partition_for(group, OFFSETS_PARTITIONS)}"
        / "00000000000000000000.log"
    )
    stored = [
        IT.read_offsets_value(1, rec.value)
        for batch in R.iter_batches(seg.read_bytes())
        for rec in batch.records()
        if rec.key is not None and group.encode() in bytes(rec.key)
    ]
    assert [v for v, _ in stored] == [1]
    expire = stored[0][1].expire_timestamp
    assert before + 2**63 - 1 - 2**64 <= expire <= after + 2**63 - 1 - 2**64


def test_commit_lands_in_the_hashed_partition(c, b):
    create_topic(c, "otopic2", 1)
    r = commit(c, 8, "hashed-group", {("otopic2", 0): 5})
    assert r.topics[0].partitions[0].error_code == 0
    part = partition_for("hashed-group", OFFSETS_PARTITIONS)
    seg = b.data_dir / f"__consumer_offsets-{part}" / "00000000000000000000.log"
    assert b"hashed-group" in seg.read_bytes()
    for other in range(OFFSETS_PARTITIONS):
        if other != part:
            assert (
                b"hashed-group"
                not in (b.data_dir / f"__consumer_offsets-{other}" / "00000000000000000000.log").read_bytes()
            )
