"""``kafkatool leader-election``: kafka-leader-election.sh (ElectLeaders at the controller) and
its ZooKeeper-mode ancestor (``/admin/preferred_replica_election``), with Kafka's options and
result lines."""

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
    error_line,
    handle_errors,
    zookeeper_option,
    zookeeper_timeout_option,
)

HELP = (
    "Elect preferred or unclean leaders like kafka-leader-election.sh (ElectLeaders through "
    "--bootstrap-server), or start a preferred replica election through ZooKeeper (--zookeeper, "
    "/admin/preferred_replica_election) as ZK-mode Kafka's tool did."
)


@handle_errors
def leader_election(
    election_type: str = typer.Option(
        ...,
        "--election-type",
        metavar="preferred|unclean",
        help="preferred: move leadership back to the "
        "first replica; unclean: elect an out-of-sync replica where a partition has no leader (data loss).",
    ),  # fmt: skip
    topic: str | None = typer.Option(
        None, "--topic", metavar="TOPIC", help="With --partition: one partition."
    ),
    partition: int | None = typer.Option(None, "--partition", metavar="P", help="The partition of --topic."),
    all_topic_partitions: bool = typer.Option(False, "--all-topic-partitions", help="Every partition."),
    path_to_json_file: Path | None = typer.Option(
        None,
        "--path-to-json-file",
        metavar="FILE",
        help='The partitions: {"partitions": [{"topic": "foo", "partition": 1}, ...]}.',
    ),  # fmt: skip
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT", help="The cluster (ElectLeaders at its controller)."
    ),
    command_config: str | None = command_config_option(),
    zookeeper: str | None = zookeeper_option(
        "Write /admin/preferred_replica_election instead (preferred only; the controller elects)."
    ),
    timeout: float = zookeeper_timeout_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Elect leaders and report per partition what happened: elected, already led by a valid
    replica (nothing to do), or the error; exit 1 if any partition could not be elected."""
    from kafkatool.assign import election as E

    kind = election_type.lower()
    if kind not in E.ELECTION_TYPES:
        raise CommandError(f"--election-type {election_type!r}: expected preferred or unclean")
    if (bootstrap_server is None) == (zookeeper is None):
        raise CommandError("give exactly one of --bootstrap-server and --zookeeper")
    if sum((topic is not None, all_topic_partitions, path_to_json_file is not None)) != 1:
        raise CommandError(
            "One and only one of the following options is required: --topic, --all-topic-partitions, --path-to-json-file"
        )
    if topic is not None and partition is None:
        raise CommandError("Missing required option(s): --partition")
    if topic is None and partition is not None:
        raise CommandError("Option --partition is only allowed if --topic is used")
    partitions: list[tuple[str, int]] | None = None
    if topic is not None:
        partitions = [(topic, partition)]
    elif path_to_json_file is not None:
        try:
            text = path_to_json_file.read_text()
        except OSError as exc:
            raise CommandError(f"{path_to_json_file}: {exc.strerror or exc}") from None
        partitions = E.parse_election_json(text, str(path_to_json_file))
    label = kind.upper()

    if zookeeper is not None:
        if kind != "preferred":
            raise CommandError(
                "ZooKeeper-mode controllers elect unclean leaders only by unclean.leader.election.enable "
                "(kafkatool configs); --election-type unclean needs --bootstrap-server"
            )
        from kafkatool.commands.zk import connect

        with connect(zookeeper, timeout) as zk:
            written, payload = E.elect_zk(zk, partitions)
        if json_out:
            for t, p in written:
                emit_json({"type": "partition", "topic": t, "partition": p, "result": "requested"})
            emit_json(
                {
                    "type": "summary",
                    "election_type": label,
                    "requested": len(written),
                    "path": "/admin/preferred_replica_election",
                }
            )
        else:
            console.print(f"Created preferred replica election path with {payload.decode()}")
            names = ", ".join(f"{t}-{p}" for t, p in written)
            console.print(f"Successfully started preferred replica election for partitions {names}")
        raise typer.Exit(EXIT_OK)

    from kafkatool.assign.kafka_client import KafkaAdmin, describe_error
    from kafkatool.protocol.errors import ErrorCode

    with KafkaAdmin(bootstrap_server, client_id="kafkatool-leader-election") as admin:
        outcomes = E.elect_live(admin, kind, partitions)
    done = [o for o in outcomes if o.error_code == 0]
    noop = [o for o in outcomes if o.error_code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [o for o in outcomes if o.error_code not in (0, ErrorCode.ELECTION_NOT_NEEDED)]
    if json_out:
        for o in outcomes:
            result = "elected" if o.error_code == 0 else "not_needed" if o in noop else "failed"
            emit_json(
                {
                    "type": "partition",
                    "topic": o.topic,
                    "partition": o.partition,
                    "result": result,
                    "error_code": o.error_code,
                    "error": describe_error(o.error_code, o.message) if o in failed else None,
                }
            )
        emit_json(
            {
                "type": "summary",
                "election_type": label,
                "elected": len(done),
                "not_needed": len(noop),
                "failed": len(failed),
            }
        )
    else:
        if done:
            names = ", ".join(o.name for o in done)
            console.print(f"Successfully completed leader election ({label}) for partitions {names}")
        if noop:
            console.print(f"Valid replica already elected for partitions {', '.join(o.name for o in noop)}")
        for o in failed:
            console.print(
                f"Error completing leader election ({label}) for partition: {o.name}: {describe_error(o.error_code, o.message)}"
            )
        if failed:
            error_line(f"{len(failed)} replica(s) could not be elected")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command("leader-election", help=HELP)(leader_election)
