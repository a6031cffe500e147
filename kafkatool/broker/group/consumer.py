"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Kafka's group-coordinator ``GroupMetadataManager`` / ``ConsumerGroup`` /
``CurrentAssignmentBuilder`` semantics:

* a heartbeat creates or updates the member; a changed subscription (topic
  names, regex) or changed subscribed-topic metadata bumps the group epoch;
* when the group epoch is ahead of the assignment epoch, the server-side
  assignor (``uniform`` or ``range``, the member's ``ServerAssignor`` or the
  first of ``group.consumer.assignors``) computes a new target assignment;
* each member reconciles towards its target incrementally: partitions it must
  give up are revoked first (UNREVOKED_PARTITIONS, same epoch), partitions
  still owned by another member wait (UNRELEASED_PARTITIONS), and the member
  moves to the target epoch when it owns nothing it should not;
* a member that stops heartbeating for ``group.consumer.session.timeout.ms``,
  or does not revoke within its rebalance timeout, is fenced; a static member
  (``InstanceId``) leaving with epoch -2 keeps its assignment for the
  instance that rejoins.

Every change is a list of records (``ConsumerGroupMetadata``,
``PartitionMetadata``, ``MemberMetadata``, ``TargetAssignment*``,
``CurrentMemberAssignment``, tombstones) appended to the group's
``__consumer_offsets`` partition through the one codec
(:mod:`kafkatool.formats.internal_topics`) and then replayed onto the in-memory
state by the same :meth:`ConsumerGroup.replay` that loads them at start-up,
so a restart rebuilds exactly what was served.

Regular expressions (RE2, as Kafka's RE2/J, full match) are resolved as
Kafka 4.0 resolves them (GroupMetadataManager.maybeUpdateRegularExpressions /
handleRegularExpressionsResult): asynchronously, after the heartbeat that
brought a new one is answered, and again when new topics exist (at most every
10 s); a member gets a regex's topics only once the group holds its
resolution (``ConsumerGroupRegularExpression``, record type 16), which then
bumps the group epoch.

Differences from Kafka 4.0, on purpose: a classic group converts to a consumer group only when it is
empty (Kafka's ``group.consumer.migration.policy=disabled``): a non-empty
classic group answers GROUP_ID_NOT_FOUND, a non-empty consumer group answers
classic JoinGroup with INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field, replace

import re2

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.assignors import ASSIGNORS, Assignment, MemberSpec, assign
from kafkatool.broker.group.offsets import OffsetStore
from kafkatool.errors import KafkatoolError
from kafkatool.formats import internal_topics as IT
from kafkatool.formats.generated import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kafkatool.formats.generated.consumer_group_current_member_assignment_value import (
    TopicPartitions as CurrentTopicPartitions,
)
from kafkatool.formats.generated.consumer_group_partition_metadata_value import TopicMetadata
from kafkatool.formats.generated.consumer_group_target_assignment_member_value import (
    TopicPartition as TargetTopicPartition,
)
from kafkatool.log import topic_settings as ts
from kafkatool.log.topic_settings import config_value_error
from kafkatool.protocol.errors import ErrorCode

log = logging.getLogger("kafkatool.broker.group")

__all__ = ["ConsumerGroup", "ConsumerGroupError", "Member"]

# MemberState (org.apache.kafka.coordinator.group.modern.MemberState)
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS, UNKNOWN = 0, 1, 2, 127
MEMBER_STATE_NAMES = {0: "stable", 1: "unrevoked_partitions", 2: "unreleased_partitions", 127: "unknown"}
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# ConsumerGroup.ConsumerGroupState
EMPTY, ASSIGNING, RECONCILING, STABLE_GROUP, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"

Record = tuple[int, object, object]  # (record type, key message, value message or None)

#: GroupMetadataManager.REGEX_BATCH_REFRESH_INTERVAL_MS: a group's regexes are refreshed at most
#: this often (a new regex waits for it too, unless the group holds no resolution)
REGEX_BATCH_REFRESH_INTERVAL_MS = 10_000


class ConsumerGroupError(KafkatoolError):
    """A heartbeat or group operation refused with a Kafka error code (the response's)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _norm(a: dict) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


@dataclass(frozen=True)
class Member:
    """ConsumerGroupMember: subscription (MemberMetadata) + assignment state (CurrentMemberAssignment)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == epoch

    def with_epoch(self, epoch: int) -> Member:
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def subscription_key(self) -> tuple:
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
        )


@dataclass(frozen=True)
class ResolvedRegex:
    """ResolvedRegularExpression: the topics a regex matched, the metadata version it was
    resolved against and when."""

    topics: frozenset[str]
    version: int
    timestamp: int


@dataclass(frozen=True)
class TopicInfo:
    topic_id: uuid.UUID
    name: str
    partitions: int


# ----------------------------------------------------------------------------- records


def member_metadata_record(group_id: str, m: Member) -> Record:
    return (
        IT.CONSUMER_GROUP_MEMBER_METADATA,
        ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor,
        ),
    )


def _current_parts(a: Assignment) -> list:
    return [CurrentTopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items())]


def current_assignment_record(group_id: str, m: Member) -> Record:
    return (
        IT.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
        ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch,
            previous_member_epoch=m.previous_member_epoch,
            state=m.state,
            assigned_partitions=_current_parts(m.assigned),
            partitions_pending_revocation=_current_parts(m.pending_revocation),
        ),
    )


def target_member_record(group_id: str, member_id: str, a: Assignment) -> Record:
    return (
        IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
        ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
        ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=[
                TargetTopicPartition(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items())
            ]
        ),
    )


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return (
        IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
        ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
    )


def group_epoch_record(group_id: str, epoch: int) -> Record:
    return (
        IT.CONSUMER_GROUP_METADATA,
        ConsumerGroupMetadataKey(group_id=group_id),
        ConsumerGroupMetadataValue(epoch=epoch),
    )


