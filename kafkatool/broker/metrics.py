"""The broker's metrics, named as Kafka's MBeans are named through the Prometheus JMX exporter.

Nearly every Kafka operator scrapes a broker with prometheus/jmx_exporter and its stock Kafka
rules (``example_configs/kafka-2_0_0.yml``): a Yammer meter's ``Count`` becomes
``kafka_<domain>_<type>_<name without PerSec>_total`` (a counter), a gauge's ``Value``
``kafka_<domain>_<type>_<name>`` with the MBean's other keys as labels, a histogram's
percentiles a gauge with ``quantile="0.50"`` ... ``"0.999"`` and its ``Count``
``..._count`` (a counter; no ``_sum``), every name lower-cased.  ``kafkatool serve`` with
``kafkatool.metrics.prometheus.listener`` answers ``GET /metrics`` with what those rules make
of Kafka 3.7's MBeans, byte for byte as the exporter's 0.x line writes them (HELP "Attribute
exposed for management ...", a counter's TYPE line named ``<name>_total``, even for
``..._count``), so dashboards and alerts written for Kafka work unchanged.

The hot path only adds integers to objects it holds (:class:`TopicCounters` of the topic and
of the whole broker, :class:`RequestStats` of the API); every figure that is a state (partition
counts, offsets, sizes, groups) is read at scrape time from the broker's own structures.  A
scrape copies the lists it reads on the event loop, then formats in a thread
(prometheus_client's text writer fed by :class:`_Collector`): no lock anywhere, ints read
under the GIL.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import logging
import time
from urllib.parse import urlsplit

from kafkatool.broker.config import ConfigError

log = logging.getLogger("kafkatool.broker.metrics")

#: kafkatool's own property: where the Prometheus endpoint listens (off when unset)
LISTENER_CONFIG = "kafkatool.metrics.prometheus.listener"

#: the last this many request times make a request type's percentiles (Kafka's histograms keep
#: 1028 samples in an exponentially decaying reservoir; a ring of the last 1024 is the bounded,
#: lock-free stand-in: one store and one addition per request)
RESERVOIR = 1024
_MASK = RESERVOIR - 1
#: Yammer's Snapshot percentiles as the JMX attributes name them, and the exporter's labels
_QUANTILES = (
    (0.50, "0.50"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
)

#: KafkaServer's BrokerState values (org.apache.kafka.metadata.BrokerState)
BROKER_RUNNING = 3
BROKER_SHUTTING_DOWN = 7


def parse_listener(value: str) -> tuple[str, int]:
    """``http://host:port`` (host may be empty: every address) -> (host, port)."""
    parts = urlsplit(value.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or port is None or parts.path not in ("", "/") or parts.query:
        raise ConfigError(
            f"{LISTENER_CONFIG}={value!r}: expected http://host:port (e.g. http://127.0.0.1:9404)"
        )
    return parts.hostname or "", port


def process_listener(value: str, index: int, step: int) -> str:
    """Process ``index``'s endpoint of a broker of several processes: port + index x step, as
    its Kafka listeners (port 0 stays ephemeral)."""
    host, port = parse_listener(value)
    return f"http://{host}:{port + index * step if port else 0}"


# ---------------------------------------------------------------------- hot-path counters
class TopicCounters:
    """BrokerTopicMetrics' meters of one topic (their Count: events since the topic's first)."""

    __slots__ = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "bytes_rejected",
        "failed_produce",
        "failed_fetch",
        "total_produce",
        "total_fetch",
    )

    def __init__(self):
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.total_produce = 0
        self.total_fetch = 0


#: the TopicCounters removeOldLeaderMetrics closes (MessagesIn, BytesIn, BytesRejected,
#: FailedProduceRequests, TotalProduceRequests; Kafka's conversion and remote-storage meters too)
LEADER_ONLY_METERS = ("messages_in", "bytes_in", "bytes_rejected", "failed_produce", "total_produce")


