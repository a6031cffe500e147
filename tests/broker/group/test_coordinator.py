"""The group coordinator's state machine on a real Broker (storage in a temp dir, no sockets)."""

from __future__ import annotations

import asyncio
import struct

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.coordinator import GroupCoordinator
from kafkatool.broker.group.hashing import java_string_hash, partition_for
from kafkatool.broker.group.offsets import OffsetAndMetadata
from kafkatool.broker.server import Broker
from kafkatool.formats.generated import ConsumerProtocolSubscription
from kafkatool.formats.internal_topics import decode_offsets_record, offsets_record_dict
from kafkatool.protocol.errors import ErrorCode as E

NUM_PARTITIONS = 3


def subscription(*topics: str) -> bytes:
    return struct.pack(">h", 0) + ConsumerProtocolSubscription(topics=list(topics), user_data=b"").encode(0)


class Env:
    def __init__(self, data_dir, overrides):
        opts = [
            f"log.dirs={data_dir}",
            f"offsets.topic.num.partitions={NUM_PARTITIONS}",
            "group.initial.rebalance.delay.ms=0",
            "group.min.session.timeout.ms=50",
            *overrides,
        ]
        self.broker = Broker(BrokerConfig.load(None, opts))
        self.broker.open_storage()
        self.gc: GroupCoordinator = self.broker.group_coordinator

    async def close(self):
        await self.gc.stop()
        self.broker.close_storage()

    async def join(
        self,
        group,
        member_id="",
        *,
        protocols=None,
        session=1000,
        rebalance=1000,
        instance=None,
        two_step=True,
        skip=False,
        wait=True,
    ):
        r = self.gc.handle_join_group(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            require_known_member_id=two_step,
            supports_skip_assignment=skip,
            client_id="client",
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance,
            session_timeout_ms=session,
            protocol_type="consumer",
            protocols=protocols if protocols is not None else [("range", subscription("t"))],
        )
        if isinstance(r, asyncio.Future) and wait:
            r = await asyncio.wait_for(r, 5)
        return r

    async def join_new(self, group, **kw):
        """The two-step join of a dynamic member: MEMBER_ID_REQUIRED, then the real join (parked)."""
        first = await self.join(group, **kw)
        assert first.error == E.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
        return await self.join(group, first.member_id, wait=False, **kw)

    async def sync(self, group, generation, member_id, assignments=None, instance=None):
        r = self.gc.handle_sync_group(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocol_name=None,
            assignments=assignments or {},
        )
        if isinstance(r, asyncio.Future):
            r = await asyncio.wait_for(r, 5)
        return r

    def heartbeat(self, group, generation, member_id, instance=None):
        return self.gc.handle_heartbeat(
            group_id=group, member_id=member_id, group_instance_id=instance, generation_id=generation
        )

    def commit(self, group, offsets, *, member_id="", generation=-1, instance=None):
        oms = {tp: OffsetAndMetadata(o, -1, meta, 1000) for tp, (o, meta) in offsets.items()}
        return self.gc.handle_offset_commit(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            generation_id=generation,
            offsets=oms,
        )


def run(tmp_path, body, *overrides):
    async def main():
        env = Env(tmp_path / "data", overrides)
        env.gc.start()
        try:
            await body(env)
        finally:
            await env.close()

    asyncio.run(main())


async def stable_pair(env, group="g"):
    """Two members, Stable; returns (generation, leader id, follower id)."""
    a = await asyncio.wait_for(await env.join_new(group), 5)
    assert a.error == 0 and a.generation_id == 1 and a.leader == a.member_id
    await env.sync(group, 1, a.member_id, {a.member_id: b"A"})
    fut_b = await env.join_new(group)
    assert env.heartbeat(group, 1, a.member_id) == E.REBALANCE_IN_PROGRESS
    ra = await env.join(group, a.member_id)
    rb = await asyncio.wait_for(fut_b, 5)
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == a.member_id
    assert {m[0] for m in ra.members} == {a.member_id, rb.member_id}
    assert rb.members == []
    follower_sync = asyncio.ensure_future(env.sync(group, 2, rb.member_id))
    await asyncio.sleep(0.01)
    assert not follower_sync.done()  # followers wait for the leader's assignment
    la = await env.sync(group, 2, a.member_id, {a.member_id: b"A2", rb.member_id: b"B2"})
    assert la.error == 0 and la.assignment == b"A2"
    fb = await asyncio.wait_for(follower_sync, 5)
    assert fb.error == 0 and fb.assignment == b"B2" and fb.protocol_name == "range"
    assert env.gc.groups[group].state.value == "Stable"
    return 2, a.member_id, rb.member_id


