"""What kafka-log-dirs.sh --describe shows (Kafka's LogDirsCommand): every log dir of every
broker, its error, and each replica's size, offset lag and whether it is a future replica
(a log-dir move in progress), asked of a cluster (DescribeLogDirs at each broker) or read
from log dirs on disk, the way the broker answers DescribeLogDirs.

:func:`kafka_json` prints it as LogDirsCommand does: the JSON of Java HashMaps, so every
map and list is in the order Java iterates them (formats/java_collections), through the
same chain of maps and sets Kafka's admin client and the tool build.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.errors import KafkatoolError
from kafkatool.formats import java_collections as J
from kafkatool.formats.properties import parse_java_int

DESCRIBE_LOG_DIRS = 35
INVALID_OFFSET_LAG = -1

TopicPartition = tuple[str, int]


class LogDirsError(KafkatoolError):
    """Input LogDirsCommand refuses (the one line, exit 2)."""


@dataclass
class Replica:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass
class LogDir:
    path: str
    error_code: int = 0
    replicas: list[Replica] = field(default_factory=list)
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass
class BrokerLogDirs:
    broker: int
    #: the dirs in the order the broker answered (offline: the order given)
    dirs: list[LogDir] = field(default_factory=list)


# ----------------------------------------------------------------------------- options


def parse_list(value: str | None) -> list[str]:
    """LogDirsCommand's splitAtCommasAndFilterOutEmpty: the items in the order given."""
    return [x for x in (value or "").split(",") if x]


def parse_broker_list(value: str | None) -> list[int]:
    """--broker-list as Integer.valueOf reads each item (a bad one: one line, exit 2)."""
    out = []
    for item in parse_list(value):
        if parse_java_int(item) is None:
            raise LogDirsError(f'--broker-list: For input string: "{item}" (give broker ids: 0,1,2)')
        out.append(int(item))
    return out


@dataclass
class BrokerChoice:
    #: the brokers to ask, in the order LogDirsCommand's HashSet holds them
    existing: list[int]
    #: --broker-list's ids not in the cluster (LogDirsCommand refuses them all)
    missing: list[int]
    #: the cluster's ids as LogDirsCommand's set prints them
    cluster: list[int]

    def refusal(self) -> str:
        return (
            "ERROR: The given brokers do not exist from --broker-list: "
            + ",".join(map(str, self.missing))
            + ". Current existent brokers: "
            + ",".join(map(str, self.cluster))
        )


def choose_brokers(wanted: list[int], cluster_nodes: list[int]) -> BrokerChoice:
    """LogDirsCommand.execute's sets: no --broker-list asks every broker of the cluster."""
    cluster = J.hash_map_order(cluster_nodes, J.java_int_hash)  # Collectors.toSet()
    given = J.hash_map_order(wanted, J.java_int_hash)
    source = given if wanted else cluster
    members = set(cluster)
    existing = [
        b for b in J.hash_map_order(source, J.java_int_hash, J.set_copy_capacity(len(source))) if b in members
    ]
    missing = [
        b
        for b in J.hash_map_order(given, J.java_int_hash, J.set_copy_capacity(len(given)))
        if b not in members
    ]
    return BrokerChoice(existing, missing, cluster)


# ----------------------------------------------------------------------------- live