def partition_metadata_record(group_id: str, metadata: dict[str, TopicInfo]) -> Record:
    return (
        IT.CONSUMER_GROUP_PARTITION_METADATA,
        ConsumerGroupPartitionMetadataKey(group_id=group_id),
        ConsumerGroupPartitionMetadataValue(
            topics=[
                TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.partitions)
                for t in metadata.values()
            ]
        ),
    )


def regex_record(group_id: str, regex: str, resolved: ResolvedRegex) -> Record:
    return (
        IT.CONSUMER_GROUP_REGULAR_EXPRESSION,
        ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex),
        ConsumerGroupRegularExpressionValue(
            topics=sorted(resolved.topics), version=resolved.version, timestamp=resolved.timestamp
        ),
    )


def regex_tombstone(group_id: str, regex: str) -> Record:
    key = ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex)
    return (IT.CONSUMER_GROUP_REGULAR_EXPRESSION, key, None)


def _tombstone(record_type: int, group_id: str, member_id: str | None = None) -> Record:
    key_cls = IT.CONSUMER_GROUP_RECORDS[record_type][0]
    key = key_cls(group_id=group_id) if member_id is None else key_cls(group_id=group_id, member_id=member_id)
    return (record_type, key, None)


def remove_member_records(group_id: str, member_id: str) -> list[Record]:
    """GroupMetadataManager.removeMember: current, target, subscription tombstones (that order)."""
    return [
        _tombstone(IT.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
        _tombstone(IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
        _tombstone(IT.CONSUMER_GROUP_MEMBER_METADATA, group_id, member_id),
    ]


# ----------------------------------------------------------------------------- the group


class ConsumerGroup:
    """One consumer group's state, changed only by :meth:`replay`."""

    group_type = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id: str, partition: int):
        self.group_id = group_id
        self.partition = partition
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        #: (topic id, partition) -> epoch of the member that owns it (assigned or pending revocation)
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.subscription_metadata: dict[str, TopicInfo] = {}
        #: regex -> its resolution (ConsumerGroupRegularExpression records)
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.offsets = OffsetStore()
        #: the group epoch record exists (a tombstone makes the group gone)
        self.exists = False

    # ------------------------------------------------------------------ derived
    @property
    def state(self) -> str:
        """ConsumerGroup.maybeUpdateGroupState."""
        if not self.exists:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE_GROUP

    def subscribed_regexes(self) -> dict[str, int]:
        """ConsumerGroup.subscribedRegularExpressions: regex -> number of members using it."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.subscribed_topic_regex:
                counts[m.subscribed_topic_regex] = counts.get(m.subscribed_topic_regex, 0) + 1
        return counts

    def last_regex_refresh_ms(self) -> int:
        """ConsumerGroup.lastResolvedRegularExpressionRefreshTimeMs (0: none resolved)."""
        return max((r.timestamp for r in self.resolved_regexes.values()), default=0)

    def last_regex_version(self) -> int:
        return max((r.version for r in self.resolved_regexes.values()), default=0)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def preferred_assignor(self, default: str) -> str:
        """ConsumerGroup.computePreferredServerAssignor: the most used ServerAssignor, else the default."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda n: counts[n])

    # ------------------------------------------------------------------ replay
    def _remove_epochs(self, m: Member) -> None:
        for a in (m.assigned, m.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_epochs.pop((t, p), None)

    def _add_epochs(self, m: Member) -> None:
        for a in (m.assigned, m.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_epochs[(t, p)] = m.member_epoch

    def put_member(self, m: Member) -> None:
        old = self.members.get(m.member_id)
        if old is not None:
            self._remove_epochs(old)
            if old.instance_id is not None and old.instance_id != m.instance_id:
                self.static_members.pop(old.instance_id, None)
        self.members[m.member_id] = m
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id
        self._add_epochs(m)

    def replay(self, record_type: int, key, value) -> None:
        """Apply one record (GroupMetadataManager.replay for the consumer-group records)."""
        if record_type == IT.CONSUMER_GROUP_METADATA:
            if value is None:
                self.exists = False
                self.group_epoch = 0
            else:
                self.exists = True
                self.group_epoch = value.epoch
        elif record_type == IT.CONSUMER_GROUP_PARTITION_METADATA:
            self.subscription_metadata = (
                {}
                if value is None
                else {
                    t.topic_name: TopicInfo(t.topic_id, t.topic_name, t.num_partitions)
                    for t in value.topics or []
                }
            )
        elif record_type == IT.CONSUMER_GROUP_MEMBER_METADATA:
            if value is None:
                old = self.members.pop(key.member_id, None)
                if old is not None:
                    self._remove_epochs(old)
                    if (
                        old.instance_id is not None
                        and self.static_members.get(old.instance_id) == old.member_id
                    ):
                        del self.static_members[old.instance_id]
                return
            old = self.members.get(key.member_id) or Member(key.member_id)
            self.put_member(
                replace(
                    old,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=tuple(sorted(set(value.subscribed_topic_names or []))),
                    subscribed_topic_regex=value.subscribed_topic_regex,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    server_assignor=value.server_assignor,
                )
            )
        elif record_type == IT.CONSUMER_GROUP_REGULAR_EXPRESSION:
            if value is None:
                self.resolved_regexes.pop(key.regular_expression, None)
            else:
                self.resolved_regexes[key.regular_expression] = ResolvedRegex(
                    frozenset(value.topics or []), value.version, value.timestamp
                )
        elif record_type == IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif record_type == IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = _norm(
                    {tp.topic_id: tp.partitions for tp in value.topic_partitions or []}
                )
        elif record_type == IT.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
            old = self.members.get(key.member_id)
            if value is None:
                if old is not None:
                    self.put_member(
                        replace(
                            old,
                            member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                            assigned={},
                            pending_revocation={},
                        )
                    )
                return
            old = old or Member(key.member_id)
            self.put_member(
                replace(
                    old,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=value.state,
                    assigned=_norm({tp.topic_id: tp.partitions for tp in value.assigned_partitions or []}),
                    pending_revocation=_norm(
                        {tp.topic_id: tp.partitions for tp in value.partitions_pending_revocation or []}
                    ),
                )
            )

    # ------------------------------------------------------------------ offsets
    def validate_offset_commit(self, member_id: str, member_epoch: int, api_version: int) -> int | None:
        """ConsumerGroup.validateOffsetCommit (not transactional)."""
        if member_epoch < 0 and not self.members:
            return None
        m = self.members.get(member_id)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != m.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int | None:
        if member_id is None and member_epoch < 0:
            return None
        m = self.members.get(member_id or "")
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def delete_records(self) -> list[Record]:
        """GroupMetadataManager.createGroupTombstoneRecords for a consumer group."""
        out: list[Record] = []
        for mid in self.members:
            out.append(_tombstone(IT.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, self.group_id, mid))
        for mid in self.target:
            out.append(_tombstone(IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, self.group_id, mid))
        out.append(_tombstone(IT.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, self.group_id))
        for mid in self.members:
            out.append(_tombstone(IT.CONSUMER_GROUP_MEMBER_METADATA, self.group_id, mid))
        for regex in sorted(self.resolved_regexes):
            out.append(regex_tombstone(self.group_id, regex))
        out.append(_tombstone(IT.CONSUMER_GROUP_PARTITION_METADATA, self.group_id))
        out.append(_tombstone(IT.CONSUMER_GROUP_METADATA, self.group_id))
        return out


# ----------------------------------------------------------------------------- reconciliation


def _owns_any(owned: list | None, revoking: Assignment) -> bool:
    """CurrentAssignmentBuilder.ownsRevokedPartitions (owned None: unknown, so yes)."""
    if owned is None:
        return True
    for tp in owned:
        pending = revoking.get(tp.topic_id)
        if pending and any(p in pending for p in tp.partitions or []):
            return True
    return False


def reconcile(
    member: Member, target_epoch: int, target: Assignment, partition_epoch, owned: list | None
) -> Member:
    """CurrentAssignmentBuilder.build."""
    if member.state == STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state == UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise ConsumerGroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return _next_assignment(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next_assignment(member, member_epoch, target_epoch, target, partition_epoch, owned) -> Member:
    unreleased = False
    assigned: dict = {}
    revoking: dict = {}
    pending_assignment: dict = {}
    for t in set(target) | set(member.assigned):
        tgt = target.get(t, frozenset())
        cur = member.assigned.get(t, frozenset())
        keep = cur & tgt
        rev = cur - keep
        add = {p for p in tgt - keep if partition_epoch(t, p) == -1}
        if len(add) != len(tgt - keep):
            unreleased = True
        if keep:
            assigned[t] = keep
        if rev:
            revoking[t] = frozenset(rev)
        if add:
            pending_assignment[t] = add
    if revoking and _owns_any(owned, revoking):
        # revoke first: same epoch, wait until the member no longer reports them
        m = replace(member, state=UNREVOKED_PARTITIONS, assigned=_norm(assigned), pending_revocation=revoking)
        return m.with_epoch(member_epoch)
    for t, ps in pending_assignment.items():
        assigned[t] = frozenset(assigned.get(t, frozenset()) | ps)
    state = UNRELEASED_PARTITIONS if unreleased else STABLE
    m = replace(member, state=state, assigned=_norm(assigned), pending_revocation={})
    return m.with_epoch(target_epoch)


# ----------------------------------------------------------------------------- heartbeat


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    #: the member's assignment, when the response carries one
    assignment: Assignment | None
    records: list[Record]
    #: the member after this heartbeat (None when it left)
    member: Member | None
    #: the group's regexes to resolve now, after this heartbeat is answered (None: no refresh)
    refresh_regexes: frozenset[str] | None = None


def _resolve_subscription(
    members, topics_by_name, resolved: dict[str, ResolvedRegex]
) -> dict[str, TopicInfo]:
    """ConsumerGroup.computeSubscriptionMetadata: every existing topic any member subscribes to
    by name or through a regex the group has resolved (a regex not resolved yet adds nothing)."""
    names: set[str] = set()
    for m in members:
        names.update(m.subscribed_topic_names)
        r = resolved.get(m.subscribed_topic_regex) if m.subscribed_topic_regex else None
        if r is not None:
            names.update(r.topics)
    return {n: topics_by_name[n] for n in sorted(names) if n in topics_by_name}


def resolve_regexes(regexes, topics_by_name, internal) -> dict[str, frozenset[str]]:
    """GroupMetadataManager.refreshRegularExpressions: the topics whose names each regex fully
    matches (internal topics never match)."""
    out = {}
    for regex in regexes:
        try:
            pattern = compile_regex(regex)
        except re2.error:
            # validated when a member brought it; a pattern that no longer compiles matches nothing
            out[regex] = frozenset()
            continue
        out[regex] = frozenset(n for n in topics_by_name if n not in internal and pattern.fullmatch(n))
    return out


_REGEX_CACHE: dict[str, object] = {}
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's INVALID_REQUEST, not broker stderr


def compile_regex(text: str):
    """SubscribedTopicRegex compiled with RE2, the engine family of Kafka's RE2/J: linear time
    (a client's pattern cannot stall the event loop), no backreferences or lookarounds.
    Raises ``re2.error`` for a pattern RE2 refuses."""
    p = _REGEX_CACHE.get(text)
    if p is None:
        if len(_REGEX_CACHE) > 1024:
            _REGEX_CACHE.clear()
        p = _REGEX_CACHE[text] = re2.compile(text, _RE2_OPTIONS)
    return p


def member_topics(
    m: Member, metadata: dict[str, TopicInfo], resolved: dict[str, ResolvedRegex]
) -> frozenset[uuid.UUID]:
    """The topics a member is subscribed to (TargetAssignmentBuilder: names plus its regex's
    resolution)."""
    ids = {metadata[n].topic_id for n in m.subscribed_topic_names if n in metadata}
    r = resolved.get(m.subscribed_topic_regex) if m.subscribed_topic_regex else None
    if r is not None:
        ids.update(metadata[n].topic_id for n in r.topics if n in metadata)
    return frozenset(ids)


def _update_regexes(
    group: ConsumerGroup,
    old_regex: str | None,
    new_regex: str | None,
    records: list,
    *,
    now_ms: int,
    refresh_pending: bool,
    new_topics_version: int,
) -> tuple[bool, dict[str, ResolvedRegex], frozenset[str] | None]:
    """GroupMetadataManager.maybeUpdateRegularExpressions: (bump the group epoch, the group's
    resolutions after this heartbeat, the regexes to resolve asynchronously or None)."""
    gid = group.group_id
    counts = group.subscribed_regexes()
    resolved = dict(group.resolved_regexes)
    bump = False
    require_refresh = False
    if old_regex != new_regex:
        if old_regex and counts.get(old_regex, 0) == 1:
            # the member was the last one using it: the resolution goes
            records.append(regex_tombstone(gid, old_regex))
            resolved.pop(old_regex, None)
        if new_regex:
            if counts.get(new_regex, 0) == 0:
                # a regex no member uses is resolved afresh; a resolution left by members that
                # are gone is not used meanwhile
                if new_regex in resolved:
                    records.append(regex_tombstone(gid, new_regex))
                    del resolved[new_regex]
                require_refresh = True
            else:
                bump = new_regex in resolved
    # the refresh conditions: regexes are in use, none is being resolved, the last resolution is
    # older than the batch interval, and a regex is unresolved or new topics exist
    if not require_refresh and not counts:
        return bump, resolved, None
    if refresh_pending or now_ms <= group.last_regex_refresh_ms() + REGEX_BATCH_REFRESH_INTERVAL_MS:
        return bump, resolved, None
    after = dict(counts)
    if old_regex:
        after[old_regex] = after.get(old_regex, 0) - 1
    if new_regex:
        after[new_regex] = after.get(new_regex, 0) + 1
    in_use = frozenset(r for r, n in after.items() if n > 0)
    require_refresh |= len(in_use) != len(resolved)
    require_refresh |= group.last_regex_version() < new_topics_version
    if require_refresh and in_use:
        return bump, resolved, in_use
    return bump, resolved, None


def heartbeat(
    group: ConsumerGroup,
    *,
    member_id: str,
    member_epoch: int,
    instance_id: str | None,
    rack_id: str | None,
    rebalance_timeout_ms: int,
    client_id: str,
    client_host: str,
    subscribed_topic_names: list[str] | None,
    subscribed_topic_regex: str | None,
    server_assignor: str | None,
    owned: list | None,
    topics_by_name: dict[str, TopicInfo],
    default_assignor: str,
    heartbeat_interval_ms: int,
    new_member_id,
    now_ms: int = 0,
    regex_refresh_pending: bool = False,
    new_topics_version: int = 0,
) -> HeartbeatResult:
    """GroupMetadataManager.consumerGroupHeartbeat (a regular heartbeat: epoch >= 0).

    Computes from the group as it is; the caller appends ``records`` and replays them."""
    gid = group.group_id
    records: list[Record] = []
    create = member_epoch == 0
    replaced_id: str | None = None
    if not member_id:
        member_id = new_member_id()
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not create:
                raise ConsumerGroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}."
                )
            member = Member(member_id)
            log.info(
                "[GroupId %s] Member %s joins the consumer group using the consumer protocol.", gid, member_id
            )
        elif not create:
            # epoch 0 from a known member id is a rejoin (a client keeps its member id after being
            # fenced, KIP-1082): it gets its current assignment back; other epochs are checked
            _check_epoch(member, member_epoch, owned)
    else:
        static_id = group.static_members.get(instance_id)
        existing = group.members.get(static_id) if static_id is not None else None
        if create:
            if existing is None:
                member = group.members.get(member_id) or Member(member_id)
            else:
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise ConsumerGroupError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {instance_id} cannot join the group "
                        f"because the instance id is owned by {existing.member_id} member.",
                    )
                member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
                replaced_id = existing.member_id
                # GroupMetadataManager.replaceMember
                records += remove_member_records(gid, existing.member_id)
                records.append(member_metadata_record(gid, member))
                records.append(target_member_record(gid, member_id, group.target.get(existing.member_id, {})))
                records.append(current_assignment_record(gid, member))
                log.info(
                    "[GroupId %s] Static member with instance id %s re-joins the consumer group; "
                    "member %s replaces %s.",
                    gid,
                    instance_id,
                    member_id,
                    existing.member_id,
                )
        else:
            if existing is None:
                raise ConsumerGroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown."
                )
            if existing.member_id != member_id:
                raise ConsumerGroupError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member "
                    f"{existing.member_id}.",
                )
            _check_epoch(existing, member_epoch, owned)
            member = existing

    # 1. the member's subscription; a change bumps the group epoch
    updated = replace(
        member,
        instance_id=instance_id if instance_id is not None else member.instance_id,
        rack_id=rack_id if rack_id is not None else member.rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms
        if rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        server_assignor=server_assignor if server_assignor is not None else member.server_assignor,
        subscribed_topic_names=tuple(sorted(set(subscribed_topic_names)))
        if subscribed_topic_names is not None
        else member.subscribed_topic_names,
        subscribed_topic_regex=subscribed_topic_regex
        if subscribed_topic_regex is not None
        else member.subscribed_topic_regex,
        client_id=client_id,
        client_host=client_host,
    )
    if updated.subscribed_topic_regex == "":
        # an empty regex clears the regex subscription (the request cannot send null to mean "clear")
        updated = replace(updated, subscribed_topic_regex=None)
    bump = False
    if updated.subscription_key() != member.subscription_key():
        records.append(member_metadata_record(gid, updated))
        bump = updated.subscribed_topic_names != member.subscribed_topic_names
    # (a member replacing a static one starts from that member, and its regex)
    regex_bump, resolved, refresh = _update_regexes(
        group,
        member.subscribed_topic_regex,
        updated.subscribed_topic_regex,
        records,
        now_ms=now_ms,
        refresh_pending=regex_refresh_pending,
        new_topics_version=new_topics_version,
    )
    bump |= regex_bump
    group_epoch = group.group_epoch
    others = [m for mid, m in group.members.items() if mid not in (updated.member_id, replaced_id)]
    metadata = _resolve_subscription([*others, updated], topics_by_name, resolved)
    if metadata != group.subscription_metadata:
        bump = True
        records.append(partition_metadata_record(gid, metadata))
    if not group.exists and not bump:
        bump = True
    if bump:
        group_epoch += 1
        records.append(group_epoch_record(gid, group_epoch))
        log.info("[GroupId %s] Bumped group epoch to %d.", gid, group_epoch)

    # 2. a new target assignment when the group epoch is ahead of the assignment epoch
    if group_epoch > group.assignment_epoch:
        target = _update_target(
            group,
            group_epoch,
            replaced_id,
            updated,
            [*others, updated],
            metadata,
            resolved,
            default_assignor,
            records,
        )
        target_epoch = group_epoch
    else:
        target_epoch = group.assignment_epoch
        # ConsumerGroup.targetAssignment(memberId, instanceId): a static member replacing a
        # departed one is reconciled towards that member's target
        if updated.member_id in group.target or replaced_id is None:
            target = group.target.get(updated.member_id, {})
        else:
            target = group.target.get(replaced_id, {})

    # 3. reconcile the member towards its target
    before = updated
    if not updated.is_reconciled_to(target_epoch):
        updated = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
        if updated != before:
            records.append(current_assignment_record(gid, updated))
    full = member_epoch == 0 or (
        rebalance_timeout_ms != -1 and subscribed_topic_names is not None and owned is not None
    )
    changed = updated.assigned != member.assigned
    return HeartbeatResult(
        member_id=updated.member_id,
        member_epoch=updated.member_epoch,
        heartbeat_interval_ms=heartbeat_interval_ms,
        assignment=updated.assigned if (full or changed) else None,
        records=records,
        member=updated,
        refresh_regexes=refresh,
    )