def test_partition_for_matches_java_hashes():
    assert java_string_hash("foo") == 101574
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("foo", 50) == 24
    assert partition_for("hello", 50) == 22
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # two UTF-16 units


def test_join_sync_heartbeat_two_members(tmp_path):
    async def body(env):
        gen, leader, follower = await stable_pair(env)
        assert env.heartbeat("g", gen, follower) == 0
        assert env.heartbeat("g", gen - 1, follower) == E.ILLEGAL_GENERATION
        assert env.heartbeat("g", gen, "nobody") == E.UNKNOWN_MEMBER_ID
        assert env.heartbeat("nope", gen, follower) == E.UNKNOWN_MEMBER_ID
        assert env.heartbeat("", gen, follower) == E.INVALID_GROUP_ID
        # a follower rejoining with unchanged metadata in Stable gets the current generation, no rebalance
        r = await env.join("g", follower)
        assert r.error == 0 and r.generation_id == gen and r.members == []
        assert env.gc.groups["g"].state.value == "Stable"
        # the leader rejoining always rebalances
        fut = await env.join("g", leader, wait=False)
        assert env.gc.groups["g"].state.value == "PreparingRebalance"
        assert env.heartbeat("g", gen, follower) == E.REBALANCE_IN_PROGRESS
        assert (await env.sync("g", gen, follower)).error == E.REBALANCE_IN_PROGRESS
        rf = await env.join("g", follower)
        rl = await asyncio.wait_for(fut, 5)
        assert rl.generation_id == rf.generation_id == gen + 1
        # a leader's assignment missing a member gives it empty bytes
        follower_sync = asyncio.ensure_future(env.sync("g", gen + 1, follower))
        await env.sync("g", gen + 1, leader, {leader: b"all"})
        assert (await follower_sync).assignment == b""

    run(tmp_path, body)


def test_join_validation(tmp_path):
    async def body(env):
        r = await env.join("g", session=10)
        assert r.error == E.INVALID_SESSION_TIMEOUT
        r = await env.join("g", session=2_000_000)
        assert r.error == E.INVALID_SESSION_TIMEOUT
        r = await env.join("", two_step=False)
        assert r.error == E.INVALID_GROUP_ID
        r = await env.join("g2", "some-member")
        assert r.error == E.UNKNOWN_MEMBER_ID
        r = await env.join("g3", protocols=[])
        assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
        a = await asyncio.wait_for(await env.join_new("g4"), 5)
        assert a.error == 0
        r = await env.join("g4", protocols=[("roundrobin", b"")])
        assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
        # before JoinGroup v4 a dynamic member is admitted at once
        r = await env.join("g5", two_step=False)
        assert r.error == 0 and r.generation_id == 1

    run(tmp_path, body)


def test_protocol_selection_by_vote(tmp_path):
    async def body(env):
        protos = [
            [("range", b"1"), ("roundrobin", b"1"), ("sticky", b"1")],
            [("sticky", b"2"), ("range", b"2")],
            [("sticky", b"3"), ("range", b"3"), ("roundrobin", b"3")],
        ]
        # the initial delay gathers all three into generation 1
        futs = [await env.join("g", protocols=p, two_step=False, wait=False) for p in protos]
        results = await asyncio.wait_for(asyncio.gather(*futs), 5)
        assert {r.generation_id for r in results} == {1}
        # candidates supported by all: range, sticky; votes: range 1, sticky 2
        assert {r.protocol_name for r in results} == {"sticky"}
        lead = [r for r in results if r.member_id == r.leader]
        assert len(lead) == 1 and sorted(m[2] for m in lead[0].members) == [b"1", b"2", b"3"]
        assert all(r.members == [] for r in results if r is not lead[0])

    run(tmp_path, body, "group.initial.rebalance.delay.ms=100")


