"""Configs of topics, brokers, users and clients as ``kafka-configs.sh`` reads and changes them:
through the admin API (DescribeConfigs, IncrementalAlterConfigs) or ZooKeeper
(``/config/<type>/<name>`` and its change notification, as AdminZkClient writes them); and the
difference between a desired state (YAML or JSON) and a cluster, Kafka's defaults not counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kafkatool.assign.kafka_client import (
    CONFIG_SOURCE_TOPIC,
    KafkaAdmin,
    KafkaAdminError,
    config_node,
    config_source,
    describe_configs,
    describe_error,
)
from kafkatool.errors import KafkatoolError
from kafkatool.protocol.apis import API_BY_KEY

INCREMENTAL_ALTER_CONFIGS = 44
#: kafka-configs.sh --entity-type -> (ConfigResource type, ZooKeeper entity type)
ENTITY_TYPES = {"topics": (2, "topics"), "brokers": (4, "brokers"), "broker-loggers": (8, None),
                "users": (None, "users"), "clients": (None, "clients")}  # fmt: skip
#: DescribeConfigs config_source names (ConfigEntry.ConfigSource)
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}  # fmt: skip
SET, DELETE = 0, 1


class ConfigsError(KafkatoolError):
    """Bad --add-config / --delete-config / desired-state input."""


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[v2,v3]`` (kafka-configs.sh: brackets group a list value) -> {k1: v1, k2: "v2,v3"}."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0:
            raise ConfigsError(f"--add-config: {text[i:]!r} is not key=value")
        key = text[i:eq].strip()
        if not key or "," in key:
            raise ConfigsError(f"--add-config: {text[i:eq]!r} is not a config name")
        j = eq + 1
        if j < n and text[j] == "[":
            close = text.find("]", j)
            if close < 0:
                raise ConfigsError(f"--add-config: unclosed [ in the value of {key}")
            value, j = text[j + 1 : close], close + 1
            if j < n and text[j] != ",":
                raise ConfigsError(f"--add-config: ',' expected after the ] of {key}")
        else:
            comma = text.find(",", j)
            comma = n if comma < 0 else comma
            value, j = text[j:comma], comma
        out[key] = value.strip()
        i = j + 1
    return out


def parse_delete_config(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


@dataclass
class Entry:
    name: str
    value: str | None
    source: str
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, str]] = field(default_factory=list)


def _resource(entity_type: str, name: str | None) -> tuple[int, str]:
    rtype = ENTITY_TYPES[entity_type][0]
    if rtype is None:
        raise ConfigsError(
            f"--entity-type {entity_type} through --bootstrap-server needs the client-quota APIs, which this "
            "command does not speak yet; use --zookeeper (or kafkatool users for SCRAM credentials)"
        )
    return rtype, "" if name is None else name


def describe_live(admin: KafkaAdmin, entity_type: str, name: str | None, *, all_configs: bool) -> list[Entry]:
    """kafka-configs --describe: the dynamic configs (every config with --all) of one entity."""
    from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource

    rtype, rname = _resource(entity_type, name)
    node = config_node(rtype, rname)
    conn = admin._any() if node is None else admin.node(node)
    version = conn.version_for(32)
    req = API_BY_KEY[32].request(
        resources=[
            DescribeConfigsResource(resource_type=rtype, resource_name=rname, configuration_keys=None)
        ],
        include_synonyms=version >= 1,
    )
    (r,) = conn.request(32, req, version).results
    if r.error_code:
        raise KafkaAdminError(
            f"DescribeConfigs {entity_type} {rname or '<default>'}: {describe_error(r.error_code, r.error_message)}",
            r.error_code,
        )
    out = []
    dynamic = {1, 2, 3, 6} if rname else {3}
    for c in r.configs:
        src = config_source(c, version, r.resource_type)
        if not all_configs and src not in dynamic:
            continue
        syn = [(s.name, s.value, SOURCES.get(s.source, str(s.source))) for s in (c.synonyms or [])]
        out.append(Entry(c.name, c.value, SOURCES.get(src, str(src)), bool(c.is_sensitive), syn))
    return sorted(out, key=lambda e: e.name)


def alter_live(
    admin: KafkaAdmin, entity_type: str, name: str | None, set_keys: dict[str, str], delete_keys: list[str]
) -> None:
    from kafkatool.protocol.generated.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
    )

    rtype, rname = _resource(entity_type, name)
    configs = [AlterableConfig(name=k, config_operation=SET, value=v) for k, v in set_keys.items()]
    configs += [AlterableConfig(name=k, config_operation=DELETE, value=None) for k in delete_keys]
    req = API_BY_KEY[INCREMENTAL_ALTER_CONFIGS].request(
        resources=[AlterConfigsResource(resource_type=rtype, resource_name=rname, configs=configs)],
        validate_only=False,
    )
    node = config_node(rtype, rname)
    target = admin._any() if node is None else admin.node(node)
    (r,) = target.request(INCREMENTAL_ALTER_CONFIGS, req).responses
    if r.error_code:
        raise KafkaAdminError(f"{describe_error(r.error_code, r.error_message)}", r.error_code)


def zk_name(entity_type: str, name: str | None) -> str:
    if ENTITY_TYPES[entity_type][1] is None:
        raise ConfigsError(f"--entity-type {entity_type} is not kept in ZooKeeper")
    return "<default>" if name is None else name


def describe_zk(zk, entity_type: str, name: str | None) -> list[Entry]:
    ent = zk.entity_config(entity_type, zk_name(entity_type, name))
    if ent is None or ent.config is None:
        return []
    src = {
        "topics": "DYNAMIC_TOPIC_CONFIG",
        "brokers": "DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG",
    }
    return [Entry(k, v, src.get(entity_type, "ZOOKEEPER")) for k, v in sorted(ent.config.config.items())]


def alter_zk(
    zk, entity_type: str, name: str | None, set_keys: dict[str, str], delete_keys: list[str]
) -> dict[str, str]:
    if entity_type == "topics":
        validate_topic_keys(set_keys)
        if zk.topic_assignment(name) is None:
            raise ConfigsError(f"Topic {name} does not exist")
    return zk.change_entity_config(
        entity_type, zk_name(entity_type, name), set_keys=set_keys, delete_keys=delete_keys
    )


def validate_topic_keys(values: dict[str, str]) -> None:
    from kafkatool.log.topic_settings import SettingsError, validate_topic_config

    for k, v in values.items():
        try:
            validate_topic_config(k, v)
        except SettingsError as exc:
            raise ConfigsError(str(exc)) from None


# ----------------------------------------------------------------------------- desired state


@dataclass
class TopicWant:
    partitions: int | None = None
    replication_factor: int | None = None
    config: dict[str, str] = field(default_factory=dict)


def load_desired(text: str, source: str) -> dict[str, TopicWant]:
    """``{"topics": {name: {"partitions": N, "replication_factor": R, "config": {k: v}}}}`` in
    JSON or YAML (a bare mapping of topics is accepted too)."""
    try:
        data = json.loads(text)
    except ValueError:
        try:
            import yaml

            data = yaml.safe_load(text)
        except Exception as exc:  # yaml.YAMLError and its kin
            raise ConfigsError(f"{source}: neither JSON nor YAML: {exc}") from None
    if isinstance(data, dict) and "topics" in data:
        data = data["topics"]
    if not isinstance(data, dict):
        raise ConfigsError(f"{source}: expected a mapping of topics")
    out = {}
    for name, spec in data.items():
        spec = spec or {}
        if not isinstance(spec, dict):
            raise ConfigsError(f"{source}: topic {name}: expected a mapping")
        unknown = set(spec) - {"partitions", "replication_factor", "replication-factor", "config", "configs"}
        if unknown:
            raise ConfigsError(f"{source}: topic {name}: unknown keys {sorted(unknown)}")
        cfg = {str(k): _text(v) for k, v in (spec.get("config") or spec.get("configs") or {}).items()}
        validate_topic_keys(cfg)
        rf = spec.get("replication_factor", spec.get("replication-factor"))
        try:
            want = TopicWant(
                int(spec["partitions"]) if spec.get("partitions") is not None else None,
                int(rf) if rf is not None else None,
                cfg,
            )
        except (TypeError, ValueError):
            raise ConfigsError(
                f"{source}: topic {name}: partitions and replication_factor are integers"
            ) from None
        out[str(name)] = want
    return out


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


@dataclass
class Drift:
    topic: str
    kind: str  # missing_topic, partitions, replication_factor, config, extra_override
    key: str | None
    desired: str | None
    actual: str | None
    #: what --apply does: create, add_partitions, set, delete, or "" (not applied: say so)
    action: str


def diff(admin: KafkaAdmin, desired: dict[str, TopicWant]) -> list[Drift]:
    """Per-key differences; a desired value equal to what the topic has (its override, or the
    broker/Kafka default it inherits) is not drift, nor an override equal to Kafka's default."""
    from kafkatool.log.topic_settings import TOPIC_CONFIGS, topic_defaults

    meta = admin.metadata(sorted(desired))
    present = [t for t in desired if t in meta.topics]
    configs = describe_configs(admin, 2, present) if present else {}
    defaults = topic_defaults({})
    out: list[Drift] = []
    for t, want in sorted(desired.items()):
        if t not in meta.topics:
            out.append(
                Drift(
                    t,
                    "missing_topic",
                    None,
                    json.dumps(
                        {"partitions": want.partitions, "replication_factor": want.replication_factor}
                    ),
                    None,
                    "create",
                )
            )
            for k, v in sorted(want.config.items()):
                out.append(Drift(t, "config", k, v, None, "create"))
            continue
        parts = meta.topics[t]
        if want.partitions is not None and want.partitions != len(parts):
            action = "add_partitions" if want.partitions > len(parts) else ""
            out.append(Drift(t, "partitions", None, str(want.partitions), str(len(parts)), action))
        rf = max((len(i.replicas) for i in parts.values()), default=0)
        if want.replication_factor is not None and want.replication_factor != rf:
            out.append(Drift(t, "replication_factor", None, str(want.replication_factor), str(rf), ""))
        actual = configs.get(t, {})
        for k, v in sorted(want.config.items()):
            have = actual.get(k, (defaults.get(k), 5))[0]
            if _norm(have) != _norm(v):
                out.append(Drift(t, "config", k, v, have, "set"))
        for k, (v, src) in sorted(actual.items()):
            if src == CONFIG_SOURCE_TOPIC and k not in want.config and k in TOPIC_CONFIGS:
                if _norm(v) != _norm(defaults.get(k)):
                    out.append(Drift(t, "extra_override", k, None, v, "delete"))
    return out