def _check_epoch(member: Member, received: int, owned: list | None) -> None:
    """GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid."""
    if received > member.member_epoch:
        raise ConsumerGroupError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < member.member_epoch:
        subset = owned is not None and all(
            set(tp.partitions or []) <= member.assigned.get(tp.topic_id, frozenset()) for tp in owned
        )
        if received != member.previous_member_epoch or not subset:
            raise ConsumerGroupError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
                "rejoin.",
            )


def _update_target(
    group, group_epoch, replaced_id, updated, members, metadata, resolved, default_assignor, records
) -> Assignment:
    """GroupMetadataManager.updateTargetAssignment + TargetAssignmentBuilder: assign, write the
    changed member targets and the assignment epoch."""
    counts: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
    name = max(sorted(counts), key=lambda n: counts[n]) if counts else default_assignor
    partitions = {t.topic_id: t.partitions for t in metadata.values()}

    def current(m: Member) -> Assignment:
        # a static member replacing a departed one starts from that member's target
        if m is updated and replaced_id is not None:
            return group.target.get(replaced_id, {})
        return group.target.get(m.member_id, {})

    specs = [
        MemberSpec(m.member_id, m.instance_id, member_topics(m, metadata, resolved), current(m))
        for m in members
    ]
    new = assign(name, specs, partitions)
    log.info(
        "[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
        group.group_id,
        group_epoch,
        name,
    )
    for mid in sorted(new):
        if mid not in group.target or group.target[mid] != new[mid]:
            records.append(target_member_record(group.group_id, mid, new[mid]))
    records.append(target_epoch_record(group.group_id, group_epoch))
    return new.get(updated.member_id, {})