def test_session_expiry_removes_member_and_rebalances(tmp_path):
    async def body(env):
        a = await asyncio.wait_for(await env.join_new("g", session=300), 5)
        await env.sync("g", 1, a.member_id, {a.member_id: b"A"})
        fut_b = await env.join_new("g", session=300)
        ra = await env.join("g", a.member_id, session=300)
        rb = await asyncio.wait_for(fut_b, 5)
        assert ra.generation_id == rb.generation_id == 2
        await asyncio.gather(
            env.sync("g", 2, a.member_id, {a.member_id: b"A", rb.member_id: b"B"}),
            env.sync("g", 2, rb.member_id),
        )
        # only A heartbeats; B's session runs out
        gen = 2
        for _ in range(12):
            await asyncio.sleep(0.05)
            err = env.heartbeat("g", gen, a.member_id)
            if err == E.REBALANCE_IN_PROGRESS:
                break
            assert err == 0
        assert err == E.REBALANCE_IN_PROGRESS
        g = env.gc.groups["g"]
        assert rb.member_id not in g.members
        assert env.heartbeat("g", gen, rb.member_id) == E.UNKNOWN_MEMBER_ID
        r = await env.join("g", a.member_id, session=300)
        assert r.generation_id == 3 and [m[0] for m in r.members] == [a.member_id]
        # a joined member that then neither syncs nor heartbeats is removed when its session runs out
        await asyncio.sleep(0.4)
        assert env.gc.groups["g"].state.value in ("PreparingRebalance", "Empty")

    run(tmp_path, body)


def test_pending_member_id_expires(tmp_path):
    async def body(env):
        first = await env.join("g", session=100)
        assert first.error == E.MEMBER_ID_REQUIRED
        await asyncio.sleep(0.2)
        assert first.member_id not in env.gc.groups["g"].pending_members

    run(tmp_path, body)


