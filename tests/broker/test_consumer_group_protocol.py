"""KIP-848 consumer groups over raw sockets with the project's codec: member epochs, target
assignment, revocation before reassignment, static members, session timeout, member-epoch
offset commits, classic vs consumer groups of one id, ListGroups/ConsumerGroupDescribe, and
the __consumer_offsets records reloaded by a restart."""

from __future__ import annotations

import time
import uuid

import pytest

from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode as E
from kafkatool.protocol.generated.consumer_group_heartbeat_request import TopicPartitions
from kafkatool.protocol.generated.offset_commit_request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkatool.protocol.generated.offset_fetch_request import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from tests.broker.conftest import BrokerProcess
from tests.broker.test_protocol import create_topic
from tests.broker.wire import WireClient

OVERRIDES = [
    "num.partitions=1",
    "offsets.topic.num.partitions=3",
    "group.consumer.session.timeout.ms=1500",
    "group.consumer.heartbeat.interval.ms=300",
]


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cgbroker") / "data", extra=OVERRIDES).start()
    yield b
    b.stop()


@pytest.fixture
def c(cbroker):
    with WireClient(cbroker.bootstrap) as client:
        yield client


def hb(
    c,
    group,
    member_id="",
    epoch=0,
    *,
    topics=None,
    owned=None,
    regex=None,
    instance=None,
    assignor=None,
    rebalance_timeout=None,
    version=1,
):
    req = G.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance,
        rebalance_timeout_ms=(30000 if epoch == 0 else -1)
        if rebalance_timeout is None
        else rebalance_timeout,
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=owned if owned is not None else ([] if epoch == 0 else None),
    )
    return c.request(68, version, req)


def parts(resp) -> dict:
    if resp.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}


def owned(assignment: dict) -> list:
    return [TopicPartitions(topic_id=t, partitions=ps) for t, ps in assignment.items()]


def topic_id(c, name):
    return (
        c.request(3, 12, G.MetadataRequest(topics=[G.metadata_request.MetadataRequestTopic(name=name)]))
        .topics[0]
        .topic_id
    )


def describe(c, group):
    return c.request(69, 0, G.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]


def gname(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_revocation_before_reassignment(c):
    create_topic(c, "kip848-a", 4)
    tid = topic_id(c, "kip848-a")
    g = gname("rev")
    r1 = hb(c, g, topics=["kip848-a"])
    assert r1.error_code == 0 and r1.member_epoch == 1 and r1.heartbeat_interval_ms == 300
    assert parts(r1) == {tid: [0, 1, 2, 3]}
    m1 = r1.member_id
    # a second member: the group epoch moves to 2, the new target splits the partitions, but the
    # newcomer gets nothing that m1 still owns
    r2 = hb(c, g, topics=["kip848-a"])
    assert r2.error_code == 0 and r2.member_epoch == 2 and parts(r2) == {}
    m2 = r2.member_id
    d = describe(c, g)
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        "Reconciling",
        2,
        2,
        "uniform",
    )
    # m1 still owns all four: it is asked to revoke (same epoch, smaller assignment)
    r = hb(c, g, m1, 1, owned=owned({tid: [0, 1, 2, 3]}))
    assert r.member_epoch == 1 and parts(r) == {tid: [0, 1]}
    # while m1 has not revoked, m2 stays without partitions
    r = hb(c, g, m2, 2, owned=[])
    assert r.member_epoch == 2 and r.assignment is None
    # m1 revoked: it moves to epoch 2
    r = hb(c, g, m1, 1, owned=owned({tid: [0, 1]}))
    assert r.member_epoch == 2 and r.assignment is None
    # now the partitions are released: m2 gets them
    r = hb(c, g, m2, 2, owned=[])
    assert r.member_epoch == 2 and parts(r) == {tid: [2, 3]}
    d = describe(c, g)
    assert d.group_state == "Stable"
    got = {
        m.member_id: (
            m.member_epoch,
            {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions},
        )
        for m in d.members
    }
    assert got == {m1: (2, {"kip848-a": [0, 1]}), m2: (2, {"kip848-a": [2, 3]})}
    # an epoch from the future or the distant past is fenced
    assert hb(c, g, m1, 7, owned=[]).error_code == E.FENCED_MEMBER_EPOCH
    assert hb(c, g, m1, 0 + 1, owned=owned({tid: [3]})).error_code == E.FENCED_MEMBER_EPOCH
    # m2 leaves: m1 gets everything back at epoch 3
    r = hb(c, g, m2, -1)
    assert (r.error_code, r.member_epoch) == (0, -1)
    r = hb(c, g, m1, 2, owned=owned({tid: [0, 1]}))
    assert r.member_epoch == 3 and parts(r) == {tid: [0, 1, 2, 3]}


