"""Offset retention of KIP-848 consumer groups on a real Broker (no sockets): offsets of topics
the members subscribe to stay, others expire retention after their commit; an empty consumer
group without offsets is deleted with tombstones for all its records."""

from __future__ import annotations

from kafkatool.broker.group.hashing import partition_for
from kafkatool.broker.group.offsets import OffsetAndMetadata
from kafkatool.protocol import generated as G
from tests.broker.group.test_coordinator import NUM_PARTITIONS, _records, run


def join_and_commit(gc, group: str, tps) -> tuple[str, int]:
    """A KIP-848 member subscribed to "sub" joins ``group`` and commits offset 3 (at time 1000)
    for ``tps``; returns its member id and epoch."""
    assert gc._validate_status(group, allow_empty=False) is None  # as the handler does first
    req = G.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=["sub"],
        topic_partitions=[],
    )
    r = gc.consumer.handle_heartbeat(req, 1, "client", "/127.0.0.1")
    assert r["error_code"] == 0
    oms = {tp: OffsetAndMetadata(3, -1, "", 1000) for tp in tps}
    assert gc.handle_offset_commit(
        group_id=group,
        member_id=r["member_id"],
        group_instance_id=None,
        generation_id=r["member_epoch"],
        offsets=oms,
        api_version=9,
    ) == dict.fromkeys(tps, 0)
    return r["member_id"], r["member_epoch"]


def test_consumer_group_offsets_expire_and_empty_group_goes(tmp_path):
    async def body(env):
        gc = env.gc
        env.broker.create_topic("sub", 1, {})
        env.broker.create_topic("other", 1, {})
        member, _epoch = join_and_commit(gc, "cg", (("sub", 0), ("other", 0)))
        retention = gc.retention_ms
        assert gc.expire_offsets(now=1000 + retention - 1) == 0
        assert gc.expire_offsets(now=1000 + retention) == 1
        cg = gc.consumer.groups["cg"]
        assert list(cg.offsets.offsets) == [("sub", 0)]
        leave = G.ConsumerGroupHeartbeatRequest(group_id="cg", member_id=member, member_epoch=-1)
        assert gc.consumer.handle_heartbeat(leave, 1, "client", "/127.0.0.1")["error_code"] == 0
        # empty: nothing is subscribed any more, so the last offset expires and the group goes
        assert gc.expire_offsets(now=1000 + retention) == 1
        assert "cg" not in gc.consumer.groups
        recs = _records(env.broker, partition_for("cg", NUM_PARTITIONS))
        assert recs[-1]["type"] == 3 and recs[-1]["value"] is None  # ConsumerGroupMetadata tombstone

    run(tmp_path, body, "offsets.retention.minutes=1")