def test_static_member_rejoins_without_rebalance(tmp_path):
    async def body(env):
        f1 = await env.join("g", instance="i1", wait=False)
        r1 = await asyncio.wait_for(f1, 5)
        assert r1.error == 0 and r1.member_id.startswith("i1-")
        await env.sync("g", 1, r1.member_id, {r1.member_id: b"P1"}, instance="i1")
        f2 = await env.join("g", instance="i2", wait=False)
        r1b = await env.join("g", r1.member_id, instance="i1")
        r2 = await asyncio.wait_for(f2, 5)
        gen = r2.generation_id
        assert gen == r1b.generation_id == 2
        s = asyncio.ensure_future(env.sync("g", gen, r2.member_id, instance="i2"))
        await env.sync("g", gen, r1.member_id, {r1.member_id: b"P1", r2.member_id: b"P2"}, instance="i1")
        await s
        # i2 restarts (no LeaveGroup for static members) and rejoins with an unknown member id
        r2b = await env.join("g", instance="i2")
        assert r2b.error == 0 and r2b.generation_id == gen and r2b.member_id != r2.member_id
        assert r2b.leader == r1.member_id and r2b.members == []
        g = env.gc.groups["g"]
        assert g.state.value == "Stable" and g.generation == gen
        assert (await env.sync("g", gen, r2b.member_id, instance="i2")).assignment == b"P2"
        assert env.heartbeat("g", gen, r2.member_id, instance="i2") == E.FENCED_INSTANCE_ID
        assert env.heartbeat("g", gen, r2b.member_id, instance="i2") == 0
        # the static leader restarting: before v9 it is told the old leader id, so it does not assign
        r1c = await env.join("g", instance="i1")
        assert r1c.generation_id == gen and r1c.leader == r1.member_id != r1c.member_id
        # with v9 it is the leader and skips the assignment
        r1d = await env.join("g", instance="i1", skip=True)
        assert r1d.leader == r1d.member_id and r1d.skip_assignment and len(r1d.members) == 2
        assert g.state.value == "Stable" and g.generation == gen
        # LeaveGroup by instance id (batched, v3+)
        top, errs = env.gc.handle_leave_group("g", [("", "i2"), ("", "unknown"), (r1.member_id, None)])
        assert top == 0 and errs == [0, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
        assert g.state.value == "PreparingRebalance"

    run(tmp_path, body)


def test_offset_commit_rules(tmp_path):
    async def body(env):
        tp = ("t", 0)
        # a simple consumer (generation -1) creates the group by committing
        assert env.commit("simple", {tp: (5, "m")}) == {tp: 0}
        assert env.commit("absent", {tp: (5, "")}, member_id="x", generation=3) == {tp: E.ILLEGAL_GENERATION}
        err, rows = env.gc.handle_offset_fetch("simple", [tp, ("t", 1)], False)
        assert err == 0 and rows[0][1].offset == 5 and rows[0][1].metadata == "m" and rows[1][1] is None
        err, rows = env.gc.handle_offset_fetch("simple", None, False)
        assert [r[0] for r in rows] == [tp]
        err, rows = env.gc.handle_offset_fetch("unknown-group", None, False)
        assert err == 0 and rows == []
        big = "x" * 4097
        assert env.commit("simple", {tp: (6, big), ("t", 1): (1, "")}) == {
            tp: E.OFFSET_METADATA_TOO_LARGE,
            ("t", 1): 0,
        }
        gen, leader, follower = await stable_pair(env, "g")
        assert env.commit("g", {tp: (1, "")}) == {tp: E.UNKNOWN_MEMBER_ID}
        assert env.commit("g", {tp: (1, "")}, member_id=leader, generation=gen - 1) == {
            tp: E.ILLEGAL_GENERATION
        }
        assert env.commit("g", {tp: (1, "")}, member_id="who", generation=gen) == {tp: E.UNKNOWN_MEMBER_ID}
        assert env.commit("g", {tp: (7, "")}, member_id=follower, generation=gen) == {tp: 0}
        # during PreparingRebalance commits are still taken; during CompletingRebalance they are not
        fut = await env.join("g", leader, wait=False)
        assert env.commit("g", {tp: (8, "")}, member_id=follower, generation=gen) == {tp: 0}
        await env.join("g", follower)
        await asyncio.wait_for(fut, 5)
        assert env.gc.groups["g"].state.value == "CompletingRebalance"
        assert env.commit("g", {tp: (9, "")}, member_id=follower, generation=gen + 1) == {
            tp: E.REBALANCE_IN_PROGRESS
        }
        assert env.gc.handle_offset_fetch("g", [tp], False)[1][0][1].offset == 8

    run(tmp_path, body)


def test_admin_apis(tmp_path):
    async def body(env):
        tp = ("t", 0)
        env.commit("simple", {tp: (5, ""), ("u", 0): (1, "")})
        gen, leader, follower = await stable_pair(env, "busy")
        err, groups = env.gc.handle_list_groups(None)
        assert err == 0 and sorted(groups) == [
            ("busy", "consumer", "Stable", "classic"),
            ("simple", "", "Empty", "classic"),
        ]
        assert env.gc.handle_list_groups(["stable"])[1] == [("busy", "consumer", "Stable", "classic")]
        err, s = env.gc.handle_describe_group("busy")
        assert s.state == "Stable" and s.protocol == "range" and len(s.members) == 2
        assert {m[5] for m in s.members} == {b"A2", b"B2"}
        err, s = env.gc.handle_describe_group("missing")
        assert err == 0 and s.state == "Dead" and s.members == []
        # OffsetDelete: a Stable consumer group protects the topics it subscribes to
        env.commit("busy", {tp: (3, ""), ("other", 0): (1, "")}, member_id=leader, generation=gen)
        err, res = env.gc.handle_offset_delete("busy", [tp, ("other", 0)])
        assert err == 0 and res == {tp: E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): 0}
        assert env.gc.handle_offset_delete("missing", [tp]) == (E.GROUP_ID_NOT_FOUND, {})
        err, res = env.gc.handle_offset_delete("simple", [("u", 0)])
        assert err == 0 and res == {("u", 0): 0}
        res = env.gc.handle_delete_groups(["simple", "busy", "missing"])
        assert res == {"simple": 0, "busy": E.NON_EMPTY_GROUP, "missing": E.GROUP_ID_NOT_FOUND}
        assert "simple" not in env.gc.groups
        assert env.gc.handle_offset_fetch("simple", [tp], False)[1][0][1] is None

    run(tmp_path, body)


def test_initial_rebalance_delay_gathers_members(tmp_path):
    async def body(env):
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        fa = await env.join_new("g", rebalance=5000)
        await asyncio.sleep(0.1)
        fb = await env.join_new("g", rebalance=5000)
        ra, rb = await asyncio.wait_for(asyncio.gather(fa, fb), 5)
        took = loop.time() - t0
        assert ra.generation_id == rb.generation_id == 1  # one generation for both
        assert 0.3 <= took < 2.0, took

    run(tmp_path, body, "group.initial.rebalance.delay.ms=300")


def _records(broker, partition):
    lg = broker.get_log(P.OFFSETS_TOPIC, partition)
    out = []
    for batch in lg.batches():
        for rec in batch.records():
            out.append(offsets_record_dict(rec.key, rec.value))
    return out


