"""``kafkatool perf produce`` and ``perf consume``: Kafka 3.7's ProducerPerformance
(kafka-producer-perf-test.sh) and ConsumerPerformance (kafka-consumer-perf-test.sh) on the
project's one producer (:mod:`kafkatool.assign.producer`) and consumer group member
(:mod:`kafkatool.assign.group_consumer`).

* Payloads: ``--payload-file``'s text split by the delimiter (Java's String.split: a regular
  expression, trailing empty strings dropped), one chosen per record by Java's
  ``SplittableRandom(0).nextInt`` (the same choices as Kafka's tool); ``--record-size`` bytes of
  random upper-case letters A-Z, a new payload per record, from a seeded generator (Kafka's
  SplittableRandom stream, one call per byte, would cost more than the producer's record).
* ThroughputThrottler's rule as Kafka's: after each send, throttled while records sent so far /
  seconds since the start (in float32, as Kafka computes it) is above the target; then the
  throttler sleeps its accumulated deficit of 1/target s per record once it reaches 2 ms.
* Stats as Kafka's Stats class: a window line every 5 s of completions, the summary with
  percentiles over latencies sampled every numRecords / min(numRecords, 500000)-th completion,
  integer milliseconds from send() to the acknowledgement.
* The producer has no I/O thread of its own: the driver hands it rounds. A round goes when a
  batch is full or an open batch's linger.ms ran out, and no earlier than the last round took
  after that round's end: while Kafka's sender thread has requests in flight, its producer's
  caller goes on appending, which is what fills batches at linger.ms=0 under load.
* Transactions (``--transaction-duration-ms``): ProducerPerformance's loop: a transaction begun
  before a record when none is open, committed after the send of the record whose send time is
  the duration or more past the transaction's start, the last one committed at the end. A
  transaction that cannot be committed (a failed batch: abortable) ends the run as Kafka's
  send() and commitTransaction() end it, by an exception: here the transaction is aborted
  (KafkaProducer.close() aborts an incomplete one) and the error is the run's; a fenced producer
  (fatal) aborts nothing. Ctrl-C aborts the open transaction.
* The consumer joins its group (perf-consumer-NNNNN unless --group), subscribes to the topic
  with ConsumerPerfRebListener's rebalance time, polls (100 ms) until ``--messages`` records or
  ``--timeout`` ms without a record; the CSV-like lines of ConsumerPerformance.
"""

from __future__ import annotations

import os
import random
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkatool.errors import KafkatoolError
from kafkatool.formats.java_format import fixed

MB = 1024.0 * 1024.0


class PerfError(KafkatoolError):
    """Bad options or input of a perf run: one line, exit 2."""


def now_ms() -> int:
    """System.currentTimeMillis()."""
    return time.time_ns() // 1_000_000


# ----------------------------------------------------------------------------- SplittableRandom
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


class SplittableRandom:
    """java.util.SplittableRandom's nextInt(bound) (seed, GOLDEN_GAMMA; mix32; RandomSupport's
    bounded rejection), the generator ProducerPerformance seeds with 0."""

    def __init__(self, seed: int):
        self.seed = seed & _MASK64

    def next_int(self) -> int:
        self.seed = (self.seed + _GOLDEN_GAMMA) & _MASK64
        z = self.seed
        z = ((z ^ (z >> 33)) * 0x62A9D9ED799705F5) & _MASK64
        r = (((z ^ (z >> 28)) * 0xCB24D0A5C88C35B3) & _MASK64) >> 32
        return r - (1 << 32) if r & 0x80000000 else r

    def next_int_bound(self, bound: int) -> int:
        r = self.next_int()
        m = bound - 1
        if bound & m == 0:
            return r & m
        u = (r & 0xFFFFFFFF) >> 1
        for _ in range(1 << 20):  # a rejection has a chance below 2**-26: bounded all the same
            r = u % bound
            if u + m - r < 2**31:  # Java: no int overflow
                return r
            u = (self.next_int() & 0xFFFFFFFF) >> 1
        return r


# ----------------------------------------------------------------------------- payloads
def java_split(text: str, delimiter: str) -> list[str]:
    """Java's String.split(regex): a zero-width match at the start makes no leading empty
    string, trailing empty strings are dropped; an input without a match is itself."""
    try:
        rx = re.compile(delimiter)
    except re.error as exc:
        raise PerfError(f"--payload-delimiter {delimiter!r}: not a regular expression: {exc}") from None
    out, start = [], 0
    for m in rx.finditer(text):
        if start == 0 and m.start() == 0 and m.end() == 0:
            continue
        out.append(text[start : m.start()])
        start = m.end()
    if not out:
        return [text]
    out.append(text[start:])
    while out and out[-1] == "":
        out.pop()
    return out


