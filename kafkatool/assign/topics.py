"""Topics of a cluster as ``kafka-topics.sh`` (TopicCommand) sees and changes them, on the one
admin client; and the same view of a log dir or a backup of one, read-only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.assign.kafka_client import (
    CONFIG_SOURCE_TOPIC,
    KafkaAdmin,
    KafkaAdminError,
    describe_configs,
    describe_error,
)
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


@dataclass
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)
    # offline (log dir) view
    size: int | None = None
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    segments: int | None = None


@dataclass
class TopicRow:
    name: str
    topic_id: str | None
    internal: bool
    partitions: list[PartitionRow]
    #: configs set for the topic (Kafka's "Configs:" column), and where they come from
    configs: dict[str, str] = field(default_factory=dict)
    config_source: str = ""
    min_isr: int = 1

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


def topic_regex(raw: str, *, topic_filter: bool = True) -> re.Pattern:
    """Kafka's TopicFilter (server-common, the IncludeList of TopicCommand's --topic and of
    GetOffsetShell's): trimmed, ',' means '|', spaces and surrounding quotes dropped, matched
    against whole names. ``topic_filter=False``: the regex as given, Pattern.compile's (Kafka
    3.7's ConsoleConsumer subscribes to ``Pattern.compile(include)``, no TopicFilter), matched
    against whole names all the same (KafkaConsumer's subscribe(Pattern): matcher.matches)."""
    rx = raw
    if topic_filter:
        rx = raw.strip().replace(",", "|").replace(" ", "")
        rx = re.sub(r"""^["']+""", "", rx)
        rx = re.sub(r"""["']+$""", "", rx)
    try:
        return re.compile(rx)
    except re.error as exc:
        # Kafka's words, then what is wrong with it
        raise KafkaAdminError(f"{rx} is an invalid regex. (a regular expression: {exc})") from None


def select(names, pattern: str | None, exclude_internal: bool, internal_of) -> list[str]:
    """TopicCommand's --topic (TopicFilter.IncludeList: :func:`topic_regex`) and --exclude-internal."""
    rx = topic_regex(pattern) if pattern else None
    out = []
    for n in sorted(names):
        if exclude_internal and internal_of(n):
            continue
        if rx is not None and not rx.fullmatch(n):
            continue
        out.append(n)
    return out


def describe_live(admin: KafkaAdmin, pattern: str | None, exclude_internal: bool) -> list[TopicRow]:
    meta = admin.metadata()
    names = select(
        meta.topics,
        pattern,
        exclude_internal,
        lambda n: meta.topic_info.get(n, (None, n.startswith("__")))[1],
    )
    configs = describe_configs(admin, 2, names) if names else {}
    broker_min_isr = 1
    if meta.brokers:
        b = describe_configs(admin, 4, [str(min(meta.brokers))]).get(str(min(meta.brokers)), {})
        if "min.insync.replicas" in b:
            broker_min_isr = int(b["min.insync.replicas"][0])
    out = []
    for n in names:
        tid, internal = meta.topic_info.get(n, (None, n.startswith("__")))
        overrides = {k: v for k, (v, src) in configs.get(n, {}).items() if src == CONFIG_SOURCE_TOPIC}
        parts = [
            PartitionRow(p, i.leader, list(i.replicas), list(i.isr), list(i.offline))
            for p, i in sorted(meta.topics[n].items())
        ]
        row = TopicRow(n, tid, internal, parts, overrides, "cluster")
        row.min_isr = int(overrides.get("min.insync.replicas", broker_min_isr))
        out.append(row)
    return out


def describe_offline(log_dirs: list[Path], pattern: str | None, exclude_internal: bool) -> list[TopicRow]:
    """Topics as a log dir holds them: partitions, sizes, offsets, segment counts, and the
    topic configs the dir keeps (embedded metadata, KRaft __cluster_metadata)."""
    from kafkatool.log import topic_settings as ts
    from kafkatool.log.manager import LogManager

    layers = ts.dir_layers(log_dirs)
    out = []
    with LogManager(log_dirs, writable=False) as mgr:
        by_topic: dict[str, list] = {}
        for (t, p), lg in mgr.logs.items():
            by_topic.setdefault(t, []).append((p, lg))
        names = select(by_topic, pattern, exclude_internal, lambda n: n.startswith("__"))
        node = next((b for b in map(ts.node_id_of, log_dirs) if b is not None), -1)
        for n in names:
            parts = []
            tid = None
            for p, lg in sorted(by_topic[n], key=lambda x: x[0]):
                segs = lg.segments
                parts.append(
                    PartitionRow(
                        p,
                        node,
                        [node],
                        [node],
                        size=lg.size,  # Log.size: what DescribeLogDirs answers
                        log_start_offset=lg.log_start_offset,
                        log_end_offset=lg.log_end_offset,
                        segments=len(segs),
                    )  # fmt: skip
                )
                tid = tid or (str(lg.topic_id) if lg.topic_id is not None else None)
            configs, source = {}, ""
            for layer in ts.topic_layers(n, layers):
                got = layer.get(n)
                if got:
                    configs = dict(got)
                    source = layer.label
                    break
            out.append(TopicRow(n, tid, n.startswith("__"), parts, configs, source))
    return out


# ----------------------------------------------------------------------------- changes


def create(admin: KafkaAdmin, name: str, partitions: int | None, replication_factor: int | None,
           assignment: dict[int, list[int]] | None, configs: dict[str, str], validate_only: bool = False) -> tuple[int, str | None]:  # fmt: skip
    from kafkatool.protocol.generated.create_topics_request import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreatableTopicConfig,
    )

    topic = CreatableTopic(
        name=name,
        num_partitions=-1 if assignment else (partitions if partitions is not None else -1),
        replication_factor=-1
        if assignment
        else (replication_factor if replication_factor is not None else -1),
        assignments=[
            CreatableReplicaAssignment(partition_index=p, broker_ids=b)
            for p, b in sorted((assignment or {}).items())
        ],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
    )
    req = API_BY_KEY[CREATE_TOPICS].request(topics=[topic], timeout_ms=30000, validate_only=validate_only)
    resp = admin.controller().request(CREATE_TOPICS, req)
    (r,) = resp.topics
    return r.error_code, r.error_message


