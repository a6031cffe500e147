"""Configs of topics, brokers, users and clients as ``kafka-configs.sh`` reads and changes them:
through the admin API (DescribeConfigs, IncrementalAlterConfigs) or ZooKeeper
(``/config/<type>/<name>`` and its change notification, as AdminZkClient writes them); and the
difference between a desired state (YAML or JSON) and a cluster, Kafka's defaults not counted.
"""

from __future__ import annotations

import json
import os
import re
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
from kafkatool.formats.properties import parse_java_int
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
            f"--entity-type {entity_type} has no ConfigResource: its quotas go through "
            "describe_quotas_live/alter_quotas_live (DescribeClientQuotas, AlterClientQuotas)"
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
    from kafkatool.zk.paths import DEFAULT

    return DEFAULT if name is None else name  # a user named <default> is a name (%3Cdefault%3E)


def describe_zk(zk, entity_type: str, name: str | None) -> list[Entry]:
    ent = zk.entity_config(entity_type, zk_name(entity_type, name))
    if ent is None or ent.config is None:
        return []
    src = (
        "DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"
    )  # brokers: users have their lines
    return [Entry(k, v, src) for k, v in sorted(ent.config.config.items())]


def alter_zk(
    zk, entity_type: str, name: str | None, set_keys: dict[str, str], delete_keys: list[str]
) -> dict[str, str]:
    """alterConfigWithZk's write of a user's SCRAM credentials or a broker's dynamic configs (the
    entity types --zookeeper takes: zk_entity_types_check)."""
    # every config to delete must be there
    ent = zk.entity_config(entity_type, zk_name(entity_type, name))
    have = ent.config.config if ent is not None and ent.config is not None else {}
    invalid = [k for k in delete_keys if k not in have]
    if invalid:
        raise ConfigsError(f"Invalid config(s): {','.join(invalid)}")
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


# ------------------------------------------------------------------ client quotas (users, clients)
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
DESCRIBE_USER_SCRAM = 50
#: kafka-configs.sh's entity type -> ClientQuotaEntity's, and the word its lines use
QUOTA_ENTITY = {"users": "user", "clients": "client-id"}
QUOTA_WORD = {"user": "user-principal", "client-id": "client-id"}


def quota_keys() -> dict[str, str]:
    from kafkatool.broker.quotas import QUOTA_TYPES

    return QUOTA_TYPES


def _scala_set(names) -> str:
    return f"Set({', '.join(names)})"


def quota_components(entities: list[tuple[str, str | None]]) -> list:
    """ConfigCommand.getAllClientQuotasConfigs' filter: a name is ofEntity, "" ofDefaultEntity,
    None ofEntityType."""
    from kafkatool.protocol.generated.describe_client_quotas_request import ComponentData

    out = []
    for etype, name in entities:
        et = QUOTA_ENTITY[etype]
        if name is None:
            out.append(ComponentData(entity_type=et, match_type=2, match=None))
        elif name == "":
            out.append(ComponentData(entity_type=et, match_type=1, match=None))
        else:
            out.append(ComponentData(entity_type=et, match_type=0, match=name))
    return out


def _entity_hash(entity: dict) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(entries), a HashMap's hashCode."""
    from kafkatool.formats.java_collections import java_string_hash, signed32

    h = 0
    for k, v in entity.items():
        h += java_string_hash(k) ^ (java_string_hash(v) if v is not None else 0)
    return signed32(31 + signed32(h))


def describe_quotas_live(
    admin: KafkaAdmin, entities: list[tuple[str, str | None]]
) -> list[tuple[dict, dict]]:
    """DescribeClientQuotas with ClientQuotaFilter.containsOnly, in the order Kafka's admin
    client's HashMap gives them: [(entity {type: name or None}, {key: value})]."""
    from kafkatool.formats.java_collections import hash_map_order, java_string_hash

    req = API_BY_KEY[DESCRIBE_CLIENT_QUOTAS].request(components=quota_components(entities), strict=True)
    resp = admin._any().request(DESCRIBE_CLIENT_QUOTAS, req)
    if resp.error_code:
        raise KafkaAdminError(describe_error(resp.error_code, resp.error_message), resp.error_code)
    found = []
    for e in resp.entries or []:
        entity = {x.entity_type: x.entity_name for x in e.entity}
        values = {v.key: v.value for v in e.values}
        order = hash_map_order(values, java_string_hash, len(values))
        found.append((entity, {k: values[k] for k in order}))
    keys = list(range(len(found)))
    order = hash_map_order(keys, lambda i: _entity_hash(found[i][0]), len(found))
    return [found[i] for i in order]


