"""``kafkatool users``: SCRAM credentials, like ``kafka-configs.sh --entity-type users``.

Through a cluster (``--bootstrap-server``, ``--command-config``: Describe/AlterUserScramCredentials;
the password is salted here and never sent) or offline on a stopped ``kafkatool serve``'s log
dir (``--log-dir``: the embedded metadata, under the dir's lock, by the broker's own rules).
"""

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
    "SCRAM users (SCRAM-SHA-256/512 credentials) of a cluster through --bootstrap-server, or of a "
    "stopped kafkatool serve's log dir (--log-dir), like kafka-configs.sh --entity-type users."
)


def _source(bootstrap_server: str | None, log_dir: Path | None) -> None:
    if (bootstrap_server is None) == (log_dir is None):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")


def _store(log_dir: Path, writable: bool):
    from kafkatool.broker.metadata import METADATA_FILE, MetadataStore

    path = log_dir / METADATA_FILE
    if not path.is_file():
        raise CommandError(
            f"{log_dir}: no kafkatool serve metadata ({METADATA_FILE}); a Kafka broker keeps SCRAM "
            "credentials in ZooKeeper (/config/users, see `kafkatool zk`) or its KRaft metadata log"
        )
    from kafkatool.log import embedded_metadata

    checked = embedded_metadata.read(path)  # EmbeddedMetadataError: one line, exit 2
    node_id = checked.data.get("node_id", -1) if checked is not None else -1
    return MetadataStore([log_dir], node_id, writable=writable)


def _mech_name(code: int) -> str:
    from kafkatool.broker.security.scram import MECHANISM_CODES

    return MECHANISM_CODES.get(code, f"UNKNOWN({code})")


def _bootstrap_option():
    """--bootstrap-server, as describe and alter take it (one of it or --log-dir)."""
    return typer.Option(
        None,
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="The cluster to ask (Describe/AlterUserScramCredentials).",
    )


def _log_dir_option():
    return typer.Option(None, "--log-dir", metavar="DIR", help="A stopped kafkatool serve's log dir.")


@handle_errors
def describe(
    user: list[str] = typer.Option(
        None, "--user", "--entity-name", metavar="USER", help="A user to describe (repeatable; default: all)."
    ),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: Path | None = _log_dir_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Mechanisms and iterations of each user's SCRAM credentials (never a secret)."""
    from kafkatool.broker.security import users as U

    _source(bootstrap_server, log_dir)
    names = list(user) if user else None
    if log_dir is not None:
        rows = U.describe(_store(log_dir, writable=False), names)
    else:
        from kafkatool.assign.kafka_client import KafkaAdmin

        with KafkaAdmin(bootstrap_server) as admin:
            rows = U.describe_live(admin, names)
    problems = 0
    for name, err, msg, infos in rows:
        creds = [{"mechanism": _mech_name(m), "iterations": i} for m, i in infos]
        problems += bool(err)
        if json_out:
            emit_json({"type": "user", "user": name, "error_code": err, "error": msg, "credentials": creds})
        elif err:
            console.print(f"{name}: {msg} (error {err})")
        else:
            joined = ", ".join(f"{c['mechanism']}=iterations={c['iterations']}" for c in creds)
            console.print(f"SCRAM credential configs for user-principal '{name}' are {joined}")
    raise typer.Exit(EXIT_FINDINGS if problems else EXIT_OK)


@handle_errors
def alter(
    user: str = typer.Option(..., "--user", "--entity-name", metavar="USER", help="The user to change."),
    add_config: str | None = typer.Option(
        None,
        "--add-config",
        metavar="'SCRAM-SHA-256=[iterations=N,password=P],...'",
        help="Credentials to set, in kafka-configs.sh's syntax (iterations default to 4096).",
    ),
    delete_config: str | None = typer.Option(
        None, "--delete-config", metavar="SCRAM-SHA-256,...", help="Mechanisms whose credential to delete."
    ),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: Path | None = _log_dir_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --log-dir: check the change, write nothing."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Set or delete a user's SCRAM credentials; takes effect at the user's next authentication."""
    from kafkatool.broker.security import users as U

    _source(bootstrap_server, log_dir)
    add = U.parse_add_config(add_config) if add_config else []
    delete = U.parse_delete_config(delete_config) if delete_config else []
    if not add and not delete:
        raise CommandError("give --add-config and/or --delete-config")
    if log_dir is not None:
        from kafkatool.log.manager import LogManager

        # the dir's one owner: a real change holds its lock (refused while a broker runs)
        with LogManager([log_dir], writable=not dry_run, load=False):
            results = U.alter_offline(_store(log_dir, writable=not dry_run), user, add, delete)
    else:
        if dry_run:
            raise CommandError("--dry-run needs --log-dir (Kafka's API has no validate-only SCRAM change)")
        from kafkatool.assign.kafka_client import KafkaAdmin

        with KafkaAdmin(bootstrap_server) as admin:
            results = U.alter_live(admin, user, add, delete)
    failed = 0
    for name, err, msg in results:
        failed += bool(err)
        if json_out:
            emit_json(
                {
                    "type": "user",
                    "user": name,
                    "error_code": err,
                    "error": msg,
                    "added": [m for m, _, _ in add] if not err else [],
                    "deleted": delete if not err else [],
                    "dry_run": dry_run,
                }
            )
        elif err:
            console.print(f"{name}: {msg} (error {err})")
        else:
            verb = "Would complete" if dry_run else "Completed"
            console.print(f"{verb} updating config for user {name}.")
    if failed:
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(modify_exit(dry_run=dry_run, would_change=True, remaining=False))


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="users", help=HELP, no_args_is_help=True)
    sub.command("describe")(describe)
    sub.command("alter")(alter)
    app.add_typer(sub, name="users")
