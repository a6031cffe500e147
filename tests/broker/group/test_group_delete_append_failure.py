"""DeleteGroups, OffsetDelete and offset expiry when the tombstones cannot be written to
``__consumer_offsets``.

The append fails for real, in LogValidator: the offsets partition's clock runs an hour ahead of
the coordinator's and ``log.message.timestamp.before.max.ms`` is one minute, so the
tombstones' CreateTime is refused (INVALID_TIMESTAMP), as test_coordinator's
test_coordinator_writes_meet_the_logs_record_rules does for a commit.

Classic groups follow Kafka 3.7's GroupMetadataManager.cleanupGroupMetadata: the offsets (and
the group once Empty without offsets) leave memory first, a failed append is only logged, and
DeleteGroups / OffsetDelete answer NONE.  KIP-848 consumer groups follow the new coordinator
(GroupCoordinatorService): the failed write changes nothing and its error is answered.
"""

from __future__ import annotations

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.hashing import partition_for
from kafkatool.protocol import generated as G
from kafkatool.protocol.errors import ErrorCode as E
from tests.broker.group.test_consumer_group_expiry import join_and_commit
from tests.broker.group.test_coordinator import NUM_PARTITIONS, _records, run, stable_pair

LIMIT = "log.message.timestamp.before.max.ms=60000"


def break_appends(env, group):
    """Make every append to ``group``'s offsets partition fail; returns the log."""
    lg = env.broker.get_log(P.OFFSETS_TOPIC, partition_for(group, NUM_PARTITIONS))
    assert lg.config.timestamp_before_max_ms == 60_000
    wall = lg.clock
    lg.clock = lambda: wall() + 3_600_000
    return lg


def fetched(env, group, tps):
    err, rows = env.gc.handle_offset_fetch(group, tps, False)
    assert err == 0
    return {tp: (om.offset if om is not None else None, code) for tp, om, code in rows}


def test_delete_groups_answers_none_and_drops_the_offsets_when_the_append_fails(tmp_path):
    async def body(env):
        gc = env.gc
        tp, tp2 = ("t", 0), ("u", 1)
        # "simple" only commits (generation 0); "rebalanced" had members (generation 1)
        assert env.commit("simple", {tp: (5, ""), tp2: (7, "")}) == {tp: 0, tp2: 0}
        gen, leader, follower = await stable_pair(env, "rebalanced")
        assert env.commit("rebalanced", {tp: (9, "")}, member_id=leader, generation=gen) == {tp: 0}
        gc.handle_leave_group("rebalanced", [(leader, None), (follower, None)])
        assert gc.groups["rebalanced"].state.value == "Empty"
        logs = {break_appends(env, g) for g in ("simple", "rebalanced")}
        ends = {lg: lg.log_end_offset for lg in logs}
        res = gc.handle_delete_groups(["simple", "rebalanced"])
        assert res == {"simple": E.NONE, "rebalanced": E.NONE}
        assert all(lg.log_end_offset == ends[lg] for lg in logs)  # nothing was written
        assert fetched(env, "simple", [tp, tp2]) == {tp: (None, 0), tp2: (None, 0)}
        assert fetched(env, "rebalanced", [tp]) == {tp: (None, 0)}
        assert "simple" not in gc.groups and "rebalanced" not in gc.groups
        assert gc.handle_list_groups(None) == (0, [])
        assert gc.handle_describe_group("rebalanced")[1].state == "Dead"
        # deleted once: a second DeleteGroups finds nothing
        assert gc.handle_delete_groups(["simple"]) == {"simple": E.GROUP_ID_NOT_FOUND}

    run(tmp_path, body, LIMIT)