def quota_line(entity: dict, values: dict) -> str:
    """ConfigCommand.describeQuotaConfigs' line."""
    from kafkatool.formats.schema import java_double_str

    parts = []
    for et in ("user", "client-id", "ip"):
        if et in entity:
            name = entity[et]
            word = QUOTA_WORD.get(et, et)
            parts.append(f"{word} '{name}'" if name is not None else f"the default {word}")
    vals = ", ".join(f"{k}={java_double_str(v)}" for k, v in values.items())
    return f"Quota configs for {', '.join(parts)} are {vals}"


def describe_scram_live(admin: KafkaAdmin, users: list[str]) -> list[str]:
    """describeClientQuotaAndUserScramCredentialConfigs' SCRAM lines (users with credentials)."""
    from kafkatool.broker.security import scram
    from kafkatool.protocol.generated.describe_user_scram_credentials_request import UserName

    req = API_BY_KEY[DESCRIBE_USER_SCRAM].request(users=[UserName(name=u) for u in users] if users else None)
    resp = admin._any().request(DESCRIBE_USER_SCRAM, req)
    out = []
    for r in resp.results:
        if r.error_code == 91:  # RESOURCE_NOT_FOUND: DescribeUserScramCredentialsResult.users leaves it out
            continue
        if r.error_code:
            out.append(
                f"Error retrieving SCRAM credential configs for user-principal '{r.user}': "
                f"{describe_error(r.error_code, r.error_message)}"
            )
            continue
        text = ", ".join(
            f"{scram.MECHANISM_CODES.get(i.mechanism, i.mechanism)}=iterations={i.iterations}"
            for i in r.credential_infos
        )
        out.append(f"SCRAM credential configs for user-principal '{r.user}' are {text}")
    return out


def check_quota_keys(
    entities: list[tuple[str, str | None]], sets: dict[str, str], deletes: list[str]
) -> None:
    """ConfigCommand.alterConfig's checks for users and clients through --bootstrap-server."""
    from kafkatool.broker.quotas import SCRAM_KEYS

    keys = quota_keys()
    scram_add = [k for k in sets if k in SCRAM_KEYS]
    unknown_add = [k for k in sets if k not in keys and k not in SCRAM_KEYS]
    scram_del = [k for k in deletes if k in SCRAM_KEYS]
    unknown_del = [k for k in deletes if k not in keys and k not in SCRAM_KEYS]
    quota_change = any(k in keys for k in sets) or any(k in keys for k in deletes)
    types = [t for t, _ in entities]
    if types[0] == "clients" or len(types) == 2:
        if unknown_add or scram_add:
            raise ConfigsError(
                "Only quota configs can be added for 'clients' using --bootstrap-server. "
                f"Unexpected config names: {_scala_set(unknown_add + scram_add)}"
            )
        if unknown_del or scram_del:
            raise ConfigsError(
                "Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                f"Unexpected config names: {_scala_set(unknown_del + scram_del)}"
            )
        return
    if unknown_add:
        raise ConfigsError(
            "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
            f"Unexpected config names: {_scala_set(unknown_add)}"
        )
    if unknown_del:
        raise ConfigsError(
            "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. "
            f"Unexpected config names: {_scala_set(unknown_del)}"
        )
    if scram_add or scram_del:
        if any(n == "" for _, n in entities):
            raise ConfigsError(
                "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials "
                "using --bootstrap-server."
            )
        if quota_change:
            raise ConfigsError(
                "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                "--bootstrap-server."
            )
        raise ConfigsError("SCRAM credentials: use kafkatool users (AlterUserScramCredentials)")


