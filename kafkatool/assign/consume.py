"""Records of a topic as a consumer gets them (kafka-console-consumer.sh, kcat -C), from a live
cluster or read-only from log dirs, with the same rules on both:

* live: the partitions are the tool's own choice (no consumer group) or a classic consumer
  group's (:mod:`kafkatool.assign.group_consumer`); a start is an offset or ListOffsets' earliest
  or latest at the leader (the isolation level's latest: the high watermark or the last stable
  offset); Fetch at each leader, following a moved leader through Metadata (a bounded number of
  times in a row); an out-of-range position is reset by auto.offset.reset (ConsoleConsumer's:
  latest, earliest with --from-beginning);
* offline: the storage engine's own read path (:meth:`kafkatool.log.log.Log.read`, which the
  broker's Fetch handler serves from, with the aborted transactions of the ``.txnindex``s it
  lists) on a LogManager opened read-only, producer state replayed for the last stable offset;
* both: a Fetch answer's batches become records as Kafka's consumer makes them
  (CompletedFetch): records below the fetch offset skipped, control batches never handed out,
  and for read_committed the batches of aborted transactions dropped by the rule the cleaner
  uses too (:class:`kafkatool.log.cleaner.TxnMetadata`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, backoff_s, describe_error
from kafkatool.errors import KafkatoolError
from kafkatool.formats import records as R
from kafkatool.formats.errors import CorruptRecordError, FormatError
from kafkatool.formats.message_formatter import ConsumerRecord
from kafkatool.log.cleaner import TxnMetadata
from kafkatool.log.log import (
    BATCH_LEFT_OUT,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    REST_LEFT_OUT,
    ReadDamage,
    read_past_damage,
)
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode, is_retriable

FETCH = 1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
#: the Java consumer's defaults (fetch.max.wait.ms 500, fetch.max.bytes 50 MiB,
#: max.partition.fetch.bytes 1 MiB, fetch.min.bytes 1)
FETCH_MAX_WAIT_MS, FETCH_MAX_BYTES, PARTITION_MAX_BYTES = 500, 52428800, 1048576
#: a partition's fetch errors (leader moves, an unreachable or restarting leader) tolerated in
#: a row before the command gives up, each after a metadata refresh and this pause (~30 s)
MAX_FAILURES, RETRY_BACKOFF_S = 60, 0.5

TopicPartition = tuple[str, int]


class ConsumeError(KafkatoolError):
    """The consumer cannot go on: one line, exit 2."""


class CorruptFetch(ConsumeError):
    """check.crcs: a fetched batch (a legacy message) whose CRC does not match (Kafka's
    CompletedFetch.maybeEnsureValid); ``records`` and ``next_offset``: what came before it."""

    def __init__(self, message: str, records: list, next_offset: int):
        super().__init__(message)
        self.records = records
        self.next_offset = next_offset


# ----------------------------------------------------------------------------- CompletedFetch
def fetched_records(
    topic: str,
    partition: int,
    data: bytes,
    fetch_offset: int,
    aborted: list | None,
    read_committed: bool,
    damage: list[tuple[FormatError, int, str]] | None = None,
    check_crcs: bool = False,
) -> tuple[list[ConsumerRecord], int]:
    """The records a consumer hands out from one partition's Fetch answer (``data``: the
    batches as sent, a batch cut short at the end ignored), and the next fetch offset: past the
    last whole batch read, control and aborted batches included (Kafka's nextFetchOffset).

    ``damage`` (the offline reader of a log dir): damage is read past instead of raised, and
    appended as (error, offset, action) (the error's position is in ``data``): the batches by
    log.read_past_damage's rule, and a batch whose records do not decode keeps those before
    (BATCH_LEFT_OUT).

    ``check_crcs`` (the consumer's check.crcs): a batch whose CRC does not match raises
    CorruptFetch with the records before it, as Kafka's CompletedFetch checks each batch as it
    reaches it (those below the fetch offset too), and a legacy message at or past it, a
    compressed wrapper's inner messages each (the records before it are handed out)."""
    txn = TxnMetadata()
    if read_committed and aborted:
        txn.add_aborted(list(aborted))
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    batches = R.iter_batches(data)
    if damage is not None:
        batches = read_past_damage(
            batches, lambda exc, offset, action: damage.append((exc, offset, action)), fetch_offset
        )
    for batch in batches:
        magic2 = batch.magic >= 2
        if check_crcs and magic2:  # maybeEnsureValid(RecordBatch): v2 batches only
            try:
                batch.ensure_checksum()
            except CorruptRecordError:
                raise CorruptFetch(
                    f"Record batch for partition {topic}-{partition} at offset {batch.base_offset} is "
                    f"invalid, cause: Record is corrupt (stored crc = {batch.crc}, computed crc = "
                    f"{batch.compute_crc()})",
                    out,
                    next_offset,
                ) from None
        # maybeEnsureValid(Record): a legacy message's own CRC, record by record from the fetch
        # offset (a plain message, or a wrapper's inner ones: the wrapper's CRC is not checked),
        # before its key and value are read (lenient: one Kafka cannot read is raised after)
        legacy_check = check_crcs and not magic2
        if batch.last_offset < fetch_offset:
            continue
        if read_committed and magic2 and batch.has_producer_id:
            if batch.is_control:
                txn.on_control_batch(batch)  # an ABORT marker ends the producer's aborted range
            elif txn.on_batch(batch):
                next_offset = batch.next_offset
                continue
        if magic2 and batch.is_control:
            next_offset = batch.next_offset
            continue
        batch_type = batch.timestamp_type if magic2 else None
        try:
            for r in batch.records(lenient=True) if legacy_check else batch.records():
                if r.offset < fetch_offset:
                    continue
                if legacy_check:
                    if r.crc != r.computed_crc:
                        raise CorruptFetch(
                            f"Record for partition {topic}-{partition} at offset {r.offset} is invalid, "
                            f"cause: Record is corrupt (stored crc = {r.crc}, computed crc = {r.computed_crc})",
                            out,
                            r.offset,
                        )
                    if type(r) is R.UnreadableRecord:
                        raise r.error
                out.append(
                    ConsumerRecord(
                        topic,
                        partition,
                        r.offset,
                        r.timestamp,
                        batch_type if batch_type is not None else r.timestamp_type,
                        r.key,
                        r.value,
                        r.headers,
                    )
                )
        except FormatError as exc:
            if damage is None:
                raise
            damage.append((exc, batch.base_offset, BATCH_LEFT_OUT))
        next_offset = max(next_offset, batch.next_offset)
    return out, next_offset


def corrupt_line(topic: str, partition: int, cause: str) -> str:
    """What the consumer says when check.crcs stops it (CompletedFetch.fetchRecords' exception
    and its cause, as ConsoleConsumer logs them before it ends)."""
    return (
        f"Received exception when fetching the next record from {topic}-{partition}. If needed, please "
        f"seek past the record to continue consumption. Caused by: {cause}"
    )


# ----------------------------------------------------------------------------- start offsets
def parse_offset(text: str) -> int:
    """ConsoleConsumer's --offset: earliest, latest (any case) or a non-negative long."""
    low = text.lower()
    if low == "earliest":
        return EARLIEST_TIMESTAMP
    if low == "latest":
        return LATEST_TIMESTAMP
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**63 or not text.strip().lstrip("+").isdigit():
        raise ConsumeError(
            f"The provided offset value '{text}' is incorrect. Valid values are 'earliest', 'latest', "
            "or a non-negative long."
        )
    return value


# ----------------------------------------------------------------------------- state
@dataclass
class PartitionState:
    position: int
    #: --exit-at-end: the high watermark / last stable offset read at the start
    end: int | None = None
    failures: int = 0
    done: bool = False
    #: check.crcs: why the next poll fails (a corrupt batch at the position; Kafka's consumer
    #: hands out the records before it first, then throws)
    corrupt: str | None = None


# ----------------------------------------------------------------------------- what to read
class NotYet(ConsumeError):
    """The topic (or the partition) is not in the cluster's metadata yet: Kafka's consumer asks
    again (Metadata.requestUpdate on UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE ...) until
    it is, or until the tool's --timeout-ms or Ctrl-C; the text is the one line said while it
    waits."""


def topic_partitions(meta, topic: str, partition: int | None) -> list[TopicPartition]:
    """``--topic`` (and ``--partition``) against the cluster's metadata: :class:`NotYet` while
    the topic or partition is missing or being created (a consumer waits for it), ConsumeError
    for an error Kafka's consumer throws (TopicAuthorizationException, InvalidTopicException)."""
    code = meta.topic_errors.get(topic)
    if code is not None or topic not in meta.topics:
        code = code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise NotYet(f"Topic '{topic}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
        if is_retriable(code):
            raise NotYet(f"Topic '{topic}' is not available yet ({describe_error(code)})")
        raise ConsumeError(f"topic {topic}: {describe_error(code)}")
    parts = sorted(meta.topics[topic])
    if partition is not None:
        if partition not in parts:
            raise NotYet(f"Topic '{topic}' has no partition {partition} (partitions: {len(parts)})")
        parts = [partition]
    return [(topic, p) for p in parts]


def waiting_line(exc: NotYet) -> str:
    """The one line a consumer says when it starts waiting for a topic or partition."""
    return f"{exc}: waiting for it, as Kafka's consumer does (until --timeout-ms or Ctrl-C)"


def matching_topics(meta, rx: re.Pattern, *, exclude_internal: bool = True) -> list[str]:
    """The topics a pattern subscription takes (KafkaConsumer.subscribe(Pattern): whole-name
    matches; exclude.internal.topics, true by default, leaves internal topics out)."""
    return sorted(
        t
        for t in meta.topics
        if rx.fullmatch(t)
        and not (exclude_internal and meta.topic_info.get(t, (None, t.startswith("__")))[1])
    )


# ----------------------------------------------------------------------------- live
class LiveConsumer:
    """Fetch from each assigned partition's leader. The assignment is the caller's: the tool's
    own (every partition of the topics, or --partition) or a consumer group's
    (:mod:`kafkatool.assign.group_consumer`), changed with :meth:`assign`."""

    def __init__(
        self,
        admin: KafkaAdmin,
        isolation: int,
        *,
        exit_at_end: bool = False,
        reset: int | None = LATEST_TIMESTAMP,
        max_bytes: int = FETCH_MAX_BYTES,
        partition_max_bytes: int = PARTITION_MAX_BYTES,
        check_crcs: bool = True,
    ):
        self.admin = admin
        #: check.crcs (Kafka's default true): every fetched batch's CRC checked
        self.check_crcs = check_crcs
        self.isolation = isolation
        self.exit_at_end = exit_at_end
        #: fetch.max.bytes and max.partition.fetch.bytes of each Fetch
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        #: auto.offset.reset: where an out-of-range position goes (None: "none", an error)
        self.reset = reset
        self.partitions: list[TopicPartition] = []
        self.states: dict[TopicPartition, PartitionState] = {}

    def assign(self, starts: dict[TopicPartition, int]) -> None:
        """Read these partitions from now on, each from its start: an offset, or
        EARLIEST/LATEST (ListOffsets at the leader)."""
        self.partitions = sorted(starts)
        self.states = {}
        special: dict[int, list[TopicPartition]] = {}
        for tp, start in starts.items():
            if start >= 0:
                self.states[tp] = PartitionState(start)
            else:
                special.setdefault(start, []).append(tp)
        for spec, tps in special.items():
            for tp, off in self._list(tps, spec).items():
                self.states[tp] = PartitionState(off)
        if self.exit_at_end and self.partitions:
            for tp, off in self._list(self.partitions, LATEST_TIMESTAMP).items():
                st = self.states[tp]
                st.end = off
                st.done = st.position >= off

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset of each assigned partition (what a consumer commits)."""
        return {tp: st.position for tp, st in self.states.items()}

    def rewind(self, unconsumed: list[ConsumerRecord]) -> None:
        """Records handed out but not used go back: each partition's position becomes its first
        unused offset (ConsoleConsumer's resetUnconsumedOffsets before close)."""
        for r in unconsumed:
            st = self.states.get((r.topic, r.partition))
            if st is not None and r.offset < st.position:
                st.position = r.offset

    def _list(self, tps: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        from kafkatool.assign.offsets import list_offsets

        out = {}
        for tp, a in list_offsets(self.admin, tps, spec, self.isolation).items():
            if a.error_code:
                raise ConsumeError(f"ListOffsets {tp[0]}-{tp[1]}: {a.error}")
            out[tp] = a.offset
        return out

    @property
    def finished(self) -> bool:
        """--exit-at-end: every assigned partition reached its end; nothing assigned is never
        finished (kcat -e: it exits when all *assigned* partitions reached their end, and waits
        while none is)."""
        return bool(self.states) and all(s.done for s in self.states.values())

    def _leaders(self) -> dict[int, list[TopicPartition]]:
        meta = self.admin.metadata_cached()
        out: dict[int, list[TopicPartition]] = {}
        for tp in self.partitions:
            if self.states[tp].done:
                continue
            info = meta.topics.get(tp[0], {}).get(tp[1])
            if info is None or info.leader < 0:
                self._failed(
                    tp,
                    f"no leader ({describe_error(info.error if info else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)})",
                )
                continue
            out.setdefault(info.leader, []).append(tp)
        return out

    def _failed(self, tp: TopicPartition, why: str) -> None:
        st = self.states[tp]
        st.failures += 1
        if st.failures > MAX_FAILURES:
            raise ConsumeError(f"{tp[0]}-{tp[1]}: giving up after {MAX_FAILURES} failed fetches: {why}")
        self._refresh = True

    def poll(self, max_wait_ms: int) -> list[ConsumerRecord]:
        """One Fetch at each leader of the partitions not done; their records. Nothing
        assigned: a pause of ``max_wait_ms``, as a fetch that gets nothing."""
        from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic

        self._refresh = False
        for (t, p), st in self.states.items():
            if st.corrupt is not None:
                raise ConsumeError(corrupt_line(t, p, st.corrupt))
        got: list[ConsumerRecord] = []
        leaders = self._leaders()
        if not leaders and not self._refresh:
            time.sleep(max(0, max_wait_ms) / 1000)
            return got
        for leader, tps in sorted(leaders.items()):
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            req = API_BY_KEY[FETCH].request(
                replica_id=-1,
                max_wait_ms=max(0, max_wait_ms),
                min_bytes=1,
                max_bytes=self.max_bytes,
                isolation_level=self.isolation,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchTopic(
                        topic=t,
                        partitions=[
                            FetchPartition(
                                partition=p,
                                current_leader_epoch=-1,
                                fetch_offset=self.states[(t, p)].position,
                                log_start_offset=-1,
                                partition_max_bytes=self.partition_max_bytes,
                            )
                            for p in ps
                        ],
                    )
                    for t, ps in by_topic.items()
                ],
                forgotten_topics_data=[],
                rack_id="",
            )
            try:
                resp = self.admin.request(FETCH, req, leader)
            except KafkaAdminError as exc:
                self.admin.forget(leader)
                for tp in tps:
                    self._failed(tp, str(exc))
                continue
            if resp.error_code:
                for tp in tps:
                    self._failed(tp, describe_error(resp.error_code))
                continue
            for t in resp.responses:
                for p in t.partitions:
                    tp = (t.topic, p.partition_index)
                    if tp not in self.states:
                        continue
                    got.extend(self._partition_answer(tp, p))
        if self._refresh:
            time.sleep(RETRY_BACKOFF_S)
            try:
                self.admin.metadata(sorted({t for t, _ in self.partitions}), keep=True)
            except KafkaAdminError:
                self.admin.forget(None)  # the next poll counts the failure again
        return got

    def _partition_answer(self, tp: TopicPartition, p) -> list[ConsumerRecord]:
        st = self.states[tp]
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.reset is None:  # auto.offset.reset=none: OffsetOutOfRangeException
                raise ConsumeError(
                    f"Fetch position FetchPosition{{offset={st.position}}} is out of range for partition "
                    f"{tp[0]}-{tp[1]}"
                )
            st.position = self._list([tp], self.reset)[tp]  # auto.offset.reset
            return []
        if p.error_code:
            self._failed(tp, describe_error(p.error_code))
            return []
        st.failures = 0
        data = bytes(p.records or b"")
        try:
            recs, nxt = fetched_records(
                tp[0],
                tp[1],
                data,
                st.position,
                p.aborted_transactions,
                self.isolation == READ_COMMITTED,
                check_crcs=self.check_crcs,
            )
        except CorruptFetch as exc:
            if not exc.records:  # nothing before it: the poll fails now
                raise ConsumeError(corrupt_line(tp[0], tp[1], str(exc))) from None
            recs, nxt = exc.records, exc.next_offset
            st.corrupt = str(exc)
        if st.end is not None:
            recs = [r for r in recs if r.offset < st.end]
        st.position = nxt
        if st.end is not None and st.position >= st.end:
            st.done = True
        return recs


class TopicConsumer:
    """``--topic`` without a group: the tool assigns itself every partition of the topic (or
    ``--partition``) once the metadata has it. Until then it asks again as Kafka's consumer does
    (its Metadata request with allowAutoTopicCreation: allow.auto.create.topics, so a broker with
    auto.create.topics.enable creates the topic), retry.backoff.ms doubling up to
    retry.backoff.max.ms apart, and says why it waits once (``log``); the command's --timeout-ms,
    --max-messages and Ctrl-C end the wait as they end a wait for records."""

    def __init__(
        self,
        fetcher: LiveConsumer,
        topic: str,
        partition: int | None,
        start: int | None,
        *,
        auto_create: bool,
        backoff_ms: int,
        backoff_max_ms: int,
        log: Callable[[str], None],
    ):
        self.fetcher = fetcher
        self.topic = topic
        self.partition = partition
        self.start = start
        self.auto_create = auto_create
        self.backoff = (backoff_ms, backoff_max_ms)
        self.log = log
        self.assigned = False
        self.said = False
        self.attempts = 0
        self.next_try = 0.0
        # the first ask: an unreachable cluster or a refused topic is one line at once
        self._try(self.fetcher.admin.metadata([topic], keep=True, auto_create=auto_create))

    def _try(self, meta) -> None:
        try:
            tps = topic_partitions(meta, self.topic, self.partition)
        except NotYet as exc:
            if not self.said:
                self.said = True
                self.log(waiting_line(exc))
            self.next_try = time.monotonic() + backoff_s(self.attempts, *self.backoff)
            self.attempts += 1
            return
        if self.start is None:  # auto.offset.reset=none and nothing committed (no group)
            raise ConsumeError(
                "Undefined offset with no reset policy for partitions: ["
                + ", ".join(f"{t}-{p}" for t, p in tps)
                + "]"
            )
        self.fetcher.assign(dict.fromkeys(tps, self.start))
        self.assigned = True

    @property
    def finished(self) -> bool:
        return self.assigned and self.fetcher.finished

    def poll(self, max_wait_ms: int) -> list[ConsumerRecord]:
        if self.assigned:
            return self.fetcher.poll(max_wait_ms)
        now = time.monotonic()
        if now < self.next_try:
            time.sleep(min(self.next_try - now, max(0, max_wait_ms) / 1000))
            return []
        try:
            meta = self.fetcher.admin.metadata([self.topic], keep=True, auto_create=self.auto_create)
        except KafkaAdminError:
            self.fetcher.admin.forget(None)  # another bootstrap server next time
            self.next_try = time.monotonic() + backoff_s(self.attempts, *self.backoff)
            self.attempts += 1
            return []
        self._try(meta)
        return []


class PatternConsumer:
    """``--include`` without a group: the tool assigns itself every partition of the topics the
    pattern matches, and at each metadata refresh (metadata.max.age.ms) those of topics that
    match since, from the reset position (a new topic has no committed offset: Kafka's consumer
    in its random group starts it at auto.offset.reset too)."""

    def __init__(
        self, fetcher: LiveConsumer, rx: re.Pattern, start: int, refresh_ms: int, exclude_internal: bool
    ):
        self.fetcher = fetcher
        self.rx = rx
        self.start = start
        self.refresh_ms = refresh_ms
        self.exclude_internal = exclude_internal
        self.next_refresh = 0.0
        self._refresh()

    def _refresh(self) -> None:
        meta = self.fetcher.admin.metadata(keep=True)
        self.next_refresh = time.monotonic() + self.refresh_ms / 1000
        tps = [
            (t, p)
            for t in matching_topics(meta, self.rx, exclude_internal=self.exclude_internal)
            for p in sorted(meta.topics[t])
        ]
        new = {tp: self.start for tp in tps if tp not in self.fetcher.states}
        if new:
            starts = {**self.fetcher.positions(), **new}
            ends = {tp: st for tp, st in self.fetcher.states.items()}
            self.fetcher.assign(starts)
            for tp, st in ends.items():  # partitions already read keep their progress and end
                self.fetcher.states[tp] = st

    @property
    def finished(self) -> bool:
        return self.fetcher.finished

    def poll(self, max_wait_ms: int) -> list[ConsumerRecord]:
        if time.monotonic() >= self.next_refresh:
            self._refresh()
        return self.fetcher.poll(max_wait_ms)


# ----------------------------------------------------------------------------- offline
def consume_offline(
    log_dirs: list[Path],
    topic: str | re.Pattern,
    partition: int | None,
    start: int,
    isolation: int,
    on_damage: Callable[[ReadDamage], None],
    on_partition: Callable[[TopicPartition], None] | None = None,
) -> Iterator[ConsumerRecord]:
    """The records a consumer would get from the data of ``log_dirs``, read-only (a running
    broker's dir too), of ``topic`` or of every topic a pattern (--include) matches but the
    internal ones, partition after partition: from ``start`` (EARLIEST/LATEST or an offset:
    one outside the log is reset to the latest, as the live command does) to the log end offset
    (read_uncommitted: the dir holds no current high watermark, the log end stands for it) or
    the last stable offset (read_committed, by the engine's rule over the replayed producer
    state).  Damaged data is read past and said (``on_damage``, a log.ReadDamage each): a batch
    failing its CRC is read as it is, a batch whose records do not decode keeps those before,
    and where an entry does not parse the rest of its segment is left out and the next segment
    read."""
    from kafkatool.log.log import ISOLATION_COMMITTED, ISOLATION_HIGH_WATERMARK
    from kafkatool.log.manager import LogManager

    committed = isolation == READ_COMMITTED
    with LogManager(log_dirs, writable=False) as mgr:
        if isinstance(topic, str):
            logs = {(t, p): lg for (t, p), lg in mgr.logs.items() if t == topic}
            if not logs:
                raise ConsumeError(f"Topic '{topic}' does not exist in {', '.join(map(str, log_dirs))}")
        else:
            from kafkatool.log.topic_settings import INTERNAL_TOPIC_CONFIGS

            logs = {
                (t, p): lg
                for (t, p), lg in mgr.logs.items()
                if topic.fullmatch(t) and t not in INTERNAL_TOPIC_CONFIGS
            }
        if partition is not None:
            if (topic, partition) not in logs:
                raise ConsumeError(f"Topic '{topic}' has no partition {partition} in the log dirs")
            logs = {(topic, partition): logs[(topic, partition)]}
        now = int(time.time() * 1000)
        for (t, p), lg in sorted(logs.items()):
            replay: list[ReadDamage] = []
            lg.rebuild_producer_state(now, damage=replay)
            for d in replay:
                on_damage(d)
            lg.update_high_watermark(lg.log_end_offset)
            upper = lg.last_stable_offset if committed else lg.high_watermark
            if start == EARLIEST_TIMESTAMP:
                pos = lg.log_start_offset
            elif start == LATEST_TIMESTAMP or not lg.log_start_offset <= start <= lg.log_end_offset:
                pos = upper
            else:
                pos = start
            for _ in range(2**31):  # bounded: each round moves the position past a batch
                if pos >= upper:
                    break
                cut: ReadDamage | None = None  # where the rest of a segment cannot be walked
                cut_segment = lg.floor_segment(pos)
                try:
                    info = lg.read(
                        pos,
                        PARTITION_MAX_BYTES,
                        isolation=ISOLATION_COMMITTED if committed else ISOLATION_HIGH_WATERMARK,
                        min_one_message=True,
                    )
                except FormatError as exc:  # an index entry into damage (Segment names the file)
                    cut = ReadDamage.of(cut_segment.log_path, exc, pos, REST_LEFT_OUT)
                    info = None
                if info is not None:
                    met: list[tuple[FormatError, int, str]] = []
                    recs, nxt = fetched_records(
                        t, p, info.read_bytes(), pos, info.aborted_transactions, committed, damage=met
                    )
                    for exc, offset, action in met:  # only read bytes are damaged: a slice exists
                        piece = info.slices[0]
                        d = ReadDamage.of(piece.path, exc, offset, action, base=piece.position)
                        if action == REST_LEFT_OUT:
                            cut, cut_segment = d, piece.segment
                        else:
                            on_damage(d)
                    yield from recs
                if cut is not None:
                    # the rest of that segment cannot be walked: on with the next one
                    on_damage(cut)
                    later = lg.higher_segment(cut_segment.base_offset) if cut_segment is not None else None
                    if later is None or later.base_offset <= pos:
                        break
                    pos = later.base_offset
                    continue
                if nxt <= pos:
                    break  # nothing whole to read below the bound (damage past it)
                pos = nxt