def test_range_assignor_and_validation(c):
    create_topic(c, "kip848-r", 3)
    tid = topic_id(c, "kip848-r")
    g = gname("range")
    bad = hb(c, g, topics=["kip848-r"], rebalance_timeout=-1)
    assert bad.error_code == E.INVALID_REQUEST and "RebalanceTimeoutMs" in bad.error_message
    assert hb(c, g, topics=["kip848-r"], assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    assert hb(c, g, "nobody", 3, owned=[]).error_code == E.GROUP_ID_NOT_FOUND
    assert hb(c, "", topics=["kip848-r"]).error_code == E.INVALID_REQUEST
    assert hb(c, g, regex="(unclosed", topics=None).error_code == E.INVALID_REQUEST
    a = hb(c, g, topics=["kip848-r"], assignor="range")
    b = hb(c, g, topics=["kip848-r"], assignor="range")
    assert a.error_code == b.error_code == 0
    assert hb(c, g, "stranger", 1, owned=[]).error_code == E.UNKNOWN_MEMBER_ID
    # both heartbeat once more (the first member revokes what the range target moves away)
    hb(c, g, a.member_id, a.member_epoch, owned=owned(parts(a)))
    hb(c, g, b.member_id, b.member_epoch, owned=[])
    d = describe(c, g)
    assert d.assignor_name == "range"
    ranges = {
        m.member_id: sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions)
        for m in d.members
    }
    lo, hi = sorted(ranges)
    assert ranges == {lo: [0, 1], hi: [2]}
    assert all(tp.topic_id == tid for m in d.members for tp in m.target_assignment.topic_partitions)


