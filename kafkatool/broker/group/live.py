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

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, describe_error
from kafkatool.broker.group.views import Committed, GroupView, MemberRow, build_rows
from kafkatool.formats import internal_topics as IT
from kafkatool.formats.generated import ConsumerProtocolAssignment
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode

LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 2, 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_DESCRIBE = 15, 16, 42, 47, 69
#: ListOffsets' special timestamps
LATEST, EARLIEST = -1, -2
#: states in which ConsumerGroupCommand resets offsets
INACTIVE = ("Empty", "Dead")


class GroupsError(KafkaAdminError):
    """A group operation the cluster refused as a whole (one line, Kafka's wording)."""


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        raise GroupsError(f"{what}: {describe_error(code, message)}", code)


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


def coordinator(admin: KafkaAdmin, group: str) -> int:
    """The coordinator's node id (FindCoordinator, key type GROUP)."""
    conn = admin._any()
    version = conn.version_for(FIND_COORDINATOR)
    info = API_BY_KEY[FIND_COORDINATOR]
    req = info.request(key_type=0, coordinator_keys=[group]) if version >= 4 else info.request(key=group)
    resp = conn.request(FIND_COORDINATOR, req, version)
    if version >= 4:
        (c,) = resp.coordinators
        _check(c.error_code, f"FindCoordinator for group '{group}'", c.error_message)
        node, host, port = c.node_id, c.host, c.port
    else:
        _check(resp.error_code, f"FindCoordinator for group '{group}'", resp.error_message)
        node, host, port = resp.node_id, resp.host, resp.port
    meta = admin.metadata_cached()
    if node not in meta.brokers:
        meta.brokers[node] = (host, port, None)
    return node


def _assignment_of(raw) -> list[tuple[str, int]]:
    decoded = IT.read_consumer_protocol(ConsumerProtocolAssignment, raw or b"")
    if decoded is None:
        return []
    return sorted((tp.topic, p) for tp in decoded[1].assigned_partitions or [] for p in tp.partitions)


def committed_offsets(admin: KafkaAdmin, group: str, node: int) -> dict[tuple[str, int], Committed]:
    """OffsetFetch of every partition the group committed (topics null: all)."""
    req = API_BY_KEY[OFFSET_FETCH].request(group_id=group, topics=None, require_stable=True)
    resp = admin.request(OFFSET_FETCH, req, node)
    _check(resp.error_code, f"OffsetFetch for group '{group}'")
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                _check(p.error_code, f"OffsetFetch {t.name}-{p.partition_index} for group '{group}'")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = Committed(p.committed_offset, p.metadata or "")
    return out


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
                _assignment_of(m.member_assignment),
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
    from kafkatool.protocol.generated.offset_commit_request import (
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    node = coordinator(admin, group)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append((p, off))
    req = API_BY_KEY[OFFSET_COMMIT].request(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            OffsetCommitRequestTopic(
                name=t,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in sorted(ps)
                ],
            )
            for t, ps in sorted(by_topic.items())
        ],
    )
    resp = admin.request(OFFSET_COMMIT, req, node)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


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