def test_records_persist_and_reload(tmp_path):
    state = {}

    async def first(env):
        gen, leader, follower = await stable_pair(env, "g")
        env.commit("g", {("t", 0): (42, "meta")}, member_id=leader, generation=gen)
        env.commit("simple", {("t", 1): (7, "")})
        env.commit("doomed", {("t", 1): (1, "")})
        assert env.gc.handle_delete_groups(["doomed"]) == {"doomed": 0}
        part = partition_for("g", NUM_PARTITIONS)
        recs = _records(env.broker, part)
        groups = [r for r in recs if r["type"] == 2 and r["key"]["data"]["group"] == "g"]
        last = groups[-1]["value"]
        assert last["version"] == "3" and last["data"]["generation"] == gen
        assert last["data"]["protocol"] == "range" and last["data"]["leader"] == leader
        assert {m["memberId"] for m in last["data"]["members"]} == {leader, follower}
        assert last["data"]["members"][0]["subscription"]["topics"] == ["t"]
        commits = [r for r in recs if r["type"] == 1 and r["key"]["data"]["group"] == "g"]
        assert commits[-1]["value"] == {
            "version": "3",
            "data": {"offset": 42, "leaderEpoch": -1, "metadata": "meta", "commitTimestamp": 1000},
        }
        doomed = _records(env.broker, partition_for("doomed", NUM_PARTITIONS))
        tomb = [
            r for r in doomed if r["key"] and r["key"]["data"]["group"] == "doomed" and r["value"] is None
        ]
        # commit-only (generation 0): no GroupMetadata record, so no tombstone of type 2
        assert {r["type"] for r in tomb} == {1}
        state["ids"] = (gen, leader, follower)

    async def second(env):
        gc = env.gc
        # start() (run above) marks partitions loading before the first yield
        gen, leader, follower = state["ids"]
        await asyncio.sleep(0.05)
        assert not gc.loading
        err, rows = gc.handle_offset_fetch("g", [("t", 0)], False)
        assert err == 0 and rows[0][1] == OffsetAndMetadata(42, -1, "meta", 1000)
        assert gc.handle_offset_fetch("simple", [("t", 1)], False)[1][0][1].offset == 7
        assert "doomed" not in gc.groups
        g = gc.groups["g"]
        assert g.state.value == "Stable" and g.generation == gen and set(g.members) == {leader, follower}
        assert env.heartbeat("g", gen, follower) == 0
        assert (await env.sync("g", gen, follower)).assignment == b"B2"

    run(tmp_path, first)
    run(tmp_path, second)