def _norm(v) -> str | None:
    return None if v is None else ",".join(p.strip() for p in str(v).split(",")).strip().lower()


def apply(admin: KafkaAdmin, desired: dict[str, TopicWant], drift: list[Drift]) -> list[tuple[Drift, str]]:
    """Make it so: create missing topics with their configs, add partitions, set and delete
    configs; returns (drift, error text or "") for what was attempted."""
    from kafkatool.assign import topics as T

    results: list[tuple[Drift, str]] = []
    by_topic: dict[str, list[Drift]] = {}
    for d in drift:
        by_topic.setdefault(d.topic, []).append(d)
    for t, ds in sorted(by_topic.items()):
        want = desired[t]
        if any(d.kind == "missing_topic" for d in ds):
            code, msg = T.create(admin, t, want.partitions, want.replication_factor, None, want.config)
            err = T.error_text(code, msg)
            results += [(d, err) for d in ds]
            continue
        for d in ds:
            if d.kind == "partitions" and d.action:
                code, msg = T.add_partitions(admin, t, int(d.desired), None)
                results.append((d, T.error_text(code, msg)))
        sets = {d.key: d.desired for d in ds if d.action == "set"}
        deletes = [d.key for d in ds if d.action == "delete"]
        if sets or deletes:
            try:
                alter_live(admin, "topics", t, sets, deletes)
                err = ""
            except KafkaAdminError as exc:
                err = str(exc)
            results += [(d, err) for d in ds if d.action in ("set", "delete")]
    return results
