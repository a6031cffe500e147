"""Consumer groups of a live cluster (``kafkatool groups --bootstrap-server``), as Java's
AdminClient and kafka-consumer-groups.sh (ConsumerGroupCommand) see them, on the project's
blocking client (:class:`~kafkatool.assign.kafka_client.KafkaAdmin`).

ListGroups goes to every broker; everything about one group goes to its coordinator
(FindCoordinator); ListOffsets goes to each partition's leader.  A KIP-848 group is described
with ConsumerGroupDescribe, a classic one with DescribeGroups (Java's admin does the same:
ConsumerGroupDescribe first, DescribeGroups when the group is not a consumer group).
Resetting offsets follows ConsumerGroupCommand.prepareOffsetsToReset: only an Empty or Dead
group, offsets clamped into [log start, log end], to-datetime falling back to the log end of
an empty partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkatool.assign import group_client as GC
from kafkatool.assign.kafka_client import KafkaAdmin, describe_error
from kafkatool.broker.group.views import Committed, GroupView, MemberRow, build_rows
from kafkatool.formats import internal_topics as IT
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode

LIST_OFFSETS = 2
LEAVE_GROUP = 13
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_DESCRIBE = 15, 16, 42, 47, 69
#: ListOffsets' special timestamps
LATEST, EARLIEST = -1, -2
#: states in which ConsumerGroupCommand resets offsets
INACTIVE = ("Empty", "Dead")


#: a group operation the cluster refused as a whole (one line, Kafka's wording)
GroupsError = GC.GroupRequestError
_check = GC.check


# ----------------------------------------------------------------------------- listing


@dataclass
class Listed:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


def list_groups(admin: KafkaAdmin) -> dict[str, Listed]:
    """The consumer groups of every broker (Java's listConsumerGroups: protocol type
    ``consumer`` or empty)."""
    meta = admin.metadata()
    out: dict[str, Listed] = {}
    for node in sorted(meta.brokers):
        resp = admin.request(
            LIST_GROUPS, API_BY_KEY[LIST_GROUPS].request(states_filter=[], types_filter=[]), node
        )
        _check(resp.error_code, f"ListGroups on broker {node}")
        for g in resp.groups:
            if g.protocol_type not in ("consumer", ""):
                continue
            gtype = (g.group_type or "").lower() or (
                "consumer" if g.protocol_type == "consumer" else "classic"
            )
            out[g.group_id] = Listed(g.group_id, g.protocol_type, g.group_state or "", gtype)
    return out


# ----------------------------------------------------------------------------- one group


#: the coordinator's node id (FindCoordinator, key type GROUP)
coordinator = GC.find_coordinator


def committed_offsets(admin: KafkaAdmin, group: str, node: int) -> dict[tuple[str, int], Committed]:
    """OffsetFetch of every partition the group committed (topics null: all)."""
    return {tp: Committed(off, meta) for tp, (off, meta) in GC.offset_fetch(admin, group, node).items()}


def list_offsets(
    admin: KafkaAdmin, tps: list[tuple[str, int]], spec: int
) -> dict[tuple[str, int], int | None]:
    """ListOffsets at ``spec`` (LATEST, EARLIEST or a timestamp) from each partition's leader
    (assign/offsets, the one client of it); None where the partition is unknown, leaderless or
    has no offset for the timestamp."""
    from kafkatool.assign.offsets import list_offsets as ask

    out: dict[tuple[str, int], int | None] = dict.fromkeys(tps)
    if not tps:
        return out
    for tp, answer in ask(admin, list(tps), spec).items():
        if answer.error_code == 0 and answer.offset >= 0:
            out[tp] = answer.offset
    return out


def _log_ends(admin: KafkaAdmin) -> Callable:
    return lambda tps: list_offsets(admin, tps, LATEST)


def describe(admin: KafkaAdmin, group: str) -> GroupView:
    """The group as kafka-consumer-groups.sh --describe shows it; state "Dead" if it does not exist."""
    node = coordinator(admin, group)
    host, port, _ = admin.metadata_cached().brokers[node]
    where = f"{host}:{port} ({node})"
    view = None
    conn = admin.node(node)
    if CONSUMER_GROUP_DESCRIBE in conn.versions:
        req = API_BY_KEY[CONSUMER_GROUP_DESCRIBE].request(
            group_ids=[group], include_authorized_operations=False
        )
        (g,) = admin.request(CONSUMER_GROUP_DESCRIBE, req, node).groups
        if g.error_code == 0:
            members = []
            for m in g.members:
                parts = sorted(
                    (tp.topic_name, p)
                    for tp in (m.assignment.topic_partitions if m.assignment else [])
                    for p in tp.partitions
                )
                members.append(MemberRow(m.member_id, m.instance_id, m.client_id, m.client_host, parts))
            view = GroupView(group, "consumer", g.group_state, "consumer", g.assignor_name or "", members)
        elif g.error_code not in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
            _check(g.error_code, f"ConsumerGroupDescribe of group '{group}'", g.error_message)
    if view is None:
        req = API_BY_KEY[DESCRIBE_GROUPS].request(groups=[group], include_authorized_operations=False)
        (g,) = admin.request(DESCRIBE_GROUPS, req, node).groups
        _check(g.error_code, f"DescribeGroups of group '{group}'")
        members = [
            MemberRow(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                IT.assigned_partitions(m.member_assignment),
            )
            for m in g.members
        ]
        view = GroupView(
            group, "classic", g.group_state, g.protocol_type or "", g.protocol_data or "", members
        )
    view.coordinator = where
    committed = committed_offsets(admin, group, node)
    if view.state == "Dead" and committed:
        view.state = "Empty"  # a group of offsets only (simple consumers): Kafka shows it Empty
    view.rows = build_rows(view.members, committed, _log_ends(admin))
    return view


# ----------------------------------------------------------------------------- changes


def delete_groups(admin: KafkaAdmin, groups: list[str]) -> dict[str, int]:
    """DeleteGroups at each group's coordinator: error code per group (0: deleted)."""
    out = {}
    for g in groups:
        node = coordinator(admin, g)
        resp = admin.request(DELETE_GROUPS, API_BY_KEY[DELETE_GROUPS].request(groups_names=[g]), node)
        for r in resp.results:
            out[r.group_id] = r.error_code
    return out


