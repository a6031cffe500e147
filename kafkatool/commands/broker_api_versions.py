"""``kafkatool broker-api-versions``: kafka-broker-api-versions.sh (Kafka 3.7's
BrokerApiVersionsCommand)."""

from __future__ import annotations

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    command_config_option,
    emit_json,
    error_line,
    handle_errors,
)

HELP = """Each broker's API versions, like kafka-broker-api-versions.sh: every broker the
cluster's Metadata lists, asked with ApiVersions on a connection of its own, one entry per
API as Kafka's NodeApiVersions prints it (each after a tab), with the version kafkatool
would use:

\b
  127.0.0.1:9092 (id: 1 rack: null) -> (
      Produce(0): 0 to 9 [usable: 9],
      ...
  )

\b
N to M [usable: U]          the broker serves N..M; U is the highest version
                            both the broker and kafkatool's protocol serve
N to M [unusable: node too new / node too old]
                            no version in common
Name(K): UNSUPPORTED        an API of brokers that this broker does not list
UNKNOWN(K): N to M          an API kafkatool's protocol does not know

A broker that cannot be asked is the line "HOST:PORT (id: N rack: R) -> ERROR: CLASS", CLASS
as Kafka prints it (org.apache.kafka.common.errors.DisconnectException for one that cannot
be reached or does not answer within request.timeout.ms), this tool's reason on stderr, and
exit status 1. Brokers are listed by id (Kafka's order is random). The requests time out
after request.timeout.ms of --command-config (default 5000, as Kafka's tool); Kafka waits
without end for a Metadata answer that lists a broker, this tool for request.timeout.ms."""

JSON_HELP = (
    "Print one JSON object per broker instead of Kafka's text: broker, host, port, rack, "
    "error (Kafka's text, null when it answered), reason, and apis, a list of {api_key, name, "
    "min_version, max_version, status (usable, unsupported, unknown, node_too_new, "
    "node_too_old), usable}."
)


@handle_errors
def broker_api_versions(
    bootstrap_server: str = typer.Option(
        ...,
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="REQUIRED: The server to connect to (several as HOST:PORT,HOST:PORT).",
    ),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """kafka-broker-api-versions.sh (see HELP)."""
    import sys

    from kafkatool.assign import api_versions as A

    result = A.broker_versions(
        bootstrap_server, timeout=_request_timeout(), client_id="kafkatool-api-versions"
    )
    for b in result:
        if json_out:
            emit_json(b.to_json())
        else:
            sys.stdout.write(b.kafka_text())
    sys.stdout.flush()
    for b in result:
        if b.reason is not None:
            error_line(f"broker {b.node_id}: {b.reason}")
    raise typer.Exit(EXIT_FINDINGS if any(b.error is not None for b in result) else EXIT_OK)


def _request_timeout() -> float:
    """request.timeout.ms of --command-config (BrokerApiVersionsCommand's AdminConfig default:
    5000), in seconds."""
    from kafkatool.assign import api_versions as A
    from kafkatool.assign.kafka_client import command_config_number

    ms = command_config_number("request.timeout.ms", "INT", str(A.DEFAULT_REQUEST_TIMEOUT_MS))
    return max(ms, 1) / 1000


def register(app: typer.Typer) -> None:
    app.command(
        "broker-api-versions",
        help=HELP,
        short_help="Each broker's API versions (kafka-broker-api-versions.sh).",
    )(broker_api_versions)
