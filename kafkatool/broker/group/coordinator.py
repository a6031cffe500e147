"""The classic group coordinator, as Kafka's ``GroupCoordinator`` and ``GroupMetadataManager`` run it.

One event loop owns every group, so the state machine needs no locks: each
API call runs to completion between awaits, and timers are ``call_later``
handles (Kafka's purgatories):

* **Empty -> PreparingRebalance** on a first join, held for
  ``group.initial.rebalance.delay.ms``, extended by each new member up to the
  rebalance timeout (``InitialDelayedJoin``);
* **PreparingRebalance -> CompletingRebalance** once every known member
  rejoined (no pending ``MEMBER_ID_REQUIRED`` ids left) or the largest
  rebalance timeout passed (``DelayedJoin``); dynamic members that did not
  rejoin are dropped, the generation is bumped, the protocol chosen by vote,
  and every parked JoinGroup answered (member list to the leader only);
* **CompletingRebalance -> Stable** when the leader's SyncGroup is written to
  ``__consumer_offsets``; members that do not sync within the rebalance timeout
  are removed (``DelayedSync``);
* **-> PreparingRebalance** on a leave, a session expiry, a join of the leader
  or a join with changed metadata (a known static member replacing its id in
  Stable with the same protocol does not rebalance);
* **Empty -> Dead** when the group is deleted or its last offset expires.

Members' sessions are per-member timers reset by every heartbeat, join, sync
and commit; members parked in a join or a sync are exempt until the rebalance
ends (then the timers restart), as in Kafka.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from kafkatool.broker.group import persistence as P
from kafkatool.broker.group.consumer import ConsumerGroup, ConsumerGroupError, ConsumerGroups
from kafkatool.broker.group.hashing import partition_for
from kafkatool.broker.group.offsets import (
    MAX_METADATA_BYTES,
    OffsetAndMetadata,
    OffsetStore,
    oversized_metadata,
)
from kafkatool.broker.tasks import stop_tasks
from kafkatool.errors import KafkatoolError
from kafkatool.formats import internal_topics as IT
from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import ConsumerProtocolSubscription
from kafkatool.log.log import ORIGIN_COORDINATOR, RecordTooLargeError
from kafkatool.log.manager import LogDirOfflineError
from kafkatool.log.validator import RecordValidationError
from kafkatool.protocol.errors import ErrorCode

log = logging.getLogger("kafkatool.broker.group")

#: a new member parked in its first JoinGroup expires after this (Kafka's NewMemberJoinTimeoutMs)
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
#: batches read before yielding to the event loop while loading a partition
LOAD_BATCHES_PER_STEP = 200

DEFAULTS = {
    "offsets.topic.num.partitions": 50,
    "offsets.topic.segment.bytes": 104857600,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offset.metadata.max.bytes": MAX_METADATA_BYTES,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2**31 - 1,
}


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

#: allowed previous states of each state (Kafka's GroupState.validPreviousStates)
_VALID_PREVIOUS = {
    DEAD: {STABLE, PREPARING, COMPLETING, EMPTY, DEAD},
    COMPLETING: {PREPARING},
    STABLE: {COMPLETING},
    PREPARING: {STABLE, COMPLETING, EMPTY},
    EMPTY: {PREPARING},
}


#: Kafka's Group.GroupType names (ListGroups v5, ConsumerGroupDescribe)
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class JoinResult:
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    #: (member_id, group_instance_id, metadata); only for the leader
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    #: (member_id, instance_id, client_id, client_host, metadata, assignment)
    members: list[tuple[str, str | None, str, str, bytes, bytes]]


class Member:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_future",
        "sync_future",
        "is_new",
        "heartbeat",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_future: asyncio.Future | None = None
        self.sync_future: asyncio.Future | None = None
        self.is_new = False
        self.heartbeat: asyncio.TimerHandle | None = None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1])
            for a, b in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: set[str]) -> str:
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {sorted(candidates)}")


class Group:
    """One group's membership, generation and offsets (Kafka's ``GroupMetadata``)."""

    def __init__(self, group_id: str, partition: int, state: GroupState = EMPTY):
        self.group_id = group_id
        self.partition = partition
        self.state = state
        self.state_timestamp: int | None = now_ms()
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}
        self.static_members: dict[str, str] = {}
        self.supported_protocols: Counter = Counter()
        self.num_awaiting_join = 0
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets = OffsetStore()
        self.join_timer: asyncio.TimerHandle | None = None
        self.join_timer_initial = False
        self.sync_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation={self.generation}, members={len(self.members)})"

    # ------------------------------------------------------------------ state
    def transition(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp = now_ms()

    def can_rebalance(self) -> bool:
        return self.state in (STABLE, COMPLETING, EMPTY)

    # ------------------------------------------------------------------ members
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, join_future: asyncio.Future | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        handle = self.pending_members.pop(member.member_id, None)
        if handle is not None:
            handle.cancel()
        if join_future is not None:
            member.join_future = join_future
            self.num_awaiting_join += 1

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            handle = self.pending_members.pop(member_id, None)
            if handle is not None:
                handle.cancel()
            return None
        self.supported_protocols.subtract(member.protocol_names)
        self.supported_protocols += Counter()  # drop zero counts
        if member.join_future is not None:
            self.num_awaiting_join -= 1
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names)
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols += Counter()
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_future is not None:
            if member.join_future is None:
                self.num_awaiting_join += 1
            elif not member.join_future.done():
                # a retried JoinGroup replaces the parked one; the old request gets a retriable answer
                member.join_future.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            member.join_future = join_future

    def invoke_join(self, member: Member, result: JoinResult) -> None:
        fut = member.join_future
        if fut is not None:
            member.join_future = None
            self.num_awaiting_join -= 1
            if not fut.done():
                fut.set_result(result)

    def invoke_sync(self, member: Member, result: SyncResult) -> None:
        fut = member.sync_future
        if fut is not None:
            member.sync_future = None
            if not fut.done():
                fut.set_result(result)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, instance_id: str | None) -> int | None:
        """Kafka's validateCurrentMember: FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID / None."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation_id: int, *, transactional: bool
    ) -> int | None:
        """Kafka's ClassicGroup.validateOffsetCommit, for OffsetCommit and TxnOffsetCommit alike."""
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is EMPTY:
            # the admin client or a consumer without group management: allowed while the group is empty
            return None
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            err = self.validate_member(member_id, instance_id)
            if err is not None:
                return err
            if generation_id != self.generation:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        # no member id nor generation (OffsetCommit v0): only an empty group takes it; older
        # TxnOffsetCommit versions carry neither, so the transactional commit is not held to it
        if not transactional and self.state is not EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def join_error(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> int | None:
        """What fails any JoinGroup into this group, new member or current one, before the rest."""
        if self.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not self.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is EMPTY and not self.members:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in names)

    def select_protocol(self) -> str:
        n = len(self.members)
        candidates = {p for p, c in self.supported_protocols.items() if c == n}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        # most votes wins; ties go to the protocol the leader prefers (Kafka leaves ties to hash order)
        best = max(votes.values())
        tied = {p for p, c in votes.items() if c == best}
        leader = self.members.get(self.leader_id) if self.leader_id else None
        order = leader.protocol_names if leader is not None else sorted(tied)
        for name in order:
            if name in tied:
                return name
        return sorted(tied)[0]

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.join_future is not None:
            return True
        for mid, m in self.members.items():
            if m.join_future is not None:
                self.leader_id = mid
                return True
        return False

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != P.CONSUMER_PROTOCOL_TYPE or not self.members or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            decoded = IT.read_consumer_protocol(ConsumerProtocolSubscription, m.metadata(self.protocol_name))
            if decoded is None:
                return None
            topics.update(decoded[1].topics or [])
        return topics

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(COMPLETING)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(EMPTY)
        self.pending_sync.clear()

    def is_subscribed_to(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def summary(self) -> GroupSummary:
        if self.state is STABLE:
            members = [
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(self.protocol_name),
                    m.assignment,
                )
                for m in self.members.values()
            ]
            protocol = self.protocol_name or ""
        else:
            members = [
                (m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                for m in self.members.values()
            ]
            protocol = ""
        return GroupSummary(self.group_id, self.state.value, self.protocol_type or "", protocol, members)


class GroupCoordinator:
    """All groups of this broker; the handlers in ``broker/handlers/group.py`` call the ``handle_*`` methods."""

    def __init__(self, broker):
        self.broker = broker
        self.groups: dict[str, Group] = {}
        #: __consumer_offsets partitions being loaded (requests for their groups get 14)
        self.loading: set[int] = set()
        self.started = False
        self._tasks: list[asyncio.Task] = []
        self._num_partitions: int | None = None
        #: KIP-848 consumer groups (the same group-id namespace as ``groups``)
        self.consumer = ConsumerGroups(self)

    # ------------------------------------------------------------------ configuration
    def _cfg(self, name: str) -> int:
        return self.broker.config.int_or(name, DEFAULTS)

    @property
    def num_partitions(self) -> int:
        t = self.broker.topic(P.OFFSETS_TOPIC) if self.broker.metadata is not None else None
        if t is not None:
            return t.partitions
        if self._num_partitions is None:
            self._num_partitions = max(1, self._cfg("offsets.topic.num.partitions"))
        return self._num_partitions

    @property
    def retention_ms(self) -> int:
        return self._cfg("offsets.retention.minutes") * 60 * 1000

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        """Load every existing ``__consumer_offsets`` partition (in the background) and start expiry."""
        if self.started:
            return
        self.started = True
        loop = asyncio.get_running_loop()
        t = self.broker.topic(P.OFFSETS_TOPIC)
        if t is not None and self.broker.replicas is None:
            parts = [p for p in range(t.partitions) if self.broker.get_log(P.OFFSETS_TOPIC, p) is not None]
            self.loading.update(parts)
            self._tasks.append(loop.create_task(self._load_all(parts)))
        if not self.broker.read_only:
            self._tasks.append(loop.create_task(self._expiry_loop()))
        else:
            log.info(
                "read-only: the group coordinator keeps groups and committed offsets in memory only; "
                "commits are accepted, served back until shutdown and never written to %s",
                P.OFFSETS_TOPIC,
            )

    async def stop(self) -> None:
        await stop_tasks(self._tasks, "group coordinator")
        self._tasks.clear()
        self.consumer.cancel_all()
        for g in self.groups.values():
            self._cancel_timers(g)
            # Kafka's onGroupUnloaded: parked requests learn the coordinator is gone
            for m in g.members.values():
                g.invoke_join(m, JoinResult(ErrorCode.NOT_COORDINATOR, m.member_id))
                g.invoke_sync(m, SyncResult(ErrorCode.NOT_COORDINATOR))
        self.started = False

    def _cancel_timers(self, group: Group) -> None:
        for h in (group.join_timer, group.sync_timer, *group.pending_members.values()):
            if h is not None:
                h.cancel()
        group.join_timer = group.sync_timer = None
        for m in group.members.values():
            if m.heartbeat is not None:
                m.heartbeat.cancel()
                m.heartbeat = None

    def ensure_offsets_topic(self) -> int | None:
        """Create ``__consumer_offsets`` on first use, as Kafka does; an error code if it cannot be."""
        if self.broker.topic(P.OFFSETS_TOPIC) is not None:
            return None
        if self.broker.read_only:
            return None  # groups live in memory only (see _append)
        n = self.num_partitions
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self._cfg("offsets.topic.segment.bytes")),
        }
        if self.broker.replicas is not None:
            # cluster mode: written to ZooKeeper (replication factor capped by the live brokers at
            # first creation); the coordinator answers COORDINATOR_NOT_AVAILABLE until leaders exist
            live = len(self.broker.replicas.live_brokers)
            rf = max(1, min(self._cfg("offsets.topic.replication.factor"), live))
            try:
                self.broker.create_topic(P.OFFSETS_TOPIC, n, configs, replication_factor=rf)
                log.info("created %s with %d partitions, replication factor %d", P.OFFSETS_TOPIC, n, rf)
            except KafkatoolError as exc:  # another broker created it a moment ago
                log.debug("creating %s: %s", P.OFFSETS_TOPIC, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.broker.create_topic(P.OFFSETS_TOPIC, n, configs)
        log.info("created %s with %d partitions", P.OFFSETS_TOPIC, n)
        return None

    # ------------------------------------------------------------------ cluster mode
    def on_leadership_change(self, leaders: list[int], followers: list[int]) -> None:
        """GroupCoordinator.onElection / onResignation for ``__consumer_offsets`` partitions:
        load the groups of a partition this broker now leads (COORDINATOR_LOAD_IN_PROGRESS
        meanwhile), forget those of a partition it no longer leads (NOT_COORDINATOR)."""
        if not self.started:
            self.start()
        for p in followers:
            self._unload_partition(p)
        todo = [p for p in leaders if p not in self.loading]
        if todo:
            self.loading.update(todo)
            self._tasks.append(asyncio.get_running_loop().create_task(self._load_all(todo)))

    def _unload_partition(self, partition: int) -> None:
        gone = [g for g in self.groups.values() if g.partition == partition]
        for g in gone:
            self._cancel_timers(g)
            for m in g.members.values():
                g.invoke_join(m, JoinResult(ErrorCode.NOT_COORDINATOR, m.member_id))
                g.invoke_sync(m, SyncResult(ErrorCode.NOT_COORDINATOR))
            del self.groups[g.group_id]
        self.consumer.unload_partition(partition)
        self.loading.discard(partition)
        if gone:
            log.info("unloaded %s-%d: %d groups", P.OFFSETS_TOPIC, partition, len(gone))

    async def _load_all(self, partitions: list[int]) -> None:
        for p in partitions:
            try:
                await self._load_partition(p)
            except asyncio.CancelledError:
                raise
            except FormatError as exc:
                # bad data (a corrupt batch a clean-shutdown marker kept from recovery): Kafka's
                # "Error loading offsets from" (GroupMetadataManager.loadGroupsAndOffsets), the
                # partition then served with nothing of it installed, as there; one line here
                log.error("failed to load %s-%d: %s", P.OFFSETS_TOPIC, p, exc)
            except Exception:
                log.exception("failed to load %s-%d", P.OFFSETS_TOPIC, p)
            finally:
                self.loading.discard(p)

    async def _load_partition(self, partition: int) -> None:
        lg = self.broker.get_log(P.OFFSETS_TOPIC, partition)
        t0 = time.monotonic()
        loader = P.PartitionLoader()
        n = 0
        # a new leader reads to its log end (its high watermark may still lag: Kafka does the same)
        upper = lg.log_end_offset if self.broker.replicas is not None else lg.high_watermark
        for batch in lg.batches():
            if batch.base_offset >= upper:
                break
            loader.feed(batch)
            n += 1
            if n % LOAD_BATCHES_PER_STEP == 0:
                await asyncio.sleep(0)
        for msg in loader.skipped:
            log.warning("%s-%d: skipped an undecodable record at %s", P.OFFSETS_TOPIC, partition, msg)
        loaded = loader.result()
        for gid, lg_group in loaded.items():
            self._install_loaded_group(gid, partition, lg_group)
        log.log(
            logging.INFO if loader.records else logging.DEBUG,
            "loaded %s-%d: %d groups, %d records in %.3f s",
            P.OFFSETS_TOPIC,
            partition,
            len(loaded),
            loader.records,
            time.monotonic() - t0,
        )

    def _install_loaded_group(self, gid: str, partition: int, loaded: P.LoadedGroup) -> None:
        if loaded.consumer_records:
            if (
                self.consumer.install_loaded(gid, partition, loaded.consumer_records, loaded.offsets)
                is not None
            ):
                return
        group = group_from_loaded(gid, partition, loaded)
        self.groups[gid] = group
        for m in group.members.values():
            self._schedule_heartbeat(group, m)

    # ------------------------------------------------------------------ validation
    def _validate_status(self, group_id: str | None, *, allow_empty: bool) -> int | None:
        if group_id is None or (not allow_empty and group_id == ""):
            return ErrorCode.INVALID_GROUP_ID
        if not self.started:
            self.start()
        if self.broker.topic(P.OFFSETS_TOPIC) is None:
            err = self.ensure_offsets_topic()
            if err is not None:
                return err
        p = self.partition_for(group_id)
        if self.broker.replicas is not None and not self.broker.replicas.is_leader(P.OFFSETS_TOPIC, p):
            return ErrorCode.NOT_COORDINATOR
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    # ------------------------------------------------------------------ timers
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        if member.heartbeat is not None:
            member.heartbeat.cancel()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat = self._loop().call_later(
            timeout / 1000, self._on_heartbeat_expired, group, member.member_id, member
        )

    def _on_heartbeat_expired(self, group: Group, member_id: str, member: Member) -> None:
        if group.state is DEAD or group.members.get(member_id) is not member:
            return
        member.heartbeat = None
        # parked members are exempt until their rebalance completes, unless still new
        if not member.is_new and (member.join_future is not None or member.sync_future is not None):
            return
        log.info("member %s of group %s failed its session; removing it", member_id, group.group_id)
        self._remove_member_and_update_group(group, member, "session timeout")

    def _add_pending_member(self, group: Group, member_id: str, session_timeout_ms: int) -> None:
        group.pending_members[member_id] = self._loop().call_later(
            session_timeout_ms / 1000, self._on_pending_expired, group, member_id
        )

    def _on_pending_expired(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.pop(member_id, None)
            if group.state is PREPARING:
                self._try_complete_join(group)

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is COMPLETING:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        if group.join_timer is not None:
            group.join_timer.cancel()
        initial = group.state is EMPTY
        group.transition(PREPARING)
        log.info(
            "preparing to rebalance group %s with old generation %d (%s-%d) (reason: %s)",
            group.group_id,
            group.generation,
            P.OFFSETS_TOPIC,
            group.partition,
            reason,
        )
        if initial:
            delay = self._cfg("group.initial.rebalance.delay.ms")
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            self._schedule_delayed_join(group)

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        group.join_timer_initial = True
        group.join_timer = self._loop().call_later(
            delay_ms / 1000, self._on_initial_join_timer, group, delay_ms, remaining_ms
        )

    def _on_initial_join_timer(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        group.join_timer = None
        if group.state is not PREPARING:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            delay = min(self._cfg("group.initial.rebalance.delay.ms"), remaining_ms)
            self._schedule_initial_join(group, delay, max(remaining_ms - delay, 0))
            return
        self._complete_join(group)

    def _schedule_delayed_join(self, group: Group) -> None:
        group.join_timer_initial = False
        group.join_timer = self._loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._on_delayed_join_timer, group
        )
        # tryCompleteElseWatch: it may be complete already
        self._try_complete_join(group)

    def _on_delayed_join_timer(self, group: Group) -> None:
        group.join_timer = None
        if group.state is PREPARING:
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.state is not PREPARING or group.join_timer_initial or group.join_timer is None:
            return
        if group.has_all_members_joined():
            group.join_timer.cancel()
            group.join_timer = None
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin."""
        for m in [m for m in group.members.values() if m.join_future is None and m.group_instance_id is None]:
            log.info("group %s: removing member %s, which did not rejoin", group.group_id, m.member_id)
            self._drop_member(group, m)
        if group.state is DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self._schedule_delayed_join(group)
            return
        group.init_next_generation()
        if group.state is EMPTY:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            err = self._store_group(group, {})
            if err is not None:
                log.warning("failed to write empty metadata for group %s: %s", group.group_id, err)
            return
        log.info(
            "stabilized group %s generation %d (%s-%d) with %d members",
            group.group_id,
            group.generation,
            P.OFFSETS_TOPIC,
            group.partition,
            len(group.members),
        )
        for m in list(group.members.values()):
            result = JoinResult(
                ErrorCode.NONE,
                m.member_id,
                group.generation,
                group.protocol_type,
                group.protocol_name,
                group.leader_id or "",
                group.current_member_metadata() if group.is_leader(m.member_id) else [],
            )
            group.invoke_join(m, result)
            self._schedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync.add(m.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: Group) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        group.sync_timer = self._loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._on_pending_sync_expired, group, group.generation
        )

    def _cancel_sync_timer(self, group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_pending_sync_expired(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation or group.state not in (COMPLETING, STABLE):
            return
        if not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for mid in missing:
            m = group.members.get(mid)
            if m is not None:
                self._drop_member(group, m)
        log.info("group %s removed members who did not send SyncGroup: %s", group.group_id, missing)
        self._prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            group.invoke_sync(m, SyncResult(error))

    def _drop_member(self, group: Group, member: Member) -> None:
        if member.heartbeat is not None:
            member.heartbeat.cancel()
            member.heartbeat = None
        group.invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        group.invoke_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        self._drop_member(group, member)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state is PREPARING:
            self._try_complete_join(group)

    # ------------------------------------------------------------------ persistence
    def _append(self, group: Group, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append to the group's partition; raises on failure."""
        if self.broker.read_only:
            # serve --read-only: the coordinator works in memory (groups, assignments and commits
            # are kept until the broker stops) and never writes __consumer_offsets
            return
        lg = self.broker.get_log(P.OFFSETS_TOPIC, group.partition)
        if lg is None:
            if (P.OFFSETS_TOPIC, group.partition) in self.broker.manager.offline_partitions:
                # an offline partition's append is a KafkaStorageException: NOT_COORDINATOR
                raise LogDirOfflineError(f"{P.OFFSETS_TOPIC}-{group.partition} is on an offline log dir")
            raise LookupError(f"{P.OFFSETS_TOPIC}-{group.partition} is not available")
        t = self.broker.topic(P.OFFSETS_TOPIC)
        batch = P.build_batch(records, now_ms())
        try:
            info = lg.append_as_leader(batch, t.leader_epoch(group.partition), origin=ORIGIN_COORDINATOR)
            self.broker.metrics.topics.coordinator_append(P.OFFSETS_TOPIC, info, len(batch))
        except OSError as exc:
            self.broker.report_log_error(lg, "appending records to", exc)
            raise

    def _group_record(self, group: Group, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
        members = [
            P.MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        ]
        value = P.group_metadata_value(
            protocol_type=group.protocol_type,
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp if group.state_timestamp is not None else -1,
            members=members,
        )
        return P.group_metadata_key(group.group_id), value

    def _store_group(self, group: Group, assignment: dict[str, bytes]) -> int | None:
        """Kafka's storeGroup: the error code, or None once written."""
        try:
            self._append(group, [self._group_record(group, assignment)])
        except P.APPEND_ERRORS as exc:
            log.error("failed to write group %s: %s", group.group_id, exc)
            return P.append_error_code(exc)
        return None

    # ------------------------------------------------------------------ JoinGroup
    def handle_join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future:
        err = self._validate_status(group_id, allow_empty=False)
        if err is not None:
            return JoinResult(err, member_id)
        if not (
            self._cfg("group.min.session.timeout.ms")
            <= session_timeout_ms
            <= self._cfg("group.max.session.timeout.ms")
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        is_unknown = member_id == ""
        try:
            # a non-empty consumer group refuses classic members; an empty one is deleted
            consumer_offsets = self.consumer.convert_empty_to_classic(group_id)
        except ConsumerGroupError as exc:
            return JoinResult(exc.code, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id, self.partition_for(group_id))
            if consumer_offsets is not None:
                group.offsets = consumer_offsets
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if is_unknown:
            result = self._join_new_member(
                group, group_instance_id, require_known_member_id, supports_skip_assignment, *args
            )
        else:
            result = self._join_current_member(group, member_id, group_instance_id, *args)
        if group.state is PREPARING:
            self._try_complete_join(group)
        return result

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self._cfg("group.max.size")
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING:
            m = group.members.get(member_id)
            return (m is not None and m.join_future is not None) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(
        self,
        group: Group,
        instance_id: str | None,
        require_known: bool,
        supports_skip: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ):
        err = group.join_error(protocol_type, protocols)
        if err is not None:
            return JoinResult(err, "")
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                return self._update_static_member_and_rebalance(
                    group,
                    old_id,
                    new_id,
                    instance_id,
                    protocols,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    supports_skip,
                )
            return self._add_member_and_rebalance(
                group,
                new_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
        if require_known:
            self._add_pending_member(group, new_id, session_timeout_ms)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
        return self._add_member_and_rebalance(
            group,
            new_id,
            None,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )

    def _join_current_member(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ):
        err = group.join_error(protocol_type, protocols)
        if err is not None:
            return JoinResult(err, member_id)
        if member_id in group.pending_members:
            if instance_id is not None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            return self._add_member_and_rebalance(
                group,
                member_id,
                None,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
        err = group.validate_member(member_id, instance_id)
        if err is not None:
            return JoinResult(err, member_id)
        member = group.members[member_id]
        if group.state is PREPARING:
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, "member rejoining"
            )
        if group.state is COMPLETING:
            if member.matches(protocols):
                return self._current_generation_result(
                    group, member_id, with_members=group.is_leader(member_id)
                )
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms, "member metadata changed"
            )
        if group.state is STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                reason = "leader rejoining" if group.is_leader(member_id) else "member metadata changed"
                return self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms, reason
                )
            return self._current_generation_result(group, member_id, with_members=False)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _current_generation_result(self, group: Group, member_id: str, *, with_members: bool) -> JoinResult:
        return JoinResult(
            ErrorCode.NONE,
            member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if with_members else [],
        )

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> asyncio.Future:
        member = Member(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )
        member.is_new = True
        fut = self._loop().create_future()
        if group.state is PREPARING and group.generation == 0:
            group.new_member_added = True
        group.add(member, fut)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        return fut

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        reason: str,
    ) -> asyncio.Future:
        fut = self._loop().create_future()
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, fut)
        self._maybe_prepare_rebalance(group, f"{reason}: {member.member_id}")
        return fut

    def _replace_static_member(self, group: Group, instance_id: str, old_id: str, new_id: str) -> Member:
        member = group.members.pop(old_id)
        # the fenced instance's parked requests are answered now
        group.invoke_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        group.invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        group.members[new_id] = member
        if group.leader_id == old_id:
            group.leader_id = new_id
        group.static_members[instance_id] = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        return member

    def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        instance_id: str,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        supports_skip: bool,
    ):
        current_leader = group.leader_id or ""
        member = self._replace_static_member(group, instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        fut = self._loop().create_future()
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, fut)
        if group.state is STABLE:
            if group.protocol_name == group.select_protocol():
                log.info(
                    "static member %s of group %s rejoined as %s in Stable without a rebalance",
                    instance_id,
                    group.group_id,
                    new_id,
                )
                err = self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if err is not None:
                    group.update_member(member, old[0], old[1], old[2], None)
                    self._replace_static_member(group, instance_id, new_id, old_id)
                    self._schedule_heartbeat(group, member)
                    group.invoke_join(member, JoinResult(err, "", leader=current_leader))
                elif supports_skip:
                    is_leader = group.is_leader(new_id)
                    result = self._current_generation_result(group, new_id, with_members=is_leader)
                    result.skip_assignment = is_leader
                    group.invoke_join(member, result)
                else:
                    # before JoinGroup v9 the old leader id is returned, so a rejoining static leader does
                    # not run an assignment a Stable group would ignore
                    result = self._current_generation_result(group, new_id, with_members=False)
                    result.leader = current_leader
                    group.invoke_join(member, result)
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with new protocols"
                )
        elif group.state is COMPLETING:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        return fut

    # ------------------------------------------------------------------ SyncGroup
    def handle_sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future:
        err = self._validate_status(group_id, allow_empty=False)
        if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance state was lost with the load: have the member rejoin (older clients
            # do not expect 14 here)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if err is not None:
            return SyncResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is DEAD:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        err = group.validate_member(member_id, group_instance_id)
        if err is not None:
            return SyncResult(err)
        if generation_id != group.generation:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is PREPARING:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.state is STABLE:
            self._remove_pending_sync_member(group, member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance
        fut = self._loop().create_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            log.info(
                "assignment received from leader %s for group %s generation %d",
                member_id,
                group.group_id,
                group.generation,
            )
            assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            generation = group.generation
            err = self._store_group(group, assignment)
            if group.state is COMPLETING and generation == group.generation:
                if err is not None:
                    self._reset_and_propagate_assignment_error(group, err)
                    self._maybe_prepare_rebalance(group, f"error {err} storing the assignment")
                else:
                    for m in group.members.values():
                        m.assignment = assignment[m.member_id]
                        group.invoke_sync(
                            m,
                            SyncResult(
                                ErrorCode.NONE, group.protocol_type, group.protocol_name, m.assignment
                            ),
                        )
                    group.transition(STABLE)
        self._schedule_heartbeat(group, member)
        return fut

    # ------------------------------------------------------------------ Heartbeat
    def handle_heartbeat(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        err = self._validate_status(group_id, allow_empty=False)
        if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # Kafka answers blindly while loading
        if err is not None:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        err = group.validate_member(member_id, group_instance_id)
        if err is not None:
            return err
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        if group.state is PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------------ LeaveGroup
    def handle_leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """(top-level error, one error per leaving (member_id, group_instance_id))."""
        err = self._validate_status(group_id, allow_empty=False)
        if err is not None:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "":
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None or current not in group.members:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_member_and_update_group(group, group.members[current], "LeaveGroup")
                errors.append(ErrorCode.NONE)
            elif member_id in group.pending_members:
                group.remove(member_id)
                if group.state is PREPARING:
                    self._try_complete_join(group)
                errors.append(ErrorCode.NONE)
            else:
                e = group.validate_member(member_id, instance_id)
                if e is None:
                    log.info("member %s left group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.members[member_id], "LeaveGroup")
                    e = ErrorCode.NONE
                errors.append(e)
        return ErrorCode.NONE, errors

    # ------------------------------------------------------------------ OffsetCommit
    def handle_offset_commit(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[tuple[str, int], OffsetAndMetadata],
        api_version: int = 8,
    ) -> dict[tuple[str, int], int]:
        err = self._validate_status(group_id, allow_empty=True)
        if err is not None:
            return dict.fromkeys(offsets, err)
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            # ConsumerGroup.validateOffsetCommit: member epochs (OffsetCommit v9+)
            err = cg.validate_offset_commit(member_id, generation_id, api_version)
            if err is not None:
                return dict.fromkeys(offsets, err)
            return self._store_offsets(cg, offsets)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # v9+ (KIP-848): an unknown group is GROUP_ID_NOT_FOUND
                code = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
                return dict.fromkeys(offsets, code)
            log.info("creating simple consumer group %s via manual offset commit", group_id)
            group = self.groups[group_id] = Group(group_id, self.partition_for(group_id))
        err = group.validate_offset_commit(member_id, group_instance_id, generation_id, transactional=False)
        if err is not None:
            return dict.fromkeys(offsets, err)
        if group.state is COMPLETING:
            return dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):
            self._schedule_heartbeat(group, group.members[member_id])
        return self._store_offsets(group, offsets)

    def _store_offsets(self, group: Group, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict:
        result, valid = oversized_metadata(offsets, self._cfg("offset.metadata.max.bytes"))
        if valid:
            records = [
                (P.offset_commit_key(group.group_id, t, p), P.offset_commit_value(om))
                for (t, p), om in valid.items()
            ]
            code = ErrorCode.NONE
            try:
                self._append(group, records)
            except RecordTooLargeError:
                code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
            except RecordValidationError as exc:
                # maybeConvertOffsetCommitError passes LogValidator's error on as it is
                code = ErrorCode[exc.error_name]
            except LookupError:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            except OSError:
                log.exception("failed to write offsets of group %s", group.group_id)
                code = ErrorCode.NOT_COORDINATOR
            if code == ErrorCode.NONE:
                for tp, om in valid.items():
                    group.offsets.put(tp, om)
            for tp in valid:
                result[tp] = code
        return result

    # ------------------------------------------------------------------ OffsetFetch
    def handle_offset_fetch(
        self,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        require_stable: bool,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, list[tuple[tuple[str, int], OffsetAndMetadata | None, int]]]:
        err = self._validate_status(group_id, allow_empty=True)
        if err is not None:
            return err, []
        group = self.consumer.groups.get(group_id)
        if group is not None:
            err = group.validate_offset_fetch(member_id, member_epoch)
            if err is not None:
                return err, []
        else:
            group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return ErrorCode.NONE, [(tp, None, ErrorCode.NONE) for tp in partitions or []]
        tps = partitions if partitions is not None else list(group.offsets.offsets)
        out = []
        for tp in tps:
            if require_stable and group.offsets.has_pending(tp):
                out.append((tp, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
            else:
                out.append((tp, group.offsets.get(tp), ErrorCode.NONE))
        return ErrorCode.NONE, out

    # ------------------------------------------------------------------ admin
    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        err = self._validate_status(group_id, allow_empty=True)
        if err is not None:
            return err, GroupSummary(group_id, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, GroupSummary(group_id, DEAD.value, "", "", [])
        return ErrorCode.NONE, group.summary()

    def handle_list_groups(self, states: list[str] | None) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)])."""
        if not self.started and self.broker.metadata is not None:
            self.start()
        wanted = {s.lower() for s in states} if states else None
        out = []
        for g in self.groups.values():
            if g.state is DEAD:
                continue
            if wanted is not None and g.state.value.lower() not in wanted:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value, CLASSIC_GROUP_TYPE))
        for cg in self.consumer.groups.values():
            if wanted is not None and cg.state.lower() not in wanted:
                continue
            out.append((cg.group_id, cg.protocol_type, cg.state, CONSUMER_GROUP_TYPE))
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE), out

    def handle_delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            err = self._validate_status(gid, allow_empty=True)
            if err is not None:
                out[gid] = err
                continue
            cg = self.consumer.groups.get(gid)
            if cg is not None:
                out[gid] = self.consumer.delete(cg)
                continue
            group = self.groups.get(gid)
            if group is None or group.state is DEAD:
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is EMPTY:
                group.transition(DEAD)
                removed = self._cleanup_group(group, list(group.offsets.offsets))
                # NONE even when the tombstones could not be written (see _cleanup_group)
                out[gid] = ErrorCode.NONE
                log.info("group %s deleted; %d offsets removed", gid, removed)
            else:
                out[gid] = ErrorCode.NON_EMPTY_GROUP
        return out

    def handle_offset_delete(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict]:
        err = self._validate_status(group_id, allow_empty=True)
        if err is not None:
            return err, {}
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            return self._consumer_offset_delete(cg, partitions)
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        result: dict[tuple[str, int], int] = {}
        if group.state is EMPTY:
            eligible = list(partitions)
        elif group.protocol_type == P.CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    result[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            removed = self._cleanup_group(group, eligible)
            # NONE even when the tombstones could not be written (see _cleanup_group)
            result.update(dict.fromkeys(eligible, ErrorCode.NONE))
            log.info("group %s: offsets of %s deleted; %d offsets removed", group_id, eligible, removed)
        return ErrorCode.NONE, result

    def _consumer_offset_delete(self, cg, partitions: list[tuple[str, int]]) -> tuple[int, dict]:
        """OffsetDelete on a consumer group: the offsets of topics its members subscribe to stay
        (GROUP_SUBSCRIBED_TO_TOPIC) while it has members; the others are deleted.  As Kafka's
        KIP-848 coordinator (a write that fails leaves its state as it was), a failed append
        keeps the offsets and answers the top-level error of append_error_code, no partitions."""
        result: dict[tuple[str, int], int] = {}
        subscribed = set(cg.subscription_metadata) if cg.members else set()
        records = []
        for tp in partitions:
            if tp[0] in subscribed:
                result[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            result[tp] = ErrorCode.NONE
            if cg.offsets.get(tp) is not None:
                records.append((P.offset_commit_key(cg.group_id, tp[0], tp[1]), None))
        if records:
            try:
                self._append(cg, records)
            except P.APPEND_ERRORS as exc:
                log.error("failed to write tombstones for group %s: %s", cg.group_id, exc)
                return P.append_error_code(exc), {}
            for key_tp in [tp for tp in partitions if result[tp] == ErrorCode.NONE]:
                cg.offsets.remove(key_tp)
        return ErrorCode.NONE, result

    def _cleanup_group(self, group: Group, partitions: list[tuple[str, int]]) -> int:
        """Kafka's GroupMetadataManager.cleanupGroupMetadata for one classic group, the one path
        of DeleteGroups, OffsetDelete, offset expiry and a deleted topic's offsets.

        The offsets go from memory first, and the group too once it is Empty without offsets
        (Dead); then one batch of tombstones is appended (the group's own only when it has had
        a generation: a group that only commits offsets has no GroupMetadata record).  A failed
        append is only logged: the callers answer NONE, the state stays removed, and Kafka counts
        nothing (the tombstones are not retried; a reload would bring the offsets back).
        Returns how many offsets Kafka counts as removed: those of a successful append."""
        records: list[tuple[bytes, bytes | None]] = []
        removed = 0
        for tp in partitions:
            if group.offsets.remove(tp) is not None:
                removed += 1
                records.append((P.offset_commit_key(group.group_id, tp[0], tp[1]), None))
        if group.state is EMPTY and not len(group.offsets):
            log.info("group %s transitioned to Dead in generation %d", group.group_id, group.generation)
            group.transition(DEAD)
        if group.state is DEAD:
            self._cancel_timers(group)
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation > 0:
                    records.append((P.group_metadata_key(group.group_id), None))
        if not records:
            return 0
        try:
            self._append(group, records)
        except P.APPEND_ERRORS as exc:
            log.error(
                "failed to append %d tombstones to %s-%d for expired/deleted offsets and/or metadata"
                " for group %s: %s",
                len(records),
                P.OFFSETS_TOPIC,
                group.partition,
                group.group_id,
                exc,
            )
            return 0
        return removed

    def handle_deleted_topic(self, topic: str) -> int:
        """Drop every group's offsets of a deleted topic (Kafka's handleDeletedPartitions)."""
        removed = 0
        for group in list(self.groups.values()):
            if group.state is DEAD or group.partition in self.loading:
                continue
            tps = [tp for tp in group.offsets.offsets if tp[0] == topic]
            if tps:
                removed += self._cleanup_group(group, tps)
        if removed:
            log.info("removed %d offsets of deleted topic %s", removed, topic)
        return removed

    # ------------------------------------------------------------------ offsets retention
    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self._cfg("offsets.retention.check.interval.ms") / 1000)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    def expire_offsets(self, now: int | None = None) -> int:
        """Remove expired offsets (and groups left Empty without offsets); returns how many went
        as Kafka counts them (offset-expiration metrics): a classic group's whose tombstones were
        written, although all expired ones leave memory (_cleanup_group)."""
        now = now_ms() if now is None else now
        retention = self.retention_ms
        total = 0
        for group in list(self.groups.values()):
            if group.partition in self.loading or group.state is DEAD:
                continue
            expired = expiring_offsets(group, now, retention)
            idle = group.state is EMPTY and not len(group.offsets) and not group.pending_members
            if expired or idle:
                if expired:
                    log.info("group %s: %d offsets expired", group.group_id, len(expired))
                total += self._cleanup_group(group, expired)
        for cg in list(self.consumer.groups.values()):
            if cg.partition in self.loading:
                continue
            expired = expiring_offsets(cg, now, retention)
            if expired:
                try:
                    self._append(cg, [(P.offset_commit_key(cg.group_id, t, p), None) for t, p in expired])
                except P.APPEND_ERRORS as exc:
                    # the KIP-848 coordinator's write fails as a whole: the offsets stay
                    log.error("failed to expire offsets of group %s: %s", cg.group_id, exc)
                    continue
                for tp in expired:
                    cg.offsets.remove(tp)
                log.info("group %s: %d offsets expired", cg.group_id, len(expired))
                total += len(expired)
            if not cg.members and not len(cg.offsets):
                # GroupMetadataManager.maybeDeleteGroup: an empty consumer group without offsets goes
                self.consumer.delete(cg)
        return total


def group_coordinator(broker) -> GroupCoordinator:
    """The broker's group coordinator (made on first use)."""
    gc = getattr(broker, "group_coordinator", None)
    if gc is None:
        gc = broker.group_coordinator = GroupCoordinator(broker)
    return gc


def expiring_offsets(group, now: int, retention_ms: int) -> list[tuple[str, int]]:
    """The partitions whose committed offsets expire at ``now``: the coordinator's periodic
    expiration and the offline reader (``kafkatool groups --log-dir --at``) share this rule."""
    if isinstance(group, ConsumerGroup):
        # ConsumerGroup.offsetExpirationCondition: from the commit timestamp; the topics its
        # members subscribe to never expire (OffsetMetadataManager.cleanupExpiredOffsets)
        return group.offsets.expired(
            now,
            retention_ms,
            protocol_type="consumer",
            is_empty=False,
            is_stable=True,
            state_timestamp=None,
            subscribed_topics=set(group.subscription_metadata) if group.members else set(),
        )
    # GroupMetadata.removeExpiredOffsets for classic groups
    return group.offsets.expired(
        now,
        retention_ms,
        protocol_type=group.protocol_type,
        is_empty=group.state is EMPTY,
        is_stable=group.state is STABLE,
        state_timestamp=group.state_timestamp,
        subscribed_topics=group.subscribed_topics,
    )


def group_from_loaded(gid: str, partition: int, loaded: P.LoadedGroup) -> Group:
    """A classic group as the coordinator rebuilds it from ``__consumer_offsets`` (its last
    GroupMetadataValue and offsets): at start-up, and offline (``kafkatool groups --log-dir``)."""
    group = Group(gid, partition)
    group.offsets = loaded.offsets
    value = loaded.metadata
    if value is not None:
        group.protocol_type = value.protocol_type or None
        group.generation = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        ts = value.current_state_timestamp
        group.state_timestamp = ts if ts is not None and ts >= 0 else None
        for mm in value.members or []:
            m = Member(
                mm.member_id,
                mm.group_instance_id,
                mm.client_id,
                mm.client_host,
                mm.rebalance_timeout if mm.rebalance_timeout is not None else mm.session_timeout,
                mm.session_timeout,
                group.protocol_type or "",
                [(group.protocol_name or "", bytes(mm.subscription or b""))],
            )
            m.assignment = bytes(mm.assignment or b"")
            group.members[m.member_id] = m
            group.supported_protocols.update(m.protocol_names)
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.members:
            group.state = STABLE
        group.subscribed_topics = group.compute_subscribed_topics()
    else:
        group.state_timestamp = None
    return group