def test_requests_during_load_get_load_in_progress(tmp_path):
    async def fill(env):
        env.commit("g", {("t", 0): (1, "")})

    async def check(env):
        pass

    run(tmp_path, fill)

    async def main():
        env = Env(tmp_path / "data", [])
        try:
            env.gc.start()
            # nothing has yielded yet: every existing partition is still loading
            assert env.gc.handle_offset_fetch("g", [("t", 0)], False)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            assert env.commit("g", {("t", 0): (2, "")}) == {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
            assert env.heartbeat("g", 1, "m") == 0  # answered blindly while loading, as Kafka does
            r = await env.join("g", two_step=False, wait=False)
            assert r.error == E.COORDINATOR_LOAD_IN_PROGRESS
            assert env.gc.handle_list_groups(None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
            await asyncio.sleep(0.05)
            assert env.gc.handle_offset_fetch("g", [("t", 0)], False)[1][0][1].offset == 1
        finally:
            await env.close()

    asyncio.run(main())


def test_offset_retention(tmp_path):
    async def body(env):
        gc = env.gc
        retention = 60_000
        env.commit("simple", {("t", 0): (1, "")})  # commit timestamp 1000
        gen, leader, follower = await stable_pair(env, "live")
        env.commit("live", {("t", 0): (1, ""), ("gone", 0): (1, "")}, member_id=leader, generation=gen)
        assert gc.retention_ms == retention
        assert gc.expire_offsets(now=1000 + retention - 1) == 0
        # simple group: per commit; Stable consumer group: only topics nobody subscribes to
        assert gc.expire_offsets(now=1000 + retention) == 2
        assert "simple" not in gc.groups  # Empty without offsets -> Dead
        assert list(gc.groups["live"].offsets.offsets) == [("t", 0)]
        # once Empty, everything goes retention after the group emptied
        gc.handle_leave_group("live", [(leader, None), (follower, None)])
        g = gc.groups["live"]
        assert g.state.value == "Empty"
        assert gc.expire_offsets(now=g.state_timestamp + retention - 1) == 0
        assert gc.expire_offsets(now=g.state_timestamp + retention) == 1
        assert "live" not in gc.groups
        recs = _records(env.broker, partition_for("live", NUM_PARTITIONS))
        assert recs[-1]["type"] == 2 and recs[-1]["value"] is None
        key, payload = decode_offsets_record(P.group_metadata_key("live"), None)
        assert payload == "<DELETE>" and key == '{"type":"2","data":{"group":"live"}}'

    run(tmp_path, body, "offsets.retention.minutes=1")


def test_deleting_a_topic_drops_its_offsets(tmp_path):
    async def body(env):
        env.broker.create_topic("doomed-topic", 2, {})
        env.commit("g1", {("doomed-topic", 0): (3, ""), ("kept", 0): (1, "")})
        env.commit("g2", {("doomed-topic", 1): (4, "")})
        env.broker.delete_topic("doomed-topic")
        assert list(env.gc.groups["g1"].offsets.offsets) == [("kept", 0)]
        # Empty and without offsets: gone; a commit-only group (generation 0) has no group tombstone
        assert "g2" not in env.gc.groups
        recs = _records(env.broker, partition_for("g2", NUM_PARTITIONS))
        assert [r["type"] for r in recs if r["value"] is None and r["key"]["data"]["group"] == "g2"] == [1]

    run(tmp_path, body)


def test_member_that_never_syncs_is_removed_after_rebalance_timeout(tmp_path):
    async def body(env):
        a = await asyncio.wait_for(await env.join_new("g", rebalance=300), 5)
        await env.sync("g", 1, a.member_id, {a.member_id: b"A"})
        fut_b = await env.join_new("g", rebalance=300)
        await env.join("g", a.member_id, rebalance=300)
        b = await asyncio.wait_for(fut_b, 5)
        await env.sync("g", 2, a.member_id, {a.member_id: b"A", b.member_id: b"B"})
        g = env.gc.groups["g"]
        assert g.state.value == "Stable" and g.pending_sync == {b.member_id}
        # B keeps its session alive but never sends SyncGroup
        for _ in range(8):
            await asyncio.sleep(0.05)
            env.heartbeat("g", 2, b.member_id)
        assert b.member_id not in g.members
        assert g.state.value == "PreparingRebalance"
        assert env.heartbeat("g", 2, a.member_id) == E.REBALANCE_IN_PROGRESS

    run(tmp_path, body)


def test_coordinator_writes_meet_the_logs_record_rules(tmp_path):
    """The coordinator appends through LogValidator (AppendOrigin.COORDINATOR): a record its
    partition's timestamp limit refuses fails the commit with LogValidator's own error, as
    Kafka's maybeConvertOffsetCommitError passes it on, and nothing is stored."""

    async def body(env):
        tp = ("t", 0)
        assert env.commit("simple", {tp: (5, "")}) == {tp: 0}
        lg = env.broker.get_log(P.OFFSETS_TOPIC, partition_for("simple", NUM_PARTITIONS))
        assert lg.config.timestamp_before_max_ms == 60_000
        wall = lg.clock
        lg.clock = lambda: wall() + 3_600_000  # the log's clock an hour past the coordinator's
        end = lg.log_end_offset
        assert env.commit("simple", {tp: (6, "")}) == {tp: E.INVALID_TIMESTAMP}
        assert lg.log_end_offset == end
        assert env.gc.handle_offset_fetch("simple", [tp], False)[1][0][1].offset == 5

    run(tmp_path, body, "log.message.timestamp.before.max.ms=60000")


def test_group_configs_are_parsed_as_configdef_parses_them():
    """GroupConfig.validate parses each value with ConfigDef (INT, atLeast(1)): the broker's one
    rule, log/dynamic_log_config.config_value_error, so a value past Integer.MAX_VALUE is
    "Not a number of type INT" (not a range error), and Range's message shows the parsed value."""
    from kafkatool.broker.group.consumer import ConsumerGroupError, validate_group_configs

    bounds = BrokerConfig({}).int
    for raw, words in [
        ("2147483648", "Invalid value 2147483648 for configuration consumer.session.timeout.ms: Not a number of type INT"),
        ("abc", "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        (" 0", "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"),
    ]:  # fmt: skip
        try:
            validate_group_configs({"consumer.session.timeout.ms": raw}, bounds)
        except ConsumerGroupError as exc:
            assert (exc.code, str(exc)) == (E.INVALID_CONFIG, words)
        else:
            raise AssertionError(f"{raw!r} was taken")
    validate_group_configs({"consumer.session.timeout.ms": " 50000 "}, bounds)  # ConfigDef trims
