"""``kafkatool delegation-tokens``: Kafka 3.7's kafka-delegation-tokens.sh (DelegationTokenCommand).

Create, renew, expire or describe delegation tokens (KIP-48) through a cluster: the
connection must authenticate (SASL, or SSL with a client certificate) and not with a token,
so ``--command-config`` gives the client's security properties, as for Kafka's tool.  The
output is the tool's, byte for byte (its table, its dates in the machine's time zone); the
broker's refusal of an operation is Kafka's exception line on stderr and exit 1, as the tool's.
"""

from __future__ import annotations

import base64
import binascii
import sys

import typer

from kafkatool.broker.security.token_views import token_date, token_json, token_table
from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    CommandError,
    command_config_option,
    emit_json,
    error_line,
    handle_errors,
)
from kafkatool.formats.java_collections import java_collection_str

HELP = (
    "Create, renew, expire or describe delegation tokens (KIP-48) through a cluster, like Kafka "
    "3.7's kafka-delegation-tokens.sh. Token operations need an authenticated connection "
    "(--command-config: SASL, or SSL with a client certificate) that did not log in with a token. "
    "A client logs in with a token through SCRAM: sasl.jaas.config=org.apache.kafka.common."
    'security.scram.ScramLoginModule required username="<tokenId>" password="<hmac>" '
    'tokenauth="true"; (any kafkatool command\'s --command-config takes it). '
    "Where Kafka 3.7's tool requires --max-life-time-period, --renew-time-period and "
    "--expiry-time-period, they default here to -1, the admin client's defaults (the broker's "
    "delegation.token.max.lifetime.ms; delegation.token.expiry.time.ms; expire at once); "
    "--describe without --owner-principal asks for every token the principal may see (Kafka "
    "3.7's tool sends an empty owner list there, which the broker answers with no token). "
    "A refused operation prints Kafka's exception (e.g. org.apache.kafka.common.errors."
    "DelegationTokenOwnerMismatchException: Specified Principal is not valid Owner/Renewer.) "
    "and exits 1."
)


def _check_options(action: str, given: dict[str, bool]) -> None:
    """DelegationTokenCommandOptions.checkArgs' invalid combinations, in Kafka's words."""
    invalid = {
        "create": ("hmac", "renew-time-period", "expiry-time-period"),
        "renew": ("renewer-principal", "max-life-time-period", "expiry-time-period", "owner-principal"),
        "expire": ("max-life-time-period", "renew-time-period", "owner-principal"),
        "describe": ("renew-time-period", "max-life-time-period", "hmac", "expiry-time-period"),
    }[action]
    for name in invalid:
        if given.get(name):
            raise CommandError(f'Option "[{action}]" can\'t be used with option "[{name}]"')


def _hmac_bytes(text: str | None) -> bytes:
    if text is None:
        raise CommandError('Missing required argument "[hmac]"')
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CommandError(f"--hmac {text!r}: not base64 ({exc})") from None