class AllTopicsCounters(TopicCounters):
    """The broker-wide BrokerTopicMetrics (no topic tag): also the replication meters, which
    Kafka keeps only there."""

    __slots__ = ("replication_bytes_in", "replication_bytes_out")

    def __init__(self):
        super().__init__()
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: the broker-wide counters and one set per topic (dropped with
    the topic, as removeMetrics drops its meters)."""

    def __init__(self):
        self.all = AllTopicsCounters()
        self.topics: dict[str, TopicCounters] = {}

    def topic(self, name: str) -> TopicCounters:
        c = self.topics.get(name)
        if c is None:
            c = self.topics[name] = TopicCounters()
        return c

    def remove(self, name: str) -> None:
        """removeMetrics: the topic is deleted, or this broker hosts no partition of it."""
        self.topics.pop(name, None)

    def remove_leader_metrics(self, name: str) -> None:
        """removeOldLeaderMetrics: this broker leads no partition of the topic any more, so the
        meters only a leader marks close (a follower's fetch meters stay); marked again, one
        starts from 0 as Kafka's recreated meter. Zeroed in place: the exposition leaves a topic's
        meter out until its first mark. (removeOldFollowerMetrics has nothing to close here:
        Kafka keeps the replication meters broker-wide only.)"""
        c = self.topics.get(name)
        if c is not None:
            for attr in LEADER_ONLY_METERS:
                setattr(c, attr, 0)

    def appended(self, tc: TopicCounters, info, size: int) -> None:
        """A leader append that succeeded (ReplicaManager.appendToLocalLog): its records
        (LogAppendInfo.numMessages, a retried batch's too) and the bytes that came, ``size``
        (records.sizeInBytes), to the topic's and the broker's meters."""
        n = info.last_offset - info.first_offset + 1
        a = self.all
        tc.messages_in += n
        a.messages_in += n
        tc.bytes_in += size
        a.bytes_in += size

    def unappended(self, tc: TopicCounters, info, size: int) -> None:
        """Take back :meth:`appended`'s marks of an append whose write then failed (the append
        writer's, log/append_writer.py): Kafka marks bytesInRate and messagesInRate only after
        appendRecordsToLeader returned, which the storage error (KafkaStorageException) does
        not.  Not below 0 (the topic's meters may have been zeroed meanwhile)."""
        n = info.last_offset - info.first_offset + 1
        a = self.all
        tc.messages_in = max(0, tc.messages_in - n)
        a.messages_in = max(0, a.messages_in - n)
        tc.bytes_in = max(0, tc.bytes_in - size)
        a.bytes_in = max(0, a.bytes_in - size)

    def coordinator_append(self, topic: str, info, size: int) -> None:
        """A coordinator's append to its internal topic (group metadata and offsets, transaction
        state, markers): counted as a produce is, the path being the same in Kafka."""
        tc = self.topic(topic)
        tc.total_produce += 1
        self.all.total_produce += 1
        self.appended(tc, info, size)


class RequestStats:
    """RequestMetrics of one request name: RequestsPerSec per version, TotalTimeMs."""

    __slots__ = ("name", "versions", "count", "samples")

    def __init__(self, name: str, max_version: int):
        self.name = name
        self.versions = [0] * (max_version + 1)
        self.count = 0
        self.samples = [0] * RESERVOIR

    def quantiles(self) -> list[tuple[str, float]]:
        """Yammer's Snapshot.getValue over the reservoir (values as Kafka records them: whole
        milliseconds): position q x (n + 1), interpolated between its neighbours."""
        n = min(self.count, RESERVOIR)
        values = sorted(self.samples[:n])
        out = []
        for q, label in _QUANTILES:
            if not n:
                out.append((label, 0.0))
                continue
            pos = q * (n + 1)
            if pos < 1:
                v = values[0]
            elif pos >= n:
                v = values[-1]
            else:
                lo = values[int(pos) - 1]
                v = lo + (pos - int(pos)) * (values[int(pos)] - lo)
            out.append((label, float(v)))
        return out


class RequestMetrics:
    """Every request name's :class:`RequestStats`, indexed by API key (Fetch also counts as
    FetchConsumer or FetchFollower, as RequestChannel's updateRequestMetrics does)."""

    def __init__(self, api_names: dict[int, tuple[str, int]]):
        self.by_key: dict[int, RequestStats] = {k: RequestStats(n, v) for k, (n, v) in api_names.items()}
        #: the same, a list indexed by API key (the hot path's lookup)
        self._index: list[RequestStats | None] = [self.by_key.get(k) for k in range(max(self.by_key) + 1)]
        fetch_max = api_names.get(1, ("Fetch", 0))[1]
        self.fetch_consumer = RequestStats("FetchConsumer", fetch_max)
        self.fetch_follower = RequestStats("FetchFollower", fetch_max)

    def record(self, api_key: int, version: int, started: float, follower: bool) -> None:
        """One request answered: ``started`` is its perf_counter() when its frame was dispatched,
        ``follower`` whether a Fetch came from a replica (handlers/fetch.fetch_replica_id)."""
        ms = int((time.perf_counter() - started) * 1000.0 + 0.5)  # Math.round of the millis
        s = self._index[api_key]  # a routed key: the router served it
        s.versions[version] += 1
        s.samples[s.count & _MASK] = ms
        s.count += 1
        if api_key == 1:
            f = self.fetch_follower if follower else self.fetch_consumer
            f.versions[version] += 1
            f.samples[f.count & _MASK] = ms
            f.count += 1

    def served(self, routes) -> list[RequestStats]:
        out = [s for k, s in sorted(self.by_key.items()) if k in routes]
        if 1 in routes:
            out += [self.fetch_consumer, self.fetch_follower]
        return out


class BrokerMetrics:
    """What a broker process counts as it serves (Broker.metrics)."""

    def __init__(self, api_names: dict[int, tuple[str, int]]):
        self.topics = BrokerTopicStats()
        self.requests = RequestMetrics(api_names)
        #: ISR changes this broker committed as a leader (ReplicaManager's IsrShrinks/Expands)
        self.isr_shrinks = 0
        self.isr_expands = 0


class _UncountedTopicStats(BrokerTopicStats):
    """BrokerTopicStats where nothing reads the counters: every topic marks one throw-away
    set, and an append's marks are not added up."""

    def __init__(self):
        super().__init__()
        self._sink = TopicCounters()

    def topic(self, name: str) -> TopicCounters:
        return self._sink

    def appended(self, tc: TopicCounters, info, size: int) -> None:
        pass

    def unappended(self, tc: TopicCounters, info, size: int) -> None:
        pass


class _UncountedRequests(RequestMetrics):
    def record(self, api_key: int, version: int, started: float, follower: bool) -> None:
        pass


class UncountedMetrics(BrokerMetrics):
    """Broker.metrics when no Prometheus endpoint is configured (LISTENER_CONFIG, which is not
    dynamic): the endpoint's scrape is the only reader of these counters, so the hot path's
    calls land in no-ops instead of adding up figures no one reads (chosen once, at start-up:
    :func:`broker_metrics`)."""

    def __init__(self, api_names: dict[int, tuple[str, int]]):
        super().__init__(api_names)
        self.topics = _UncountedTopicStats()
        self.requests = _UncountedRequests(api_names)


def broker_metrics(config, api_names: dict[int, tuple[str, int]]) -> BrokerMetrics:
    """The broker's metrics: counted when ``config`` has the endpoint, else not."""
    cls = BrokerMetrics if config.get(LISTENER_CONFIG) else UncountedMetrics
    return cls(api_names)


# ---------------------------------------------------------------------- the scrape
def _help(domain: str, mtype: str, name: str | None, attr: str) -> str:
    """The 0.x exporter's HELP: the attribute's description and where it came from."""
    return f"Attribute exposed for management {domain}:name={name},type={mtype},attribute={attr}"


#: BrokerTopicMetrics: (MBean name, TopicCounters attribute); the replication meters are broker-wide only
_TOPIC_METERS = (
    ("MessagesInPerSec", "messages_in"),
    ("BytesInPerSec", "bytes_in"),
    ("BytesOutPerSec", "bytes_out"),
    ("BytesRejectedPerSec", "bytes_rejected"),
    ("FailedProduceRequestsPerSec", "failed_produce"),
    ("FailedFetchRequestsPerSec", "failed_fetch"),
    ("TotalProduceRequestsPerSec", "total_produce"),
    ("TotalFetchRequestsPerSec", "total_fetch"),
)
_BROKER_METERS = (
    ("ReplicationBytesInPerSec", "replication_bytes_in"),
    ("ReplicationBytesOutPerSec", "replication_bytes_out"),
)


class Snapshot:
    """What one scrape reads, gathered on the event loop (lists copied, numbers taken); the
    formatting then runs in a thread and touches nothing the loop changes but ints."""

    def __init__(self, broker):
        m = broker.metrics
        self.all = m.topics.all
        self.topics = list(m.topics.topics.items())  # sorted in the thread
        # the request types this broker serves (Kafka's RequestChannel metrics are its
        # listener's APIs): one it refuses has no figure
        self.requests = m.requests.served(broker.router.routes)
        self.isr = (m.isr_shrinks, m.isr_expands)
        manager = broker.manager
        self.logs = list(manager.logs.items()) if manager is not None else []
        self.replica = _replica_gauges(broker, self.logs)
        self.controller = _controller_gauges(broker)
        self.groups = _group_gauges(broker)
        cleaner = getattr(broker, "cleaner", None)  # maintenance.CleanerState, while it runs
        self.cleaner = None if cleaner is None else (cleaner.last_stats, cleaner.max_dirty_ratio)
        self.state = BROKER_SHUTTING_DOWN if broker.stopping else BROKER_RUNNING
        self.connections = broker.connection_counts()


def _replica_gauges(broker, logs) -> dict[str, int]:
    """ReplicaManager's gauges: PartitionCount (every hosted partition, an offline one too),
    LeaderCount, UnderReplicated/UnderMinIsr/AtMinIsr (over the partitions led here: ISR below
    the replicas, below / at Partition.effectiveMinIsr), OfflineReplicaCount."""
    offline = len(broker.manager.offline_partitions) if broker.manager is not None else 0
    rm = broker.replicas
    if rm is None:
        # standalone (or a process of several): every log here is led here with itself as its
        # ISR and replicas (RF 1), so effectiveMinIsr = min(min.insync.replicas, 1) = 1
        led = len(logs)
        return {
            "PartitionCount": led + offline,
            "LeaderCount": led,
            "UnderReplicatedPartitions": 0,
            "UnderMinIsrPartitionCount": 0,
            "AtMinIsrPartitionCount": led,
            "OfflineReplicaCount": offline,
        }
    parts = list(rm.local.values())
    leader = [p for p in parts if p.leader == rm.node_id]
    under = at = urp = 0
    for p in leader:
        isr = len(p.isr)
        if isr < len(p.replicas):
            urp += 1
        need = p.effective_min_isr
        if isr < need:
            under += 1
        elif isr == need:
            at += 1
    return {
        "PartitionCount": len(parts) + offline,
        "LeaderCount": len(leader),
        "UnderReplicatedPartitions": urp,
        "UnderMinIsrPartitionCount": under,
        "AtMinIsrPartitionCount": at,
        "OfflineReplicaCount": offline,
    }


def _controller_gauges(broker) -> dict[str, int]:
    """KafkaController's gauges: 0 on a broker that is not the active controller (Kafka's
    ``if (!isActive) 0``).  Standalone, the broker (its first process) is the controller."""
    cluster = broker.cluster
    if cluster is not None:
        counts = cluster.controller.metric_counts() if cluster.controller is not None else None
        if counts is None:
            return {
                "ActiveControllerCount": 0,
                "OfflinePartitionsCount": 0,
                "GlobalTopicCount": 0,
                "GlobalPartitionCount": 0,
            }
        topics, partitions, offline = counts
        return {
            "ActiveControllerCount": 1,
            "OfflinePartitionsCount": offline,
            "GlobalTopicCount": topics,
            "GlobalPartitionCount": partitions,
        }
    if broker.is_member or broker.metadata is None or broker.manager is None:
        return {
            "ActiveControllerCount": 0,
            "OfflinePartitionsCount": 0,
            "GlobalTopicCount": 0,
            "GlobalPartitionCount": 0,
        }
    topics = list(broker.metadata.topics.values())
    partitions = sum(t.partitions for t in topics)
    leaderless = 0
    for t in topics:
        for p in range(t.partitions):
            if broker.partition_leader(t.name, p) < 0:
                leaderless += 1
    return {
        "ActiveControllerCount": 1,
        "OfflinePartitionsCount": leaderless,
        "GlobalTopicCount": len(topics),
        "GlobalPartitionCount": partitions,
    }


#: GroupMetadataManager's gauges of groups in a state: (gauge, GroupState value)
_GROUP_STATES = (
    ("NumGroupsPreparingRebalance", "PreparingRebalance"),
    ("NumGroupsCompletingRebalance", "CompletingRebalance"),
    ("NumGroupsStable", "Stable"),
    ("NumGroupsDead", "Dead"),
    ("NumGroupsEmpty", "Empty"),
)


def _group_gauges(broker) -> dict[str, int] | None:
    """GroupMetadataManager's NumOffsets, NumGroups and its groups by state (the coordinator's
    process only)."""
    gc = getattr(broker, "group_coordinator", None)
    if gc is None or broker.is_member:
        return None
    groups = list(gc.groups.values())
    out = {"NumOffsets": sum(len(g.offsets.offsets) for g in groups), "NumGroups": len(groups)}
    states = [g.state.value for g in groups]
    for gauge, state in _GROUP_STATES:
        out[gauge] = states.count(state)
    return out


def _first(item):
    return item[0]


class _Collector:
    """prometheus_client's custom collector over one :class:`Snapshot`."""

    def __init__(self, snap: Snapshot):
        self.snap = snap

    def collect(self):
        # a family with no sample is not written (the exporter writes what MBeans matched)
        return (m for m in self._families() if m.samples)

    def _families(self):
        from prometheus_client.core import Metric

        s = self.snap

        def family(name, mtype, help_):
            return Metric(name, help_, mtype)

        # kafka.server:type=BrokerTopicMetrics,name=<X>PerSec[,topic=T] Count -> counter
        for mbean, attr in _TOPIC_METERS + _BROKER_METERS:
            short = mbean[: -len("PerSec")].lower()
            m = family(
                f"kafka_server_brokertopicmetrics_{short}",
                "counter",
                _help("kafka.server", "BrokerTopicMetrics", mbean, "Count"),
            )
            sample = f"kafka_server_brokertopicmetrics_{short}_total"
            m.add_sample(sample, {}, getattr(s.all, attr))
            if (mbean, attr) in _TOPIC_METERS:
                for topic, c in sorted(s.topics, key=_first):
                    v = getattr(c, attr)
                    if v:  # Kafka makes a topic's meter at its first mark
                        m.add_sample(sample, {"topic": topic}, v)
            yield m
        for mbean, v in (("IsrShrinksPerSec", s.isr[0]), ("IsrExpandsPerSec", s.isr[1])):
            short = mbean[: -len("PerSec")].lower()
            m = family(
                f"kafka_server_replicamanager_{short}",
                "counter",
                _help("kafka.server", "ReplicaManager", mbean, "Count"),
            )
            m.add_sample(f"kafka_server_replicamanager_{short}_total", {}, v)
            yield m
        for gauge, v in s.replica.items():
            name = f"kafka_server_replicamanager_{gauge.lower()}"
            m = family(name, "gauge", _help("kafka.server", "ReplicaManager", gauge, "Value"))
            m.add_sample(name, {}, v)
            yield m
        for gauge, v in s.controller.items():
            name = f"kafka_controller_kafkacontroller_{gauge.lower()}"
            m = family(name, "gauge", _help("kafka.controller", "KafkaController", gauge, "Value"))
            m.add_sample(name, {}, v)
            yield m
        name = "kafka_server_kafkaserver_brokerstate"
        m = family(name, "gauge", _help("kafka.server", "KafkaServer", "BrokerState", "Value"))
        m.add_sample(name, {}, s.state)
        yield m
        if s.groups is not None:
            for gauge, v in s.groups.items():
                name = f"kafka_coordinator_group_groupmetadatamanager_{gauge.lower()}"
                m = family(
                    name, "gauge", _help("kafka.coordinator.group", "GroupMetadataManager", gauge, "Value")
                )
                m.add_sample(name, {}, v)
                yield m
        if s.cleaner is not None:
            (seconds, read, written), dirty = s.cleaner
            # LogCleaner's and LogCleanerManager's gauges (Ints in Kafka: truncated)
            for mtype, gauge, v in (
                ("LogCleaner", "max-clean-time-secs", int(seconds)),
                ("LogCleaner", "cleaner-recopy-percent", int(100 * written / max(read, 1))),
                ("LogCleanerManager", "max-dirty-percent", int(100 * dirty)),
            ):
                name = f"kafka_log_{mtype.lower()}_{gauge.replace('-', '_')}"
                m = family(name, "gauge", _help("kafka.log", mtype, gauge, "Value"))
                m.add_sample(name, {}, v)
                yield m
        yield from self._requests()
        yield from self._logs()
        name = "kafka_server_socket_server_metrics_connection_count"
        m = family(
            name,
            "gauge",
            "The current number of active connections. kafka.server:name=null,type=socket-server-metrics,attribute=connection-count",
        )
        for listener, n in s.connections:
            m.add_sample(name, {"listener": listener, "networkProcessor": "0"}, n)
        yield m

    def _requests(self):
        from prometheus_client.core import Metric

        rate = Metric(
            "kafka_network_requestmetrics_requests",
            _help("kafka.network", "RequestMetrics", "RequestsPerSec", "Count"),
            "counter",
        )
        total = Metric(
            "kafka_network_requestmetrics_totaltimems",
            _help("kafka.network", "RequestMetrics", "TotalTimeMs", "50thPercentile"),
            "gauge",
        )
        count = Metric(
            "kafka_network_requestmetrics_totaltimems_count",
            _help("kafka.network", "RequestMetrics", "TotalTimeMs", "Count"),
            "counter",
        )
        for r in self.snap.requests:
            for version, n in enumerate(r.versions):
                if n:  # Kafka makes a version's meter at its first request
                    rate.add_sample(
                        "kafka_network_requestmetrics_requests_total",
                        {"request": r.name, "version": str(version)},
                        n,
                    )
            for label, v in r.quantiles():
                total.add_sample(
                    "kafka_network_requestmetrics_totaltimems", {"request": r.name, "quantile": label}, v
                )
            count.add_sample("kafka_network_requestmetrics_totaltimems_count", {"request": r.name}, r.count)
        yield rate
        yield total
        yield count

    def _logs(self):
        from prometheus_client.core import Metric

        fams = {
            g: Metric(f"kafka_log_log_{g.lower()}", _help("kafka.log", "Log", g, "Value"), "gauge")
            for g in ("Size", "LogEndOffset", "LogStartOffset", "NumLogSegments")
        }
        for (topic, p), lg in sorted(self.snap.logs, key=_first):
            labels = {"topic": topic, "partition": str(p)}
            try:
                values = (lg.size, lg.log_end_offset, lg.log_start_offset, lg.num_segments)
            except Exception:  # a log closed meanwhile (deleted, moved): left out of this scrape
                continue
            for (g, m), v in zip(fams.items(), values, strict=True):
                m.add_sample(f"kafka_log_log_{g.lower()}", labels, v)
        yield from fams.values()


def render(snap: Snapshot, accept_gzip: bool) -> bytes:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snap))
    body = generate_latest(registry)
    return gzip.compress(body, 1) if accept_gzip else body


# ---------------------------------------------------------------------- the endpoint
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_MAX_HEAD = 16 * 1024
_READ_TIMEOUT_S = 10.0


class Endpoint:
    """``GET /metrics`` over HTTP/1.1 on the broker's event loop (one response per connection)."""

    def __init__(self, broker, host: str, port: int):
        self.broker = broker
        self.host = host
        self.port = port
        self.server: asyncio.AbstractServer | None = None
        self.bound: tuple[str, int] | None = None

    async def start(self) -> None:
        try:
            self.server = await asyncio.start_server(
                self._serve, self.host or None, self.port, reuse_address=True
            )
        except OSError as exc:  # serve's "cannot listen" line, naming the property
            raise OSError(
                exc.errno, f"{LISTENER_CONFIG}=http://{self.host}:{self.port}: {exc.strerror}"
            ) from None
        sock = self.server.sockets[0].getsockname()
        self.bound = (sock[0], sock[1])
        log.info("Prometheus metrics at http://%s:%d/metrics", sock[0], sock[1])

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                return
            if len(head) > _MAX_HEAD:
                return
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            method, target = (parts[0], parts[1]) if len(parts) == 3 else ("", "")
            path = target.split("?", 1)[0]
            headers = {}
            for line in lines[1:]:
                k, sep, v = line.partition(":")
                if sep:
                    headers[k.strip().lower()] = v.strip()
            if method not in ("GET", "HEAD"):
                await self._answer(writer, 405, b"Method Not Allowed\n", "text/plain", head_only=False)
                return
            if path not in ("/metrics", "/"):
                await self._answer(writer, 404, b"Not Found\n", "text/plain", head_only=method == "HEAD")
                return
            gz = "gzip" in headers.get("accept-encoding", "")
            # the cyclic collector waits while the copies are made, as it waits for a handler
            # (Router.dispatch): a full collection set off by the snapshot's allocations would
            # run on the event loop (measured: 90 ms at 10,000 partitions, against 3-6 ms)
            hold = gc.isenabled()
            if hold:
                gc.disable()
            try:
                snap = Snapshot(self.broker)
            finally:
                if hold:
                    gc.enable()
            body = await asyncio.get_running_loop().run_in_executor(None, render, snap, gz)
            await self._answer(writer, 200, body, CONTENT_TYPE, head_only=method == "HEAD", gz=gz)
        except (ConnectionError, OSError):
            pass
        except Exception:
            log.exception("metrics scrape failed")
        finally:
            writer.close()

    @staticmethod
    async def _answer(
        writer, status: int, body: bytes, ctype: str, *, head_only: bool, gz: bool = False
    ) -> None:
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[status]
        head = [
            f"HTTP/1.1 {status} {reason}",
            f"Content-Type: {ctype}",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        if gz:
            head.append("Content-Encoding: gzip")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if not head_only:
            writer.write(body)
        await writer.drain()
