"""``kafkatool configs``: kafka-configs.sh's --describe and --alter for topics, brokers, users and
clients through a cluster or ZooKeeper, and ``diff --desired FILE`` (with ``--apply``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer
from typer.core import TyperCommand

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    CommandError,
    command_config_option,
    console,
    emit_json,
    handle_errors,
    modify_exit,
    zookeeper_option,
    zookeeper_timeout_option,
)

HELP = (
    "Configs like kafka-configs.sh: describe and alter topics, brokers (dynamic configs), users and clients "
    "through --bootstrap-server or --zookeeper; diff a desired state (YAML or JSON) against a cluster and "
    "--apply it."
)
ENTITY_HELP = "topics, brokers, broker-loggers, users or clients."
_SINGULAR = {
    "topics": "topic",
    "brokers": "broker",
    "broker-loggers": "broker-logger",
    "users": "user",
    "clients": "client",
}


def _entity(entity_type: str, entity_name: str | None) -> str | None:
    """The one entity of a single --entity-type: its name, None the default ("" from
    --entity-default or an empty --entity-name, as ConfigCommand)."""
    from kafkatool.assign.configs import ENTITY_TYPES, broker_id_check

    if entity_type not in ENTITY_TYPES:
        raise CommandError(f"--entity-type {entity_type!r}: one of {', '.join(ENTITY_TYPES)}")
    if entity_name == "" and entity_type == "topics":
        raise CommandError("--entity-default is for brokers, users and clients")
    if entity_name is None:
        raise CommandError("give --entity-name NAME (or --entity-default)")
    broker_id_check(entity_type, entity_name)
    return entity_name or None


class EntityOrderCommand(TyperCommand):
    """--entity-name and --entity-default as ConfigCommand takes them (ConfigCommandOptions.entityNames):
    one list of names in their command-line order, "" for each --entity-default, the first name
    for the first --entity-type, the second for the second. The parse gives --entity-name that
    list; --entity-default stays true when one was given."""

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args):
            opts, rest, order = parse(args)
            given = iter(opts.get("entity_name") or [])
            names = [next(given) if p.name == "entity_name" else "" for p in order
                     if p.name in ("entity_name", "entity_default")]  # fmt: skip
            if names:
                opts["entity_name"] = names
            return opts, rest, order

        parser.parse_args = parse_args
        return parser


def _entities(types: list[str], names: list[str], *, describe: bool) -> list[tuple[str, str | None]] | None:
    """kafka-configs.sh's users and clients entities: up to two --entity-type (users and clients, in
    either order), the names (``names``: _entity_names) matched to them in order, "" the default
    and, for describe, a type without a name any entity of it (None); None for the other entity
    types (one of them)."""
    if not any(t in ("users", "clients") for t in types):
        return None
    if len(set(types)) != len(types):
        dups = [t for i, t in enumerate(types) if t in types[:i]]
        raise CommandError(f"Duplicate entity type(s) specified: {','.join(dups)}")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise CommandError("Only 'users' and 'clients' entity types may be specified together")
    if not describe and not names:
        raise CommandError(
            "an entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
        )
    if not describe and len(names) != len(types):
        raise CommandError("An entity name must be specified for every entity type")
    if len(names) > len(types):
        raise CommandError("More entity names specified than entity types")
    return [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]


def _sources(bootstrap_server: str | None, zookeeper: str | None) -> None:
    if (bootstrap_server is None) == (zookeeper is None):
        raise CommandError("give exactly one of --bootstrap-server and --zookeeper")


def _label(entity_type: str, name: str | None) -> str:
    if name is None:
        return f"the default {_SINGULAR[entity_type]}"
    return f"{_SINGULAR[entity_type]} {name}"


# the options describe and alter share (one declaration each); _entity() checks them
def _entity_type_option():
    return typer.Option(
        ...,
        "--entity-type",
        metavar="TYPE",
        help=ENTITY_HELP + " Twice for a user's client id: users and clients.",
    )


def _entity_name_option():
    return typer.Option(
        None,
        "--entity-name",
        metavar="NAME",
        help="The topic, broker id, user or client id, one per --entity-type (a user principal or client "
        "id is kept in ZooKeeper under Kafka's sanitized name: alice@EXAMPLE.COM at "
        "/config/users/alice%40EXAMPLE.COM).",
    )


def _entity_default_option():
    return typer.Option(
        False,
        "--entity-default",
        help="The cluster-wide default (brokers, users, clients). With two entity types the names "
        "(--entity-name, --entity-default) go to the types in their command-line order, as "
        "kafka-configs.sh: --entity-type users --entity-type clients --entity-default is the "
        "default user's quotas for any client id; --entity-type users --entity-default "
        "--entity-type clients --entity-default the default user's default client id.",
    )


@handle_errors
def describe(
    entity_type: list[str] = _entity_type_option(),
    entity_name: list[str] | None = _entity_name_option(),
    entity_default: bool = _entity_default_option(),
    all_configs: bool = typer.Option(
        False, "--all", help="Every config, not only the dynamic ones (through --bootstrap-server)."
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT", help="The cluster to ask (DescribeConfigs)."
    ),
    command_config: str | None = command_config_option(),
    zookeeper: str | None = zookeeper_option(
        "Read /config/<type>/<name> instead (users and brokers only, as Kafka 3.7's kafka-configs.sh; "
        "a broker only while it is not running, the default only while no broker is: refused, exit 2, "
        "while one is registered in /brokers/ids)."
    ),
    timeout: float = zookeeper_timeout_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """An entity's configs in kafka-configs.sh --describe's lines (users and clients: their
    quotas, through --bootstrap-server DescribeClientQuotas, and a user's SCRAM mechanisms)."""
    from kafkatool.assign import configs as C

    _sources(bootstrap_server, zookeeper)
    if zookeeper is not None:
        C.zk_entity_types_check(entity_type)
    quota_entities = _entities(entity_type, entity_name or [], describe=True)
    if quota_entities is not None:
        _describe_quotas(quota_entities, bootstrap_server, zookeeper, timeout, json_out)
    entity_type, entity_name = _single(entity_type, entity_name)
    name = _entity(entity_type, entity_name)
    if zookeeper is not None:
        if all_configs:
            raise CommandError("--all needs --bootstrap-server (ZooKeeper holds only the dynamic configs)")
        from kafkatool.commands.zk import connect

        with connect(zookeeper, timeout, writable=False) as zk:
            if entity_type == "brokers":
                with _refusal_json(json_out, entity_type, name):
                    C.zk_brokers_not_running(
                        zk, name, "--bootstrap-server option must be specified to describe brokers"
                    )
            if not json_out:  # describeConfigWithZk's one line, as for users
                for line in C.describe_zk_lines(zk, entity_type, C.zk_name(entity_type, name)):
                    console.print(line, highlight=False)
                raise typer.Exit(EXIT_OK)
            entries = C.describe_zk(zk, entity_type, name)
    else:
        from kafkatool.assign.kafka_client import KafkaAdmin

        with KafkaAdmin(bootstrap_server, client_id="kafkatool-configs") as admin:
            entries = C.describe_live(admin, entity_type, name, all_configs=all_configs)
    if json_out:
        for e in entries:
            emit_json(
                {
                    "type": "config",
                    "entity_type": entity_type,
                    "entity": name,
                    "name": e.name,
                    "value": None if e.sensitive else e.value,
                    "source": e.source,
                    "sensitive": e.sensitive,
                    "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms],
                }  # fmt: skip
            )
        raise typer.Exit(EXIT_OK)
    what = "All" if all_configs else "Dynamic"
    console.print(f"{what} configs for {_label(entity_type, name)} are:")
    for e in entries:
        value = "null" if e.sensitive else e.value
        syn = ", ".join(f"{s}:{n}={'null' if e.sensitive else v}" for n, v, s in e.synonyms)
        console.print(f"  {e.name}={value} sensitive={'true' if e.sensitive else 'false'} synonyms={{{syn}}}")
    raise typer.Exit(EXIT_OK)


@contextlib.contextmanager
def _refusal_json(json_out: bool, entity_type: str, name: str | None) -> Iterator[None]:
    """A refusal of the ZooKeeper path (BrokersRunningError) with --json: one error object on
    stdout too; the line on stderr and the exit status are handle_errors'."""
    from kafkatool.assign.configs import BrokersRunningError

    try:
        yield
    except BrokersRunningError as exc:
        if json_out:
            emit_json({"type": "error", "entity_type": entity_type, "entity": name, "message": str(exc)})
        raise


def _single(types: list[str], names: list[str] | None) -> tuple[str, str | None]:
    if len(types) != 1:
        raise CommandError("give one --entity-type (two only for users then clients)")
    names = list(names or [])
    if len(names) > 1:
        raise CommandError("More entity names specified than entity types")
    return types[0], (names[0] if names else None)


def _describe_quotas(entities, bootstrap_server, zookeeper, timeout: float, json_out: bool) -> None:
    """kafka-configs.sh --describe of users and clients (exits)."""
    from kafkatool.assign import configs as C

    if zookeeper is not None:  # users alone (zk_entity_types_check)
        from kafkatool.commands.zk import connect

        ((etype, n),) = entities
        name = None if n is None else C.zk_name(etype, n or None)
        with connect(zookeeper, timeout, writable=False) as zk:
            lines = C.describe_zk_lines(zk, etype, name)
        for line in lines:
            emit_json({"type": "config_line", "line": line}) if json_out else console.print(
                line, highlight=False
            )
        raise typer.Exit(EXIT_OK)
    from kafkatool.assign.kafka_client import KafkaAdmin

    with KafkaAdmin(bootstrap_server, client_id="kafkatool-configs") as admin:
        found = C.describe_quotas_live(admin, entities)
        names = [n for _, n in entities]
        scram = []
        if all(t == "users" for t, _ in entities) and "" not in names:
            scram = C.describe_scram_live(admin, [n for n in names if n is not None])
    if json_out:
        for entity, values in found:
            emit_json({"type": "quota", "entity": entity, "values": values})
        for line in scram:
            emit_json({"type": "config_line", "line": line})
        raise typer.Exit(EXIT_OK)
    for entity, values in found:
        console.print(C.quota_line(entity, values), highlight=False)
    for line in scram:
        console.print(line, highlight=False)
    raise typer.Exit(EXIT_OK)


@handle_errors
def alter(
    entity_type: list[str] = _entity_type_option(),
    entity_name: list[str] | None = _entity_name_option(),
    entity_default: bool = _entity_default_option(),
    add_config: str | None = typer.Option(
        None,
        "--add-config",
        metavar="K=V,K2=[A,B]",
        help="Configs to set (kafka-configs.sh's syntax; [..] groups a list).",
    ),
    delete_config: str | None = typer.Option(
        None, "--delete-config", metavar="K,K2", help="Configs to remove."
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT", help="The cluster (IncrementalAlterConfigs)."
    ),
    command_config: str | None = command_config_option(),
    zookeeper: str | None = zookeeper_option(
        "Write /config/<type>/<name> and its change notification instead: a user's SCRAM credentials "
        "(salted here) or a broker's dynamic configs, the only ones Kafka 3.7's kafka-configs.sh "
        "alters through ZooKeeper (quotas and topics need --bootstrap-server). A broker's configs only "
        "while it is not running, the default only while no broker is (refused, exit 2, while one is "
        "registered in /brokers/ids: use --bootstrap-server); checked as Kafka's "
        "DynamicBrokerConfig checks them; password.encoder.* is never written, and a password config "
        "needs password.encoder.secret and is stored encrypted with it as Kafka's PasswordEncoder "
        "stores it (password.encoder.cipher.algorithm, .keyfactory.algorithm, .key.length and "
        ".iterations as given, else Kafka's defaults)."
    ),
    timeout: float = zookeeper_timeout_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Set and delete an entity's dynamic configs (kafka-configs.sh --alter)."""
    from kafkatool.assign import configs as C

    _sources(bootstrap_server, zookeeper)
    if zookeeper is not None:
        C.zk_entity_types_check(entity_type)
    quota_entities = _entities(entity_type, entity_name or [], describe=False)
    if quota_entities is not None and bootstrap_server is not None:
        sets = C.parse_add_config(add_config) if add_config else {}
        deletes = C.parse_delete_config(delete_config) if delete_config else []
        if not sets and not deletes:
            raise CommandError("give --add-config and/or --delete-config")
        from kafkatool.assign.kafka_client import KafkaAdmin

        with KafkaAdmin(bootstrap_server, client_id="kafkatool-configs") as admin:
            C.alter_quotas_live(admin, quota_entities, sets, deletes)
        etype, ename = quota_entities[0]
        if json_out:
            emit_json({"type": "config", "entity_type": etype, "entity": ename or None,
                       "entities": [{"type": t, "name": n or None} for t, n in quota_entities],
                       "set": sets, "deleted": deletes})  # fmt: skip
        elif ename:
            console.print(f"Completed updating config for {_SINGULAR[etype]} {ename}.")
        else:
            console.print(f"Completed updating default config for {etype} in the cluster.")
        raise typer.Exit(EXIT_OK)
    entity_type, entity_name = _single(entity_type, entity_name)
    name = _entity(entity_type, entity_name)
    sets = C.parse_add_config(add_config) if add_config else {}
    deletes = C.parse_delete_config(delete_config) if delete_config else []
    if not sets and not deletes:
        raise CommandError("give --add-config and/or --delete-config")
    if zookeeper is not None and entity_type == "users":
        C.zk_user_check(sets, deletes)
        sets = C.zk_scram_credentials(sets)
    if zookeeper is not None:
        from kafkatool.commands.zk import connect

        with connect(zookeeper, timeout) as zk:
            if entity_type == "brokers":
                with _refusal_json(json_out, entity_type, name):  # the configs as given
                    C.zk_brokers_not_running(zk, name, C.zk_update_error(entity_type, sets, deletes))
                sets = C.zk_broker_configs(sets, per_broker=name is not None)
            C.alter_zk(zk, entity_type, name, sets, deletes)
    else:
        from kafkatool.assign.kafka_client import KafkaAdmin

        if entity_type == "topics":
            C.validate_topic_keys(sets)
        with KafkaAdmin(bootstrap_server, client_id="kafkatool-configs") as admin:
            C.alter_live(admin, entity_type, name, sets, deletes)
    if json_out:
        emit_json(
            {
                "type": "config",
                "entity_type": entity_type,
                "entity": name,
                "deleted": deletes,
                # a SCRAM credential ZooKeeper keeps is not shown (as describe's sensitive values)
                "set": {k: None if entity_type == "users" else v for k, v in sets.items()},
            }  # fmt: skip
        )
    elif zookeeper is not None:
        # alterConfigWithZk's line: the entity as ConfigCommand's ConfigEntity prints it
        label = C.zk_entity_label(entity_type, C.zk_name(entity_type, name))
        console.print(f"Completed updating config for entity: {label}.", highlight=False)
    elif name is None:
        console.print(f"Completed updating default config for {entity_type} in the cluster.")
    else:
        console.print(f"Completed updating config for {_SINGULAR[entity_type]} {name}.")
    raise typer.Exit(EXIT_OK)


@handle_errors
def diff(
    desired: Path = typer.Option(
        ...,
        "--desired",
        metavar="FILE",
        help="YAML or JSON: {topics: {NAME: {partitions, replication_factor, config: {k: v}}}}.",
    ),
    apply_: bool = typer.Option(False, "--apply", help="Make the cluster so (without it: a dry run)."),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", metavar="HOST:PORT", help="The cluster."),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The per-key difference between a desired state and the cluster (a value equal to the
    default a topic inherits is no drift); --apply creates topics, adds partitions, sets and
    deletes configs. Replication-factor changes and fewer partitions are reported, never applied
    (use kafkatool reassign). Exit 1 on drift in a dry run, or when something could not be applied."""
    from kafkatool.assign import configs as C
    from kafkatool.assign.kafka_client import KafkaAdmin

    try:
        text = desired.read_text()
    except OSError as exc:
        raise CommandError(f"{desired}: {exc.strerror or exc}") from None
    want = C.load_desired(text, str(desired))
    with KafkaAdmin(bootstrap_server, client_id="kafkatool-configs") as admin:
        drift = C.diff(admin, want)
        results = C.apply(admin, want, drift) if apply_ else []
    errors = {id(d): e for d, e in results if e}
    unapplied = [d for d in drift if not d.action]
    for d in drift:
        if json_out:
            emit_json(
                {
                    "type": "drift",
                    "topic": d.topic,
                    "kind": d.kind,
                    "key": d.key,
                    "desired": d.desired,
                    "actual": d.actual,
                    "action": d.action or None,
                    "applied": apply_ and bool(d.action) and id(d) not in errors,
                    "error": errors.get(id(d)),
                }  # fmt: skip
            )
            continue
        what = d.key or d.kind
        state = (
            "not applied (kafkatool reassign)" if not d.action else
            (f"FAILED: {errors[id(d)]}" if id(d) in errors else ("applied" if apply_ else f"would {d.action.replace('_', ' ')}"))
        )  # fmt: skip
        console.print(
            f"{d.topic}: {what}: {d.actual if d.actual is not None else '(none)'} -> {d.desired if d.desired is not None else '(remove)'}  [{state}]"
        )
    if json_out:
        emit_json(
            {
                "type": "summary",
                "drift": len(drift),
                "applied": apply_,
                "failed": len(errors),
                "not_applicable": len(unapplied),
            }
        )
    elif not drift:
        console.print(f"no drift: {len(want)} topics as desired")
    if errors or (apply_ and unapplied):
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(modify_exit(dry_run=not apply_, would_change=bool(drift), remaining=False))


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="configs", help=HELP, no_args_is_help=True)
    sub.command("describe", cls=EntityOrderCommand)(describe)
    sub.command("alter", cls=EntityOrderCommand)(alter)
    sub.command("diff")(diff)
    app.add_typer(sub, name="configs")