def read_payload_file(path: Path, delimiter: str, say: Callable[[str], None]) -> list[bytes]:
    """readPayloadFile: the file's text (UTF-8, malformed bytes as U+FFFD, as new String(bytes,
    UTF_8)) split by the delimiter, each payload as UTF-8 bytes; its two lines to ``say``."""
    from kafkatool.formats.java_utf8 import decode, encode

    absolute = Path(os.path.abspath(path))
    say(f"Reading payloads from: {absolute}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise PerfError(f"--payload-file {path}: {exc.strerror or exc}") from None
    if not data:
        raise PerfError(f"--payload-file {path}: File does not exist or empty file provided.")
    payloads = java_split(decode(data), delimiter)
    say(f"Number of messages read: {len(payloads)}")
    return [encode(p) for p in payloads]  # String.getBytes(UTF_8)


_LETTERS = bytes(range(65, 91))
#: a random byte below 234 (9 * 26) taken as a letter, the others dropped: A-Z uniform
_TO_LETTER = bytes(_LETTERS[b % 26] for b in range(256))
_OVER = bytes(range(234, 256))


class Payloads:
    """One payload per record: a random choice of ``choices`` (SplittableRandom(0).nextInt, as
    Kafka's generateRandomPayload), else ``size`` random letters A-Z (a seeded generator, cut from
    a block made at C speed)."""

    BLOCK = 1 << 20

    def __init__(self, size: int | None, choices: list[bytes]):
        self.size = size
        self.choices = choices
        self.random = SplittableRandom(0)
        self._rng = random.Random(0)
        self._block = b""
        self._at = 0

    def _letters(self, n: int) -> bytes:
        if n <= 0:
            return b""
        out = []
        while n > 0:
            if self._at >= len(self._block):
                raw = self._rng.randbytes(max(self.BLOCK, n + n // 8))
                self._block = raw.translate(_TO_LETTER, _OVER)
                self._at = 0
            piece = self._block[self._at : self._at + n]
            self._at += len(piece)
            n -= len(piece)
            out.append(piece)
        return out[0] if len(out) == 1 else b"".join(out)

    def next(self) -> bytes:
        if self.choices:
            return self.choices[self.random.next_int_bound(len(self.choices))]
        return self._letters(self.size or 0)


# ----------------------------------------------------------------------------- throttler
def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


class ThroughputThrottler:
    """org.apache.kafka.server.util.ThroughputThrottler for records/s."""

    NS_PER_SEC = 1_000_000_000
    MIN_SLEEP_NS = 2_000_000

    def __init__(self, target: int, start_ms: int):
        self.start_ms = start_ms
        self.target = target
        self.sleep_time_ns = self.NS_PER_SEC // target if target > 0 else 2**63 - 1
        self.sleep_deficit_ns = 0

    def should_throttle(self, amount_so_far: int, send_start_ms: int) -> bool:
        """Kafka's float arithmetic: elapsedSec = (sendStartMs - startMs) / 1000.f, then
        amountSoFar / elapsedSec > targetThroughput, all in float32."""
        if self.target < 0:
            return False
        elapsed = _f32(_f32(send_start_ms - self.start_ms) / 1000.0)
        return elapsed > 0 and _f32(_f32(amount_so_far) / elapsed) > _f32(self.target)

    def throttle(self, wait: Callable[[float], None]) -> None:
        """Add one record's 1/target s to the deficit; sleep it off (``wait(seconds)``, which may
        return early: the time that passed is what counts) once it reaches 2 ms."""
        self.sleep_deficit_ns += self.sleep_time_ns
        if self.sleep_deficit_ns < self.MIN_SLEEP_NS:
            return
        start = time.monotonic_ns()
        for _ in range(1 << 30):  # bounded: every pass waits or ends
            remaining = self.sleep_deficit_ns - (time.monotonic_ns() - start)
            if remaining <= 0:
                break
            wait(remaining / 1e9)
        self.sleep_deficit_ns = 0


# ----------------------------------------------------------------------------- producer stats
@dataclass
class ProducerWindow:
    records: int
    records_per_sec: float
    mb_per_sec: float
    avg_latency_ms: float
    max_latency_ms: float

    def line(self) -> str:
        return (
            f"{self.records} records sent, {fixed(self.records_per_sec, 1)} records/sec "
            f"({fixed(self.mb_per_sec, 2)} MB/sec), {fixed(self.avg_latency_ms, 1)} ms avg latency, "
            f"{fixed(self.max_latency_ms, 1)} ms max latency."
        )

    def json(self) -> dict:
        return {"type": "window", **self.__dict__}


@dataclass
class ProducerSummary(ProducerWindow):
    p50_ms: int = 0
    p95_ms: int = 0
    p99_ms: int = 0
    p999_ms: int = 0
    #: the payload bytes acknowledged (not in Kafka's line: its MB/sec are of them)
    bytes: int = 0

    def line(self) -> str:
        return (
            f"{self.records} records sent, {fixed(self.records_per_sec, 6)} records/sec "
            f"({fixed(self.mb_per_sec, 2)} MB/sec), {fixed(self.avg_latency_ms, 2)} ms avg latency, "
            f"{fixed(self.max_latency_ms, 2)} ms max latency, {self.p50_ms} ms 50th, {self.p95_ms} ms 95th, "
            f"{self.p99_ms} ms 99th, {self.p999_ms} ms 99.9th."
        )

    def json(self) -> dict:
        return {"type": "summary", **self.__dict__}


def _div(a: float, b: float) -> float:
    """Java's double division: x/0 is NaN or +-Infinity, never an exception."""
    if b == 0:
        if a == 0 or a != a:
            return float("nan")
        return float("inf") if a > 0 else float("-inf")
    return a / b


class ProducerStats:
    """ProducerPerformance.Stats: ``on_window`` gets each window as Kafka prints it."""

    def __init__(
        self, num_records: int, reporting_interval_ms: int, on_window: Callable[[ProducerWindow], None]
    ):
        self.start = now_ms()
        self.window_start = self.start
        self.sampling = num_records // min(num_records, 500000)
        self.latencies = [0] * (num_records // self.sampling + 1)
        self.iteration = 0
        self.index = 0
        self.count = 0
        self.bytes = 0
        self.max_latency = 0
        self.total_latency = 0
        self.window_count = 0
        self.window_max_latency = 0
        self.window_total_latency = 0
        self.window_bytes = 0
        self.reporting_interval = reporting_interval_ms
        self.on_window = on_window

    def record(self, latency: int, size: int, at_ms: int) -> None:
        """Stats.record, then PerfCallback's iteration++ (a completion without error)."""
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        if latency > self.max_latency:
            self.max_latency = latency
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency
        if latency > self.window_max_latency:
            self.window_max_latency = latency
        if self.iteration % self.sampling == 0:
            self.latencies[self.index] = latency
            self.index += 1
        if at_ms - self.window_start >= self.reporting_interval:
            self.on_window(self.window())
            self.window_start = now_ms()
            self.window_count = self.window_max_latency = self.window_total_latency = self.window_bytes = 0
        self.iteration += 1

    def window(self) -> ProducerWindow:
        elapsed = now_ms() - self.window_start
        return ProducerWindow(
            self.window_count,
            _div(1000.0 * self.window_count, elapsed),
            _div(_div(1000.0 * self.window_bytes, elapsed), MB),
            _div(self.window_total_latency, self.window_count),
            float(self.window_max_latency),
        )

    def total(self) -> ProducerSummary:
        elapsed = now_ms() - self.start
        size = min(self.index, len(self.latencies))
        ordered = sorted(self.latencies[:size])
        # Stats.percentiles: latencies[(int) (p * size)] of the sorted samples (0 when there are none)
        percs = [ordered[int(p * size)] if ordered else 0 for p in (0.5, 0.95, 0.99, 0.999)]
        return ProducerSummary(
            self.count,
            _div(1000.0 * self.count, elapsed),
            _div(_div(1000.0 * self.bytes, elapsed), MB),
            _div(self.total_latency, self.count),
            float(self.max_latency),
            *percs,
            self.bytes,
        )


# ----------------------------------------------------------------------------- producer run
@dataclass
class ProduceResult:
    summary: ProducerSummary
    failed: int = 0
    interrupted: bool = False
    #: the records that failed for a reason of the producer or its transaction (Outcome.shared:
    #: counted in ``failed``, not one line each)
    shared: int = 0
    #: why a transactional run ended early: the fatal error, or the abortable one of the
    #: transaction it aborted (None: every transaction committed)
    transaction_error: str | None = None


class _Driver:
    """Rounds of the single-threaded producer: see the module's note."""

    def __init__(self, producer):
        self.p = producer
        self.free_at = 0.0  # monotonic time from which the "sender" takes the next round

    def _due(self, now: float) -> bool:
        p = self.p
        full = False
        for q in p.ready.values():
            if q:
                if len(q) >= p.max_in_flight:
                    return True  # as many batches as a round takes: no reason to wait
                full = True
        if now < self.free_at:
            return False
        if full:
            return True
        linger = p.linger
        return any(now >= b.created + linger for b in p.open.values())

    def round(self) -> None:
        t0 = time.monotonic()
        self.p.send_ready(flush=False)
        t1 = time.monotonic()
        self.free_at = t1 + (t1 - t0)

    def maybe_round(self) -> None:
        if self._due(time.monotonic()):
            self.round()

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, taking the rounds that fall due meanwhile."""
        end = time.monotonic() + seconds
        for _ in range(1 << 30):  # bounded: each pass sleeps, sends or ends
            now = time.monotonic()
            if now >= end:
                return
            if self._due(now):
                self.round()
                continue
            due = self.p.next_deadline()
            wake = end if due is None else min(end, max(due, self.free_at))
            time.sleep(max(0.0, wake - now))


class ProduceRun:
    """One perf produce: the producer's outcomes go to :meth:`outcome`."""

    def __init__(self, num_records: int, stats: ProducerStats, on_error: Callable[[int, str], None]):
        self.num_records = num_records
        self.stats = stats
        self.on_error = on_error
        self.sent: dict[int, tuple[int, int]] = {}
        self.failed = 0
        self.shared = 0

    def outcome(self, o) -> None:
        start, size = self.sent.pop(o.number)
        if o.error is None:
            at = now_ms()
            self.stats.record(int(at - start), size, at)
        else:
            self.failed += 1
            if o.shared:
                self.shared += 1  # the producer's or the transaction's error, said once
            else:
                self.on_error(o.number, o.error)

    def run(
        self, producer, payloads: Payloads, throughput: int, transaction_duration_ms: int = 0
    ) -> ProduceResult:
        """ProducerPerformance's loop; transactions of ``transaction_duration_ms`` when above 0."""
        from kafkatool.formats.records import SimpleRecord

        driver = _Driver(producer)
        start_ms = now_ms()
        throttler = ThroughputThrottler(throughput, start_ms)
        transactions = transaction_duration_ms > 0
        interrupted = False
        current_size = 0
        transaction_start = 0
        try:
            for i in range(self.num_records):
                payload = payloads.next()
                if transactions and current_size == 0:
                    producer.begin_transaction()
                    transaction_start = now_ms()
                send_start = now_ms()
                self.sent[i] = (send_start, len(payload))
                producer.append(i, SimpleRecord(payload))
                driver.maybe_round()
                if producer.fatal is not None or producer.abortable is not None:
                    break  # KafkaProducer.send throws after a fatal error, or in an abortable transaction
                current_size += 1
                if transactions and transaction_duration_ms <= send_start - transaction_start:
                    if not producer.commit_transaction():
                        break  # commitTransaction throws
                    current_size = 0
                if throttler.should_throttle(i, send_start):
                    throttler.throttle(driver.wait)
            if (
                transactions
                and producer.in_transaction
                and producer.fatal is None
                and producer.abortable is None
            ):
                producer.commit_transaction()
        except KeyboardInterrupt:
            interrupted = True
        transaction_error = (producer.fatal or producer.abortable) if transactions else None
        try:
            if transactions:
                # KafkaProducer.close(): an incomplete transaction is aborted
                if producer.in_transaction:
                    producer.abort_transaction()
                transaction_error = producer.fatal or transaction_error  # a fence found by the abort
            else:
                producer.send_ready(flush=True)  # producer.close(): what was sent is acknowledged
        except KeyboardInterrupt:
            interrupted = True
        return ProduceResult(self.stats.total(), self.failed, interrupted, self.shared, transaction_error)


# ----------------------------------------------------------------------------- consumer
@dataclass
class ConsumerWindow:
    """printConsumerProgress's line: --show-detailed-stats."""

    time_ms: int
    data_consumed_mb: float
    mb_sec: float
    messages: int
    msg_sec: float
    rebalance_time_ms: int
    fetch_time_ms: int
    fetch_mb_sec: float
    fetch_msg_sec: float

    def line(self, date_format) -> str:
        return (
            f"{date_format.format(self.time_ms)}, 0, {fixed(self.data_consumed_mb, 4)}, {fixed(self.mb_sec, 4)}, "
            f"{self.messages}, {fixed(self.msg_sec, 4)}, {self.rebalance_time_ms}, {self.fetch_time_ms}, "
            f"{fixed(self.fetch_mb_sec, 4)}, {fixed(self.fetch_msg_sec, 4)}"
        )

    def json(self) -> dict:
        return {"type": "window", **self.__dict__}


@dataclass
class ConsumerSummary:
    start_time_ms: int
    end_time_ms: int
    data_consumed_mb: float
    mb_sec: float
    messages: int
    msg_sec: float
    rebalance_time_ms: int
    fetch_time_ms: int
    fetch_mb_sec: float
    fetch_msg_sec: float
    bytes: int

    def line(self, date_format) -> str:
        return (
            f"{date_format.format(self.start_time_ms)}, {date_format.format(self.end_time_ms)}, "
            f"{fixed(self.data_consumed_mb, 4)}, {fixed(self.mb_sec, 4)}, {self.messages}, "
            f"{fixed(self.msg_sec, 4)}, {self.rebalance_time_ms}, {self.fetch_time_ms}, "
            f"{fixed(self.fetch_mb_sec, 4)}, {fixed(self.fetch_msg_sec, 4)}"
        )

    def json(self) -> dict:
        return {"type": "summary", **self.__dict__}


HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DETAILED_HEADER = (
    "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
POLL_MS = 100


class RebalanceTimer:
    """ConsumerPerfRebListener: the time from the start (then from each revocation) to each
    assignment, in total and since the last detailed-stats line."""

    def __init__(self, start_ms: int):
        self.join_start = start_ms
        self.total = 0
        self.window = 0

    def on_partitions_revoked(self, partitions) -> None:
        self.join_start = now_ms()

    def on_partitions_assigned(self, partitions) -> None:
        elapsed = now_ms() - self.join_start
        self.total += elapsed
        self.window += elapsed


@dataclass
class ConsumeResult:
    summary: ConsumerSummary
    timed_out: bool
    unconsumed: list
    interrupted: bool = False


def progress(
    at_ms: int, last_ms: int, read: int, last_read: int, nbytes: int, last_bytes: int, join_ms: int
) -> ConsumerWindow:
    """printBasicProgress + printExtendedProgress."""
    elapsed = float(at_ms - last_ms)
    interval_mb = (nbytes - last_bytes) / MB
    fetch_ms = at_ms - last_ms - join_ms
    return ConsumerWindow(
        at_ms,
        nbytes / MB,
        _div(1000.0 * interval_mb, elapsed),
        read,
        _div(read - last_read, elapsed) * 1000.0,
        join_ms,
        fetch_ms,
        0.0 if fetch_ms <= 0 else 1000.0 * interval_mb / fetch_ms,
        0.0 if fetch_ms <= 0 else 1000.0 * (read - last_read) / fetch_ms,
    )


def run_consumer(
    consumer,
    timer: RebalanceTimer,
    start_ms: int,
    num_messages: int,
    timeout_ms: int,
    reporting_interval_ms: int,
    on_window: Callable[[ConsumerWindow], None] | None,
) -> ConsumeResult:
    """ConsumerPerformance.consume: poll until ``num_messages`` records were read or no record
    came for ``timeout_ms``; a progress window (``on_window``, --show-detailed-stats) each
    ``reporting_interval_ms``. Records past ``num_messages`` in the last poll are not counted and
    are handed back (``unconsumed``) for the group's commit."""
    read = nbytes = last_read = last_bytes = 0
    current = now_ms()
    last_report = last_consumed = current
    unconsumed: list = []
    interrupted = False
    try:
        while read < num_messages and current - last_consumed <= timeout_ms:
            records = consumer.poll(POLL_MS)
            current = now_ms()
            if records:
                last_consumed = current
            for n, r in enumerate(records):
                if read >= num_messages:
                    unconsumed = records[n:]
                    break
                read += 1
                if r.key is not None:
                    nbytes += len(r.key)
                if r.value is not None:
                    nbytes += len(r.value)
                if current - last_report >= reporting_interval_ms:
                    if on_window is not None:
                        on_window(
                            progress(current, last_report, read, last_read, nbytes, last_bytes, timer.window)
                        )
                    timer.window = 0
                    last_report = current
                    last_read = read
                    last_bytes = nbytes
    except KeyboardInterrupt:
        interrupted = True
    end_ms = now_ms()
    elapsed_s = (end_ms - start_ms) / 1000.0
    fetch_ms = (end_ms - start_ms) - timer.total
    mb = nbytes / MB
    summary = ConsumerSummary(
        start_ms,
        end_ms,
        mb,
        _div(mb, elapsed_s),
        read,
        _div(read, elapsed_s),
        timer.total,
        fetch_ms,
        _div(mb, fetch_ms / 1000.0),
        _div(read, fetch_ms / 1000.0),
        nbytes,
    )
    return ConsumeResult(summary, read < num_messages and not interrupted, unconsumed, interrupted)
