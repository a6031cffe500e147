"""Replication throttles (Kafka's ReplicationQuotaManager, one per side and broker).

A replica is throttled when its topic's ``leader.replication.throttled.replicas`` (on the
leader) or ``follower.replication.throttled.replicas`` (on the follower) is ``*`` or names
``partition:<this broker>``, and the replica is out of sync; the bytes of throttled replicas
share the broker's ``<side>.replication.throttled.rate`` (B/s, dynamic), kept here as a token
bucket holding at most one second of the rate.  The leader sends a throttled follower nothing
while the quota is exhausted (shouldLeaderThrottle); the follower leaves throttled partitions
out of its fetch (shouldFollowerThrottle).  ``kafkatool reassign --throttle`` sets both.
"""

from __future__ import annotations

import time

from kafkatool.log.config import LONG_MAX


class ReplicationQuota:
    def __init__(self, rm, side: str):
        self.rm = rm
        self.rate_name = f"{side}.replication.throttled.rate"
        self.replicas_name = f"{side}.replication.throttled.replicas"
        self._allowance = 0.0
        self._refilled = time.monotonic()

    def rate(self) -> float | None:
        rate = self.rm.config.int(self.rate_name)
        return None if rate >= LONG_MAX else float(rate)

    def is_throttled(self, topic: str, partition: int) -> bool:
        """The partition is in this side's throttled replicas on this broker (whether the
        replica is in sync is the caller's to check)."""
        if self.rate() is None:
            return False
        t = self.rm.broker.topic(topic)
        raw = (t.configs.get(self.replicas_name) if t is not None else None) or ""
        entries = {e.strip() for e in raw.split(",") if e.strip()}
        return "*" in entries or f"{partition}:{self.rm.node_id}" in entries

    def exceeded(self) -> bool:
        rate = self.rate()
        if rate is None:
            return False
        now = time.monotonic()
        self._allowance = min(rate, self._allowance + (now - self._refilled) * rate)
        self._refilled = now
        return self._allowance <= 0

    def record(self, nbytes: int) -> None:
        if self.rate() is not None:
            self._allowance -= nbytes
