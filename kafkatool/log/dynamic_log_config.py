"""Which stored dynamic broker configs of the topic defaults Kafka takes (its DynamicLogConfig).

Kafka keeps dynamic broker configs (``kafka-configs --entity-type brokers``) in ZooKeeper
``/config/brokers`` or as ConfigRecords of the KRaft ``__cluster_metadata`` log, and takes them
as DynamicBrokerConfig does: a config that is never dynamic (read-only), one stored at a level it
may not have, or a value its definition refuses is left out (fromPersistentProps,
removeInvalidConfigs), and a set the broker cannot run with is not applied at all, never half
(processReconfiguration).

The part of that rule a topic's settings depend on is here, below the broker: the topic defaults
(DynamicLogConfig.ReconfigurableConfigs: each topic config's first broker synonym) and
producer.id.expiration.ms (ProducerStateManagerConfig), their value checks (ConfigDef.parse with
KafkaConfig's validators), KafkaConfig's requirements on them, and :func:`take_stored`, the one
way a stored layer is taken.  broker/config.py (BrokerConfig.take_dynamic) runs the same
:func:`take_stored` with its own configs' rules added (listeners, security, the throttles, which
configs this broker applies); the fleet scan, which may not import the broker, takes a log dir's
layers with :data:`TOPIC_DEFAULTS`, which reads the topic defaults alone: what a topic resolves to
is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkatool.log import topic_settings as ts

PRODUCER_ID_EXPIRATION = "producer.id.expiration.ms"
#: DynamicLogConfig.ReconfigurableConfigs: each topic config's first broker synonym
#: (ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS) but log.message.format.version
DYNAMIC_LOG_CONFIGS = frozenset(d.synonyms[0][0] for d in ts.TOPIC_CONFIGS.values() if d.synonyms) - {
    "log.message.format.version"
}
#: the dynamic broker configs a topic's settings read (ts.resolve), with their types (KafkaConfig's)
DYNAMIC_TOPIC_DEFAULT_TYPES: dict[str, int] = {
    **{
        d.synonyms[0][0]: d.type
        for d in ts.TOPIC_CONFIGS.values()
        if d.synonyms[:1] and d.synonyms[0][0] in DYNAMIC_LOG_CONFIGS
    },
    PRODUCER_ID_EXPIRATION: ts.INT,
}
#: every broker config a topic's settings read: the dynamic ones and the read-only synonyms
#: (log.retention.hours, log.roll.hours ...: server.properties only)
TOPIC_DEFAULT_NAMES = frozenset(n for d in ts.TOPIC_CONFIGS.values() for n, _mult in d.synonyms) | frozenset(
    DYNAMIC_TOPIC_DEFAULT_TYPES
)

# KafkaConfig's validators of the dynamic topic defaults (DynamicBrokerConfig.validateConfigTypes
# parses a dynamic value with them): ConfigDef.Range.atLeast ...
_AT_LEAST = {
    "log.segment.bytes": 14,  # LegacyRecord.RECORD_OVERHEAD_V0
    "log.cleaner.delete.retention.ms": 0,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": 1,
    "log.index.size.max.bytes": 4,
    "log.index.interval.bytes": 0,
    "log.flush.interval.messages": 1,
    "log.segment.delete.delay.ms": 0,
    "message.max.bytes": 0,
    "min.insync.replicas": 1,
    "log.message.timestamp.difference.max.ms": 0,
    "log.message.timestamp.before.max.ms": 0,
    "log.message.timestamp.after.max.ms": 0,
    "log.local.retention.ms": -2,  # RemoteLogManagerConfig: atLeast(-2)
    "log.local.retention.bytes": -2,
}
#: ... Range.between and ValidString.in (log.cleanup.policy: ValidList.in, each item): the topic
#: configs' own validators, under each one's first broker synonym
_BETWEEN = {ts.TOPIC_CONFIGS[n].synonyms[0][0]: r for n, r in ts.VALUE_BETWEEN.items()}
_ONE_OF = {ts.TOPIC_CONFIGS[n].synonyms[0][0]: v for n, v in ts.VALUE_ONE_OF.items()}


def scala_set(names) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def read_only_error(names) -> str:
    """DynamicBrokerConfig.validateConfigs' message for configs that are never dynamic."""
    return f"Cannot update these configs dynamically: {scala_set(names)}"


def value_error(
    name: str, type_: int, value: str, at_least: int | None = None, one_of: Collection[str] | None = None
) -> str | None:
    """ConfigDef.parse's message for a dynamic value of ``name`` (of ``type_``; ``at_least``,
    ``one_of``: a lower bound and the allowed values of the caller's, for a config this module
    has none for) that Kafka's definition of it refuses; None when it takes it."""
    lo, hi = _BETWEEN.get(name, (_AT_LEAST.get(name, at_least), None))
    return ts.config_value_error(name, type_, value, lo, hi, _ONE_OF.get(name, one_of))