def delete(admin: KafkaAdmin, names: list[str]) -> dict[str, tuple[int, str | None]]:
    req = API_BY_KEY[DELETE_TOPICS].request(topic_names=names, topics=[], timeout_ms=30000)
    conn = admin.controller()
    version = conn.version_for(DELETE_TOPICS)
    if version >= 6:
        from kafkatool.protocol.generated.delete_topics_request import DeleteTopicState

        req = API_BY_KEY[DELETE_TOPICS].request(
            topics=[DeleteTopicState(name=n) for n in names], timeout_ms=30000
        )
    resp = conn.request(DELETE_TOPICS, req, version)
    return {r.name: (r.error_code, getattr(r, "error_message", None)) for r in resp.responses}


def add_partitions(
    admin: KafkaAdmin, name: str, count: int, assignment: list[list[int]] | None
) -> tuple[int, str | None]:
    from kafkatool.protocol.generated.create_partitions_request import (
        CreatePartitionsAssignment,
        CreatePartitionsTopic,
    )

    t = CreatePartitionsTopic(
        name=name, count=count,
        assignments=None if not assignment else [CreatePartitionsAssignment(broker_ids=b) for b in assignment],
    )  # fmt: skip
    req = API_BY_KEY[CREATE_PARTITIONS].request(topics=[t], timeout_ms=30000, validate_only=False)
    (r,) = admin.controller().request(CREATE_PARTITIONS, req).results
    return r.error_code, r.error_message


def parse_replica_assignment(text: str) -> list[list[int]]:
    """--replica-assignment "1:2,2:3" -> [[1, 2], [2, 3]] (partition order)."""
    out = []
    for part in text.split(","):
        try:
            out.append([int(b) for b in part.strip().split(":")])
        except ValueError:
            raise KafkaAdminError(
                f"--replica-assignment {text!r}: expected broker ids like 1:2,2:3"
            ) from None
    return out


def error_text(code: int, message: str | None) -> str:
    return message or describe_error(code) if code != ErrorCode.NONE else ""