def leave_records(group: ConsumerGroup, member: Member, metadata_now: dict[str, TopicInfo]) -> list[Record]:
    """GroupMetadataManager.consumerGroupFenceMember: remove the member, refresh the subscribed
    topics' metadata without it, bump the group epoch."""
    gid = group.group_id
    records = remove_member_records(gid, member.member_id)
    regex = member.subscribed_topic_regex
    if regex and regex in group.resolved_regexes and group.subscribed_regexes().get(regex) == 1:
        # its last user is gone: the resolution goes, as when a member changes its regex (a
        # member that brings it back has it resolved afresh)
        records.append(regex_tombstone(gid, regex))
    if metadata_now != group.subscription_metadata:
        records.append(partition_metadata_record(gid, metadata_now))
    records.append(group_epoch_record(gid, group.group_epoch + 1))
    return records


def static_leave_records(group: ConsumerGroup, member: Member) -> list[Record]:
    """consumerGroupStaticMemberGroupLeave: epoch -2, assignment kept for the instance's return."""
    leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
    return [current_assignment_record(group.group_id, leaving)]


def validate_assignor(name: str | None, enabled: list[str]) -> None:
    if name is not None and name not in enabled:
        raise ConsumerGroupError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {name} is not supported. Supported assignors: {', '.join(enabled)}.",
        )