def requirement_error(values: Mapping[str, str]) -> str | None:
    """KafkaConfig.validateValues' requirements on the topic defaults (Scala's ``require``) over
    the set broker values: the broker refuses to start with them, and a dynamic config that
    breaks one."""
    try:
        roll = int(ts.broker_value("segment.ms", values)[0])
        jitter = int(ts.broker_value("segment.jitter.ms", values)[0])
        retention = int(ts.broker_value("retention.ms", values)[0])
    except (ts.SettingsError, ValueError) as exc:
        return str(exc)
    if roll < 1:
        return "requirement failed: log.roll.ms must be greater than or equal to 1"
    if jitter < 0:
        return "requirement failed: log.roll.jitter.ms must be greater than or equal to 0"
    if retention < 1 and retention != -1:
        return "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    return None


def local_retention_error(values: Mapping[str, str]) -> str | None:
    """DynamicLogConfig.validateReconfiguration: with a bounded log.retention.ms (or .bytes),
    log.local.retention.ms (.bytes) must be -2 (the same as the retention) or no more than it.
    Kafka runs it when a change touches a broker topic default, never at start-up."""
    for local_name, name, what, bounded in (
        ("local.retention.ms", "retention.ms", "log.retention.ms", lambda n: n != -1),
        ("local.retention.bytes", "retention.bytes", "log.retention.bytes", lambda n: n > -1),
    ):
        try:
            retention = int(ts.broker_value(name, values)[0])
            local = int(ts.broker_value(local_name, values)[0])
        except (ts.SettingsError, ValueError) as exc:
            return str(exc)
        if not bounded(retention) or local == -2:
            continue
        if local == -1:
            why = f"Value must not be -1 as {what} value is set as {retention}."
        elif local > retention:
            why = f"Value must not be more than {what} property value: {retention}"
        else:
            continue
        return f"Invalid value {local} for configuration log.{local_name}: {why}"
    return None


def defaults_error(values: Mapping[str, str], changed: Collection[str] = ()) -> str | None:
    """Why a broker with these set values (server.properties under its dynamic layers) cannot run
    (None: it can): KafkaConfig's requirements, DynamicLogConfig's checks of a change that
    touches a topic default (``changed``: the names a running broker's change sets or deletes;
    none at start-up), then the topic defaults the log engine takes (the validation a topic
    config gets)."""
    err = requirement_error(values)
    if err is None and not DYNAMIC_LOG_CONFIGS.isdisjoint(changed):
        err = local_retention_error(values)
    if err is None:
        try:
            ts.log_config_from(ts.topic_defaults(values))
        except ts.SettingsError as exc:
            err = str(exc)
    return err


@dataclass(frozen=True)
class StoredRule:
    """Which stored dynamic configs a reader takes: ``reads`` (others are left out without a
    word: not the reader's concern), ``refuses`` (why Kafka leaves one out, None: it takes it;
    given the name, the value and whether it is stored for the broker rather than as the
    cluster-wide default) and ``applies`` (the configs a stored layer replaces)."""

    reads: Callable[[str], bool]
    refuses: Callable[[str, object, bool], str | None]
    applies: Collection[str]


def topic_default_error(name: str, value: object, per_broker: bool) -> str | None:
    """Why Kafka leaves a stored dynamic topic default out (every topic default is cluster-wide,
    so either level takes it): a read-only synonym, a value that is no string or that its
    definition refuses."""
    del per_broker
    if name not in DYNAMIC_TOPIC_DEFAULT_TYPES:
        return read_only_error({name})
    if not isinstance(value, str):
        return f"{name} is not a string"
    return value_error(name, DYNAMIC_TOPIC_DEFAULT_TYPES[name], value)


#: the topic defaults alone: what a reader below the broker takes (the fleet scan)
TOPIC_DEFAULTS = StoredRule(
    TOPIC_DEFAULT_NAMES.__contains__, topic_default_error, frozenset(DYNAMIC_TOPIC_DEFAULT_TYPES)
)


class StoredNote(str):
    """A note :func:`take_stored` makes (the text), with what it is about: ``config``, the config
    left out (None: a set not applied) at ``per_broker``'s level (None: both levels' set)."""

    config: str | None = None
    per_broker: bool | None = None


def _note(text: str, config: str | None, per_broker: bool | None) -> StoredNote:
    note = StoredNote(text)
    note.config, note.per_broker = config, per_broker
    return note


