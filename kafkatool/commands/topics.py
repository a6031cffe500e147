"""``kafkatool topics``: kafka-topics.sh (list, describe, create, delete, alter --partitions),
kafka-get-offsets.sh (get-offsets) and kafka-delete-records.sh (delete-records) through a cluster,
and ``describe --log-dir`` / ``get-offsets --log-dir`` on a log dir or a backup of one."""

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
    modify_exit,
)

HELP = (
    "Topics like kafka-topics.sh: list, describe (with its partition filters), create, delete, alter "
    "--partitions through --bootstrap-server; partition offsets like kafka-get-offsets.sh (get-offsets) "
    "and records deleted like kafka-delete-records.sh (delete-records); describe and get-offsets offline "
    "on a log dir or a backup (--log-dir): partitions, sizes, offsets, segment counts and the configs "
    "the dir holds."
)
TOPIC_HELP = (
    "The topic, or a regular expression matched against whole names (list, describe, delete, alter; "
    "Kafka's TopicFilter: a comma also separates alternatives)."
)


def _admin(bootstrap_server: str):
    from kafkatool.assign.kafka_client import KafkaAdmin

    return KafkaAdmin(bootstrap_server, client_id="kafkatool-topics")


def _bootstrap(required: bool = True):
    return typer.Option(
        ... if required else None, "--bootstrap-server", metavar="HOST:PORT", help="The cluster to ask."
    )


