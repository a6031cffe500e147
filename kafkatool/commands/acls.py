"""``kafkatool acls``: kafka-acls.sh — list, add and remove ACLs through a cluster
(Describe/Create/DeleteAcls) or offline on a stopped ``kafkatool serve``'s log dir (its embedded
metadata, under the dir's lock), with Kafka's options and output lines."""

from __future__ import annotations

from pathlib import Path

import typer

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
)

HELP = (
    "ACLs like kafka-acls.sh: --list, --add, --remove for topics, groups, the cluster, transactional "
    "ids, user principals (CreateTokens, DescribeTokens) and delegation tokens (Describe), through --bootstrap-server or offline on a stopped kafkatool serve's log dir (--log-dir)."
)


def _pattern(p) -> str:
    from kafkatool.broker.security import acl as A

    return f"ResourcePattern(resourceType={A.RESOURCE_TYPES[p[0]]}, name={p[1]}, patternType={A.PATTERN_TYPES[p[2]]})"


def _entry(b) -> str:
    from kafkatool.broker.security import acl as A

    return (
        f"(principal={b.principal}, host={b.host}, operation={A.OPERATIONS[b.operation]}, "
        f"permissionType={A.PERMISSIONS[b.permission]})"
    )


def _print_grouped(title: str, bindings) -> None:
    by: dict[tuple, list] = {}
    for b in bindings:
        by.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    for p, bs in sorted(by.items()):
        console.print(f"{title} `{_pattern(p)}`: ")
        for b in bs:
            console.print(f" \t{_entry(b)} ")
        console.print()


def _resources(topic, group, cluster, transactional_id, pattern: int, users=(), tokens=()):
    from kafkatool.broker.security import acl as A

    out = [(A.TOPIC, t, pattern) for t in topic or []]
    out += [(A.GROUP, g, pattern) for g in group or []]
    out += [(A.TRANSACTIONAL_ID, t, pattern) for t in transactional_id or []]
    out += [(A.DELEGATION_TOKEN, t, pattern) for t in tokens or []]
    out += [(A.USER, u, pattern) for u in users or []]
    if cluster:
        out.append((A.CLUSTER, A.CLUSTER_NAME, A.LITERAL))
    return out


def _ops(names: list[str] | None, resource_type: int, producer: bool, consumer: bool, idempotent: bool):
    """The operations for a resource: --operation (default All), or --producer/--consumer's sets."""
    from kafkatool.broker.security import acl as A

    if producer or consumer:
        ops = set()
        if producer:
            ops |= {
                A.TOPIC: {A.WRITE, A.DESCRIBE, A.CREATE},
                A.TRANSACTIONAL_ID: {A.WRITE, A.DESCRIBE},
                A.CLUSTER: {A.IDEMPOTENT_WRITE} if idempotent else set(),
            }.get(resource_type, set())
        if consumer:
            ops |= {A.TOPIC: {A.READ, A.DESCRIBE}, A.GROUP: {A.READ}}.get(resource_type, set())
        return sorted(ops)
    out = []
    for n in names or ["All"]:
        key = n.strip().upper().replace("-", "_")
        key = {"CLUSTERACTION": "CLUSTER_ACTION", "DESCRIBECONFIGS": "DESCRIBE_CONFIGS", "ALTERCONFIGS": "ALTER_CONFIGS",
               "IDEMPOTENTWRITE": "IDEMPOTENT_WRITE", "CREATETOKENS": "CREATE_TOKENS",
               "DESCRIBETOKENS": "DESCRIBE_TOKENS"}.get(key, key)  # fmt: skip
        if key not in A.OP or A.OP[key] in (0, 1):
            raise CommandError(
                f"--operation {n!r}: not one of {', '.join(v for k, v in A.OPERATIONS.items() if k > 1)}"
            )
        out.append(A.OP[key])
    return out


def _store(log_dir: Path, writable: bool):
    from kafkatool.commands.users import _store as users_store

    return users_store(log_dir, writable)


