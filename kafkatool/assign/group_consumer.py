"""``kafkatool consume --group``: a classic consumer group member, as Kafka 3.7's KafkaConsumer
(ConsumerCoordinator over AbstractCoordinator) is one for kafka-console-consumer.sh.

* Membership: FindCoordinator, JoinGroup (protocol type ``consumer``, one protocol: ``range``
  with ConsumerProtocolSubscription v3 bytes, formats/internal_topics' codec; a v4+ coordinator's
  MEMBER_ID_REQUIRED answered by joining again with the id it gave), SyncGroup (the leader
  computes every member's partitions with Kafka's RangeAssignor rule: :func:`range_assign`),
  Heartbeat every heartbeat.interval.ms between fetches, a rejoin on REBALANCE_IN_PROGRESS
  (generation kept), ILLEGAL_GENERATION (generation reset) or UNKNOWN_MEMBER_ID (member id reset
  too), as AbstractCoordinator's handlers; a coordinator error or a lost connection sends
  FindCoordinator again. LeaveGroup when the command ends (Ctrl-C too), unless the member is
  static (group.instance.id), as Kafka's consumer.
* The protocol is eager (range): before a rejoin the member commits (auto commit) and gives up
  every partition (ConsumerCoordinator.onJoinPrepare).
* Positions: the group's committed offsets (OffsetFetch, require_stable), else auto.offset.reset
  (ListOffsets earliest/latest at the leader; "none" is an error).
* Commits (enable.auto.commit): every auto.commit.interval.ms between fetches, before a rejoin
  and at the end, of each assigned partition's position (the next offset after the records the
  command printed: unprinted records are given back first, ConsoleConsumer's
  resetUnconsumedOffsets).
* A RebalanceListener (ConsumerRebalanceListener) hears of the partitions revoked before a rejoin
  (none at the first join: no generation yet, as Kafka's onJoinPrepare) and of each assignment
  (`perf consume` times its rebalances by it). fetch.max.bytes and max.partition.fetch.bytes
  size each Fetch.
* The subscription: a topic, or a pattern matched against the cluster's topics at every metadata
  refresh (metadata.max.age.ms); the leader rejoins when a subscribed topic's partition count
  changes, any member when its pattern matches another set of topics (ConsumerCoordinator's
  rejoinNeededOrPending).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kafkatool.assign import client_config as CC
from kafkatool.assign import group_client as GC
from kafkatool.assign.consume import (
    MAX_FAILURES,
    RETRY_BACKOFF_S,
    ConsumeError,
    LiveConsumer,
    NotYet,
    matching_topics,
    topic_partitions,
    waiting_line,
)
from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, backoff_s, describe_error
from kafkatool.broker.group.assignors import range_ranges
from kafkatool.errors import KafkatoolError
from kafkatool.formats import internal_topics as IT
from kafkatool.formats.generated import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafkatool.formats.message_formatter import ConsumerRecord
from kafkatool.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
PROTOCOL_TYPE = "consumer"
RANGE = "range"
#: partition.assignment.strategy values that name the range assignor
RANGE_NAMES = (RANGE, "org.apache.kafka.clients.consumer.RangeAssignor")
LEAVE_REASON = "the consumer is being closed"  # AbstractCoordinator.close

TopicPartition = tuple[str, int]

# ----------------------------------------------------------------------------- settings
#: Kafka 3.7 ConsumerConfig's configs this consumer acts on: name -> (type, default, minimum,
#: choices); ConsoleConsumer's own defaults: client.id console-consumer, auto.offset.reset latest
#: (earliest with --from-beginning: None here, decided by the command)
APPLIED: dict[str, tuple[str, str | None, int | None, list[str] | None]] = {
    "group.id": ("STRING", None, None, None),
    "client.id": ("STRING", "console-consumer", None, None),
    "auto.offset.reset": ("STRING", None, None, ["latest", "earliest", "none"]),
    "enable.auto.commit": ("BOOLEAN", "true", None, None),
    "auto.commit.interval.ms": ("INT", "5000", 0, None),
    "session.timeout.ms": ("INT", "45000", None, None),
    "heartbeat.interval.ms": ("INT", "3000", None, None),
    "max.poll.interval.ms": ("INT", "300000", 1, None),
    "group.instance.id": ("STRING", None, None, None),
    "isolation.level": ("STRING", None, None, ["read_committed", "read_uncommitted"]),
    "metadata.max.age.ms": ("LONG", "300000", 0, None),
    "partition.assignment.strategy": ("STRING", RANGE, None, None),
    "exclude.internal.topics": ("BOOLEAN", "true", None, None),
    "allow.auto.create.topics": ("BOOLEAN", "true", None, None),
    "retry.backoff.ms": ("LONG", "100", 0, None),
    "retry.backoff.max.ms": ("LONG", "1000", 0, None),
    "fetch.max.bytes": ("INT", "52428800", 0, None),
    "max.partition.fetch.bytes": ("INT", "1048576", 0, None),
    "check.crcs": ("BOOLEAN", "true", None, None),
}
#: Kafka 3.7 consumer configs taken without effect on which records are printed or committed
#: (fetch sizes and waits, sockets, backoffs, metrics; what ConsoleConsumer sets itself)
TAKEN_SILENTLY = frozenset(
    {
        "bootstrap.servers",
        "key.deserializer",
        "value.deserializer",
        "fetch.min.bytes",
        "fetch.max.wait.ms",
        "max.poll.records",
        "client.rack",
        "request.timeout.ms",
        "default.api.timeout.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "send.buffer.bytes",
        "receive.buffer.bytes",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "client.dns.lookup",
        "metrics.sample.window.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metric.reporters",
        "auto.include.jmx.reporter",
        "enable.metrics.push",
        "security.providers",
    }
)
_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass
class ConsumerSettings:
    group_id: str | None
    client_id: str
    auto_offset_reset: str | None
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    group_instance_id: str | None
    isolation_level: str | None
    metadata_max_age_ms: int
    exclude_internal_topics: bool
    #: allow.auto.create.topics: the Metadata requests of a --topic ask the broker to create it
    allow_auto_create_topics: bool
    #: retry.backoff.ms, retry.backoff.max.ms: a metadata refresh's backoff (a topic waited for)
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    #: fetch.max.bytes and max.partition.fetch.bytes: the byte limits of each Fetch
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    #: check.crcs: each fetched batch's CRC checked; a corrupt one ends the consumer
    check_crcs: bool = True
    #: security.protocol, ssl.*, sasl.* as given (for ClientSecurity, over --command-config's)
    security: dict[str, str] = field(default_factory=dict)
    #: lines Kafka's consumer logs as warnings (unknown configs)
    notes: list[str] = field(default_factory=list)


def consumer_settings(props: dict[str, str]) -> ConsumerSettings:
    """The consumer configs, checked as KafkaConsumer's ConfigDef checks them (assign/client_config,
    the producer's rules too): a wrong value is Kafka's ConfigException (ConsumeError); a name
    Kafka's consumer does not know is a warning (logUnused) and left out; the consumer's names
    without effect here are taken silently; security configs go to the client's security;
    interceptor.classes asks for what this consumer does not do and is refused."""
    notes: list[str] = []
    security: dict[str, str] = {}
    for name in props:
        if name in APPLIED or name in TAKEN_SILENTLY:
            continue
        if CC.is_security_config(name):
            security[name] = props[name]
        elif name == "interceptor.classes":
            if props[name].strip():
                raise ConsumeError(
                    f"{name}={props[name]}: kafkatool consume has no interceptors; leave it out"
                )
        else:
            notes.append(CC.unknown_config(name))

    def value(name: str):
        kind, default, low, choices = APPLIED[name]
        raw = props.get(name, default)
        if raw is None:
            return None
        if name == "isolation.level":
            raw = raw.strip().lower()  # CaseInsensitiveValidString
        try:
            return CC.parse_value(name, raw, kind, low, None, choices)
        except CC.ClientConfigError as exc:
            raise ConsumeError(str(exc)) from None

    strategies = [x.strip() for x in value("partition.assignment.strategy").split(",") if x.strip()]
    if not any(x in RANGE_NAMES for x in strategies):
        raise ConsumeError(
            f"partition.assignment.strategy {props['partition.assignment.strategy']}: this consumer "
            f"implements the range assignor only (range, {RANGE_NAMES[1]})"
        )
    instance = value("group.instance.id")
    if instance is not None and (not _INSTANCE_ID.fullmatch(instance) or len(instance) > 249):
        # JoinGroupRequest.validateGroupInstanceId
        raise ConsumeError(
            f'Group instance id "{instance}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
            if instance
            else "Group instance id must be non-empty string"
        )
    s = ConsumerSettings(
        group_id=value("group.id"),
        client_id=value("client.id"),
        auto_offset_reset=value("auto.offset.reset"),
        enable_auto_commit=value("enable.auto.commit"),
        auto_commit_interval_ms=value("auto.commit.interval.ms"),
        session_timeout_ms=value("session.timeout.ms"),
        heartbeat_interval_ms=value("heartbeat.interval.ms"),
        max_poll_interval_ms=value("max.poll.interval.ms"),
        group_instance_id=instance,
        isolation_level=value("isolation.level"),
        metadata_max_age_ms=value("metadata.max.age.ms"),
        exclude_internal_topics=value("exclude.internal.topics"),
        allow_auto_create_topics=value("allow.auto.create.topics"),
        retry_backoff_ms=value("retry.backoff.ms"),
        retry_backoff_max_ms=value("retry.backoff.max.ms"),
        fetch_max_bytes=value("fetch.max.bytes"),
        max_partition_fetch_bytes=value("max.partition.fetch.bytes"),
        check_crcs=value("check.crcs"),
        security=security,
        notes=notes,
    )
    if s.heartbeat_interval_ms >= s.session_timeout_ms:
        raise ConsumeError("Heartbeat must be set lower than the session timeout")  # Heartbeat's check
    return s


def auto_offset_reset(props: dict[str, str]) -> str:
    """A KafkaConsumer's auto.offset.reset among ``props`` (default latest), checked as
    consumer_settings checks it; the other configs are not looked at (StreamsResetter's embedded
    consumer, which only asks for a position)."""
    kind, _default, low, choices = APPLIED["auto.offset.reset"]
    raw = props.get("auto.offset.reset")
    if raw is None:
        return "latest"
    try:
        return CC.parse_value("auto.offset.reset", raw, kind, low, None, choices)
    except CC.ClientConfigError as exc:
        raise ConsumeError(str(exc)) from None


# ----------------------------------------------------------------------------- RangeAssignor
def range_assign(
    partitions_per_topic: dict[str, int],
    members: dict[str, tuple[list[str], str | None]],
) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor (without rack awareness: this consumer sends no rack), the rule
    broker/group/assignors.range_ranges runs for KIP-848 groups too. ``members``: member id ->
    (subscribed topics, group.instance.id); a topic without metadata is skipped."""
    got = range_ranges(members, partitions_per_topic)
    return {m: [(t, p) for t, r in sorted(a.items()) for p in r] for m, a in got.items()}