@handle_errors
def list_topics(
    topic: str | None = typer.Option(None, "--topic", metavar="TOPIC", help=TOPIC_HELP),
    exclude_internal: bool = typer.Option(False, "--exclude-internal", help="Leave out internal topics."),
    bootstrap_server: str | None = _bootstrap(False),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = typer.Option(
        None, "--log-dir", metavar="DIR", help="A log dir or a backup instead of a cluster."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Topic names, one a line (kafka-topics.sh --list)."""
    rows = _describe(bootstrap_server, log_dir, topic, exclude_internal)
    for r in rows:
        if json_out:
            emit_json({"type": "topic", "topic": r.name, "internal": r.internal})
        else:
            console.print(r.name)
    raise typer.Exit(EXIT_OK)


def _describe(bootstrap_server, log_dir, topic, exclude_internal):
    from kafkatool.assign import topics as T

    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    if log_dir:
        from kafkatool.commands.topic_sources import targets

        dirs = sorted({t.log_dir for t in targets(list(log_dir))})
        return T.describe_offline(dirs, topic, exclude_internal)
    with _admin(bootstrap_server) as admin:
        return T.describe_live(admin, topic, exclude_internal)


def _ids(xs) -> str:
    return ",".join(map(str, xs))


@handle_errors
def describe(
    topic: str | None = typer.Option(None, "--topic", metavar="TOPIC", help=TOPIC_HELP),
    exclude_internal: bool = typer.Option(False, "--exclude-internal", help="Leave out internal topics."),
    under_replicated: bool = typer.Option(
        False,
        "--under-replicated-partitions",
        help="Only partitions whose ISR is smaller than their replicas.",
    ),
    under_min_isr: bool = typer.Option(
        False, "--under-min-isr-partitions", help="Only partitions whose ISR is below min.insync.replicas."
    ),
    at_min_isr: bool = typer.Option(
        False, "--at-min-isr-partitions", help="Only partitions whose ISR is at min.insync.replicas."
    ),
    unavailable: bool = typer.Option(
        False, "--unavailable-partitions", help="Only partitions without a leader."
    ),
    with_overrides: bool = typer.Option(
        False, "--topics-with-overrides", help="Only topics with config overrides (no partitions)."
    ),
    bootstrap_server: str | None = _bootstrap(False),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = typer.Option(
        None,
        "--log-dir",
        metavar="DIR",
        help="A log dir or a backup instead of a cluster: adds sizes, offsets, segments.",
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Topics and partitions in kafka-topics.sh --describe's lines (TopicCommand.describeTopic)."""
    rows = _describe(bootstrap_server, log_dir, topic, exclude_internal)
    filtered = under_replicated or under_min_isr or at_min_isr or unavailable

    def wanted(t, p) -> bool:
        if under_replicated and len(p.isr) < len(p.replicas):
            return True
        if under_min_isr and len(p.isr) < t.min_isr:
            return True
        if at_min_isr and len(p.isr) == t.min_isr:
            return True
        return unavailable and p.leader < 0

    for t in rows:
        if with_overrides and not t.configs:
            continue
        cfg = ",".join(f"{k}={v}" for k, v in sorted(t.configs.items()))
        if json_out:
            emit_json(
                {
                    "type": "topic",
                    "topic": t.name,
                    "topic_id": t.topic_id,
                    "partition_count": len(t.partitions),
                    "replication_factor": t.replication_factor,
                    "configs": t.configs,
                    "config_source": t.config_source or None,
                }  # fmt: skip
            )
        elif not filtered:
            # Kafka's tab-separated lines, tabs kept (rich would expand them)
            typer.echo(
                f"Topic: {t.name}\tTopicId: {t.topic_id or ''}\tPartitionCount: {len(t.partitions)}\t"
                f"ReplicationFactor: {t.replication_factor}\tConfigs: {cfg}"
            )
        if with_overrides:
            continue
        for p in t.partitions:
            if filtered and not wanted(t, p):
                continue
            if json_out:
                row = {"type": "partition", "topic": t.name, "partition": p.partition, "leader": p.leader,
                       "replicas": p.replicas, "isr": p.isr, "offline": p.offline}  # fmt: skip
                if p.size is not None:
                    row.update(
                        size=p.size,
                        log_start_offset=p.log_start_offset,
                        log_end_offset=p.log_end_offset,
                        segments=p.segments,
                    )
                emit_json(row)
                continue
            line = (
                f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            )
            if p.offline:
                line += f"\tOffline: {_ids(p.offline)}"
            if p.size is not None:
                line += (
                    f"\tSize: {p.size}\tLogStartOffset: {p.log_start_offset}\tLogEndOffset: {p.log_end_offset}"
                    f"\tSegments: {p.segments}"
                )
            typer.echo(line)
    if topic and not rows:
        error_line(f"Topic '{topic}' does not exist as expected")
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_OK)


def _configs(config: list[str] | None) -> dict[str, str]:
    out = {}
    for c in config or []:
        k, sep, v = c.partition("=")
        if not sep or not k.strip():
            raise CommandError(f"--config {c!r}: expected key=value")
        out[k.strip()] = v.strip()
    return out


@handle_errors
def create(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="The topic to create."),
    partitions: int | None = typer.Option(
        None, "--partitions", metavar="N", help="Partitions (default: the broker's num.partitions)."
    ),
    replication_factor: int | None = typer.Option(
        None, "--replication-factor", metavar="N", help="Replicas (default: default.replication.factor)."
    ),
    replica_assignment: str | None = typer.Option(
        None,
        "--replica-assignment",
        metavar="B1:B2,B3:B4",
        help="Broker ids per partition instead of --partitions/--replication-factor.",
    ),
    config: list[str] = typer.Option(
        None, "--config", metavar="KEY=VALUE", help="A topic config (repeatable)."
    ),
    if_not_exists: bool = typer.Option(False, "--if-not-exists", help="No error when the topic exists."),
    bootstrap_server: str = _bootstrap(),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Create a topic (CreateTopics at the controller): "Created topic T."."""
    from kafkatool.assign import topics as T
    from kafkatool.protocol.errors import ErrorCode

    assignment = None
    if replica_assignment:
        if partitions is not None or replication_factor is not None:
            raise CommandError("--replica-assignment goes without --partitions and --replication-factor")
        assignment = dict(enumerate(T.parse_replica_assignment(replica_assignment)))
    with _admin(bootstrap_server) as admin:
        code, message = T.create(admin, topic, partitions, replication_factor, assignment, _configs(config))
    exists = code == ErrorCode.TOPIC_ALREADY_EXISTS
    ok = code == 0 or (exists and if_not_exists)
    if json_out:
        emit_json(
            {
                "type": "topic",
                "topic": topic,
                "created": code == 0,
                "error_code": code,
                "error": T.error_text(code, message) or None,
            }
        )
    elif code == 0:
        console.print(f"Created topic {topic}.")
    elif not ok:
        error_line(f"Error while executing topic command : {T.error_text(code, message)}")
    raise typer.Exit(EXIT_OK if ok else EXIT_FINDINGS)


@handle_errors
def delete(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help=TOPIC_HELP),
    if_exists: bool = typer.Option(False, "--if-exists", help="No error when no topic matches."),
    bootstrap_server: str = _bootstrap(),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Delete the matching topics (DeleteTopics at the controller)."""
    from kafkatool.assign import topics as T

    with _admin(bootstrap_server) as admin:
        meta = admin.metadata()
        names = T.select(meta.topics, topic, False, lambda n: False)
        internal = [n for n in names if meta.topic_info.get(n, (None, n.startswith("__")))[1]]
        if internal:
            raise CommandError(
                f"Topic {internal[0]} is a kafka internal topic and is not allowed to be marked for deletion."
            )
        if not names:
            if if_exists:
                raise typer.Exit(EXIT_OK)
            error_line(f"Error while executing topic command : Topic '{topic}' does not exist as expected")
            raise typer.Exit(EXIT_FINDINGS)
        results = T.delete(admin, names)
    failed = {n: r for n, r in results.items() if r[0]}
    for n, (code, msg) in sorted(results.items()):
        if json_out:
            emit_json(
                {
                    "type": "topic",
                    "topic": n,
                    "deleted": not code,
                    "error_code": code,
                    "error": T.error_text(code, msg) or None,
                }
            )
        elif code:
            error_line(f"Error while executing topic command : {n}: {T.error_text(code, msg)}")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


@handle_errors
def alter(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help=TOPIC_HELP),
    partitions: int = typer.Option(
        ..., "--partitions", metavar="N", help="The new partition count (only grows)."
    ),
    replica_assignment: str | None = typer.Option(
        None, "--replica-assignment", metavar="B1:B2,...", help="Brokers of the new partitions."
    ),
    if_exists: bool = typer.Option(False, "--if-exists", help="No error when no topic matches."),
    bootstrap_server: str = _bootstrap(),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Add partitions (CreatePartitions); Kafka never removes partitions."""
    from kafkatool.assign import topics as T

    assignment = T.parse_replica_assignment(replica_assignment) if replica_assignment else None
    failed = 0
    with _admin(bootstrap_server) as admin:
        meta = admin.metadata()
        names = T.select(meta.topics, topic, False, lambda n: False)
        if not names and not if_exists:
            error_line(f"Error while executing topic command : Topic '{topic}' does not exist as expected")
            raise typer.Exit(EXIT_FINDINGS)
        for n in names:
            code, msg = T.add_partitions(admin, n, partitions, assignment)
            failed += bool(code)
            if json_out:
                emit_json(
                    {
                        "type": "topic",
                        "topic": n,
                        "partitions": partitions,
                        "error_code": code,
                        "error": T.error_text(code, msg) or None,
                    }
                )
            elif code:
                error_line(f"Error while executing topic command : {T.error_text(code, msg)}")
            else:
                console.print("Adding partitions succeeded!")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


GET_OFFSETS_HELP = (
    "Partition offsets in kafka-get-offsets.sh's lines, TOPIC:PARTITION:OFFSET (GetOffsetShell): "
    "ListOffsets at each partition's leader as Kafka's admin client asks (READ_UNCOMMITTED; v7 for "
    "max-timestamp), in GetOffsetShell's order (by TOPIC-PARTITION as text: t-10 before t-2). A "
    "partition with no such offset (a timestamp after every record) is left out, as Kafka leaves it "
    'out (--json: "offset": null). A partition answered with an error is reported on stderr ("Skip '
    'getting offsets for topic-partition T-P due to error: ...") and makes the exit status 1, as '
    "nothing matching the filters does. A leader moving or out of reach (a broker just killed) is "
    "asked again, until the admin client's default.api.timeout.ms (60000, or --command-config's); a "
    "partition with no leader at all (every replica down) is reported as LEADER_NOT_AVAILABLE after 5 "
    "tries (Kafka's admin client waits the timeout, then reports a TimeoutException). With --log-dir the same answers "
    "come from a log dir or a "
    "backup, read-only, by the broker's own ListOffsets rule (a partition whose data is damaged where "
    "the lookup reads is answered as the broker answers it, CORRUPT_MESSAGE, the file and byte named)."
)
GET_OFFSETS_TIME_HELP = (
    "Which offset: -1 or latest (the high watermark), -2 or earliest (the log start offset), -3 or "
    "max-timestamp (the record with the largest timestamp), or a timestamp in ms (the first record "
    "at or after it); any other number is sent as it is (-4: the earliest local offset)."
)


@handle_errors
def get_offsets(
    topic: str | None = typer.Option(
        None,
        "--topic",
        metavar="TOPIC",
        help="The topic, or a regular expression matched against whole names (default: every topic).",
    ),
    partitions: str | None = typer.Option(
        None,
        "--partitions",
        metavar="ID[,ID...]",
        help="Comma-separated partition ids (default: every partition). Not with --topic-partitions.",
    ),
    topic_partitions: str | None = typer.Option(
        None,
        "--topic-partitions",
        metavar="PATTERN[,PATTERN...]",
        help="Comma-separated TOPIC-REGEX:PARTITIONS patterns, PARTITIONS a number, N-M (M excluded), N- "
        "or -M, or left out for all (e.g. orders:0-3,audit:5-,:1). Not with --topic or --partitions.",
    ),
    time_spec: str = typer.Option("latest", "--time", metavar="TIME", help=GET_OFFSETS_TIME_HELP),
    exclude_internal: bool = typer.Option(
        False, "--exclude-internal-topics", help="Leave out internal topics (included by default)."
    ),
    bootstrap_server: str | None = _bootstrap(False),
    broker_list: str | None = typer.Option(
        None,
        "--broker-list",
        metavar="HOST:PORT",
        help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified "
        "(GetOffsetShell's, which takes it without a warning).",
    ),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = typer.Option(
        None,
        "--log-dir",
        metavar="DIR",
        help="A log dir or a backup instead of a cluster, read-only (a running broker's dir too): the "
        "same answers by the broker's own ListOffsets rule, the log end offset standing for the high "
        "watermark (the dir holds none that is current).",
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """kafka-get-offsets.sh (GetOffsetShell): see GET_OFFSETS_HELP."""
    from kafkatool.assign import offsets as O

    spec = O.parse_time(time_spec)
    flt = O.partition_filter(topic, partitions, topic_partitions)
    # GetOffsetShell: --bootstrap-server is required unless --broker-list is given, and wins over it
    bootstrap_server = bootstrap_server or broker_list
    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    if log_dir:
        from kafkatool.commands.topic_sources import targets

        dirs = sorted({t.log_dir for t in targets(list(log_dir))})
        answers = O.get_offsets_offline(dirs, flt, exclude_internal, spec)
    else:
        with _admin(bootstrap_server) as admin:
            answers = O.get_offsets_live(admin, flt, exclude_internal, spec)
    if not answers:
        error_line("Could not match any topic-partitions with the specified filters")
        raise typer.Exit(EXIT_FINDINGS)
    failed = False
    for (t, p), a in answers.items():  # GetOffsetShell reports the errors first, in its list's order
        if a.error_code:
            failed = True
            if not json_out:
                error_line(f"Skip getting offsets for topic-partition {t}-{p} due to error: {a.error}")
    for (t, p), a in sorted(answers.items(), key=lambda kv: O.output_order(kv[0])):
        if json_out:
            row = {"type": "offset", "topic": t, "partition": p}
            if a.error_code:
                row.update(offset=None, error_code=a.error_code, error=a.error)
            else:
                found = a.offset != -1
                row.update(offset=a.offset if found else None, timestamp=a.timestamp if found else None)
            emit_json(row)
        elif not a.error_code and a.offset != -1:
            typer.echo(f"{t}:{p}:{a.offset}")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


DELETE_RECORDS_HELP = (
    "Delete the records below an offset of each partition (DeleteRecords at its leader: the log "
    "start offset moves there) as kafka-delete-records.sh (DeleteRecordsCommand) does, in its lines: "
    '"Executing records delete operation", "Records delete operation completed:", then '
    '"partition: T-P<TAB>low_watermark: N" or "partition: T-P<TAB>error: ..." per partition (exit 1 '
    "if any failed; a leader moving or out of reach is asked again, a partition without a leader "
    "reported as get-offsets reports it). In a cluster the answer comes once every live replica's "
    "log start offset reached the offset (Kafka's DelayedDeleteRecords). Online only, no --log-dir: "
    "deleting records offline is `kafkatool retention`'s job (whole segments, by the topic's retention, as a broker's retention deletes them); a log "
    "start offset inside a segment is the broker's to move, in its memory and its "
    "log-start-offset-checkpoint, and a broker running on the dir would overwrite a change made "
    "beside it."
)


@handle_errors
def delete_records(
    offset_json_file: Path = typer.Option(
        ...,
        "--offset-json-file",
        metavar="FILE",
        help="The offset per partition below which records are deleted (-1: the high watermark): "
        '{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}.',
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the partitions and offsets that would be asked for; send nothing."
    ),
    bootstrap_server: str = _bootstrap(),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """kafka-delete-records.sh (DeleteRecordsCommand): see DELETE_RECORDS_HELP."""
    from kafkatool.assign import offsets as O
    from kafkatool.log.file_records import read_regular

    source = str(offset_json_file)
    raw = read_regular(offset_json_file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"{source}: byte {exc.start}: not UTF-8: The input string is not a valid JSON"
        ) from None
    offsets = O.parse_offset_json(text, source)
    if dry_run:
        for (t, p), off in sorted(offsets.items(), key=lambda kv: O.output_order(kv[0])):
            if json_out:
                emit_json(
                    {"type": "delete_records", "topic": t, "partition": p, "offset": off, "dry_run": True}
                )
            else:
                typer.echo(f"partition: {t}-{p}\toffset: {off}")
        raise typer.Exit(modify_exit(dry_run=True, would_change=bool(offsets), remaining=False))
    if not json_out:
        typer.echo("Executing records delete operation")
    with _admin(bootstrap_server) as admin:
        answers = O.delete_records(admin, offsets) if offsets else {}
    if not json_out:
        typer.echo("Records delete operation completed:")
    failed = False
    for (t, p), a in sorted(answers.items(), key=lambda kv: O.output_order(kv[0])):
        failed |= bool(a.error_code)
        if json_out:
            row = {"type": "delete_records", "topic": t, "partition": p, "offset": offsets[(t, p)]}
            if a.error_code:
                row.update(low_watermark=None, error_code=a.error_code, error=a.error)
            else:
                row.update(low_watermark=a.offset)
            emit_json(row)
        elif a.error_code:
            typer.echo(f"partition: {t}-{p}\terror: {a.error}")
        else:
            typer.echo(f"partition: {t}-{p}\tlow_watermark: {a.offset}")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="topics", help=HELP, no_args_is_help=True)
    sub.command("list")(list_topics)
    sub.command("describe")(describe)
    sub.command("create")(create)
    sub.command("delete")(delete)
    sub.command("alter")(alter)
    sub.command("get-offsets", help=GET_OFFSETS_HELP, short_help="Partition offsets (kafka-get-offsets.sh).")(
        get_offsets
    )
    sub.command(
        "delete-records",
        help=DELETE_RECORDS_HELP,
        short_help="Delete records below an offset (kafka-delete-records.sh).",
    )(delete_records)
    app.add_typer(sub, name="topics")
