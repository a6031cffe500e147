"""Where the offline commands find a topic's configuration: every place Kafka keeps it.

The options (``--zookeeper``, ``--bootstrap-server``) and the glue that turns
each place into a :class:`~kafkatool.log.topic_settings.ConfigLayer`; the
resolution order and the one broker -> topic map are in
:mod:`kafkatool.log.topic_settings`.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime
from pathlib import Path

import typer

from kafkatool.commands.common import CommandError, console, emit_json
from kafkatool.commands.common import zookeeper_option as common_zookeeper_option
from kafkatool.log import topic_settings as ts

SOURCES_HELP = """Topic configs are read from every place Kafka keeps them: the log dir's
embedded metadata (kafkatool-cluster.json, written by kafkatool serve, and the
dynamic broker configs it keeps in kafkatool-dynamic-broker-configs.json, such as a
log.retention.ms set at runtime, which override server.properties), a KRaft
__cluster_metadata log in the log dir (topic configs, and dynamic broker
configs that override server.properties), ZooKeeper /config/topics/TOPIC and
/config/brokers/<default> and /config/brokers/ID (--zookeeper) and a live
cluster (--bootstrap-server, DescribeConfigs);
__consumer_offsets and __transaction_state are compacted by definition, and a
partition listed in the dir's cleaner-offset-checkpoint is treated as
compacted when no source says otherwise.  A dir that holds both (kafkatool
serve ran on a dir a KRaft broker wrote) is read as serve reads it: a topic
kafkatool-cluster.json holds has its configs from there alone, changes and
deletions made through serve included, the KRaft log's are not used for it.  Dynamic broker configs are taken as a
broker takes them at start-up: one Kafka would not take (an invalid value, a
read-only config) is left out with a warning, and a set a broker could not run
with is not used at all.  The broker's own dynamic configs are those of the node
id in the log dir's meta.properties, or of --config's node.id (broker.id) when
it sets one, as a broker started with it would take them (a warning says when
the two differ).  The output names the source of each value."""

ZOOKEEPER_HELP = "ZooKeeper host:port[/chroot]: read topic configs from /config/topics/TOPIC."
BOOTSTRAP_HELP = "host:port of a live cluster: read topic configs with DescribeConfigs."


def zookeeper_option():
    return common_zookeeper_option(ZOOKEEPER_HELP)


def bootstrap_option():
    return typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT", help=BOOTSTRAP_HELP, show_default=False
    )


def zookeeper_layer(zookeeper: str, topics: list[str], broker_id: int | None = None) -> ts.ConfigLayer:
    from kafkatool.commands.zk import connect
    from kafkatool.zk.client import ZkError

    layer = ts.ConfigLayer(ts.SOURCE_ZOOKEEPER)
    try:
        with connect(zookeeper, 10.0, writable=False) as zk:
            for t in topics:
                entity = zk.entity_config("topics", t)
                if entity is None:
                    continue
                if entity.error:
                    layer.notes.append(f"{entity.path}: {entity.error}")
                    continue
                layer.topics[t] = dict(entity.config.config) if entity.config else {}
            # dynamic broker configs: the cluster default, then this dir's broker (Kafka's order)
            for name, target in (("<default>", layer.broker_default), (broker_id, layer.broker_node)):
                if name is None:
                    continue
                entity = zk.entity_config("brokers", str(name))
                if entity is not None and entity.config is not None and not entity.error:
                    target.update(entity.config.config)
    except ZkError as exc:
        raise CommandError(f"--zookeeper {zookeeper}: {exc}") from None
    return layer


def cluster_layers(bootstrap: str, topics: list[str]) -> list[ts.ConfigLayer]:
    from kafkatool.assign.kafka_client import (
        CONFIG_SOURCE_TOPIC,
        KafkaAdmin,
        KafkaAdminError,
        describe_topic_configs,
    )

    topic_layer = ts.ConfigLayer(f"{ts.SOURCE_CLUSTER}: topic config")
    broker_layer = ts.ConfigLayer(f"{ts.SOURCE_CLUSTER}: broker config")
    try:
        with KafkaAdmin(bootstrap, timeout=10.0) as admin:
            found = describe_topic_configs(admin, topics)
    except KafkaAdminError as exc:
        raise CommandError(f"--bootstrap-server {bootstrap}: {exc}") from None
    for t, configs in found.items():
        topic_layer.topics[t] = {k: v for k, (v, src) in configs.items() if src == CONFIG_SOURCE_TOPIC}
        broker_layer.topics[t] = {k: v for k, (v, src) in configs.items() if src != CONFIG_SOURCE_TOPIC}
    for t in topics:
        if t not in found:
            topic_layer.notes.append(f"the cluster at {bootstrap} has no topic {t}")
    return [topic_layer, broker_layer]


def gather_layers(
    log_dirs: list[Path],
    topics: list[str],
    *,
    zookeeper: str | None,
    bootstrap: str | None,
    broker_id: int | None = None,
) -> list[ts.ConfigLayer]:
    """Every source of topic configs the options and the log dirs name, highest priority first."""
    layers: list[ts.ConfigLayer] = []
    if bootstrap:
        layers += cluster_layers(bootstrap, topics)
    if zookeeper:
        layers.append(zookeeper_layer(zookeeper, topics, broker_id))
    layers += ts.dir_layers(log_dirs)
    return layers


def cleaner_checkpoint_layer(topics: list[str]) -> ts.ConfigLayer:
    """Evidence in the dir: the log cleaner only keeps offsets for compacted partitions."""
    return ts.ConfigLayer(ts.SOURCE_CLEANER_CHECKPOINT, {t: {"cleanup.policy": "compact"} for t in topics})


def configured_node_id(server_props: dict[str, str]) -> int | None:
    """The node id a --config names (node.id, else broker.id, as the broker reads them), None
    when it names none."""
    from kafkatool.broker.config import BrokerConfig, ConfigError

    try:
        return BrokerConfig(dict(server_props)).explicit_node_id
    except ConfigError as exc:
        raise CommandError(f"--config: {exc}") from None


class TopicConfigs:
    """Resolves partitions' settings for one command run (sources are read once)."""

    def __init__(
        self,
        log_dirs: list[Path],
        topics: list[str],
        *,
        server_props: dict[str, str],
        topic_overrides: dict[str | None, dict[str, str]],
        flags: dict[str, object],
        zookeeper: str | None = None,
        bootstrap: str | None = None,
    ):
        self.server_props = server_props
        self.topic_overrides = topic_overrides
        self.flags = flags
        #: the broker whose own dynamic configs apply: --config's node.id (a broker started with
        #: it would use it), else each log dir's meta.properties
        self.node_id = configured_node_id(server_props)
        broker_id = self.node_id
        if broker_id is None:
            broker_id = next((b for b in map(ts.node_id_of, log_dirs) if b is not None), None)
        self.external = gather_layers(
            [], topics, zookeeper=zookeeper, bootstrap=bootstrap, broker_id=broker_id
        )
        for layer in self.external:
            if layer.label == ts.SOURCE_ZOOKEEPER:
                self._take_dynamic(layer, "/config/brokers/<default>", f"/config/brokers/{broker_id}")
        self._dirs: dict[Path, list[ts.ConfigLayer]] = {}
        self.notes: list[str] = [n for layer in self.external for n in layer.notes]
        for d in log_dirs:
            self._dir_layers(d)

    def _dir_layers(self, log_dir: Path) -> list[ts.ConfigLayer]:
        key = Path(log_dir)
        if key not in self._dirs:
            from kafkatool.broker.config import OFFLINE_RULE
            from kafkatool.formats.properties import META_PROPERTIES_FILE
            from kafkatool.log import dynamic_log_config as dlc

            stored = ts.node_id_of(key)
            node = self.node_id if self.node_id is not None else stored
            if stored is not None and node != stored:
                self.notes.append(
                    f"{key / META_PROPERTIES_FILE} says node {stored}, --config node {node} (a broker "
                    f"refuses to start with both); the dynamic broker configs of node {node} are used"
                )
            layers = ts.dir_layers([key], node)
            dlc.take_dir_layers(key, layers, node, self.server_props, OFFLINE_RULE)
            self._dirs[key] = layers
            self.notes += [n for layer in layers for n in layer.notes]
        return self._dirs[key]

    def _take_dynamic(self, layer: ts.ConfigLayer, where_default: str, where_node: str) -> None:
        """A place's dynamic broker configs as a broker takes them at start-up: an invalid value
        is left out with a note, the rest applies (Kafka's DynamicBrokerConfig)."""
        from kafkatool.broker.config import take_layer_dynamic

        take_layer_dynamic(layer, self.server_props, (where_default, where_node))

    def broker_layers(self) -> list[ts.ConfigLayer]:
        """Every place read, highest first: the options' (ZooKeeper), then each log dir's."""
        return self.external + [la for d in self._dirs for la in self._dirs[d]]

    def broker_setting(self, name: str) -> tuple[float, str]:
        """A broker-only cleaner setting (log.cleaner.dedupe.buffer.size...) as the broker of these
        dirs runs with it: its dynamic configs over server.properties over Kafka's default
        (log/topic_settings.broker_values, the order of a topic's defaults)."""
        try:
            return ts.broker_setting(self.server_props, name, self.broker_layers())
        except ts.SettingsError as exc:
            raise CommandError(str(exc)) from None

    def broker_set_value(self, name: str) -> tuple[str, str] | None:
        """(value, source) of a broker setting set in one of the places read or server.properties
        (:meth:`broker_setting`'s order), None: unset."""
        return ts.broker_set_value(name, self.server_props, self.broker_layers())

    def resolve(self, log_dir: Path, topic: str, *, in_cleaner_checkpoint: bool = False) -> ts.ResolvedConfig:
        layers = self.external + self._dir_layers(log_dir)
        if in_cleaner_checkpoint:
            layers = [*layers, cleaner_checkpoint_layer([topic])]
        try:
            return ts.resolve(
                topic,
                server_props=self.server_props,
                topic_overrides=self.topic_overrides,
                layers=layers,
                flags=self.flags,
            )
        except (ts.SettingsError, ValueError) as exc:
            raise CommandError(f"topic {topic}: {exc}") from None

    @classmethod
    def of_log_dirs(cls, log_dirs, flags: dict[str, object]) -> TopicConfigs:
        """Settings from the log dirs' own metadata and the command's flags alone
        (recover, rebuild-index: no server.properties, no cluster)."""
        return cls(list(log_dirs), [], server_props={}, topic_overrides={}, flags=flags)

    def of_partition_dir(self, log_dir: Path, part_dir: Path):
        """The LogConfig of a partition dir (its topic by the dir's name; the whole name when
        that is not topic-N)."""
        from kafkatool.log.log import parse_topic_partition

        tp = parse_topic_partition(part_dir.name)
        return self.resolve(log_dir, tp[0] if tp else part_dir.name).config