def delete_offsets(
    admin: KafkaAdmin, group: str, tps: list[tuple[str, int]]
) -> tuple[int, dict[tuple[str, int], int]]:
    """OffsetDelete: the top-level error and one per partition."""
    from kafkatool.protocol.generated.offset_delete_request import (
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )

    node = coordinator(admin, group)
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    req = API_BY_KEY[OFFSET_DELETE].request(
        group_id=group,
        topics=[
            OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for t, ps in sorted(by_topic.items())
        ],
    )
    resp = admin.request(OFFSET_DELETE, req, node)
    per = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
    return resp.error_code, per


def commit_offsets(
    admin: KafkaAdmin, group: str, offsets: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """OffsetCommit as Java's alterConsumerGroupOffsets sends it (generation -1, no member):
    the coordinator accepts it only while the group has no members."""
    return GC.offset_commit(admin, group, coordinator(admin, group), offsets)


#: KafkaAdminClient.DEFAULT_LEAVE_GROUP_REASON
ADMIN_LEAVE_REASON = "member was removed by an admin"


def remove_members(admin: KafkaAdmin, group: str, members: list[MemberRow]) -> dict[str, int]:
    """Admin.removeMembersFromConsumerGroup of every member described (RemoveMembersFromConsumer-
    GroupOptions() without members): LeaveGroup v3+ at the coordinator with one identity per
    member, a static one by its group.instance.id alone, a dynamic one by its member id, each with
    the admin's reason. An error code per member (its instance id or member id); a refusal of the
    whole request raises GroupsError. Before v3 (a broker older than 2.4) one LeaveGroup per
    dynamic member; a static member cannot be named there (UNSUPPORTED_VERSION)."""
    from kafkatool.protocol.generated.leave_group_request import MemberIdentity

    node = coordinator(admin, group)
    conn = admin.node(node)
    version = conn.version_for(LEAVE_GROUP)
    info = API_BY_KEY[LEAVE_GROUP]
    out: dict[str, int] = {}
    if version >= 3:
        identities = [
            MemberIdentity(member_id="", group_instance_id=m.instance_id, reason=ADMIN_LEAVE_REASON)
            if m.instance_id is not None
            else MemberIdentity(member_id=m.member_id, group_instance_id=None, reason=ADMIN_LEAVE_REASON)
            for m in members
        ]
        resp = conn.request(LEAVE_GROUP, info.request(group_id=group, members=identities), version)
        _check(resp.error_code, f"LeaveGroup of group '{group}'")
        for r in resp.members:
            out[r.group_instance_id if r.group_instance_id is not None else r.member_id] = r.error_code
        return out
    for m in members:
        if m.instance_id is not None:
            out[m.instance_id] = ErrorCode.UNSUPPORTED_VERSION
            continue
        resp = conn.request(LEAVE_GROUP, info.request(group_id=group, member_id=m.member_id), version)
        out[m.member_id] = resp.error_code
    return out


def topic_partitions(admin: KafkaAdmin, topics: list[str]) -> list[tuple[str, int]]:
    """Every partition of the topics (an unknown topic is an error, as describeTopics fails)."""
    meta = admin.metadata(topics)
    out = []
    for t in topics:
        if t not in meta.topics:
            code = meta.topic_errors.get(t, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            raise GroupsError(f"topic '{t}': {describe_error(code)}", code)
        out.extend((t, p) for p in sorted(meta.topics[t]))
    return out


@dataclass
class ResetSpec:
    """One reset scenario of ConsumerGroupCommand (and of StreamsResetter, which has the same
    ones but --to-current)."""

    kind: str  # to-earliest, to-latest, to-current, to-offset, shift-by, to-datetime, from-file
    value: int = 0
    plan: dict[tuple[str, int], int] | None = None
    #: shift-by where the group committed nothing: None refuses (ConsumerGroupCommand); a
    #: consumer's auto.offset.reset (StreamsResetter's consumer.position): "latest", "earliest"
    #: or "none" (NoOffsetForPartitionException)
    uncommitted: str | None = None


#: ResetNote kinds
ABOVE_LATEST, AT_LATEST, BELOW_EARLIEST, AT_EARLIEST, EMPTY = (
    "above_latest",
    "at_latest",
    "below_earliest",
    "at_earliest",
    "empty",
)


@dataclass(frozen=True)
class ResetNote:
    """What plan_reset tells about one partition: a requested offset at or past a bound of the
    log (``value``: the offset it gets), or a partition without an offset for the time
    (EMPTY: the log end). Each tool words the notes it prints (group_command_warning here)."""

    kind: str
    tp: tuple[str, int]
    requested: int | None
    value: int


def group_command_warning(note: ResetNote) -> str | None:
    """ConsumerGroupCommand's line for a note (it says nothing of an offset at a bound)."""
    t, p = note.tp
    if note.kind == ABOVE_LATEST:
        return (
            f"New offset ({note.requested}) is higher than latest offset for topic partition "
            f"{t}-{p}. Value will be set to {note.value}"
        )
    if note.kind == BELOW_EARLIEST:
        return (
            f"New offset ({note.requested}) is lower than earliest offset for topic partition "
            f"{t}-{p}. Value will be set to {note.value}"
        )
    if note.kind == EMPTY:
        return f"Partition {p} from topic {t} is empty. Falling back to latest known offset."
    return None


def plan_reset(
    admin: KafkaAdmin,
    view: GroupView,
    partitions: list[tuple[str, int]],
    spec: ResetSpec,
    note: Callable[[ResetNote], None],
) -> dict[tuple[str, int], int]:
    """The new offsets (ConsumerGroupCommand.prepareOffsetsToReset, StreamsResetter.maybeReset:
    the same clamping into [log start, log end] and fallbacks); ``note`` gets a ResetNote for
    each partition whose offset met a bound or had none."""
    current = view.committed

    def clamp(requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        tps = list(requested)
        starts, ends = list_offsets(admin, tps, EARLIEST), list_offsets(admin, tps, LATEST)
        out = {}
        for tp, off in requested.items():
            end, start = ends.get(tp), starts.get(tp)
            if end is None:
                raise GroupsError(f"Error getting ending offset of topic partition: {tp[0]}-{tp[1]}")
            if off >= end:
                note(ResetNote(ABOVE_LATEST if off > end else AT_LATEST, tp, off, end))
                off = end
            elif start is not None and off <= start:
                note(ResetNote(BELOW_EARLIEST if off < start else AT_EARLIEST, tp, off, start))
                off = start
            out[tp] = off
        return out

    def fetched(spec_ts: int, what: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        got = list_offsets(admin, tps, spec_ts)
        for tp, off in got.items():
            if off is None:
                raise GroupsError(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
        return dict(got)

    if spec.kind == "to-offset":
        return clamp(dict.fromkeys(partitions, spec.value))
    if spec.kind == "to-earliest":
        return fetched(EARLIEST, "starting", partitions)
    if spec.kind == "to-latest":
        return fetched(LATEST, "ending", partitions)
    if spec.kind == "shift-by":
        missing = [tp for tp in partitions if tp not in current]
        if missing and spec.uncommitted not in ("latest", "earliest"):
            t, p = missing[0]
            if spec.uncommitted == "none":
                raise GroupsError(
                    "Undefined offset with no reset policy for partitions: "
                    f"[{', '.join(f'{t}-{p}' for t, p in missing)}]"
                )
            raise GroupsError(
                f"Cannot shift offset for partition {t}-{p} since there is no current committed offset"
            )
        position = dict(current)
        if missing:  # the consumer's position: auto.offset.reset
            if spec.uncommitted == "latest":
                position.update(fetched(LATEST, "ending", missing))
            else:
                position.update(fetched(EARLIEST, "starting", missing))
        return clamp({tp: position[tp] + spec.value for tp in partitions})
    if spec.kind == "to-datetime":
        got = list_offsets(admin, partitions, spec.value)
        empty = [tp for tp, off in got.items() if off is None]
        ends = list_offsets(admin, empty, LATEST)
        out = {}
        for tp in partitions:
            off = got[tp] if got[tp] is not None else ends.get(tp)
            if off is None:
                raise GroupsError(f"Error getting offset by timestamp of topic partition: {tp[0]}-{tp[1]}")
            if got[tp] is None:
                note(ResetNote(EMPTY, tp, None, off))
            out[tp] = off
        return out
    if spec.kind == "from-file":
        return clamp(dict(spec.plan or {}))
    if spec.kind == "to-current":
        out = {tp: current[tp] for tp in partitions if tp in current}
        rest = [tp for tp in partitions if tp not in current]
        for tp, off in list_offsets(admin, rest, LATEST).items():
            if off is None:
                raise GroupsError(f"Error getting ending offset of topic partition: {tp[0]}-{tp[1]}")
            out[tp] = off
        return out
    raise ValueError(spec.kind)
