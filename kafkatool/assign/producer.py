"""A blocking producer on the one admin client (kafka_client) and the project's batch encoder
(formats/records.build_record_batch): what kafka-console-producer.sh's KafkaProducer does for it.

- Partitioner: Kafka 3.7's default (BuiltInPartitioner): a record with a key goes to
  ``toPositive(murmur2(key)) % partitions`` over all partitions (Utils.murmur2, the one
  implementation here; librdkafka's murmur2 partitioners agree); a record without a key to the
  sticky partition, a random partition with a leader that is kept until batch.size bytes were
  produced to it (KIP-794's uniform sticky partitioning; Java's adaptive weighting by queue sizes
  is left out: one client thread has no queues to weigh).
- Batches: one open batch per partition, sent when it reaches batch.size, when linger.ms passed
  since its first record, or at the end of the input; each request carries at most one batch per
  partition of its leader, up to max.request.size, one request in flight per broker, so a
  partition's records are appended in input order even across retries.
- Retries: a retriable partition error (NOT_LEADER_OR_FOLLOWER, a leader moving ...) or a lost
  connection refreshes the metadata and sends the batch again to the partition's leader then,
  retry.backoff.ms apart (doubling up to 1 s, as Kafka 3.7's producer), at most ``retries`` times
  for error answers; a broker that cannot be reached is waited for up to delivery.timeout.ms.
  MESSAGE_TOO_LARGE for a batch of several records splits it (Sender's splitAndReenqueue).
- Idempotence: InitProducerId, then sequence numbers per partition; a batch sent again keeps its
  bytes and sequence, so the broker's producer state answers a retry of an appended batch with the
  original offsets (never a second copy).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, describe_error, error_name
from kafkatool.formats import compression
from kafkatool.formats.records import (
    RECORD_BATCH_OVERHEAD,
    SimpleRecord,
    build_record_batch,
    encode_record_v2,
    increment_sequence,
)
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode, is_retriable

PRODUCE, INIT_PRODUCER_ID = 0, 22
#: Kafka 3.7 producer defaults the console producer does not change
MAX_REQUEST_SIZE = 1048576
DELIVERY_TIMEOUT_MS = 120000
TRANSACTION_TIMEOUT_MS = 60000
RETRY_BACKOFF_MAX_MS = 1000


class ProducerError(KafkaAdminError):
    """The producer cannot go on (no cluster, unknown topic, a fatal idempotence error)."""


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (a signed 32-bit result), the hash of its default partitioner."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass
class Outcome:
    """What became of one record: acknowledged (offset, -1 for acks=0) or failed (error)."""

    number: int
    partition: int
    offset: int = -1
    timestamp: int = -1
    error: str | None = None


@dataclass
class _Record:
    number: int
    record: SimpleRecord
    size: int


@dataclass
class _Batch:
    partition: int
    records: list[_Record] = field(default_factory=list)
    size: int = RECORD_BATCH_OVERHEAD
    created: float = 0.0
    attempts: int = 0
    base_sequence: int = -1
    data: bytes | None = None
    not_before: float = 0.0


class Producer:
    """Records in, outcomes out (``on_outcome`` in the order records complete per partition)."""

    def __init__(
        self,
        admin: KafkaAdmin,
        topic: str,
        *,
        acks: int,
        codec: int,
        batch_size: int,
        linger_ms: int,
        request_timeout_ms: int,
        retries: int,
        retry_backoff_ms: int,
        idempotence: bool,
        partition: int | None,
        on_outcome: Callable[[Outcome], None],
    ):
        self.admin = admin
        self.topic = topic
        self.acks = acks
        self.codec = codec
        self.batch_size = max(1, batch_size)
        self.linger = linger_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000
        self.idempotence = idempotence
        self.fixed_partition = partition
        self.on_outcome = on_outcome
        self.producer_id, self.producer_epoch = -1, -1
        self.leaders: dict[int, int] = {}
        self.partitions = 0
        self.open: dict[int, _Batch] = {}
        self.ready: dict[int, list[_Batch]] = {}  # closed batches per partition, in order
        self.sequences: dict[int, int] = {}
        self._sticky: int | None = None
        self._sticky_bytes = 0
        self.sent_bytes = 0

    # -- set-up ------------------------------------------------------------------------------

    def start(self, wait_s: float = 5.0) -> None:
        """The topic's partitions and leaders (bounded wait for a topic being created), and a
        producer id when idempotent."""
        self.refresh(wait_s, first=True)
        if self.fixed_partition is not None and not 0 <= self.fixed_partition < self.partitions:
            raise ProducerError(
                f"Invalid partition given with record: {self.fixed_partition} is not in the range "
                f"[0...{self.partitions})."
            )
        if self.idempotence:
            self._init_producer_id()

    def refresh(self, wait_s: float = 0.0, first: bool = False) -> None:
        deadline = time.monotonic() + wait_s
        backoff = self.retry_backoff
        while True:
            try:
                meta = self.admin.metadata([self.topic], auto_create=True)
            except KafkaAdminError:
                self.admin.close()
                if first or time.monotonic() >= deadline:
                    raise  # an unreachable cluster at the start: one line, at once
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_MS / 1000)
                continue
            code = meta.topic_errors.get(self.topic)
            parts = meta.topics.get(self.topic)
            if parts:
                self.partitions = len(parts)
                self.leaders = {p: i.leader for p, i in parts.items()}
                if all(leader >= 0 for leader in self.leaders.values()) or time.monotonic() >= deadline:
                    return
            elif time.monotonic() >= deadline or (code and not is_retriable(code)):
                if first:
                    reason = describe_error(code) if code else "no partitions"
                    raise ProducerError(f"Topic {self.topic} not present in metadata ({reason})", code)
                return
            time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_MS / 1000)

    def _init_producer_id(self) -> None:
        info = API_BY_KEY[INIT_PRODUCER_ID]
        deadline = time.monotonic() + DELIVERY_TIMEOUT_MS / 1000
        while True:
            req = info.request(
                transactional_id=None,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                producer_id=-1,
                producer_epoch=-1,
            )
            resp = self.admin.request(INIT_PRODUCER_ID, req)
            if resp.error_code == 0:
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                return
            retriable = is_retriable(resp.error_code)
            if not retriable or time.monotonic() >= deadline:
                raise ProducerError(f"InitProducerId: {describe_error(resp.error_code)}", resp.error_code)
            time.sleep(self.retry_backoff)

    # -- accumulate ----------------------------------------------------------------------------

    def _choose(self, key: bytes | None, size: int) -> int:
        if self.fixed_partition is not None:
            return self.fixed_partition
        if key is not None:
            return partition_for_key(key, self.partitions)
        if self._sticky is None or self._sticky_bytes >= self.batch_size:
            available = [p for p, leader in self.leaders.items() if leader >= 0] or list(self.leaders)
            if len(available) > 1 and self._sticky in available:
                available.remove(self._sticky)
            self._sticky = random.choice(available)
            self._sticky_bytes = 0
        self._sticky_bytes += size
        return self._sticky

    def append(self, number: int, record: SimpleRecord) -> int:
        """Queue one record (its timestamp set now, as KafkaProducer.send does); its partition."""
        record.timestamp = int(time.time() * 1000)
        size = len(encode_record_v2(0, 0, record.key, record.value, record.headers))
        partition = self._choose(record.key, size)
        if size + RECORD_BATCH_OVERHEAD > MAX_REQUEST_SIZE:
            self.on_outcome(
                Outcome(
                    number,
                    partition,
                    error=f"RecordTooLargeException: The message is {size + RECORD_BATCH_OVERHEAD} bytes when "
                    f"serialized which is larger than {MAX_REQUEST_SIZE}, which is the value of the "
                    "max.request.size configuration.",
                )
            )
            return partition
        batch = self.open.get(partition)
        if batch is not None and batch.size + size > self.batch_size and batch.records:
            self._close(partition)
            batch = None
        if batch is None:
            batch = self.open[partition] = _Batch(partition, created=time.monotonic())
        batch.records.append(_Record(number, record, size))
        batch.size += size
        if batch.size >= self.batch_size:
            self._close(partition)
        return partition

    def _close(self, partition: int) -> None:
        batch = self.open.pop(partition, None)
        if batch is not None and batch.records:
            self.ready.setdefault(partition, []).append(batch)

    def next_deadline(self) -> float | None:
        """When something is due: the oldest open batch's linger.ms running out, or a batch
        waiting for its retry's backoff, sent then with no input coming (None: nothing)."""
        due = [b.created + self.linger for b in self.open.values()]
        due += [q[0].not_before for q in self.ready.values() if q]
        return min(due) if due else None

    def pending(self) -> bool:
        return bool(self.open) or any(self.ready.values())

    # -- send ----------------------------------------------------------------------------------

    def send_ready(self, *, flush: bool) -> None:
        """Send what is due: closed batches, open ones whose linger.ms ran out (all with
        ``flush``), until none is due. Each batch is answered or failed before this returns
        when ``flush``."""
        now = time.monotonic()
        for p, b in list(self.open.items()):
            if flush or now >= b.created + self.linger:
                self._close(p)
        while any(self.ready.values()):
            self._send_round()
            if not flush:
                # what is left is waiting for a retry's backoff or a leader: sent on the next call
                now = time.monotonic()
                if all(q[0].not_before > now for q in self.ready.values() if q):
                    return

    def _send_round(self) -> None:
        now = time.monotonic()
        wait = [q[0].not_before for q in self.ready.values() if q]
        if wait and min(wait) > now:
            time.sleep(min(wait) - now)
        by_leader: dict[int, list[_Batch]] = {}
        no_leader = False
        for p, queue in sorted(self.ready.items()):
            if not queue or queue[0].not_before > time.monotonic():
                continue
            leader = self.leaders.get(p, -1)
            if leader < 0:
                self._retry(queue[0], describe_error(ErrorCode.LEADER_NOT_AVAILABLE), counts=False)
                no_leader = True
                continue
            by_leader.setdefault(leader, []).append(queue[0])
        if no_leader:
            self._refresh_quietly()
        for leader, batches in sorted(by_leader.items()):
            request, size = [], 0
            for b in batches:
                data = self._encode(b)
                if request and size + len(data) > MAX_REQUEST_SIZE:
                    continue  # the next round
                request.append(b)
                size += len(data)
            self._send(leader, request)

    def _encode(self, b: _Batch) -> bytes:
        if b.data is None:
            if self.idempotence:
                seq = self.sequences.get(b.partition, 0)
                b.base_sequence = seq
                self.sequences[b.partition] = increment_sequence(seq, len(b.records))
            b.data = build_record_batch(
                [r.record for r in b.records],
                codec=self.codec,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=b.base_sequence,
            )
        return b.data

    def _send(self, leader: int, batches: list[_Batch]) -> None:
        from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

        req = API_BY_KEY[PRODUCE].request(
            transactional_id=None,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[
                TopicProduceData(
                    name=self.topic,
                    partition_data=[PartitionProduceData(index=b.partition, records=b.data) for b in batches],
                )
            ],
        )
        try:
            conn = self.admin.node(leader)
            if self.acks == 0:
                conn.send_only(PRODUCE, req)
                resp = None
            else:
                resp = conn.request(PRODUCE, req)
        except KafkaAdminError as exc:
            # lost or no connection: the answer is unknown; sent again (idempotence keeps a
            # batch that was appended from being appended twice)
            self.admin.close()
            for b in batches:
                self._retry(b, str(exc), counts=False)
            self._refresh_quietly()
            return
        answers = {}
        if resp is not None:
            for t in resp.responses:
                for p in t.partition_responses:
                    if t.name == self.topic:
                        answers[p.index] = p
        for b in batches:
            if resp is None:
                self._done(b, -1, -1)
                continue
            p = answers.get(b.partition)
            if p is None:
                self._fail(b, f"the response from broker {leader} has no result for partition {b.partition}")
            elif p.error_code == 0:
                self._done(b, p.base_offset, p.log_append_time_ms)
            elif p.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._done(b, -1, -1)  # Kafka's producer: appended before, offset unknown
            elif p.error_code == ErrorCode.MESSAGE_TOO_LARGE and len(b.records) > 1:
                self._split(b)
            elif is_retriable(p.error_code):
                self._retry(b, describe_error(p.error_code, p.error_message), counts=True)
                self._refresh_quietly()
            else:
                self._fail(
                    b, describe_error(p.error_code, p.error_message), p.record_errors or [], p.error_code
                )

    def _refresh_quietly(self) -> None:
        try:
            self.refresh()
        except KafkaAdminError:
            self.admin.close()

    def _retry(self, b: _Batch, why: str, *, counts: bool) -> None:
        now = time.monotonic()
        if counts:
            b.attempts += 1
        if (counts and b.attempts > self.retries) or now - b.created > DELIVERY_TIMEOUT_MS / 1000:
            self._fail(b, why)
            return
        b.not_before = now + min(self.retry_backoff * (2 ** min(b.attempts, 10)), RETRY_BACKOFF_MAX_MS / 1000)

    def _pop(self, b: _Batch) -> None:
        queue = self.ready.get(b.partition, [])
        if queue and queue[0] is b:
            queue.pop(0)

    def _done(self, b: _Batch, base_offset: int, log_append_time: int) -> None:
        self._pop(b)
        self.sent_bytes += len(b.data)
        for i, r in enumerate(b.records):
            offset = base_offset + i if base_offset >= 0 else -1
            ts = log_append_time if log_append_time >= 0 else r.record.timestamp
            self.on_outcome(Outcome(r.number, b.partition, offset, ts))

    def _fail(self, b: _Batch, why: str, record_errors=(), code: int | None = None) -> None:
        self._pop(b)
        named = {e.batch_index: e.batch_index_error_message for e in record_errors}
        if self.idempotence and b.base_sequence >= 0:
            # the broker did not append it: the partition's next batch takes its sequence
            self._resequence(b)
        for i, r in enumerate(b.records):
            text = why
            if named:
                # Sender.failBatch: a record named by the answer gets its own message, the others
                # Kafka's words for having been in the same batch
                text = f"{error_name(code)}: " + (
                    named.get(i) or why
                    if i in named
                    else "Failed to append record because it was part of a batch which had one more "
                    "more invalid records"
                )
            self.on_outcome(Outcome(r.number, b.partition, error=text))

    def _resequence(self, failed: _Batch) -> None:
        # only a partition's first batch is ever encoded (one in flight): the next one is
        # encoded with the sequence the broker expects now
        self.sequences[failed.partition] = failed.base_sequence

    def _split(self, b: _Batch) -> None:
        """MESSAGE_TOO_LARGE for several records: the batch in halves, in its place, again."""
        queue = self.ready[b.partition]
        half = len(b.records) // 2
        parts = [b.records[:half], b.records[half:]]
        new = [
            _Batch(b.partition, rs, RECORD_BATCH_OVERHEAD + sum(r.size for r in rs), b.created, b.attempts)
            for rs in parts
        ]
        queue[0:1] = new
        if self.idempotence and b.base_sequence >= 0:
            self.sequences[b.partition] = b.base_sequence


CODECS = {name: codec for codec, name in compression.CODEC_NAMES.items()}