def _wait_epoch(c, g, epoch, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = describe(c, g)
        if d.group_epoch >= epoch:
            return d
        time.sleep(0.05)
    raise AssertionError(f"group {g} did not reach epoch {epoch}: {describe(c, g)}")


def test_regex_subscription_resolved_asynchronously(c):
    """Kafka 4.0 (GroupMetadataManager.maybeUpdateRegularExpressions /
    handleRegularExpressionsResult): a new regex is resolved after the heartbeat that brought it
    is answered, the resolution bumps the group epoch, new topics are picked up by a refresh at
    most every 10 s, and a member rejoining with a regex no member uses gets its topic names
    first and the regex's topics later (librdkafka's 0045 do_test_resubscribe_with_regex)."""
    create_topic(c, "rx848-one", 2)
    create_topic(c, "lit848", 1)
    g = gname("regex")
    r = hb(c, g, regex="rx848-.*", topics=None)
    # not resolved yet: nothing to assign
    assert r.error_code == 0 and r.member_epoch == 1 and parts(r) == {}
    _wait_epoch(c, g, 2)
    r = hb(c, g, r.member_id, r.member_epoch, owned=[])
    assert r.member_epoch == 2 and sorted(len(v) for v in parts(r).values()) == [2]
    resolved_at = time.monotonic()
    create_topic(c, "rx848-two", 1)
    # the new topic waits for the next refresh, 10 s after the last (heartbeats keep the session)
    mine = parts(r)
    deadline = resolved_at + 20
    while time.monotonic() < deadline:
        r = hb(c, g, r.member_id, r.member_epoch, owned=owned(mine))
        assert r.error_code == 0
        if parts(r) is not None:
            mine = parts(r)
        if r.member_epoch == 3:
            break
        time.sleep(0.25)
    assert r.member_epoch == 3 and sorted(len(v) for v in mine.values()) == [1, 2]
    assert time.monotonic() - resolved_at > 9.5
    d = describe(c, g)
    assert d.members[0].subscribed_topic_regex == "rx848-.*" and d.members[0].subscribed_topic_names == []
    # leave, then rejoin with the regex and a topic name: the name's partitions come first
    assert hb(c, g, r.member_id, -1).error_code == 0
    lit = topic_id(c, "lit848")
    r = hb(c, g, r.member_id, 0, regex="rx848-.*", topics=["lit848"])
    assert r.error_code == 0 and parts(r) == {lit: [0]}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = hb(c, g, r.member_id, r.member_epoch, owned=owned(parts(r) or {lit: [0]}))
        if parts(r) and len(parts(r)) == 3:
            break
        time.sleep(0.3)
    assert sorted(len(v) for v in parts(r).values()) == [1, 1, 2]
    # RE2 (Kafka's engine family): linear time even for a pattern that backtracks exponentially
    # in a backtracking engine, and no lookarounds
    create_topic(c, "a" * 200, 1)
    t0 = time.monotonic()
    slow = hb(c, gname("redos"), regex="(a+)+b", topics=None)
    assert slow.error_code == 0 and parts(slow) == {}
    describe(c, gname("after-redos"))  # the broker answers after the resolution ran
    assert time.monotonic() - t0 < 2
    bad = hb(c, gname("look"), regex="(?=rx848).*", topics=None)
    assert bad.error_code == E.INVALID_REQUEST and "invalid perl operator" in bad.error_message
    # v0 has no regex field: a v0 join needs topic names
    assert hb(c, gname("v0"), topics=None, version=0).error_code == E.INVALID_REQUEST


def test_static_member_keeps_assignment_and_session_timeout(c):
    create_topic(c, "kip848-s", 2)
    tid = topic_id(c, "kip848-s")
    g = gname("static")
    r = hb(c, g, topics=["kip848-s"], instance="inst-1")
    assert parts(r) == {tid: [0, 1]}
    # the same instance id while its member is active: refused
    assert hb(c, g, topics=["kip848-s"], instance="inst-1").error_code == E.UNRELEASED_INSTANCE_ID
    left = hb(c, g, r.member_id, -2, instance="inst-1")
    assert (left.error_code, left.member_epoch) == (0, -2)
    d = describe(c, g)
    assert d.members[0].member_epoch == -2  # kept, with its assignment
    # the instance comes back with a new member id: same assignment, no new group epoch
    back = hb(c, g, topics=["kip848-s"], instance="inst-1")
    assert back.error_code == 0 and back.member_id != r.member_id
    assert parts(back) == {tid: [0, 1]} and back.member_epoch == r.member_epoch
    assert hb(c, g, r.member_id, 1, instance="inst-1", owned=[]).error_code == E.FENCED_INSTANCE_ID
    # no heartbeat for the session timeout (1.5 s): the member is removed
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and describe(c, g).members:
        time.sleep(0.3)
    d = describe(c, g)
    assert d.members == [] and d.group_state == "Empty"


def _commit(c, group, member, epoch, topic, offset, version=9):
    req = G.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=[
            OffsetCommitRequestTopic(
                name=topic,
                partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)],
            )
        ],
    )
    return c.request(8, version, req).topics[0].partitions[0].error_code