@handle_errors
def delegation_tokens(
    create: bool = typer.Option(
        False, "--create", help="Create a new delegation token (--renewer-principal names its renewers)."
    ),
    renew: bool = typer.Option(
        False, "--renew", help="Renew a delegation token (--hmac, --renew-time-period)."
    ),
    expire: bool = typer.Option(
        False, "--expire", help="Expire a delegation token (--hmac, --expiry-time-period)."
    ),
    describe: bool = typer.Option(
        False,
        "--describe",
        help="Describe the tokens of the --owner-principal owners/renewers; without it every token the "
        "principal owns, renews or may describe.",
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT", help="REQUIRED: server(s) to use for bootstrapping."
    ),
    command_config: str | None = command_config_option(),
    owner_principal: list[str] = typer.Option(
        None,
        "--owner-principal",
        metavar="TYPE:NAME",
        help="--create: the token's owner (CREATE_TOKENS on that user needed); --describe: owners or "
        "renewers whose tokens to list (repeatable).",
    ),
    renewer_principal: list[str] = typer.Option(
        None, "--renewer-principal", metavar="TYPE:NAME", help="A renewer of the new token (repeatable)."
    ),
    max_life_time_period: int | None = typer.Option(
        None,
        "--max-life-time-period",
        metavar="MS",
        help="Max life period of the token; -1 (the default): the broker's delegation.token.max.lifetime.ms.",
    ),
    renew_time_period: int | None = typer.Option(
        None,
        "--renew-time-period",
        metavar="MS",
        help="Renew time period; -1 (the default): the broker's delegation.token.expiry.time.ms.",
    ),
    expiry_time_period: int | None = typer.Option(
        None,
        "--expiry-time-period",
        metavar="MS",
        help="Expiry time period; -1 (the default): the token is invalidated at once.",
    ),
    hmac: str | None = typer.Option(None, "--hmac", metavar="HMAC", help="HMAC of the delegation token."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Create, renew, expire or describe delegation tokens (kafka-delegation-tokens.sh)."""
    from kafkatool.broker.security import tokens as T

    actions = [
        n
        for n, on in (("create", create), ("renew", renew), ("expire", expire), ("describe", describe))
        if on
    ]
    if len(actions) != 1:
        raise CommandError(
            "Command must include exactly one action: --create, --renew, --expire or --describe"
        )
    if bootstrap_server is None:
        raise CommandError('Missing required argument "[bootstrap-server]"')
    if command_config is None:
        raise CommandError('Missing required argument "[command-config]"')
    action = actions[0]
    _check_options(
        action,
        {
            "hmac": hmac is not None,
            "renew-time-period": renew_time_period is not None,
            "expiry-time-period": expiry_time_period is not None,
            "max-life-time-period": max_life_time_period is not None,
            "renewer-principal": bool(renewer_principal),
            "owner-principal": bool(owner_principal),
        },
    )
    try:
        owners = [T.parse_principal(p.strip()) for p in owner_principal or []]
        renewers = [T.parse_principal(p.strip()) for p in renewer_principal or []]
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    mac = _hmac_bytes(hmac) if action in ("renew", "expire") else b""
    from kafkatool.assign.kafka_client import KafkaAdmin

    out = sys.stdout
    try:
        with KafkaAdmin(bootstrap_server) as admin:
            if action == "create":
                life = -1 if max_life_time_period is None else max_life_time_period
                renewer_names = [f"{t}:{n}" for t, n in renewers]
                if not json_out:
                    out.write(
                        f"Calling create token operation with renewers :{java_collection_str(renewer_names)} , "
                        f"max-life-time-period :{life}\n"
                    )
                owner = f"{owners[0][0]}:{owners[0][1]}" if owners else None
                info, token_hmac = T.create_live(admin, renewer_names, life, owner)
                if json_out:
                    emit_json(token_json(info, token_hmac))
                else:
                    out.write(f"Created delegation token with tokenId : {info.token_id}\n")
                    out.write(token_table([(info, token_hmac)]))
            elif action in ("renew", "expire"):
                period = renew_time_period if action == "renew" else expiry_time_period
                period = -1 if period is None else period
                if not json_out:
                    label = "renew-time-period" if action == "renew" else "expire-time-period"
                    out.write(f"Calling {action} token operation with hmac :{hmac} , {label} :{period}\n")
                call = T.renew_live if action == "renew" else T.expire_live
                expiry = call(admin, mac, period)
                if json_out:
                    emit_json({"type": action, "expiry_timestamp": expiry})
                else:
                    # Kafka's tool ends this line without a newline
                    out.write(f"Completed {action} operation. New expiry date : {token_date(expiry)}")
            else:
                names = [f"{t}:{n}" for t, n in owners]
                if not json_out:
                    if names:
                        out.write(
                            f"Calling describe token operation for owners: {java_collection_str(names)}\n"
                        )
                    else:
                        out.write("Calling describe token operation for current user.\n")
                found = T.describe_live(admin, names or None)
                if json_out:
                    for info, token_hmac in found:
                        emit_json(token_json(info, token_hmac))
                else:
                    out.write(f"Total number of tokens : {len(found)}")
                    out.write(token_table(found))
    except T.TokenRefused as exc:
        out.flush()
        error_line(str(exc))
        raise typer.Exit(EXIT_FINDINGS) from None
    out.flush()
    raise typer.Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command("delegation-tokens", help=HELP)(delegation_tokens)
