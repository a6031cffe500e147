"""Kafka's rate measures (org.apache.kafka.common.metrics.stats), the one implementation every
quota of the broker measures with: the client quotas (broker/quotas.py: ClientQuotaManager's
:class:`Rate`, ControllerMutationQuotaManager's :class:`TokenBucket`) and the replication
throttles (broker/replication_quota.py: ReplicationQuotaManager's :class:`SimpleRate`).

- A SampledStat keeps up to ``samples`` samples of ``window_ms`` each (a record past the current
  sample's window starts the next one, reusing the oldest once all exist); a sample older than
  ``samples x window_ms`` is reset when measured (purgeObsoleteSamples).
- :class:`Rate`: the samples' sum over the time since the oldest sample, counted as at least
  ``samples - 1`` whole windows (so a first burst is spread over them).
- :class:`SimpleRate`: the same sum over the time since the oldest sample, at least one window.
- :meth:`Rate.exceeded` is Sensor.checkQuotas of an upper-bound Quota: the measure above the bound.

No clock here but :func:`now_ms`; every method takes the time, so the measures are tested with
numbers alone.
"""

from __future__ import annotations

import math
import time

#: the metric configs' defaults of every quota (quota.window.num, quota.window.size.seconds and
#: their replication.* counterparts: 10 whole windows + the current one, of one second)
DEFAULT_SAMPLES = 11
DEFAULT_WINDOW_S = 1


def java_round(x: float) -> int:
    """Java's Math.round(double): floor(x + 0.5)."""
    return math.floor(x + 0.5)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class Rate:
    """Kafka's Rate over a WindowedSum (SampledStat): ``samples`` samples of ``window_ms``,
    the rate the sum over the elapsed window (at least samples - 1 whole windows).  ``bound``:
    the Quota's (upper) bound, changed in place as Kafka changes a metric's config (the samples
    stay)."""

    __slots__ = ("samples", "window_ms", "_samples", "_current", "bound", "last_ms")

    def __init__(
        self, bound: float, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_S * 1000
    ):
        self.bound = bound
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[list] = []  # [window start ms, value]
        self._current = 0
        self.last_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_ms = now_ms
        if not self._samples:
            self._samples.append([now_ms, 0.0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                sample = [now_ms, 0.0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[0], sample[1] = now_ms, 0.0
        sample[1] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s[0] >= expire:
                s[0], s[1] = now_ms, 0.0

    def _elapsed(self, now_ms: int) -> int:
        """Purged, the time since the oldest sample began (SampledStat.oldest, made if none)."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append([now_ms, 0.0])
        return now_ms - min(s[0] for s in self._samples)

    def window_size(self, now_ms: int) -> int:
        elapsed = self._elapsed(now_ms)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s[1] for s in self._samples)
        return total / (self.window_size(now_ms) / 1000.0)

    def exceeded(self, now_ms: int) -> bool:
        """Sensor.checkQuotas of an upper-bound Quota: the measure above the bound."""
        return self.measure(now_ms) > self.bound

    def throttle_ms(self, now_ms: int, cap_ms: int | None = None) -> int:
        """0 within the bound, else QuotaUtils.throttleTime (capped: boundedThrottleTime)."""
        value = self.measure(now_ms)
        if value <= self.bound or self.bound <= 0:
            return 0
        t = java_round((value - self.bound) / self.bound * self.window_size(now_ms))
        return t if cap_ms is None else min(t, cap_ms)


class SimpleRate(Rate):
    """Kafka's SimpleRate: the sum over the time since the oldest sample, at least one window
    (no samples - 1 windows assumed: a first burst counts over one window, not ten)."""

    __slots__ = ()

    def window_size(self, now_ms: int) -> int:
        return max(self._elapsed(now_ms), self.window_ms)


class TokenBucket:
    """KIP-599's TokenBucket: ``samples x window`` seconds of the rate as its burst, full at
    first use; a strict quota refuses while the tokens are negative."""

    __slots__ = ("bound", "burst", "tokens", "last_ms")

    def __init__(
        self, bound: float, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_S * 1000
    ):
        self.bound = bound
        self.burst = samples * window_ms / 1000.0 * bound
        self.tokens = 0.0
        self.last_ms = 0

    def _refill(self, now_ms: int) -> None:
        self.tokens = min(self.burst, self.tokens + self.bound * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms

    def measure(self, now_ms: int) -> float:
        self._refill(now_ms)
        return self.tokens

    def record(self, value: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens = min(self.burst, self.tokens - value)

    def throttle_ms(self, now_ms: int) -> int:
        """ControllerMutationQuotaManager.throttleTimeMs: -tokens / bound seconds (0: none owed)."""
        tokens = self.measure(now_ms)
        return java_round(-tokens / self.bound * 1000) if tokens < 0 and self.bound > 0 else 0