def policy_text(resolved: ts.ResolvedConfig) -> str:
    return ",".join(resolved.config.cleanup_policy)


def policy_override(resolved: ts.ResolvedConfig, needs: str, lost: str) -> tuple[list[str], list[dict]]:
    """(notes, overrides named) when --cleanup-policy replaced the topic's own cleanup.policy;
    ``lost`` is said when the replaced policy lacks ``needs`` (what the command does)."""
    below = resolved.below_flag("cleanup.policy")
    if below is None:
        return [], []
    old_value, old_source = below
    policy = policy_text(resolved)
    if old_value == policy:
        return [], []
    return (
        [
            f"OVERRIDE: cleanup.policy={old_value} (from {old_source}) replaced by {policy} (--cleanup-policy)"
            + (f"; {lost}" if needs not in old_value else "")
        ],
        [{"config": "cleanup.policy", "from": old_value, "source": old_source, "to": policy}],
    )


# ------------------------------------------------------- shared by the offline commands


def parse_now(value: str | None, *, flag: str = "--now") -> int:
    """Epoch milliseconds, or an ISO-8601 time (UTC when no zone is given)."""
    if value is None:
        return int(time.time() * 1000)
    v = value.strip()
    if v.lstrip("-").isdigit():
        return int(v)
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"{flag} {value!r}: expected epoch milliseconds or an ISO-8601 time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def load_settings(server_config: Path | None, topic_config: list[str]):
    """server.properties and --topic-config overrides, as the offline commands take them."""
    try:
        props = ts.load_server_properties(server_config) if server_config is not None else {}
        overrides = ts.parse_topic_overrides(topic_config or [])
    except ts.SettingsError as exc:
        raise CommandError(str(exc)) from None
    return props, overrides


