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
    """One of ConsumerGroupCommand's reset scenarios."""

    kind: str  # to-earliest, to-latest, to-current, to-offset, shift-by, to-datetime, from-file
    value: int = 0
    plan: dict[tuple[str, int], int] | None = None


def plan_reset(
    admin: KafkaAdmin,
    view: GroupView,
    partitions: list[tuple[str, int]],
    spec: ResetSpec,
    warn: Callable[[str], None],
) -> dict[tuple[str, int], int]:
    """The new offsets (prepareOffsetsToReset); ``warn`` gets Kafka's clamping/fallback lines."""
    current = view.committed

    def clamp(requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        tps = list(requested)
        starts, ends = list_offsets(admin, tps, EARLIEST), list_offsets(admin, tps, LATEST)
        out = {}
        for tp, off in requested.items():
            end, start = ends.get(tp), starts.get(tp)
            if end is None:
                raise GroupsError(f"Error getting ending offset of topic partition: {tp[0]}-{tp[1]}")
            if off > end:
                warn(
                    f"New offset ({off}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. Value will be set to {end}"
                )
                off = end
            elif start is not None and off < start:
                warn(
                    f"New offset ({off}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. Value will be set to {start}"
                )
                off = start
            out[tp] = off
        return out

    def fetched(spec_ts: int, what: str) -> dict[tuple[str, int], int]:
        got = list_offsets(admin, partitions, spec_ts)
        for tp, off in got.items():
            if off is None:
                raise GroupsError(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
        return dict(got)

    if spec.kind == "to-offset":
        return clamp(dict.fromkeys(partitions, spec.value))
    if spec.kind == "to-earliest":
        return fetched(EARLIEST, "starting")
    if spec.kind == "to-latest":
        return fetched(LATEST, "ending")
    if spec.kind == "shift-by":
        missing = [tp for tp in partitions if tp not in current]
        if missing:
            t, p = missing[0]
            raise GroupsError(
                f"Cannot shift offset for partition {t}-{p} since there is no current committed offset"
            )
        return clamp({tp: current[tp] + spec.value for tp in partitions})
    if spec.kind == "to-datetime":
        got = list_offsets(admin, partitions, spec.value)
        empty = [tp for tp, off in got.items() if off is None]
        for t, p in empty:
            warn(f"Partition {p} from topic {t} is empty. Falling back to latest known offset.")
        ends = list_offsets(admin, empty, LATEST)
        out = {}
        for tp in partitions:
            off = got[tp] if got[tp] is not None else ends.get(tp)
            if off is None:
                raise GroupsError(f"Error getting offset by timestamp of topic partition: {tp[0]}-{tp[1]}")
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
