"""Kafka's I/O throttle of the log cleaner (``log.cleaner.io.max.bytes.per.second``).

Kafka's ``kafka.utils.Throttler`` as ``LogCleaner`` builds it (check interval 300 ms,
throttling down): the cleaner reports every byte it reads and writes; once a check interval
has passed with bytes observed, a rate above the desired one is paid for with a sleep long
enough that the interval's bytes would have taken their time at the desired rate, and a new
interval starts.  The default rate (Double.MAX_VALUE) never sleeps, and the cleaner then
builds no throttle at all (:func:`throttle_for`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

#: LogCleaner's check interval
CHECK_INTERVAL_MS = 300


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
        #: bytes observed and seconds slept so far (the cleaner's statistics)
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
            sleep_ms = round(self.observed / (self.rate / 1000) - elapsed_ns // 1_000_000)
            if sleep_ms > 0:
                self.sleep(sleep_ms / 1000)
                self.slept += sleep_ms / 1000
        self.period_start = self.clock()
        self.observed = 0


def throttle_for(bytes_per_second: float | None) -> Throttler | None:
    """A throttle for a finite positive rate; None (no throttling, no cost) otherwise."""
    if (
        bytes_per_second is None
        or not math.isfinite(bytes_per_second)
        or bytes_per_second >= sys.float_info.max
    ):
        return None  # Kafka's default, Double.MAX_VALUE
    return Throttler(bytes_per_second)
