"""Replication throttles: Kafka 3.7's ReplicationQuotaManager, one per side and broker (QuotaFactory's
``leader`` and ``follower``), and one for moves between log dirs (``alterLogDirs``).

- The measure is broker/rates.py's :class:`SimpleRate` over ``replication.quota.window.num``
  samples of ``replication.quota.window.size.seconds`` (alter.log.dirs.replication.* for the
  moves): the bytes recorded over the time since the oldest sample, at least one window.
- The bound is the broker's own dynamic ``<side>.replication.throttled.rate``
  (``replica.alter.log.dirs.io.max.bytes.per.second``), Long.MAX_VALUE unset, as Kafka's BrokerConfigHandler applies it: read at each check, so a change takes effect
  at once and keeps the samples (updateQuota changes the metric's config).  Kafka 3.7 applies
  neither a cluster-wide default (``--entity-default``, KAFKA-10190) nor server.properties to the
  quota; neither do we.
- A SimpleRate's samples reach back ``window.num x window.size`` (11 s by default): a leader
  whose followers fetch all along (each answer records its throttled partitions' size, or an
  empty answer's few bytes) has 11 s of samples, and a burst of up to ~11 s of the rate passes
  at once; a sensor without samples counts a first burst over one window.
- :meth:`ReplicationQuota.exceeded` is isQuotaExceeded (the sensor's checkQuotas: the rate above
  the bound), :meth:`ReplicationQuota.record` record(value) (recorded whatever the bound), and
  :meth:`ReplicationQuota.is_throttled` isThrottled: the topic's
  ``<side>.replication.throttled.replicas`` is ``*`` or names ``partition:<this broker>``
  (ConfigHandler.parseThrottledPartitions), whether the replica is in sync or not.

Who asks: the leader's fetch handler leaves an out-of-sync follower's throttled partition without
records while the quota is exceeded (ReplicaManager.shouldLeaderThrottle) and records the size of
every throttled partition of a follower's answer (KafkaApis.sizeOfThrottledPartitions); the
follower's fetcher leaves such a partition out of its fetch (shouldFollowerThrottle) and records
the bytes it appends of every throttled partition (ReplicaFetcherThread.processPartitionData);
a log-dir move copies nothing while its quota is exceeded and records what it copies
(ReplicaAlterLogDirsThread, LocalLeaderEndPoint.buildFetch).
"""

from __future__ import annotations

from collections.abc import Callable

from kafkatool.broker.rates import SimpleRate, now_ms
from kafkatool.log.topic_settings import ALL_REPLICAS, SettingsError, throttled_replicas

LONG_MAX = 2**63 - 1
#: ReplicationQuotaManager's AllReplicas: the topic's ``*``
ALL = ALL_REPLICAS


class ReplicationQuota:
    """ReplicationQuotaManager: ``config`` (the broker's BrokerConfig, whose per-broker dynamic
    layer holds ``rate_name``); ``replicas_of(topic)`` the topic's raw throttled-replicas value
    (None: not set), ``node_id`` this broker's, ``clock`` the sensor's milliseconds."""

    __slots__ = ("config", "rate_name", "sensor", "_raw", "replicas_of", "node_id", "_parsed", "clock")

    def __init__(
        self,
        config,
        rate_name: str,
        samples: int,
        window_s: int,
        replicas_of: Callable[[str], str | None] | None = None,
        node_id: int = -1,
        clock: Callable[[], int] = now_ms,
    ):
        self.config = config
        self.rate_name = rate_name
        self.sensor = SimpleRate(float(LONG_MAX), samples, window_s * 1000)
        self._raw: str | None = None
        self.replicas_of = replicas_of
        self.node_id = node_id
        #: raw throttled-replicas value -> ALL or the frozenset of this broker's partitions
        self._parsed: dict = {}
        #: milliseconds of a monotonic clock (the sensor's time)
        self.clock = clock

    def upper_bound(self) -> int:
        """The bound (B/s): the broker's own dynamic value, Long.MAX_VALUE when unset."""
        raw = self.config.dynamic.get(self.rate_name)
        if raw != self._raw:
            self._raw = raw
            try:
                bound = LONG_MAX if raw is None else int(str(raw).strip())
            except ValueError:  # stored layers are checked when taken; never throttle on junk
                bound = LONG_MAX
            self.sensor.bound = float(bound)
        return int(self.sensor.bound) if self.sensor.bound < LONG_MAX else LONG_MAX

    def exceeded(self) -> bool:
        """isQuotaExceeded: the rate over the samples is above the bound."""
        if self.upper_bound() >= LONG_MAX:
            return False  # Quota.upperBound(Long.MaxValue): no rate of bytes gets past it
        return self.sensor.exceeded(self.clock())

    def record(self, nbytes: int) -> None:
        """record(value): counted whatever the bound (a bound set later sees the recent bytes)."""
        self.sensor.record(nbytes, self.clock())

    def is_throttled(self, topic: str, partition: int) -> bool:
        """isThrottled: the topic's throttled replicas are ``*`` or name ``partition:<this broker>``
        (in sync or not: the caller asks that where Kafka does)."""
        if self.replicas_of is None:
            return False
        raw = self.replicas_of(topic)
        if not raw:
            return False
        parsed = self._parsed.get(raw)
        if parsed is None:
            parsed = self._parsed[raw] = self._parse(raw)
        return parsed is ALL or partition in parsed

    def _parse(self, raw: str):
        """ConfigHandler.parseThrottledPartitions: ``*``, or the partitions of the
        ``partition:broker`` entries naming this broker (topic_settings.throttled_replicas, the
        one rule of the value; one the broker refuses throttles nothing: a stored value is
        checked when it is taken)."""
        if len(self._parsed) > 1024:
            self._parsed.clear()
        try:
            replicas = throttled_replicas("replication.throttled.replicas", raw)  # the name: for a message
        except SettingsError:
            return frozenset()
        if replicas == ALL:
            return ALL
        return frozenset(p for p, b in replicas if b == self.node_id)