def alter_quotas_live(
    admin: KafkaAdmin, entities: list[tuple[str, str]], set_keys: dict[str, str], delete_keys: list[str]
) -> None:
    """ConfigCommand.alterQuotaConfigs: deletes must name configs the entity has; values are
    doubles; one AlterClientQuotas entry."""
    from kafkatool.protocol.generated.alter_client_quotas_request import EntityData, EntryData, OpData

    check_quota_keys(entities, set_keys, delete_keys)
    old = describe_quotas_live(admin, entities)
    have = old[0][1] if old else {}
    invalid = [k for k in delete_keys if k not in have]
    if invalid:
        raise ConfigsError(f"Invalid config(s): {','.join(invalid)}")
    ops = []
    for k, v in set_keys.items():
        try:
            value = float(v.strip())
        except ValueError:
            raise ConfigsError(f"Cannot parse quota configuration value for {k}: {v}") from None
        ops.append(OpData(key=k, value=value, remove=False))
    ops += [OpData(key=k, value=0.0, remove=True) for k in delete_keys]
    entity = [EntityData(entity_type=QUOTA_ENTITY[t], entity_name=n or None) for t, n in entities]
    req = API_BY_KEY[ALTER_CLIENT_QUOTAS].request(
        entries=[EntryData(entity=entity, ops=ops)], validate_only=False
    )
    (r,) = admin._any().request(ALTER_CLIENT_QUOTAS, req).entries
    if r.error_code:
        raise KafkaAdminError(describe_error(r.error_code, r.error_message), r.error_code)


#: ConfigCommand.ZkSupportedConfigTypes (Kafka 3.x): the entity types --zookeeper may describe or
#: alter (a user's SCRAM credentials, a stopped broker's dynamic configs); the rest needs a broker
ZK_ENTITY_TYPES = ("users", "brokers")
#: ScramMechanism.minIterations() (4096 for both)
SCRAM_MIN_ITERATIONS = 4096


def zk_entity_types_check(types: list[str]) -> None:
    """ConfigCommandOptions.checkArgs with --zookeeper: every entity type one it may use."""
    for t in types:
        if t not in ZK_ENTITY_TYPES:
            raise ConfigsError(
                f"Invalid entity type {t}, the entity type must be one of {', '.join(ZK_ENTITY_TYPES)} "
                "with a --zookeeper argument"
            )


def _properties_str(values: dict[str, str]) -> str:
    """java.util.Properties.toString (its ConcurrentHashMap of 16 bins' order)."""
    from kafkatool.formats.java_collections import hash_map_order, java_string_hash

    return "{" + ", ".join(f"{k}={values[k]}" for k in hash_map_order(values, java_string_hash, 16)) + "}"


def zk_update_error(entity_type: str, sets: dict[str, str], deletes: list[str]) -> str:
    """alterConfigWithZk's errorMessage, the start of its refusals: the configs as given (before
    any preprocessing: a SCRAM password, a password encoder secret as typed), Properties'
    toString and parseConfigsToBeDeleted's Scala Buffer (List() without --delete-config)."""
    deleted = f"ArrayBuffer({', '.join(deletes)})" if deletes else "List()"
    return (
        f"--bootstrap-server option must be specified to update {entity_type} configs: "
        f"{{add: {_properties_str(sets)}, delete: {deleted}}}"
    )


def zk_user_check(sets: dict[str, str], deletes: list[str]) -> None:
    """alterConfigWithZk's requirement for users: only SCRAM credentials are added or deleted
    through ZooKeeper (a quota needs --bootstrap-server, AlterClientQuotas)."""
    from kafkatool.broker.quotas import SCRAM_KEYS

    if all(k in SCRAM_KEYS for k in sets) and all(k in SCRAM_KEYS for k in deletes):
        return
    raise ConfigsError(
        f"requirement failed: {zk_update_error('users', sets, deletes)}. User configuration updates using "
        "ZooKeeper are only supported for SCRAM credential updates."
    )


