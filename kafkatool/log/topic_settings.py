"""Where a topic's log settings come from when no broker is running.

A broker combines its own ``server.properties`` (Kafka's broker names:
``log.retention.hours``, ``log.cleaner.delete.retention.ms``...) with the
topic's overrides (topic names: ``retention.ms``...; kept in ZooKeeper or the
KRaft metadata log).  Offline tools take the same two layers from files and
options, plus explicit flags on top: flag > topic config > server.properties
> Kafka's default.  :func:`resolve` records, for every setting, which layer
gave the value, so commands can say so.

Broker synonyms and their order follow Kafka's ServerTopicConfigSynonyms: the
first synonym that is set wins (``log.retention.ms`` before
``log.retention.minutes`` before ``log.retention.hours``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafkatool.formats.properties import decode_properties
from kafkatool.log.config import LogConfig

HOUR_MS = 3_600_000
MINUTE_MS = 60_000

# topic config name -> [(broker name, multiplier to the topic's unit)], in Kafka's priority order
SERVER_SYNONYMS: dict[str, list[tuple[str, int]]] = {
    "segment.bytes": [("log.segment.bytes", 1)],
    "segment.ms": [("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)],
    "segment.jitter.ms": [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)],
    "segment.index.bytes": [("log.index.size.max.bytes", 1)],
    "flush.messages": [("log.flush.interval.messages", 1)],
    "flush.ms": [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)],
    "retention.bytes": [("log.retention.bytes", 1)],
    "retention.ms": [
        ("log.retention.ms", 1),
        ("log.retention.minutes", MINUTE_MS),
        ("log.retention.hours", HOUR_MS),
    ],
    "max.message.bytes": [("message.max.bytes", 1)],
    "index.interval.bytes": [("log.index.interval.bytes", 1)],
    "delete.retention.ms": [("log.cleaner.delete.retention.ms", 1)],
    "min.compaction.lag.ms": [("log.cleaner.min.compaction.lag.ms", 1)],
    "max.compaction.lag.ms": [("log.cleaner.max.compaction.lag.ms", 1)],
    "file.delete.delay.ms": [("log.segment.delete.delay.ms", 1)],
    "min.cleanable.dirty.ratio": [("log.cleaner.min.cleanable.ratio", 1)],
    "cleanup.policy": [("log.cleanup.policy", 1)],
    "preallocate": [("log.preallocate", 1)],
    "message.timestamp.type": [("log.message.timestamp.type", 1)],
}

# broker-only settings the cleaner needs (name -> Kafka default)
CLEANER_BROKER_DEFAULTS: dict[str, float] = {
    "log.cleaner.dedupe.buffer.size": 134_217_728,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.threads": 1,
    "producer.id.expiration.ms": 86_400_000,
}

SOURCE_FLAG = "flag"
SOURCE_TOPIC = "topic config"
SOURCE_SERVER = "server.properties"
SOURCE_DEFAULT = "default"


class SettingsError(ValueError):
    """A bad option or properties value (commands turn it into a one-line error, exit 2)."""


@dataclass
class ResolvedConfig:
    topic: str
    config: LogConfig
    # topic config name -> (value as given, where it came from, e.g. "server.properties (log.retention.hours)")
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)

    def source_of(self, name: str) -> str:
        return self.sources.get(name, ("", SOURCE_DEFAULT))[1]

    def describe(self, names: list[str]) -> dict[str, dict]:
        out = {}
        for name in names:
            attr = LogConfig.NAMES[name]
            value = getattr(self.config, attr)
            if isinstance(value, tuple):
                value = ",".join(value)
            out[name] = {"value": value, "source": self.source_of(name)}
        return out


def load_server_properties(path: str | os.PathLike) -> dict[str, str]:
    """Parse a broker's ``server.properties`` (Java properties syntax)."""
    return decode_properties(Path(path).read_bytes())


def parse_topic_overrides(items: list[str]) -> dict[str | None, dict[str, str]]:
    """``key=value`` (every topic) or ``TOPIC:key=value`` (one topic; topic names cannot contain ':')."""
    out: dict[str | None, dict[str, str]] = {}
    for item in items:
        if "=" not in item:
            raise SettingsError(f"--topic-config {item!r}: expected key=value or TOPIC:key=value")
        left, value = item.split("=", 1)
        topic, _, key = left.rpartition(":")
        key = key.strip()
        if key not in LogConfig.NAMES:
            raise SettingsError(f"--topic-config {item!r}: unknown topic config {key!r}")
        out.setdefault(topic or None, {})[key] = value.strip()
    return out


def _convert(name: str, raw: str, multiplier: int = 1) -> str:
    attr = LogConfig.NAMES[name]
    current = getattr(LogConfig(), attr)
    raw = raw.strip()
    try:
        if isinstance(current, bool):
            if raw.lower() not in ("true", "false"):
                raise ValueError
        elif isinstance(current, tuple):
            parts = [p.strip() for p in raw.split(",") if p.strip()]
            if not parts or any(p not in ("delete", "compact") for p in parts):
                raise ValueError
        elif isinstance(current, float):
            float(raw)
        elif isinstance(current, int):
            n = int(raw)
            # Kafka: a negative retention in any unit means "unlimited" (-1)
            return str(n * multiplier if n >= 0 or multiplier == 1 else -1)
        elif name == "message.timestamp.type" and raw not in ("CreateTime", "LogAppendTime"):
            raise ValueError
    except ValueError:
        raise SettingsError(f"invalid value {raw!r} for {name}") from None
    return raw


def resolve(
    topic: str,
    *,
    server_props: dict[str, str] | None = None,
    topic_overrides: dict[str | None, dict[str, str]] | None = None,
    flags: dict[str, object] | None = None,
) -> ResolvedConfig:
    """The topic's LogConfig: flag > topic config > server.properties > Kafka's default."""
    server_props = server_props or {}
    topic_overrides = topic_overrides or {}
    chosen: dict[str, str] = {}
    sources: dict[str, tuple[str, str]] = {}
    for name, synonyms in SERVER_SYNONYMS.items():
        for broker_name, mult in synonyms:
            if broker_name in server_props:
                chosen[name] = _convert(name, server_props[broker_name], mult)
                sources[name] = (server_props[broker_name], f"{SOURCE_SERVER} ({broker_name})")
                break
    for scope in (None, topic):
        for name, raw in topic_overrides.get(scope, {}).items():
            chosen[name] = _convert(name, raw)
            sources[name] = (raw, SOURCE_TOPIC)
    for name, value in (flags or {}).items():
        if value is None:
            continue
        chosen[name] = _convert(name, str(value))
        sources[name] = (str(value), SOURCE_FLAG)
    if "producer.id.expiration.ms" in server_props:
        chosen_pid = int(server_props["producer.id.expiration.ms"])
    else:
        chosen_pid = None
    config = LogConfig().with_overrides(chosen)
    if chosen_pid is not None:
        config = replace(config, producer_id_expiration_ms=chosen_pid)
    return ResolvedConfig(topic, config, sources)


def broker_setting(server_props: dict[str, str] | None, name: str) -> tuple[float, str]:
    """A broker-only cleaner setting and its source."""
    server_props = server_props or {}
    if name in server_props:
        try:
            return float(server_props[name]), f"{SOURCE_SERVER} ({name})"
        except ValueError:
            raise SettingsError(f"invalid value {server_props[name]!r} for {name}") from None
    return CLEANER_BROKER_DEFAULTS[name], SOURCE_DEFAULT
