"""``kafkatool log-dirs``: kafka-log-dirs.sh --describe (Kafka's LogDirsCommand) through a
cluster, and ``describe --log-dir`` on a broker's log dirs or a backup of them."""

from __future__ import annotations

from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_OK,
    CommandError,
    command_config_option,
    emit_json,
    handle_errors,
)

HELP = (
    "Log dirs like kafka-log-dirs.sh --describe: each broker's log dirs, their errors, and each "
    "replica's size, offset lag and whether it is a future replica (a log-dir move in progress), "
    "through --bootstrap-server, or read offline from log dirs or a backup (--log-dir)."
)

JSON_HELP = (
    "Print one JSON object per line (a log_dir object per dir, then a replica object per "
    "partition it holds, sorted) instead of kafka-log-dirs.sh's two lines and one JSON document."
)

DESCRIBE_HELP = """Each log dir of each broker with its partitions (kafka-log-dirs.sh --describe):
the lines "Querying brokers for log directories information" and "Received log directory
information from brokers IDS", then one line of Kafka's JSON, its keys in Kafka's order (an
error is null or Kafka's exception class, e.g. org.apache.kafka.common.errors.KafkaStorageException
for an offline dir). DescribeLogDirs goes to each broker itself, not to the controller; a broker
that cannot be reached (killed, still in the metadata) is asked again as Kafka's admin client asks
(retry.backoff.ms doubling up to retry.backoff.max.ms) until default.api.timeout.ms (60000, or
--command-config's), then the command fails in one line.

\b
{"brokers":[{"broker":ID,"logDirs":[{"partitions":[{"partition":"T-P",
  "size":BYTES,"offsetLag":N,"isFuture":BOOL}],"error":null,"logDir":DIR}]}],
  "version":1}

\b
size       the bytes of the replica's segments, as the broker counts them
offsetLag  a current replica: its high watermark minus its log end offset,
           never below 0 (so 0); a future replica (isFuture: a log-dir move
           in progress): how far its log end is behind its current replica's
isFuture   true for the copy a log-dir move is making (a -future dir)

With --log-dir the same JSON is read from the files (read-only: no lock, nothing written, a
running broker is left alone), after the lines "Reading log directories information from DIRS"
and "Read log directory information of brokers IDS" (the broker id: each dir's meta.properties).
Sizes are computed as the broker computes them (a dir without a clean-shutdown marker is
scanned in memory as its broker's start-up would). Offline offsetLag is Kafka's rule applied to
the files: 0 for a current replica (a loaded log's high watermark never passes its end); for a
future replica its current replica's log end offset minus its own, or -1 (Kafka's
INVALID_OFFSET_LAG: no local log) when the current replica is not in the dirs given."""


@handle_errors
def describe(
    broker_list: str | None = typer.Option(
        None,
        "--broker-list",
        metavar="ID,ID",
        help="The brokers to ask, as 0,1,2 (default: every broker of the cluster; with --log-dir, "
        "of the dirs). A broker that is not there is refused, as kafka-log-dirs.sh refuses it.",
    ),
    topic_list: str | None = typer.Option(
        None,
        "--topic-list",
        metavar="TOPIC,TOPIC",
        help="Only these topics' replicas, as topic1,topic2 (default: every topic). Every dir is listed.",
    ),
    bootstrap_server: str | None = typer.Option(
        None,
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="The cluster to ask (DescribeLogDirs at each broker).",
    ),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = typer.Option(
        None,
        "--log-dir",
        metavar="DIR",
        help="A broker's log dir or a backup of one instead of a cluster (repeat for each dir; a "
        "partition dir shows that partition only). Read-only: safe on a running broker's dirs. "
        "The broker id is the dir's meta.properties' (-1: none).",
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """kafka-log-dirs.sh --describe (see DESCRIBE_HELP)."""
    from kafkatool.assign import log_dirs as L

    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    topics = L.parse_list(topic_list)
    wanted = L.parse_broker_list(broker_list)
    if log_dir:
        found = L.describe_offline(list(log_dir))
        by_id = {b.broker: b for b in found}
        choice = L.choose_brokers(wanted, list(by_id))
        if choice.missing:
            raise CommandError(choice.refusal())
        result = [by_id[b] for b in choice.existing]
        intro = "Reading log directories information from " + ",".join(d.path for b in found for d in b.dirs)
        outro = "Read log directory information of brokers "
    else:
        from kafkatool.assign.kafka_client import KafkaAdmin, admin_timeouts

        timeouts = admin_timeouts()  # --command-config's, checked before anything is asked
        with KafkaAdmin(bootstrap_server, client_id="kafkatool-log-dirs") as admin:
            choice = L.choose_brokers(wanted, list(admin.metadata(topics=[]).brokers))
            if choice.missing:
                raise CommandError(choice.refusal())
            intro = "Querying brokers for log directories information"
            if not json_out:
                typer.echo(intro)
            result = L.describe_live(admin, choice.existing, timeouts)
        outro = "Received log directory information from brokers "
    if json_out:
        _emit_lines(L.keep_topics(result, topics))
        raise typer.Exit(EXIT_OK)
    if log_dir:
        typer.echo(intro)
    typer.echo(outro + ",".join(map(str, choice.existing)))
    typer.echo(L.kafka_json(result, topics))
    raise typer.Exit(EXIT_OK)


def _emit_lines(result) -> None:
    from kafkatool.protocol.errors import exception_class

    for b in sorted(result, key=lambda b: b.broker):
        for d in sorted(b.dirs, key=lambda d: d.path):
            emit_json(
                {
                    "type": "log_dir",
                    "broker": b.broker,
                    "log_dir": d.path,
                    "error_code": d.error_code,
                    "error": exception_class(d.error_code),
                    "partitions": len(d.replicas),
                    "size": sum(r.size for r in d.replicas),
                    "total_bytes": d.total_bytes,
                    "usable_bytes": d.usable_bytes,
                }
            )
            for r in sorted(d.replicas, key=lambda r: (r.topic, r.partition, r.is_future)):
                emit_json(
                    {
                        "type": "replica",
                        "broker": b.broker,
                        "log_dir": d.path,
                        "topic": r.topic,
                        "partition": r.partition,
                        "size": r.size,
                        "offset_lag": r.offset_lag,
                        "is_future": r.is_future,
                    }
                )


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="log-dirs", help=HELP, no_args_is_help=True)
    sub.command(
        "describe",
        help=DESCRIBE_HELP,
        short_help="Each broker's log dirs and their replicas (kafka-log-dirs.sh --describe).",
    )(describe)
    app.add_typer(sub, name="log-dirs")