#: validateBrokersNotRunning's info
BROKERS_RUNNING = "Broker configuration operations using ZooKeeper are only supported if the affected broker(s) are not running."


class BrokersRunningError(ConfigsError):
    """ConfigCommand.validateBrokersNotRunning's refusal: a broker's dynamic configs through
    ZooKeeper while it (the default: any broker) is registered."""


def zk_brokers_not_running(zk, name: str | None, error_message: str) -> None:
    """validateBrokersNotRunning (alterConfigWithZk with configs to add or delete,
    describeConfigWithZk): a broker's own configs only while /brokers/ids/<id> is absent (a
    registration it cannot decode counts: Kafka fails on it), the default (``name`` None) only
    while no broker is registered.  BrokersRunningError with Kafka's requirement message."""
    if name is not None:
        broker_id = int(name)  # broker_id_check has taken it
        if zk.broker(broker_id) is not None:
            raise BrokersRunningError(
                f"requirement failed: {error_message} - broker {broker_id} is running. {BROKERS_RUNNING}"
            )
        return
    running = len(zk.brokers())
    if running:
        raise BrokersRunningError(
            f"requirement failed: {error_message} - {running} brokers are running. {BROKERS_RUNNING}"
        )


#: KafkaConfig.PasswordEncoderSecretProp; every password.encoder.* config is for the tool alone
PASSWORD_ENCODER_PREFIX = "password.encoder."
PASSWORD_ENCODER_SECRET = "password.encoder.secret"


def zk_broker_configs(sets: dict[str, str], per_broker: bool) -> dict[str, str]:
    """preProcessBrokerConfigs: the broker configs kafka-configs --zookeeper writes.  The
    password.encoder.* configs are taken out (never stored), the rest checked as
    DynamicBrokerConfig.validateConfigs checks them (broker/config.validate_configs_error); a
    password config needs password.encoder.secret (Kafka's requirement message) and is stored
    encrypted as Kafka's PasswordEncoder does (formats/password_encoder; createPasswordEncoder:
    the cipher, key factory, key length and iterations from the other password.encoder.*
    configs given, else KafkaConfig's defaults), for the brokers that read it with the same
    secret in their server.properties."""
    from kafkatool.broker import config as BC
    from kafkatool.formats import password_encoder as PE
    from kafkatool.log.dynamic_log_config import scala_set

    encoder = {k: v for k, v in sets.items() if k.startswith(PASSWORD_ENCODER_PREFIX)}
    out = {k: v for k, v in sets.items() if k not in encoder}
    err = BC.validate_configs_error(out, per_broker)
    if err is not None:
        raise ConfigsError(err)
    passwords = [k for k in out if BC.is_password_config(k)]
    if not passwords:
        return out
    if PASSWORD_ENCODER_SECRET not in encoder:
        raise ConfigsError(
            f"requirement failed: {PASSWORD_ENCODER_SECRET} must be specified to update {scala_set(passwords)}. "
            "Other password encoder configs like cipher algorithm and iterations may also be specified to "
            "override the default encoding parameters. Password encoder configs will not be persisted in "
            "ZooKeeper."
        )
    numbers = {}
    for name, default in (("key.length", PE.DEFAULT_KEY_LENGTH), ("iterations", PE.DEFAULT_ITERATIONS)):
        raw = encoder.get(PASSWORD_ENCODER_PREFIX + name)
        numbers[name] = default if raw is None else parse_java_int(raw)
        if numbers[name] is None:  # String.toInt's NumberFormatException
            raise ConfigsError(f'For input string: "{raw}" ({PASSWORD_ENCODER_PREFIX}{name})')
    cipher = encoder.get(PASSWORD_ENCODER_PREFIX + "cipher.algorithm", PE.DEFAULT_CIPHER)
    for name in passwords:
        try:
            out[name] = PE.encode(
                out[name],
                encoder[PASSWORD_ENCODER_SECRET],
                salt=os.urandom(PE.SALT_BYTES),
                iv=os.urandom(PE.iv_size(cipher)),
                key_factory=encoder.get(PASSWORD_ENCODER_PREFIX + "keyfactory.algorithm"),
                cipher=cipher,
                key_length=numbers["key.length"],
                iterations=numbers["iterations"],
            )
        except PE.PasswordEncoderError as exc:
            raise ConfigsError(f"{PASSWORD_ENCODER_PREFIX}*: {exc.message}") from None
    return out