@handle_errors
def acls(
    list_: bool = typer.Option(False, "--list", help="List the ACLs (of the given resources, or all)."),
    add: bool = typer.Option(False, "--add", help="Add ACLs."),
    remove: bool = typer.Option(False, "--remove", help="Remove ACLs."),
    topic: list[str] = typer.Option(
        None, "--topic", metavar="TOPIC", help="A topic resource (repeatable; * for all)."
    ),
    group: list[str] = typer.Option(
        None, "--group", metavar="GROUP", help="A consumer group resource (repeatable)."
    ),
    cluster: bool = typer.Option(False, "--cluster", help="The cluster resource."),
    transactional_id: list[str] = typer.Option(
        None, "--transactional-id", metavar="ID", help="A transactional id resource."
    ),
    user_principal: list[str] = typer.Option(
        None,
        "--user-principal",
        metavar="User:NAME",
        help="A user principal resource (CreateTokens: create tokens for it; DescribeTokens: see its tokens).",
    ),
    delegation_token: list[str] = typer.Option(
        None, "--delegation-token", metavar="TOKEN_ID", help="A delegation token resource (Describe)."
    ),
    pattern_type: str = typer.Option(
        None,
        "--resource-pattern-type",
        metavar="LITERAL|PREFIXED|ANY|MATCH",
        help="LITERAL (default for --add) or PREFIXED; for --list and --remove also ANY (default) and MATCH.",
    ),  # fmt: skip
    allow_principal: list[str] = typer.Option(
        None, "--allow-principal", metavar="User:NAME", help="Principal to allow."
    ),
    deny_principal: list[str] = typer.Option(
        None, "--deny-principal", metavar="User:NAME", help="Principal to deny."
    ),
    allow_host: list[str] = typer.Option(
        None, "--allow-host", metavar="HOST", help="Host of the allow ACLs (default *)."
    ),
    deny_host: list[str] = typer.Option(
        None, "--deny-host", metavar="HOST", help="Host of the deny ACLs (default *)."
    ),
    operation: list[str] = typer.Option(
        None,
        "--operation",
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All.",
    ),
    producer: bool = typer.Option(
        False,
        "--producer",
        help="A producer's ACLs: WRITE, DESCRIBE, CREATE on topics (and WRITE, DESCRIBE on --transactional-id).",
    ),
    consumer: bool = typer.Option(
        False, "--consumer", help="A consumer's ACLs: READ, DESCRIBE on topics, READ on --group."
    ),
    idempotent: bool = typer.Option(
        False, "--idempotent", help="With --producer: IDEMPOTENT_WRITE on the cluster."
    ),
    principal: list[str] = typer.Option(
        None, "--principal", metavar="User:NAME", help="With --list: only this principal's ACLs."
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT", help="The cluster (Describe/Create/DeleteAcls)."
    ),
    command_config: str | None = command_config_option(),
    log_dir: Path | None = typer.Option(
        None, "--log-dir", metavar="DIR", help="A stopped kafkatool serve's log dir."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --log-dir: show the change, write nothing."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List, add or remove ACLs (Kafka's AclAuthorizer bindings)."""
    from kafkatool.broker.security import acl as A

    if sum((list_, add, remove)) != 1:
        raise CommandError("give exactly one of --list, --add, --remove")
    if (bootstrap_server is None) == (log_dir is None):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    if producer and consumer and not add:
        raise CommandError("--producer and --consumer go with --add")
    if pattern_type is None:
        pt = A.LITERAL if add else A.ANY_PATTERN
    else:
        pt = A.PT.get(pattern_type.strip().upper(), 0)
        if pt == 0 or (add and pt not in (A.LITERAL, A.PREFIXED)):
            raise CommandError(
                f"--resource-pattern-type {pattern_type}: {'LITERAL or PREFIXED' if add else 'LITERAL, PREFIXED, ANY or MATCH'}"
            )
    resources = _resources(topic, group, cluster, transactional_id, pt, user_principal, delegation_token)
    if producer and not topic:
        raise CommandError("--producer needs --topic")
    if producer and idempotent:
        resources.append((A.CLUSTER, A.CLUSTER_NAME, A.LITERAL))

    if list_:
        filters = [A.AclFilter(rt, n, p) for rt, n, p in resources] or [A.AclFilter()]
        if principal:
            filters = [
                A.AclFilter(f.resource_type, f.name, f.pattern_type, pr) for f in filters for pr in principal
            ]
        found = _describe(bootstrap_server, log_dir, filters)
        if json_out:
            for b in found:
                emit_json({"type": "acl", **b.to_json()})
        else:
            _print_grouped("Current ACLs for resource", found)
        raise typer.Exit(EXIT_OK)

    entries = [(p, h, A.ALLOW) for p in allow_principal or [] for h in (allow_host or ["*"])]
    entries += [(p, h, A.DENY) for p in deny_principal or [] for h in (deny_host or ["*"])]
    if not resources:
        raise CommandError(
            "name a resource: --topic, --group, --cluster, --transactional-id, --user-principal or --delegation-token"
        )
    if add:
        if not entries:
            raise CommandError("--add needs --allow-principal or --deny-principal")
        bindings = [
            A.AclBinding(rt, n, p, pr, h, op, perm)
            for rt, n, p in resources
            for op in _ops(operation, rt, producer, consumer, idempotent)
            for pr, h, perm in entries
        ]
        errors = _create(bootstrap_server, log_dir, bindings, dry_run)
        bad = [(b, e) for b, e in zip(bindings, errors, strict=True) if e]
        if json_out:
            for b, e in zip(bindings, errors, strict=True):
                emit_json(
                    {"type": "acl", "action": "add", **b.to_json(), "error": e or None, "dry_run": dry_run}
                )
        else:
            _print_grouped(
                "Adding ACLs for resource", [b for b, e in zip(bindings, errors, strict=True) if not e]
            )
            for b, e in bad:
                console.print(
                    f"Error while adding {_entry(b)} on `{_pattern((b.resource_type, b.name, b.pattern_type))}`: {e}"
                )
        if bad:
            raise typer.Exit(EXIT_FINDINGS)
        raise typer.Exit(modify_exit(dry_run=dry_run, would_change=True, remaining=False))
    # remove: the given principals/operations, or everything on the resources
    ops = _ops(operation, A.TOPIC, False, False, False) if operation else [1]
    filters = []
    for rt, n, p in resources:
        if entries:
            filters += [A.AclFilter(rt, n, p, pr, h, op, perm) for pr, h, perm in entries for op in ops]
        else:
            filters += [A.AclFilter(rt, n, p, None, None, op, 1) for op in ops]
    removed = _delete(bootstrap_server, log_dir, filters, dry_run)
    if json_out:
        for b in removed:
            emit_json({"type": "acl", "action": "remove", **b.to_json(), "dry_run": dry_run})
    else:
        _print_grouped(
            "Removing ACLs for resource" if not dry_run else "Would remove ACLs for resource", removed
        )
        if not removed:
            console.print("No ACL matched.")
    raise typer.Exit(modify_exit(dry_run=dry_run, would_change=bool(removed), remaining=False))


# ----------------------------------------------------------------------------- the two sources


def _describe(bootstrap_server, log_dir, filters):
    from kafkatool.broker.security import acl as A

    if log_dir is not None:
        auth = A.Authorizer(_store(log_dir, writable=False), super_users=None, allow_if_no_acl=False)
        found = {b for f in filters for b in auth.describe(f)}
        return sorted(found)
    from kafkatool.broker.security import acl_admin

    with _admin(bootstrap_server) as admin:
        return sorted({b for f in filters for b in acl_admin.describe_live(admin, f)})


def _create(bootstrap_server, log_dir, bindings, dry_run: bool) -> list[str]:
    from kafkatool.broker.security import acl as A

    if log_dir is not None:
        from kafkatool.log.manager import LogManager

        with LogManager([log_dir], writable=not dry_run, load=False):
            store = _store(log_dir, writable=not dry_run)
            auth = A.Authorizer(store, super_users=None, allow_if_no_acl=False)
            return [str(e) if e else "" for e in auth.create(bindings)]
    if dry_run:
        raise CommandError("--dry-run needs --log-dir (CreateAcls has no validate-only mode)")
    from kafkatool.broker.security import acl_admin

    with _admin(bootstrap_server) as admin:
        return acl_admin.create_live(admin, bindings)


def _delete(bootstrap_server, log_dir, filters, dry_run: bool):
    from kafkatool.broker.security import acl as A

    if log_dir is not None:
        from kafkatool.log.manager import LogManager

        with LogManager([log_dir], writable=not dry_run, load=False):
            store = _store(log_dir, writable=not dry_run)
            auth = A.Authorizer(store, super_users=None, allow_if_no_acl=False)
            out = auth.delete(filters)
        errors = [o for o in out if isinstance(o, A.AclError)]
        if errors:
            raise CommandError(str(errors[0]))
        return sorted({b for o in out for b in o})
    if dry_run:
        raise CommandError("--dry-run needs --log-dir (DeleteAcls has no validate-only mode)")
    from kafkatool.broker.security import acl_admin

    with _admin(bootstrap_server) as admin:
        return sorted(set(acl_admin.delete_live(admin, filters)))


def _admin(bootstrap_server: str):
    from kafkatool.assign.kafka_client import KafkaAdmin

    return KafkaAdmin(bootstrap_server, client_id="kafkatool-acls")


def register(app: typer.Typer) -> None:
    app.command("acls", help=HELP)(acls)
