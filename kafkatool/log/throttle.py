"""Kafka's I/O throttle of the log cleaner (``log.cleaner.io.max.bytes.per.second``).

Kafka's ``kafka.utils.Throttler`` as ``LogCleaner`` builds it (check interval 300 ms,
throttling down): the cleaner reports every byte it reads and writes; once a check interval
has passed with bytes observed, a rate above the desired one is paid for with a sleep long
enough that the interval's bytes would have taken their time at the desired rate, and a new
interval starts.

Kafka builds one per ``LogCleaner`` and keeps it for the cleaner's life: the interval and
its bytes run on across rounds and partitions (many small rounds, each shorter than the
check interval, are throttled together), and a dynamic change of the rate
(``LogCleaner.reconfigure`` -> ``updateDesiredRatePerSec``) changes the rate only, the
interval's accounting stays.  So the broker's cleaner (broker/maintenance.CleanerState) and a
``compact`` run each hold one :class:`Throttler`; at the default rate (Double.MAX_VALUE) it
counts and never sleeps, as Kafka's does.

A round of the broker's cleaner runs in its worker process: the throttler travels there
pickled with the round and its accounting comes back with the answer (:meth:`Throttler.adopt`).
The clock is ``time.monotonic_ns`` (CLOCK_MONOTONIC, one clock for every process of the
machine), so an interval begun in one process is measured in another.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: LogCleaner's check interval
CHECK_INTERVAL_MS = 300
#: how many bytes the cleaner reads or writes between two reports to the throttler: Kafka's
#: cleaner reports each read buffer it fills (log.cleaner.io.buffer.size / threads / 2,
#: 256 KiB by default) and what it writes of it; reporting every batch cost a round 6-8% of
#: its CPU with small batches (three calls a batch), runs of this size are within noise
REPORT_BYTES = 262_144


class Throttler:
    def __init__(
        self,
        bytes_per_second: float,
        check_interval_ms: int = CHECK_INTERVAL_MS,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.rate = bytes_per_second
        self.check_interval_ns = check_interval_ms * 1_000_000
        self.clock = clock
        self.sleep = sleep
        self.period_start = clock()
        self.observed = 0
        #: bytes observed and seconds slept over the throttler's life (a round's statistics
        #: are the difference across it)
        self.total = 0
        self.slept = 0.0

    def maybe_throttle(self, n: int) -> None:
        self.observed += n
        self.total += n
        elapsed_ns = self.clock() - self.period_start
        if elapsed_ns <= self.check_interval_ns or self.observed <= 0:
            return
        if self.observed * 1e9 / elapsed_ns > self.rate:
            # the sleep that makes this interval's bytes take their time at the desired rate
            # (Kafka: Math.round of ms, whole ms elapsed)
            sleep_ms = math.floor(self.observed / (self.rate / 1000) - elapsed_ns // 1_000_000 + 0.5)
            if sleep_ms > 0:
                self.sleep(sleep_ms / 1000)
                self.slept += sleep_ms / 1000
        self.period_start = self.clock()
        self.observed = 0

    def update_rate(self, bytes_per_second: float) -> bool:
        """Kafka's updateDesiredRatePerSec (LogCleaner.reconfigure): the new rate decides from
        the next check on; the current interval and its bytes stay.  True if it changed."""
        changed = bytes_per_second != self.rate
        self.rate = bytes_per_second
        return changed

    def adopt(self, other: Throttler) -> None:
        """Take the accounting of ``other``, a copy of this throttler that ran a round elsewhere
        (the cleaner's worker process); the rate stays this one's (a dynamic change may have
        come meanwhile)."""
        self.period_start = other.period_start
        self.observed = other.observed
        self.total = other.total
        self.slept = other.slept