def subscription_bytes(topics: list[str], generation: int) -> bytes:
    """ConsumerProtocol.serializeSubscription of an eager member (no owned partitions), v3."""
    return IT.write_consumer_protocol(
        ConsumerProtocolSubscription(
            topics=sorted(topics), user_data=None, owned_partitions=[], generation_id=generation, rack_id=None
        )
    )


def assignment_bytes(partitions: list[TopicPartition]) -> bytes:
    """ConsumerProtocol.serializeAssignment (no user data), v3."""
    from kafkatool.formats.generated.consumer_protocol_assignment import TopicPartition as Assigned

    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return IT.write_consumer_protocol(
        ConsumerProtocolAssignment(
            assigned_partitions=[Assigned(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())],
            user_data=None,
        )
    )


def read_subscription(raw) -> list[str]:
    decoded = IT.read_consumer_protocol(ConsumerProtocolSubscription, raw or b"")
    return [] if decoded is None else list(decoded[1].topics or [])


# ----------------------------------------------------------------------------- the member
class RebalanceListener(Protocol):
    """ConsumerRebalanceListener: told of the partitions given up before a rejoin (an eager
    member gives up all of them; not at the first join, which has no generation yet) and of
    those a completed join assigned."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...


class _Rejoin(KafkatoolError):
    """A join round must start again (an error the coordinator protocol retries); caught inside
    this module."""


class GroupConsumer:
    """A consumer group member that fetches its partitions with :class:`LiveConsumer`; ``log``
    gets the warnings Kafka's consumer logs (a failed auto commit or LeaveGroup)."""

    def __init__(
        self,
        admin: KafkaAdmin,
        settings: ConsumerSettings,
        *,
        topic: str | None,
        pattern: re.Pattern | None,
        isolation: int,
        exit_at_end: bool = False,
        log: Callable[[str], None],
        listener: RebalanceListener | None = None,
    ):
        assert settings.group_id is not None
        self.listener = listener
        self.admin = admin
        self.s = settings
        self.group = settings.group_id
        self.topic = topic
        self.pattern = pattern
        self.log = log
        self.reset = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}[
            settings.auto_offset_reset or "latest"
        ]
        self.fetcher = LiveConsumer(
            admin,
            isolation,
            exit_at_end=exit_at_end,
            reset=self.reset,
            max_bytes=settings.fetch_max_bytes,
            partition_max_bytes=settings.max_partition_fetch_bytes,
            check_crcs=settings.check_crcs,
        )
        self.exit_at_end = exit_at_end
        self.member_id = ""
        self.generation = -1
        self.coordinator: int | None = None
        self.rejoin_reason: str | None = ""  # None: no rejoin needed
        self.joined = False
        self.leader = False
        self.subscribed: list[str] = []
        #: the leader's view of the group's topics when it assigned (topic -> partition count)
        self.assigned_snapshot: dict[str, int] = {}
        self.group_topics: list[str] = []
        now = time.monotonic()
        self.next_heartbeat = now
        self.next_commit = now + settings.auto_commit_interval_ms / 1000
        self.next_metadata = now
        #: metadata answers in a row without the subscribed topic
        self._missing = 0
        self._refresh_metadata()

    # -- what is subscribed ------------------------------------------------------------------------

    def _refresh_metadata(self) -> None:
        """Metadata of the subscription (a pattern: every topic); a rejoin where it changed what
        this member subscribes or, on the leader, a subscribed topic's partition count."""
        wanted = None if self.pattern is not None else sorted({self.topic, *self.group_topics})
        meta = self._metadata(wanted)
        self.next_metadata = time.monotonic() + self.s.metadata_max_age_ms / 1000
        if self.pattern is not None:
            topics = matching_topics(meta, self.pattern, exclude_internal=self.s.exclude_internal_topics)
        else:
            topics = [self.topic]  # subscribe(Collections.singletonList(topic)), as it is
            try:
                topic_partitions(meta, self.topic, None)
                self._missing = 0
            except NotYet as exc:
                # Kafka's consumer asks again, retry.backoff.ms doubling up to retry.backoff.max.ms
                # apart, while a subscribed topic is unknown (Metadata.requestUpdate); the group
                # gives this member nothing of it meanwhile
                if not self._missing:
                    self.log(waiting_line(exc))
                self.next_metadata = time.monotonic() + backoff_s(
                    self._missing, self.s.retry_backoff_ms, self.s.retry_backoff_max_ms
                )
                self._missing += 1
        if topics != self.subscribed:
            if self.joined:
                self._request_rejoin(f"subscription changed to {topics}")
            self.subscribed = topics
        if self.leader and self.joined:
            now = {t: len(meta.topics.get(t, {})) for t in self.assigned_snapshot}
            if now != self.assigned_snapshot:
                self._request_rejoin(
                    "cached metadata has changed from "
                    + f"{self.assigned_snapshot} at the beginning of the rebalance to {now}"
                )

    def _metadata(self, topics: list[str] | None):
        """A Metadata request as the consumer's (ConsumerMetadata): the named topics with
        allowAutoTopicCreation (allow.auto.create.topics), every topic for a pattern, without."""
        return self.admin.metadata(
            topics, keep=True, auto_create=topics is not None and self.s.allow_auto_create_topics
        )

    # -- the loop ---------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.exit_at_end and self.joined and self.fetcher.finished

    def poll(self, max_wait_ms: int) -> list[ConsumerRecord]:
        """Keep the membership (join, heartbeat, metadata, auto commit) and fetch once."""
        now = time.monotonic()
        if now >= self.next_metadata:
            self._guard(self._refresh_metadata)
        rounds = 0
        while self.rejoin_reason is not None:  # bounded: MAX_FAILURES rounds in a row
            rounds += 1
            if rounds > MAX_FAILURES:
                raise ConsumeError(f"group '{self.group}': no stable membership after {MAX_FAILURES} rounds")
            self._join()
        self._maybe_heartbeat()
        if self.s.enable_auto_commit and time.monotonic() >= self.next_commit:
            self.commit(sync=False)
            self.next_commit = time.monotonic() + self.s.auto_commit_interval_ms / 1000
        if self.rejoin_reason is not None:
            return []  # a rebalance started: no fetch for partitions about to be given up
        wait = min(max_wait_ms, max(0, int((self.next_heartbeat - time.monotonic()) * 1000)))
        return self.fetcher.poll(wait)

    def _guard(self, step: Callable[[], None]) -> None:
        """Run a coordinator step; a lost coordinator is looked up again at the next one."""
        try:
            step()
        except KafkaAdminError as exc:
            self._coordinator_lost(str(exc))

    def _coordinator_lost(self, why: str) -> None:
        if self.coordinator is not None:
            self.admin.forget(self.coordinator)
        self.coordinator = None
        self._failures = getattr(self, "_failures", 0) + 1
        if self._failures > MAX_FAILURES:
            raise ConsumeError(f"group '{self.group}': giving up after {MAX_FAILURES} failures: {why}")
        time.sleep(RETRY_BACKOFF_S)

    def _coordinator(self) -> int:
        if self.coordinator is None:
            self.coordinator = GC.find_coordinator(self.admin, self.group)
        return self.coordinator

    def _request_rejoin(self, reason: str) -> None:
        if self.rejoin_reason is None:
            self.rejoin_reason = reason

    def _reset_generation(self, reset_member_id: bool) -> None:
        self.generation = -1
        self.joined = False
        if reset_member_id:
            self.member_id = ""

    def _group_error(self, code: int, api: str) -> None:
        """AbstractCoordinator's handling of a coordinator's error answer; raises _Rejoin or
        ConsumeError (fatal)."""
        if code in (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            self._coordinator_lost(f"{api}: {describe_error(code)}")
            raise _Rejoin
        if code == ErrorCode.UNKNOWN_MEMBER_ID:
            self._reset_generation(True)
            self._request_rejoin(f"encountered {describe_error(code)} from {api} response")
            raise _Rejoin
        if code == ErrorCode.ILLEGAL_GENERATION:
            self._reset_generation(False)
            self._request_rejoin(f"encountered {describe_error(code)} from {api} response")
            raise _Rejoin
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._request_rejoin("group is already rebalancing")
            raise _Rejoin
        raise ConsumeError(f"{api} for group '{self.group}': {describe_error(code)}")

    # -- join -------------------------------------------------------------------------------------

    def _join(self) -> None:
        """One round of JoinGroup + SyncGroup (ConsumerCoordinator.onJoinPrepare first: commit,
        give up every partition); on success the partitions are assigned and positioned."""
        if self.joined and self.fetcher.partitions:
            if self.s.enable_auto_commit:
                self.commit(sync=True)
        if self.listener is not None and self.generation != -1 and self.member_id:
            # EAGER onJoinPrepare: every partition revoked (none lost: the generation is kept)
            self.listener.on_partitions_revoked(list(self.fetcher.partitions))
        self.fetcher.assign({})
        self.joined = False
        self.leader = False
        reason = self.rejoin_reason or ""
        try:
            self._guard(lambda: self._join_sync(reason))
        except _Rejoin:
            pass

    def _join_sync(self, reason: str) -> None:
        from kafkatool.protocol.generated.join_group_request import JoinGroupRequestProtocol
        from kafkatool.protocol.generated.sync_group_request import SyncGroupRequestAssignment

        node = self._coordinator()
        req = API_BY_KEY[JOIN_GROUP].request(
            group_id=self.group,
            session_timeout_ms=self.s.session_timeout_ms,
            rebalance_timeout_ms=self.s.max_poll_interval_ms,
            member_id=self.member_id,
            group_instance_id=self.s.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[
                JoinGroupRequestProtocol(
                    name=RANGE, metadata=subscription_bytes(self.subscribed, self.generation)
                )
            ],
            reason=reason[:255],
        )
        # the coordinator holds a JoinGroup until the rebalance completes: the rebalance timeout,
        # and 5 s more (AbstractCoordinator.sendJoinGroupRequest)
        resp = self.admin.request(JOIN_GROUP, req, node, timeout=self.s.max_poll_interval_ms / 1000 + 5)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            self.rejoin_reason = f"need to re-join with the given member-id: {resp.member_id}"
            raise _Rejoin
        if resp.error_code:
            self._group_error(resp.error_code, "JoinGroup")
        if resp.protocol_name not in (None, RANGE):
            raise ConsumeError(f"JoinGroup for group '{self.group}': protocol {resp.protocol_name} chosen")
        self.member_id = resp.member_id
        generation = resp.generation_id
        self.leader = resp.leader == resp.member_id
        assignments = []
        if self.leader and not resp.skip_assignment:
            members = {
                m.member_id: (read_subscription(m.metadata), m.group_instance_id) for m in resp.members
            }
            self.group_topics = sorted({t for topics, _ in members.values() for t in topics})
            meta = self._metadata(self.group_topics) if self.group_topics else None
            counts = {t: len(meta.topics[t]) for t in self.group_topics if meta and t in meta.topics}
            # a subscribed topic without metadata counts 0: its creation is a change (a rejoin)
            self.assigned_snapshot = {t: counts.get(t, 0) for t in self.group_topics}
            plan = range_assign(counts, members)
            assignments = [
                SyncGroupRequestAssignment(member_id=m, assignment=assignment_bytes(tps))
                for m, tps in plan.items()
            ]
        sync = API_BY_KEY[SYNC_GROUP].request(
            group_id=self.group,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=self.s.group_instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=RANGE,
            assignments=assignments,
        )
        sresp = self.admin.request(SYNC_GROUP, sync, node, timeout=self.s.max_poll_interval_ms / 1000 + 5)
        if sresp.error_code:
            self._group_error(sresp.error_code, "SyncGroup")
        self.generation = generation
        assigned = IT.assigned_partitions(sresp.assignment)
        if self.listener is not None:
            # onJoinComplete: the listener hears of the assignment before the positions are fetched
            self.listener.on_partitions_assigned(list(assigned))
        # positioned before the round counts as done: a coordinator error in OffsetFetch joins again
        self._position(assigned)
        self.rejoin_reason = None
        self.joined = True
        self._failures = 0
        self.next_heartbeat = time.monotonic() + self.s.heartbeat_interval_ms / 1000

    def _position(self, tps: list[TopicPartition]) -> None:
        """The committed offsets of the partitions, else auto.offset.reset."""
        committed: dict[TopicPartition, tuple[int, str]] = {}
        if tps:
            for _ in range(MAX_FAILURES + 1):
                try:
                    committed = GC.offset_fetch(self.admin, self.group, self._coordinator(), tps)
                    break
                except GC.GroupRequestError as exc:
                    if exc.code != ErrorCode.UNSTABLE_OFFSET_COMMIT:
                        self._group_error(exc.code or 0, "OffsetFetch")
                    time.sleep(RETRY_BACKOFF_S)
            else:
                raise ConsumeError(f"OffsetFetch for group '{self.group}': offsets stayed unstable")
        missing = [tp for tp in tps if tp not in committed]
        if missing and self.reset is None:
            # NoOffsetForPartitionException
            raise ConsumeError(
                "Undefined offset with no reset policy for partitions: ["
                + ", ".join(f"{t}-{p}" for t, p in missing)
                + "]"
            )
        starts = {tp: committed[tp][0] if tp in committed else self.reset for tp in tps}
        self.fetcher.assign(starts)

    # -- heartbeat, commit, leave -----------------------------------------------------------------

    def _maybe_heartbeat(self) -> None:
        if not self.joined or time.monotonic() < self.next_heartbeat:
            return
        self.next_heartbeat = time.monotonic() + self.s.heartbeat_interval_ms / 1000

        def beat() -> None:
            req = API_BY_KEY[HEARTBEAT].request(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=self.s.group_instance_id,
            )
            resp = self.admin.request(HEARTBEAT, req, self._coordinator())
            if resp.error_code:
                self._group_error(resp.error_code, "Heartbeat")
            self._failures = 0

        try:
            self._guard(beat)
        except _Rejoin:
            pass

    def commit(self, *, sync: bool) -> None:
        """Commit every assigned partition's position with this member's generation; a failure
        is logged (an auto commit's, as Kafka's consumer logs it) and may start a rejoin."""
        offsets = self.fetcher.positions()
        if not offsets or not self.joined:
            return
        what = "Synchronous" if sync else "Asynchronous"
        try:
            codes = GC.offset_commit(
                self.admin,
                self.group,
                self._coordinator(),
                offsets,
                generation=self.generation,
                member_id=self.member_id,
                group_instance_id=self.s.group_instance_id,
            )
        except KafkaAdminError as exc:
            self.log(f"{what} auto-commit of offsets {self._text(offsets)} failed: {exc}")
            self._coordinator_lost(str(exc))
            return
        failed = {tp: c for tp, c in codes.items() if c}
        if not failed:
            return
        code = next(iter(failed.values()))
        self.log(f"{what} auto-commit of offsets {self._text(offsets)} failed: {describe_error(code)}")
        try:
            self._group_error(code, "OffsetCommit")
        except _Rejoin:
            pass
        except ConsumeError:
            pass  # Kafka's consumer logs a failed auto commit and goes on

    @staticmethod
    def _text(offsets: dict[TopicPartition, int]) -> str:
        return (
            "{"
            + ", ".join(f"{t}-{p}=OffsetAndMetadata{{offset={o}}}" for (t, p), o in sorted(offsets.items()))
            + "}"
        )

    def close(self, unconsumed: list[ConsumerRecord]) -> None:
        """ConsoleConsumer's cleanup: unprinted records given back, the positions committed
        (auto commit), then LeaveGroup (a dynamic member)."""
        self.fetcher.rewind(unconsumed)
        # a Ctrl-C may have cut a request short, its answer still on the way: new connections
        self.admin.close()
        self._failures = 0
        try:
            if self.s.enable_auto_commit and self.joined:
                self.commit(sync=True)
        finally:
            self._leave()

    def _leave(self) -> None:
        from kafkatool.protocol.generated.leave_group_request import MemberIdentity

        if not self.member_id or self.s.group_instance_id is not None:
            return
        try:
            conn = self.admin.node(self._coordinator())
            version = conn.version_for(LEAVE_GROUP)
            if version >= 3:
                req = API_BY_KEY[LEAVE_GROUP].request(
                    group_id=self.group,
                    members=[
                        MemberIdentity(member_id=self.member_id, group_instance_id=None, reason=LEAVE_REASON)
                    ],
                )
            else:
                req = API_BY_KEY[LEAVE_GROUP].request(group_id=self.group, member_id=self.member_id)
            resp = conn.request(LEAVE_GROUP, req, version)
            code = resp.error_code or next((m.error_code for m in resp.members or [] if m.error_code), 0)
            if code:
                self.log(f"LeaveGroup request failed with error: {describe_error(code)}")
        except KafkaAdminError as exc:
            self.log(f"LeaveGroup request failed: {exc}")
        self._reset_generation(True)