def broker_id_check(entity_type: str, name: str | None) -> None:
    """ConfigCommandOptions.checkArgs: a brokers or broker-loggers entity name is an integer
    (Integer.parseInt), whichever way the command goes."""
    if entity_type not in ("brokers", "broker-loggers") or not name:
        return
    if parse_java_int(name) is None:
        raise ConfigsError(
            f"The entity name for {entity_type} must be a valid integer broker id, but it is: {name}"
        )


#: preProcessScramCredentials' pattern (Java's ``.``: no line terminator)
_SCRAM_VALUE = re.compile("(?:iterations=([0-9]*),)?password=([^\n\r\u0085\u2028\u2029]*)")


def zk_scram_credentials(sets: dict[str, str]) -> dict[str, str]:
    """preProcessScramCredentials: ``[iterations=N,]password=P`` becomes the credential ZooKeeper
    keeps (ScramCredentialUtils.credentialToString: salt, stored and server key, iterations), the
    password never written."""
    from kafkatool.broker.security import scram

    out = dict(sets)
    for mechanism in scram.MECHANISMS:
        value = sets.get(mechanism)
        if value is None:
            continue
        m = _SCRAM_VALUE.fullmatch(value)
        if m is None or m.group(1) == "" or (m.group(1) and int(m.group(1)) > 2**31 - 1):
            raise ConfigsError(f"Invalid credential property {mechanism}={value}")
        iterations = int(m.group(1)) if m.group(1) is not None else SCRAM_MIN_ITERATIONS
        if iterations < SCRAM_MIN_ITERATIONS:
            raise ConfigsError(
                f"Iterations {iterations} is less than the minimum {SCRAM_MIN_ITERATIONS} required for {mechanism}"
            )
        out[mechanism] = scram.new_credential(mechanism, m.group(2), iterations).to_text()
    return out


def zk_entity_label(entity_type: str, name: str, client: str | None = None) -> str:
    """ConfigCommand.ConfigEntity.toString (real names or DEFAULT): ``user-principal 'u'``,
    ``default client-id``, ``brokers '1'``; the default is the entity at the znode ``<default>``,
    so a user named ``<default>`` is ``user-principal '<default>'``."""
    from kafkatool.zk.paths import DEFAULT_ENTITY, entity_segment

    word = {"users": "user-principal", "clients": "client-id", "topics": "topic"}

    def one(t: str, n) -> str:
        w = word.get(t, t)
        return f"default {w}" if entity_segment(t, n) == DEFAULT_ENTITY else f"{w} '{n}'"

    if client is not None:
        return f"{one('users', name)}, {one('clients', client)}"
    return one(entity_type, name)


def describe_zk_lines(zk, entity_type: str, name) -> list[str]:
    """describeConfigWithZk's lines for users and brokers (``name`` a real name or DEFAULT): ``Configs for <entity> are k=v,...``
    (Properties' order, a ConcurrentHashMap of 16 bins); all entities of the type without a name
    (a user without configs of its own is left out)."""
    from kafkatool.formats.java_collections import hash_map_order, java_string_hash

    if name is not None:
        ents = [zk.entity_config(entity_type, name)]
        keys = [name]
    else:
        ents = [e for e in zk.entity_configs(entity_type) if e.client is None and e.error is None]
        keys = [e.name for e in ents]
    out = []
    for n, ent in zip(keys, ents, strict=True):
        cfg = ent.config.config if ent is not None and ent.config is not None else {}
        if not cfg and name is None and entity_type == "users":
            continue
        order = hash_map_order(cfg, java_string_hash, 16)
        line = ",".join(f"{k}={cfg[k]}" for k in order)
        out.append(f"Configs for {zk_entity_label(entity_type, n)} are {line}")
    return out