def server_config_option():
    """--config, as the offline commands that read broker defaults take it."""
    return typer.Option(
        None,
        "--config",
        metavar="SERVER.PROPERTIES",
        help="The broker's server.properties (broker defaults).",
    )


def topic_config_option():
    return typer.Option(
        [], "--topic-config", metavar="[TOPIC:]KEY=VALUE", help="A topic config override (repeatable)."
    )


def now_option():
    return typer.Option(None, "--now", help="The current time: epoch ms or ISO-8601 (default: the clock).")


def warn(json_out: bool, where: str, text: str) -> None:
    """A warning of compact and retention: a JSON line, or a yellow line."""
    if json_out:
        emit_json({"type": "warning", "where": where, "message": text})
    else:
        console.print(f"[yellow]warning:[/] {text}")


@contextlib.contextmanager
def maintenance_dir(log_dir: Path, *, dry_run: bool, json_out: bool, now_ms: int):
    """One log dir of compact or retention under its LogManager (locked unless --dry-run):
    yields (manager, its state of the dir) after showing the dir's warnings."""
    from kafkatool.log.manager import LogManager

    manager = LogManager([log_dir], writable=not dry_run, load=False, clock=lambda: now_ms)
    state = manager.state_of(log_dir)
    if dry_run and state.locked_by_other and not json_out:
        console.print(f"[yellow]note:[/] {log_dir} is locked by a running process; a real run would refuse")
    with manager:
        for w in state.warnings:
            warn(json_out, str(log_dir), w)
        yield manager, state


def targets(paths: list[Path]):
    """PATH... -> partition dirs by log dir (LogManager's one rule; not Kafka data: exit 2)."""
    from kafkatool.log.manager import find_targets

    return find_targets(paths)


def targets_and_configs(paths: list[Path], props, overrides, flags, zookeeper, bootstrap):
    """PATH... grouped by log dir, and every named topic's effective configuration."""
    groups = targets(paths)
    configs = TopicConfigs(
        [g.log_dir for g in groups],
        sorted({tp[0] for g in groups for _, tp in g.partitions}),
        server_props=props,
        topic_overrides=overrides,
        flags=flags,
        zookeeper=zookeeper,
        bootstrap=bootstrap,
    )
    return groups, configs


def index_interval_option():
    """--index-interval-bytes, as recover and rebuild-index take it."""
    return typer.Option(
        None,
        "--index-interval-bytes",
        metavar="N",
        min=0,
        help="index.interval.bytes for every topic (default: each topic's own, from the log dir's "
        "metadata or Kafka's 4096).",
    )