def describe_live(admin, brokers: list[int], timeouts=None) -> list[BrokerLogDirs]:
    """DescribeLogDirs for every topic (``topics`` null, as Kafka's admin asks) at each broker,
    straight to that broker (not the controller).  A broker that answers no dir answers its
    error (v4), or, before v4, CLUSTER_AUTHORIZATION_FAILED, as Kafka's admin reads it.  A
    broker that cannot be reached (killed, still in the metadata) is asked again until the calls'
    default.api.timeout.ms (one deadline for all, as the admin client's concurrent calls), then
    it is one line (:meth:`KafkaAdmin.request_until`)."""
    import time

    from kafkatool.assign.kafka_client import KafkaAdminError, admin_timeouts, describe_error
    from kafkatool.protocol.apis import API_BY_KEY
    from kafkatool.protocol.errors import ErrorCode

    timeouts = timeouts or admin_timeouts()
    deadline = time.monotonic() + timeouts.api_timeout_ms / 1000
    out = []
    for b in brokers:
        req = API_BY_KEY[DESCRIBE_LOG_DIRS].request(topics=None)
        resp = admin.request_until(DESCRIBE_LOG_DIRS, req, b, deadline, timeouts)
        if not resp.results:
            code = getattr(resp, "error_code", 0) or ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            raise KafkaAdminError(f"DescribeLogDirs at broker {b}: {describe_error(code)}", code)
        dirs = []
        for r in resp.results:
            d = LogDir(
                r.log_dir,
                r.error_code,
                total_bytes=getattr(r, "total_bytes", -1),
                usable_bytes=getattr(r, "usable_bytes", -1),
            )
            for t in r.topics:
                for p in t.partitions:
                    d.replicas.append(
                        Replica(t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                    )
            dirs.append(d)
        out.append(BrokerLogDirs(b, dirs))
    return out


# ----------------------------------------------------------------------------- offline


def describe_offline(paths: list[Path]) -> list[BrokerLogDirs]:
    """The dirs on disk as their broker's DescribeLogDirs would answer them (read-only: no lock
    taken, nothing written, safe on a running broker's dirs): each dir's partitions with the
    broker's size (Log.size: its segments' bytes), current replicas' offset lag max(high
    watermark - log end, 0) (0: a loaded log's high watermark is at most its end), a future
    replica's (a ``-future`` dir) its current replica's log end minus its own, or -1 when the
    current replica is not in the dirs given (Kafka: no local log).  A partition dir given
    stands for its log dir with that partition only.  Dirs are grouped by the broker id of
    their meta.properties (-1: none readable)."""
    from kafkatool.log import topic_settings as ts
    from kafkatool.log.manager import LogManager, log_end_offset_lag, resolve_path

    #: each log dir in the order given, with the partitions to show (None: all)
    only: dict[Path, set[TopicPartition] | None] = {}
    for path in paths:
        log_dir, parts = resolve_path(path)
        if log_dir == Path(path).resolve():  # a log dir, not one partition of it
            only[log_dir] = None
        elif only.get(log_dir, set()) is not None:
            only.setdefault(log_dir, set()).update(tp for _, tp in parts)
    dirs = list(only)
    by_broker: dict[int, BrokerLogDirs] = {}
    with LogManager(dirs, writable=False) as mgr:
        rows = {d: LogDir(str(d)) for d in dirs}
        for tp, lg in sorted(mgr.logs.items()):
            d = mgr.log_dir_of(*tp)
            if only.get(d) is not None and tp not in only[d]:
                continue
            rows[d].replicas.append(
                Replica(tp[0], tp[1], lg.size, log_end_offset_lag(lg, lg.log_end_offset, False), False)
            )
        for tp, fut in sorted(mgr.future_logs.items()):
            d = fut.dir.parent.resolve()
            if d not in rows or (only.get(d) is not None and tp not in only[d]):
                continue
            lag = log_end_offset_lag(mgr.logs.get(tp), fut.log_end_offset, True)
            rows[d].replicas.append(Replica(tp[0], tp[1], fut.size, lag, True))
        for d in dirs:
            node = ts.node_id_of(d)
            node = -1 if node is None else node
            by_broker.setdefault(node, BrokerLogDirs(node)).dirs.append(rows[d])
    return list(by_broker.values())


# ----------------------------------------------------------------------------- output


def keep_topics(result: list[BrokerLogDirs], topics: list[str]) -> list[BrokerLogDirs]:
    """--topic-list: only those topics' replicas (every dir stays, as in Kafka's output)."""
    if not topics:
        return result
    wanted = set(topics)
    return [
        BrokerLogDirs(b.broker, [LogDir(d.path, d.error_code, [r for r in d.replicas if r.topic in wanted],
                                        d.total_bytes, d.usable_bytes) for d in b.dirs])
        for b in result
    ]  # fmt: skip


def _kafka_order_brokers(result: list[BrokerLogDirs]) -> list[BrokerLogDirs]:
    """KafkaAdminClient.describeLogDirs' futures (HashMap(n)), their copy in DescribeLogDirsResult
    (HashMap(Map)) and allDescriptions' HashMap(n), each filled in the order of the one before."""
    by_id = {b.broker: b for b in result}
    order = J.hash_map_order(by_id, J.java_int_hash, len(by_id))
    order = J.hash_map_order(order, J.java_int_hash, J.copy_capacity(len(order)))
    order = J.hash_map_order(order, J.java_int_hash, len(order))
    return [by_id[b] for b in order]


def kafka_json(result: list[BrokerLogDirs], topics: list[str]) -> str:
    """LogDirsCommand.formatAsJson: Jackson's compact JSON of its HashMaps, with the replicas of
    ``topics`` only (none: all).  ``result`` unfiltered: the admin client's map of a dir's
    replicas holds them all, and the order of the tool's filtered copy follows it."""
    from kafkatool.formats.schema import json_dumps_java
    from kafkatool.protocol.errors import exception_class

    wanted = set(topics)
    brokers = []
    for b in _kafka_order_brokers(result):
        by_path = {d.path: d for d in b.dirs}
        logdirs = []
        # logDirDescriptions: HashMap(results.size()) of dirs, a HashMap() of replicas each;
        # the tool's filter collects the replicas into a new HashMap()
        for path in J.hash_map_order(by_path, J.java_string_hash, len(b.dirs)):
            d = by_path[path]
            tps = {(r.topic, r.partition): r for r in d.replicas}  # a dir holds a partition once
            order = J.hash_map_order(tps, J.topic_partition_hash)
            order = J.hash_map_order(
                [tp for tp in order if not wanted or tp[0] in wanted], J.topic_partition_hash
            )
            partitions = [
                J.java_map([("partition", f"{t}-{p}"), ("size", tps[t, p].size),
                            ("offsetLag", tps[t, p].offset_lag), ("isFuture", tps[t, p].is_future)])
                for t, p in order
            ]  # fmt: skip
            logdirs.append(
                J.java_map(
                    [("logDir", path), ("error", exception_class(d.error_code)), ("partitions", partitions)]
                )
            )
        brokers.append(J.java_map([("broker", b.broker), ("logDirs", logdirs)]))
    return json_dumps_java(J.java_map([("version", 1), ("brokers", brokers)]))