def take_stored(
    layers: Mapping[bool, dict[str, str]],
    static: Mapping[str, str],
    found: Mapping[bool, tuple[str, Mapping[str, object]]],
    rule: StoredRule,
    *,
    running: bool = False,
) -> tuple[bool, list[str]]:
    """Take the dynamic layers kept somewhere into ``layers`` (per_broker -> the dynamic layer
    as it is: this broker's own, True, and the cluster-wide default, False; changed in place)
    as Kafka's DynamicBrokerConfig takes persisted configs (updateDefaultConfig,
    updateBrokerConfig): ``found`` maps per_broker -> (where, the configs kept there) (a layer not
    given stays as it is); the configs ``rule.applies`` names are replaced by the ones found,
    leaving out the ones ``rule.refuses``; the two layers are checked together over ``static``
    (server.properties), and a set the broker cannot run with is not applied at all.  Each is
    said in a note (a :class:`StoredNote`).  ``running``: the logs are open, so the change is
    also checked as Kafka's reconfigurables check one (:func:`defaults_error`'s ``changed``).
    Returns whether a layer changed, and the notes."""
    notes = []
    changes: dict[bool, dict[str, str | None]] = {}
    for per_broker, (where, configs) in found.items():
        layer = layers[per_broker]
        kept: dict[str, str] = {}
        for k, v in configs.items():
            if not rule.reads(k):
                continue
            err = rule.refuses(k, v, per_broker)
            if err is not None:
                notes.append(_note(f"dynamic broker config {k} in {where} ignored: {err}", k, per_broker))
                continue
            kept[k] = v
        change: dict[str, str | None] = {k: None for k in layer if k in rule.applies and k not in kept}
        change.update({k: v for k, v in kept.items() if layer.get(k) != v})
        if change:
            changes[per_broker] = change
    if not changes:
        return False, notes
    new = {per_broker: dict(layer) for per_broker, layer in layers.items()}
    for per_broker, change in changes.items():
        for k, v in change.items():
            if v is None:
                new[per_broker].pop(k, None)
            else:
                new[per_broker][k] = v
    changed = [k for change in changes.values() for k in change] if running else ()
    err = defaults_error(ts.merge_broker_levels(static, new.get(False, {}), new.get(True, {})), changed)
    if err is not None:
        wheres = " and ".join(found[per_broker][0] for per_broker in changes)
        levels = list(changes)
        notes.append(
            _note(
                f"dynamic broker configs in {wheres} not applied: {err}",
                None,
                levels[0] if len(levels) == 1 else None,
            )
        )
        return False, notes
    for per_broker, change in changes.items():
        layer = layers[per_broker]
        for k, v in change.items():
            if v is None:
                del layer[k]
            else:
                layer[k] = v
    return True, notes


def take_layer(
    layer: ts.ConfigLayer,
    wheres: tuple[str, str],
    static: Mapping[str, str] | None = None,
    rule: StoredRule = TOPIC_DEFAULTS,
) -> None:
    """The dynamic broker configs a reader found in one place (``wheres``: where the cluster-wide
    default and the broker's own are kept) as a broker with ``static`` (server.properties) takes
    them at start-up (:func:`take_stored`): the layer keeps what it takes, and says what it leaves
    out in its notes."""
    if not (layer.broker_default or layer.broker_node):
        return
    static = {str(k): str(v) for k, v in (static or {}).items()}
    if defaults_error(static) is not None:
        static = {}  # server.properties' own error is the resolution's to say
    layers: dict[bool, dict[str, str]] = {False: {}, True: {}}
    _took, notes = take_stored(
        layers, static, {False: (wheres[0], layer.broker_default), True: (wheres[1], layer.broker_node)}, rule
    )
    layer.broker_default, layer.broker_node = layers[False], layers[True]
    layer.notes.extend(notes)


#: a log dir layer's label -> the file or dir in the log dir that keeps its dynamic broker configs
DYNAMIC_KEPT_IN = {
    ts.SOURCE_KRAFT: ts.CLUSTER_METADATA_DIR,
    ts.DYNAMIC_CONFIGS_FILE: ts.DYNAMIC_CONFIGS_FILE,
}


def take_dir_layers(
    log_dir: Path,
    layers: list[ts.ConfigLayer],
    node_id: int | None,
    static: Mapping[str, str] | None = None,
    rule: StoredRule = TOPIC_DEFAULTS,
) -> None:
    """:func:`take_layer` for each layer of ``log_dir`` (ts.dir_layers) that keeps dynamic broker
    configs; ``node_id``: the broker whose own configs the layers hold."""
    for layer in layers:
        name = DYNAMIC_KEPT_IN.get(layer.label)
        if name is not None:
            where = Path(log_dir) / name
            take_layer(layer, (f"{where} (cluster default)", f"{where} (broker {node_id})"), static, rule)