def test_offset_delete_answers_none_and_drops_the_offsets_when_the_append_fails(tmp_path):
    async def body(env):
        gc = env.gc
        tp, tp2 = ("t", 0), ("u", 1)
        assert env.commit("g", {tp: (5, ""), tp2: (7, "")}) == {tp: 0, tp2: 0}
        lg = break_appends(env, "g")
        end = lg.log_end_offset
        assert gc.handle_offset_delete("g", [tp]) == (E.NONE, {tp: E.NONE})
        assert fetched(env, "g", [tp, tp2]) == {tp: (None, 0), tp2: (7, 0)}
        assert gc.groups["g"].state.value == "Empty"
        # the last offset: the group, Empty without offsets, goes Dead and leaves the cache
        assert gc.handle_offset_delete("g", [tp2]) == (E.NONE, {tp2: E.NONE})
        assert "g" not in gc.groups
        assert fetched(env, "g", [tp2]) == {tp2: (None, 0)}
        assert gc.handle_offset_delete("g", [tp2]) == (E.GROUP_ID_NOT_FOUND, {})
        assert lg.log_end_offset == end

    run(tmp_path, body, LIMIT)


def test_offset_expiry_drops_the_offsets_when_the_append_fails(tmp_path):
    """The expiry goes through the same cleanup: the expired offsets leave memory, and Kafka
    counts none of them as removed (its count is of tombstones written)."""

    async def body(env):
        gc = env.gc
        tp = ("t", 0)
        assert env.commit("g", {tp: (5, "")}) == {tp: 0}  # commit timestamp 1000
        lg = break_appends(env, "g")
        end = lg.log_end_offset
        assert gc.expire_offsets(now=1000 + gc.retention_ms) == 0
        assert "g" not in gc.groups
        assert fetched(env, "g", [tp]) == {tp: (None, 0)}
        assert lg.log_end_offset == end

    run(tmp_path, body, LIMIT, "offsets.retention.minutes=1")


def test_tombstones_written_for_a_deleted_group(tmp_path):
    """With a working log the same deletion writes the offsets' tombstones, and the group's own
    only for a group that had a generation (a commit-only group has no GroupMetadata record)."""

    async def body(env):
        gc = env.gc
        tp = ("t", 0)
        assert env.commit("simple", {tp: (5, "")}) == {tp: 0}
        gen, leader, follower = await stable_pair(env, "rebalanced")
        gc.handle_leave_group("rebalanced", [(leader, None), (follower, None)])
        assert gc.handle_delete_groups(["simple", "rebalanced"]) == {"simple": 0, "rebalanced": 0}
        for group, types in (("simple", [1]), ("rebalanced", [2])):
            recs = _records(env.broker, partition_for(group, NUM_PARTITIONS))
            tombstones = [
                r["type"] for r in recs if r["value"] is None and r["key"]["data"]["group"] == group
            ]
            assert tombstones == types

    run(tmp_path, body)


def _consumer_group_with_offsets(env, group, tps):
    gc = env.gc
    env.broker.create_topic("sub", 1, {})
    member, _epoch = join_and_commit(gc, group, tps)
    leave = G.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1)
    assert gc.consumer.handle_heartbeat(leave, 1, "client", "/127.0.0.1")["error_code"] == 0


def test_consumer_group_keeps_its_offsets_and_answers_the_error_when_the_append_fails(tmp_path):
    """KIP-848 groups live in the new coordinator, whose failed write leaves the state as it
    was and answers normalizeException's error: LogValidator's INVALID_TIMESTAMP as it is."""

    async def body(env):
        gc = env.gc
        tp, tp2 = ("sub", 0), ("other", 0)
        _consumer_group_with_offsets(env, "cg", [tp, tp2])
        lg = break_appends(env, "cg")
        end = lg.log_end_offset
        assert gc.handle_offset_delete("cg", [tp]) == (E.INVALID_TIMESTAMP, {})
        assert gc.handle_delete_groups(["cg"]) == {"cg": E.INVALID_TIMESTAMP}
        assert fetched(env, "cg", [tp, tp2]) == {tp: (3, 0), tp2: (3, 0)}
        assert "cg" in gc.consumer.groups
        assert lg.log_end_offset == end

    run(tmp_path, body, LIMIT)