def _fetch(c, group, member, epoch, topic):
    req = G.OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(
                group_id=group,
                member_id=member,
                member_epoch=epoch,
                topics=[OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
            )
        ]
    )
    g = c.request(9, 9, req).groups[0]
    return g.error_code, (g.topics[0].partitions[0].committed_offset if g.topics else None)


def test_offsets_with_member_epochs_and_classic_rules(c):
    create_topic(c, "kip848-o", 1)
    g = gname("offsets")
    # an empty classic group (simple commit) becomes a consumer group on the first heartbeat,
    # its offsets kept
    assert _commit(c, g, "", -1, "kip848-o", 5, version=8) == 0
    r = hb(c, g, topics=["kip848-o"])
    assert r.error_code == 0
    groups = {x.group_id: x for x in c.request(16, 5, G.ListGroupsRequest(types_filter=["consumer"])).groups}
    assert groups[g].group_type == "consumer" and groups[g].protocol_type == "consumer"
    assert g not in {
        x.group_id for x in c.request(16, 5, G.ListGroupsRequest(types_filter=["classic"])).groups
    }
    assert _fetch(c, g, None, -1, "kip848-o") == (0, 5)
    m, epoch = r.member_id, r.member_epoch
    assert _commit(c, g, m, epoch, "kip848-o", 7) == 0
    assert _commit(c, g, m, epoch + 1, "kip848-o", 8) == E.STALE_MEMBER_EPOCH
    assert _commit(c, g, "ghost", epoch, "kip848-o", 8) == E.UNKNOWN_MEMBER_ID
    # members of a consumer group must use OffsetCommit v9+
    assert _commit(c, g, m, epoch, "kip848-o", 8, version=8) == E.UNSUPPORTED_VERSION
    assert _fetch(c, g, m, epoch, "kip848-o") == (0, 7)
    assert _fetch(c, g, m, epoch + 5, "kip848-o")[0] == E.STALE_MEMBER_EPOCH
    assert _commit(c, gname("unknown"), "x", 3, "kip848-o", 1) == E.GROUP_ID_NOT_FOUND
    # a classic JoinGroup to a consumer group with members: refused
    join = G.JoinGroupRequest(
        group_id=g,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[G.join_group_request.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")],
    )
    assert c.request(11, 9, join).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # deleting a consumer group with members: NON_EMPTY_GROUP; after the member leaves: deleted
    delete = G.DeleteGroupsRequest(groups_names=[g])
    assert c.request(42, 2, delete).results[0].error_code == E.NON_EMPTY_GROUP
    assert hb(c, g, m, -1).error_code == 0
    assert c.request(42, 2, delete).results[0].error_code == 0
    assert describe(c, g).error_code == E.GROUP_ID_NOT_FOUND
    # a non-empty classic group refuses a consumer-protocol member
    cl = gname("classic")
    join.group_id = cl
    first = c.request(11, 9, join)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    join.member_id = first.member_id
    assert c.request(11, 9, join).error_code == 0
    assert hb(c, cl, topics=["kip848-o"]).error_code == E.GROUP_ID_NOT_FOUND


def test_restart_reloads_consumer_group(tmp_path):
    b = BrokerProcess(
        tmp_path / "data", extra=OVERRIDES[:2] + ["group.consumer.session.timeout.ms=60000"]
    ).start()
    try:
        with WireClient(b.bootstrap) as c:
            create_topic(c, "kip848-restart", 2)
            tid = topic_id(c, "kip848-restart")
            g = "restart-group"
            r1 = hb(c, g, topics=["kip848-restart"], instance="i-1")
            r2 = hb(c, g, topics=["kip848-restart"])
            r1 = hb(c, g, r1.member_id, r1.member_epoch, owned=owned(parts(r1)), instance="i-1")
            r1 = hb(c, g, r1.member_id, r1.member_epoch, owned=owned(parts(r1)), instance="i-1")
            r2b = hb(c, g, r2.member_id, r2.member_epoch, owned=[])
            assert _commit(c, g, r1.member_id, r1.member_epoch, "kip848-restart", 11) == 0
            before = describe(c, g)
            assert before.group_state == "Stable"
        b.stop()
        b.start()
        with WireClient(b.bootstrap) as c:
            deadline = time.monotonic() + 10
            after = describe(c, g)
            while after.error_code == E.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
                time.sleep(0.2)
                after = describe(c, g)

            def summary(d):
                return (
                    d.group_state,
                    d.group_epoch,
                    d.assignment_epoch,
                    sorted(
                        (
                            m.member_id,
                            m.instance_id,
                            m.member_epoch,
                            sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
                        )
                        for m in d.members
                    ),
                )

            assert summary(after) == summary(before)
            # the members carry on with their epochs, and the committed offset is there
            r = hb(c, g, r2b.member_id, r2b.member_epoch, owned=owned(parts(r2b) or {}))
            assert r.error_code == 0 and r.member_epoch == r2b.member_epoch
            assert _fetch(c, g, r1.member_id, r1.member_epoch, "kip848-restart") == (0, 11)
            assert tid == topic_id(c, "kip848-restart")
    finally:
        b.stop()


def test_transactional_offsets_and_offset_delete_on_consumer_group(c):
    from kafkatool.protocol.generated.offset_delete_request import (
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )
    from kafkatool.protocol.generated.txn_offset_commit_request import (
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )
    from tests.broker.test_txn_protocol import end_txn, init_pid

    create_topic(c, "kip848-x", 1)
    create_topic(c, "kip848-y", 1)
    g = gname("txn")
    r = hb(c, g, topics=["kip848-x"])
    m, epoch = r.member_id, r.member_epoch
    init = init_pid(c, "t848", version=5)
    pid, pepoch = init.producer_id, init.producer_epoch
    add = G.AddOffsetsToTxnRequest(
        transactional_id="t848", producer_id=pid, producer_epoch=pepoch, group_id=g
    )
    assert c.request(25, 4, add).error_code == 0

    def txn_commit(member_epoch, offset):
        req = G.TxnOffsetCommitRequest(
            transactional_id="t848",
            group_id=g,
            producer_id=pid,
            producer_epoch=pepoch,
            generation_id=member_epoch,
            member_id=m,
            topics=[
                TxnOffsetCommitRequestTopic(
                    name="kip848-x",
                    partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)],
                )
            ],
        )
        return c.request(28, 4, req).topics[0].partitions[0].error_code

    assert txn_commit(epoch + 3, 9) == E.ILLEGAL_GENERATION
    assert txn_commit(epoch, 9) == 0
    assert _fetch(c, g, m, epoch, "kip848-x") == (0, -1)  # not visible before COMMIT
    assert end_txn(c, "t848", pid, pepoch, True, version=4) == 0
    deadline = time.monotonic() + 5
    while _fetch(c, g, m, epoch, "kip848-x") != (0, 9) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _fetch(c, g, m, epoch, "kip848-x") == (0, 9)
    # the group stays one consumer group (no classic twin was made for the transaction)
    listed = [x for x in c.request(16, 5, G.ListGroupsRequest()).groups if x.group_id == g]
    assert [(x.group_type, x.group_state) for x in listed] == [("consumer", "Stable")]
    # OffsetDelete: a subscribed topic's offsets stay while the group has members
    assert _commit(c, g, m, epoch, "kip848-y", 4) == 0
    req = G.OffsetDeleteRequest(
        group_id=g,
        topics=[
            OffsetDeleteRequestTopic(name=t, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
            for t in ("kip848-x", "kip848-y")
        ],
    )
    resp = c.request(47, 0, req)
    assert resp.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in resp.topics} == {
        "kip848-x": E.GROUP_SUBSCRIBED_TO_TOPIC,
        "kip848-y": 0,
    }
    assert _fetch(c, g, m, epoch, "kip848-y") == (0, -1)