def enabled_assignors(text: str | None) -> list[str]:
    names = [n.strip() for n in (text or "uniform,range").split(",") if n.strip()]
    return [n for n in names if n in ASSIGNORS] or ["uniform", "range"]


# ----------------------------------------------------------------------------- the service


#: GroupCoordinatorConfig defaults
CONSUMER_DEFAULTS = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.max.size": 2147483647,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
}

#: GroupConfig (the configs of a GROUP config resource) -> the broker setting a group without an
#: override uses. Kafka 4.0 also has share.* group configs; this broker has no share groups.
GROUP_CONFIGS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
}


def validate_group_configs(props: dict[str, str], broker_cfg) -> None:
    """GroupConfig.validate: known names, each value parsed as ConfigDef parses an INT with its
    atLeast(1) validator (log/topic_settings.config_value_error, the one rule: a value past
    Integer.MAX_VALUE is "Not a number of type INT"), each within the broker's
    group.consumer.min/max bounds, the session timeout above the heartbeat interval (a name not
    set takes GroupConfig's default, as ConfigDef.parse does). ``broker_cfg(name)`` gives an int
    broker setting. Raises ConsumerGroupError(INVALID_CONFIG)."""
    bad = ErrorCode.INVALID_CONFIG
    values = {}
    for name, raw in props.items():
        if name not in GROUP_CONFIGS:
            raise ConsumerGroupError(bad, f"Unknown group config name: {name}")
        message = config_value_error(name, ts.INT, str(raw), 1)
        if message is not None:
            raise ConsumerGroupError(bad, message)
        values[name] = int(str(raw).strip())
    session = values.get(
        "consumer.session.timeout.ms", CONSUMER_DEFAULTS["group.consumer.session.timeout.ms"]
    )
    heartbeat = values.get(
        "consumer.heartbeat.interval.ms", CONSUMER_DEFAULTS["group.consumer.heartbeat.interval.ms"]
    )
    for value, name, bound, cmp in (
        (heartbeat, "consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", "greater"),
        (heartbeat, "consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", "less"),
        (session, "consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "greater"),
        (session, "consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms", "less"),
    ):
        limit = broker_cfg(bound)
        if (cmp == "greater" and value < limit) or (cmp == "less" and value > limit):
            raise ConsumerGroupError(bad, f"{name} must be {cmp} than or equal to {bound}")
    if session <= heartbeat:
        raise ConsumerGroupError(
            bad, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        )


class ConsumerGroups:
    """The consumer groups of a :class:`~kafkatool.broker.group.coordinator.GroupCoordinator`:
    heartbeats, describe, timers, and the records they append (through the coordinator's
    ``_append``, the one writer of ``__consumer_offsets``)."""

    def __init__(self, gc):
        self.gc = gc
        self.groups: dict[str, ConsumerGroup] = {}
        self._session: dict[tuple[str, str], object] = {}
        self._rebalance: dict[tuple[str, str], object] = {}
        #: group id -> the scheduled resolution of its regexes (Kafka's "<group>-regex" task)
        self._regex_refresh: dict[str, object] = {}
        #: the topic names seen last, and the version (a wall-clock ms, so it grows across
        #: restarts) of the last topic set with a new name: Kafka's lastMetadataImageWithNewTopics
        self._topic_names: frozenset[str] = frozenset()
        self._new_topics_version = 0

    # ------------------------------------------------------------------ configuration
    def _cfg(self, name: str) -> int:
        return self.gc.broker.config.int_or(name, CONSUMER_DEFAULTS)

    def group_cfg(self, gid: str, name: str) -> int:
        """GroupMetadataManager.consumerGroupSessionTimeoutMs / consumerGroupHeartbeatIntervalMs:
        the group's dynamic config (GroupConfigManager) over the broker setting."""
        raw = self.gc.broker.metadata.group_configs.get(gid, {}).get(name)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                pass
        return self._cfg(GROUP_CONFIGS[name])

    @property
    def assignors(self) -> list[str]:
        return enabled_assignors(self.gc.broker.config.get("group.consumer.assignors"))

    def topics_by_name(self) -> dict[str, TopicInfo]:
        out = {}
        for name, t in self.gc.broker.metadata.topics.items():
            out[name] = TopicInfo(uuid.UUID(bytes=t.topic_id.raw), name, t.partitions)
        return out

    def internal_topics(self) -> frozenset[str]:
        return frozenset(n for n, t in self.gc.broker.metadata.topics.items() if t.is_internal)

    def _topics_version(self, topics_by_name: dict) -> int:
        names = frozenset(topics_by_name)
        if not names <= self._topic_names:
            self._new_topics_version = max(self._new_topics_version + 1, int(time.time() * 1000))
        self._topic_names = names
        return self._new_topics_version

    # ------------------------------------------------------------------ writing
    def _write(self, group: ConsumerGroup, records: list[Record], extra: list | None = None) -> None:
        """Append the records (plus raw ``extra`` (key, value) pairs) and replay them; raises
        ConsumerGroupError when the partition cannot take them."""
        raw = list(extra or [])
        raw += [IT.consumer_group_record(rt, k, v) for rt, k, v in records]
        if raw:
            try:
                self.gc._append(group, raw)
            except P.APPEND_ERRORS as exc:
                log.error("failed to write consumer group %s: %s", group.group_id, exc)
                raise ConsumerGroupError(P.append_error_code(exc), str(exc)) from None
        for rt, k, v in records:
            group.replay(rt, k, v)

    # ------------------------------------------------------------------ loading
    def install_loaded(
        self, gid: str, partition: int, records: list[Record], offsets
    ) -> ConsumerGroup | None:
        group = ConsumerGroup(gid, partition)
        for rt, k, v in records:
            group.replay(rt, k, v)
        if not group.exists:
            return None
        group.offsets = offsets
        self.groups[gid] = group
        for m in group.members.values():
            self._schedule_session(group, m.member_id)
            if m.state == UNREVOKED_PARTITIONS:
                self._schedule_rebalance(group, m)
        return group

    # ------------------------------------------------------------------ timers
    def _loop(self):
        return self.gc._loop()

    def _cancel(self, table: dict, key) -> None:
        h = table.pop(key, None)
        if h is not None:
            h.cancel()

    def _schedule_session(self, group: ConsumerGroup, member_id: str) -> None:
        key = (group.group_id, member_id)
        self._cancel(self._session, key)
        timeout = self.group_cfg(group.group_id, "consumer.session.timeout.ms") / 1000.0
        self._session[key] = self._loop().call_later(
            timeout, self._fence_timer, group.group_id, member_id, None, "the member session expired"
        )

    def _schedule_rebalance(self, group: ConsumerGroup, m: Member) -> None:
        key = (group.group_id, m.member_id)
        self._cancel(self._rebalance, key)
        timeout = max(m.rebalance_timeout_ms, 0) / 1000.0
        self._rebalance[key] = self._loop().call_later(
            timeout,
            self._fence_timer,
            group.group_id,
            m.member_id,
            m.member_epoch,
            f"it failed to transition from epoch {m.member_epoch} within {m.rebalance_timeout_ms}ms",
        )

    def _cancel_timers(self, gid: str, member_id: str) -> None:
        self._cancel(self._session, (gid, member_id))
        self._cancel(self._rebalance, (gid, member_id))

    def unload_partition(self, partition: int) -> None:
        """The coordinator lost this ``__consumer_offsets`` partition: forget its groups."""
        for gid in [g for g, cg in self.groups.items() if cg.partition == partition]:
            for member_id in list(self.groups[gid].members):
                self._cancel_timers(gid, member_id)
            self._cancel(self._regex_refresh, gid)
            del self.groups[gid]

    def cancel_all(self) -> None:
        for table in (self._session, self._rebalance, self._regex_refresh):
            for h in table.values():
                h.cancel()
            table.clear()

    def _fence_timer(self, gid: str, member_id: str, epoch: int | None, why: str) -> None:
        table = self._session if epoch is None else self._rebalance
        table.pop((gid, member_id), None)
        group = self.groups.get(gid)
        m = group.members.get(member_id) if group is not None else None
        if m is None or (epoch is not None and (m.member_epoch != epoch or m.state != UNREVOKED_PARTITIONS)):
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s.", gid, member_id, why)
        try:
            self.fence(group, m)
        except ConsumerGroupError as exc:
            log.warning("[GroupId %s] could not fence member %s: %s", gid, member_id, exc.message)

    def _refresh_regexes(self, gid: str, member_id: str, regexes: frozenset[str]) -> None:
        """GroupMetadataManager.refreshRegularExpressions + handleRegularExpressionsResult:
        write each regex still in use with its topics; bump the group epoch when a regex's
        topics or the subscribed topics' metadata changed."""
        self._regex_refresh.pop(gid, None)
        group = self.groups.get(gid)
        if group is None:
            return
        topics = self.topics_by_name()
        version = self._topics_version(topics)
        now_ms = int(time.time() * 1000)
        found = resolve_regexes(regexes, topics, self.internal_topics())
        in_use = group.subscribed_regexes()
        resolved = dict(group.resolved_regexes)
        records: list[Record] = []
        bump = False
        for regex in sorted(found):
            if not in_use.get(regex):
                continue
            new = ResolvedRegex(found[regex], version, now_ms)
            old = resolved.get(regex)
            if old is None or old.topics != new.topics:
                bump = True
            resolved[regex] = new
            records.append(regex_record(gid, regex, new))
        metadata = _resolve_subscription(group.members.values(), topics, resolved)
        if metadata != group.subscription_metadata:
            bump = True
            records.append(partition_metadata_record(gid, metadata))
        if bump:
            records.append(group_epoch_record(gid, group.group_epoch + 1))
            log.info("[GroupId %s] Bumped group epoch to %d.", gid, group.group_epoch + 1)
        log.info(
            "[GroupId %s] Scanned %d topics to refresh regular expressions %s (member %s).",
            gid,
            len(topics),
            sorted(found),
            member_id,
        )
        try:
            self._write(group, records)
        except ConsumerGroupError as exc:
            log.warning("[GroupId %s] could not update regular expressions: %s", gid, exc.message)

    def fence(self, group: ConsumerGroup, m: Member) -> None:
        others = [x for x in group.members.values() if x.member_id != m.member_id]
        metadata = _resolve_subscription(others, self.topics_by_name(), group.resolved_regexes)
        self._write(group, leave_records(group, m, metadata))
        self._cancel_timers(group.group_id, m.member_id)

    # ------------------------------------------------------------------ heartbeat
    def _validate(self, req, version: int) -> None:
        bad = ErrorCode.INVALID_REQUEST
        if req.group_id == "":
            raise ConsumerGroupError(bad, "GroupId can't be empty.")
        if req.instance_id == "":
            raise ConsumerGroupError(bad, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise ConsumerGroupError(bad, "RackId can't be empty.")
        regex = req.subscribed_topic_regex if version >= 1 else None
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise ConsumerGroupError(bad, "MemberId can't be empty.")
        elif epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise ConsumerGroupError(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise ConsumerGroupError(bad, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and regex is None:
                raise ConsumerGroupError(
                    bad,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise ConsumerGroupError(bad, "MemberId can't be empty.")
            if req.instance_id is None:
                raise ConsumerGroupError(bad, "InstanceId can't be null.")
        else:
            raise ConsumerGroupError(bad, "MemberEpoch is invalid.")
        validate_assignor(req.server_assignor, self.assignors)
        if regex:
            try:
                compile_regex(regex)
            except re2.error as exc:
                why = (
                    exc.args[0].decode(errors="replace")
                    if exc.args and isinstance(exc.args[0], bytes)
                    else exc
                )
                raise ConsumerGroupError(
                    bad, f"SubscribedTopicRegex {regex!r} is not a valid regular expression: {why}"
                ) from None

    def _group_for(self, gid: str, create: bool) -> tuple[ConsumerGroup, list]:
        """getOrMaybeCreateConsumerGroup: (group, raw records deleting an empty classic group)."""
        group = self.groups.get(gid)
        if group is not None:
            return group, []
        classic = self.gc.groups.get(gid)
        if not create:
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        group = ConsumerGroup(gid, self.gc.partition_for(gid))
        if classic is None:
            return group, []
        if classic.members or classic.pending_members or classic.state.value != "Empty":
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group")
        # an empty classic group is replaced (its offsets stay with the group id)
        group.offsets = classic.offsets
        return group, [(IT.group_metadata_key(gid), None)]

    def handle_heartbeat(self, req, version: int, client_id: str, client_host: str) -> dict:
        """Response fields (error_code, error_message, member_id, member_epoch,
        heartbeat_interval_ms, assignment)."""
        try:
            self._validate(req, version)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, version, client_id, client_host)
        except ConsumerGroupError as exc:
            return {"error_code": exc.code, "error_message": exc.message}

    def _heartbeat(self, req, version: int, client_id: str, client_host: str) -> dict:
        gid = req.group_id
        group, extra = self._group_for(gid, req.member_epoch == 0)
        is_new = gid not in self.groups
        if (
            req.member_epoch == 0
            and req.member_id not in group.members
            and len(group.members) >= self._cfg("group.consumer.max.size")
        ):
            raise ConsumerGroupError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {len(group.members)} members.",
            )
        topics = self.topics_by_name()
        result = heartbeat(
            group,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=req.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if version >= 1 else None,
            server_assignor=req.server_assignor,
            owned=req.topic_partitions,
            topics_by_name=topics,
            default_assignor=self.assignors[0],
            heartbeat_interval_ms=self.group_cfg(gid, "consumer.heartbeat.interval.ms"),
            new_member_id=lambda: str(uuid.uuid4()),
            now_ms=int(time.time() * 1000),
            regex_refresh_pending=gid in self._regex_refresh,
            new_topics_version=self._topics_version(topics),
        )
        before = group.members.get(result.member_id)
        self._write(group, result.records, extra)
        if is_new and group.exists:
            if gid in self.gc.groups:
                self.gc._cancel_timers(self.gc.groups[gid])
                del self.gc.groups[gid]
            self.groups[gid] = group
        if result.refresh_regexes:
            # resolved after this heartbeat is answered, as Kafka's executor task is
            self._regex_refresh[gid] = self._loop().call_soon(
                self._refresh_regexes, gid, result.member_id, result.refresh_regexes
            )
        m = group.members.get(result.member_id)
        if m is not None:
            self._schedule_session(group, m.member_id)
            if before is None or before.member_epoch != m.member_epoch or before.state != m.state:
                if m.state == UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group, m)
                else:
                    self._cancel(self._rebalance, (gid, m.member_id))
        return {
            "error_code": 0,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval_ms": result.heartbeat_interval_ms,
            "assignment": result.assignment,
        }

    def _leave(self, req) -> dict:
        gid = req.group_id
        group = self.groups.get(gid)
        if group is None:
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        if req.instance_id is None:
            m = group.members.get(req.member_id)
            if m is None:
                raise ConsumerGroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {gid}."
                )
            log.info("[GroupId %s] Member %s left the consumer group.", gid, m.member_id)
            self.fence(group, m)
            return {"error_code": 0, "member_id": req.member_id, "member_epoch": req.member_epoch}
        mid = group.static_members.get(req.instance_id)
        m = group.members.get(mid) if mid is not None else None
        if m is None:
            raise ConsumerGroupError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
            )
        if m.member_id != req.member_id:
            raise ConsumerGroupError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                f"{m.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info(
                "[GroupId %s] Static Member %s with instance id %s temporarily left the consumer group.",
                gid,
                m.member_id,
                req.instance_id,
            )
            self._write(group, static_leave_records(group, m))
            self._cancel(self._rebalance, (gid, m.member_id))
            return {
                "error_code": 0,
                "member_id": m.member_id,
                "member_epoch": LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            }
        log.info(
            "[GroupId %s] Static Member %s with instance id %s left the consumer group.",
            gid,
            mid,
            req.instance_id,
        )
        self.fence(group, m)
        return {"error_code": 0, "member_id": req.member_id, "member_epoch": req.member_epoch}

    # ------------------------------------------------------------------ admin
    def delete(self, group: ConsumerGroup) -> int:
        """DeleteGroups of an empty consumer group: every record's tombstone and the offsets'."""
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        extra = [(IT.offset_commit_key(group.group_id, t, p), None) for t, p in list(group.offsets.offsets)]
        try:
            self._write(group, group.delete_records(), extra)
        except ConsumerGroupError as exc:
            return exc.code
        group.offsets.offsets.clear()
        self.groups.pop(group.group_id, None)
        log.info("group %s deleted", group.group_id)
        return ErrorCode.NONE

    def convert_empty_to_classic(self, gid: str):
        """A classic JoinGroup for an empty consumer group deletes it (Kafka's
        maybeDeleteEmptyConsumerGroup); returns its offsets, or None when there is no such group.
        Raises ConsumerGroupError(INCONSISTENT_GROUP_PROTOCOL) for a non-empty one."""
        group = self.groups.get(gid)
        if group is None:
            return None
        if group.members:
            raise ConsumerGroupError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Group {gid} is a consumer group with members."
            )
        self._write(group, group.delete_records())
        self.groups.pop(gid, None)
        return group.offsets

    def describe(self, gid: str) -> dict:
        group = self.groups.get(gid)
        if group is None:
            return {"group_id": gid, "error_code": ErrorCode.GROUP_ID_NOT_FOUND}
        names = {t.topic_id: n for n, t in self.topics_by_name().items()}

        def parts(a: Assignment):
            return [(t, names[t], sorted(ps)) for t, ps in sorted(a.items()) if t in names]

        return {
            "group_id": gid,
            "error_code": 0,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.preferred_assignor(self.assignors[0]),
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": parts(m.assigned),
                    "target_assignment": parts(group.target.get(m.member_id, {})),
                }
                for m in group.members.values()
            ],
        }
