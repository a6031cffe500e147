"""librdkafka 0045 ``subscribe_many_updates`` in KIP-848 mode, the coordinator's side: a member
changes its subscription, so a revocation is pending; it leaves with epoch -1 before acknowledging
it, and rejoins with epoch 0 under the same member id and another subscription. Each answer is
GroupMetadataManager's (consumerGroupHeartbeat, consumerGroupLeave, consumerGroupFenceMember),
on a real Broker without sockets."""

from __future__ import annotations

from kafkatool.broker.group.consumer import UNREVOKED_PARTITIONS
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode as E
from kafkatool.protocol.generated.consumer_group_heartbeat_request import TopicPartitions
from tests.broker.group.test_coordinator import run


def _hb(gc, member_id, epoch, *, topics=None, owned=None, rebalance_timeout=-1):
    req = G.ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=rebalance_timeout,
        subscribed_topic_names=topics,
        topic_partitions=owned,
    )
    return gc.consumer.handle_heartbeat(req, 1, "rdkafka", "/127.0.0.1")


def _owned(assignment: dict) -> list:
    return [TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in assignment.items()]


def test_leave_during_revocation_then_rejoin_with_the_same_member_id(tmp_path):
    async def body(env):
        gc = env.gc
        for name in ("t0", "t1", "t2"):
            env.broker.create_topic(name, 4, {})
        ids = {n: gc.consumer.topics_by_name()[n].topic_id for n in ("t0", "t1", "t2")}
        assert gc._validate_status("g", allow_empty=False) is None  # as the handler does first
        member = "m-0045"  # librdkafka generates its member id and keeps it (KIP-1082)
        r = _hb(gc, member, 0, topics=["t0", "t1"], owned=[], rebalance_timeout=300000)
        assert r["error_code"] == 0 and r["member_id"] == member and r["member_epoch"] == 1
        assert r["assignment"] == {ids["t0"]: frozenset(range(4)), ids["t1"]: frozenset(range(4))}
        full = r["assignment"]
        # the new subscription drops t0: the group epoch moves to 2, the member keeps epoch 1
        # until it stops reporting t0 (revocation before reassignment), t2 waits
        r = _hb(gc, member, 1, topics=["t1", "t2"], owned=_owned(full))
        assert r["error_code"] == 0 and r["member_epoch"] == 1
        assert r["assignment"] == {ids["t1"]: frozenset(range(4))}
        cg = gc.consumer.groups["g"]
        m = cg.members[member]
        assert (m.state, cg.group_epoch, cg.assignment_epoch) == (UNREVOKED_PARTITIONS, 2, 2)
        assert m.pending_revocation == {ids["t0"]: frozenset(range(4))}
        # unsubscribe() before the revocation is acknowledged: the leave heartbeat
        r = _hb(gc, member, -1)
        assert r == {"error_code": 0, "member_id": member, "member_epoch": -1}
        assert member not in cg.members and cg.group_epoch == 3
        # the member's partitions are free again: no partition epoch is held
        assert all(cg.current_partition_epoch(ids[t], p) == -1 for t in ("t0", "t1", "t2") for p in range(4))
        assert gc.consumer._session == {} and gc.consumer._rebalance == {}
        # a second leave of the same member id: it is not a member any more
        assert _hb(gc, member, -1)["error_code"] == E.UNKNOWN_MEMBER_ID
        # subscribe() again: epoch 0 under the same member id joins as a new member and gets
        # everything it subscribes to at once (nobody owns it)
        r = _hb(gc, member, 0, topics=["t2"], owned=[], rebalance_timeout=300000)
        assert r["error_code"] == 0 and r["member_id"] == member and r["member_epoch"] == 4
        assert r["assignment"] == {ids["t2"]: frozenset(range(4))}
        assert r["heartbeat_interval_ms"] == 5000
        m = cg.members[member]
        assert (m.state, m.member_epoch, m.pending_revocation) == (0, 4, {})

    run(tmp_path, body)


def test_epoch_zero_without_the_join_fields_is_refused_as_kafka_does(tmp_path):
    """What librdkafka sends when subscribe() follows a leave it made from its steady state:
    epoch 0 without RebalanceTimeoutMs and TopicPartitions. Kafka refuses it before looking at
    the group (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid)."""

    async def body(env):
        gc = env.gc
        env.broker.create_topic("t0", 4, {})
        assert gc._validate_status("g", allow_empty=False) is None
        r = _hb(gc, "m-0045", 0, topics=["t0"], owned=None, rebalance_timeout=-1)
        assert r == {
            "error_code": E.INVALID_REQUEST,
            "error_message": "RebalanceTimeoutMs must be provided in first request.",
        }
        r = _hb(gc, "m-0045", 0, topics=["t0"], owned=None, rebalance_timeout=300000)
        assert r == {
            "error_code": E.INVALID_REQUEST,
            "error_message": "TopicPartitions must be empty when (re-)joining.",
        }
        assert "g" not in gc.consumer.groups

    run(tmp_path, body)
