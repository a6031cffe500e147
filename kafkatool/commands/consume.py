"""``kafkatool consume``: kafka-console-consumer.sh (ConsoleConsumer with DefaultMessageFormatter)
and kcat -C, through a cluster or read-only from log dirs or a backup."""

from __future__ import annotations

import itertools
import signal
import sys
import time
from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    add_client_security,
    command_config_option,
    error_line,
    handle_errors,
    load_properties_file,
    property_args,
)

HELP = """Print a topic's records as kafka-console-consumer.sh does (ConsoleConsumer and its
DefaultMessageFormatter, Kafka 3.7: the same options, --property names, defaults and output
bytes), live through --bootstrap-server or read-only from log dirs (--log-dir).

Exactly one of --topic and --include (a regex of topic names, matched whole, internal topics
left out: subscribe(Pattern)) says what to read.

With --group G (or group.id in --consumer-property / --consumer.config) the command is a member
of the classic consumer group G, as ConsoleConsumer's KafkaConsumer: JoinGroup/SyncGroup with
protocol type consumer and the range assignor (the one strategy it offers and implements: Java
members, whose default is [range, cooperative-sticky], and librdkafka's [range, roundrobin] agree
on it), Heartbeat every heartbeat.interval.ms, a rejoin when the group rebalances, LeaveGroup at
the end (Ctrl-C and SIGTERM too, exit 130; not a static member's: group.instance.id). Each
partition starts at the group's committed offset, else at auto.offset.reset (latest; earliest
with --from-beginning, which is only that reset policy: a committed offset wins). Offsets are committed (enable.auto.commit, default true) every
auto.commit.interval.ms (5000), before a rebalance takes partitions away and at the end: the
position after the last record printed. --group with --partition is refused, as Kafka does.

Without a group the tool assigns itself the partitions (every partition of --topic, --partition,
or those of the topics --include matches, looked up again every metadata.max.age.ms) and nothing
is committed: kafka-console-consumer.sh would join a random group console-consumer-NNNNN with
auto commit off, which reads the same records. A start is ListOffsets' latest (the high
watermark, or the last stable offset with read_committed) unless --from-beginning, --offset or
auto.offset.reset say otherwise; a position out of range restarts at auto.offset.reset. It runs
until --max-messages, --timeout-ms or --exit-at-end ends it, or Ctrl-C (exit 130).

A --topic (or --partition) the cluster does not have is waited for, as Kafka's consumer waits: its
Metadata requests ask the broker to create the topic (allow.auto.create.topics, default true; a
broker with auto.create.topics.enable=true does, and the topic is read), and otherwise the command
says once on stderr that it waits and asks again (retry.backoff.ms doubling up to
retry.backoff.max.ms) until the topic is there, --timeout-ms passes (exit 0, as ConsoleConsumer's
timeout) or Ctrl-C. A group member meanwhile is given no partition of it and joins again once it
exists.

With --log-dir (repeatable: a broker's log dirs, a backup, a running broker's dir too; no lock,
nothing written) the same records come from the data on disk through the storage engine's
own read path, from the log start offset (or --offset) to the log end (read_uncommitted) or
the last stable offset (read_committed, from the replayed producer state), then it ends.
Damaged data is read past: a batch failing its CRC is printed as it is, a batch whose records do
not decode keeps those before, and where an entry does not parse the rest of its segment is
left out and the next segment read; each damage is one line on stderr naming the file, the byte
and the offset and what was done, and the exit status is then 1.

Keys and values are written as Kafka writes them: their bytes as they are (ConsoleConsumer
reads with ByteArrayDeserializer), or with --property value.deserializer=
org.apache.kafka.common.serialization.StringDeserializer (key., headers.) as Java's String of
them (bytes that are not UTF-8: one U+FFFD per malformed sequence). --json prints one object
per record instead: topic, partition, offset, timestamp, timestamp_type, key, value, headers,
key and value as UTF-8 text when they are, else base64 (key_encoding/value_encoding say
which). "Processed a total of N messages" goes to stderr at the end, as ConsoleConsumer's."""

PROPERTY_HELP = (
    "A DefaultMessageFormatter property, KEY=VALUE (repeatable): print.timestamp, print.key, "
    "print.offset, print.partition, print.headers (default false), print.value (true), key.separator "
    "(a tab), line.separator (a newline), headers.separator (,), null.literal (null), key.deserializer, "
    "value.deserializer, headers.deserializer (StringDeserializer or ByteArrayDeserializer)."
)

CONSUMER_PROPERTY_HELP = (
    "A consumer config, KEY=VALUE (repeatable; wins over --consumer.config), checked as Kafka's "
    "consumer checks it: group.id, client.id (console-consumer), auto.offset.reset "
    "(latest|earliest|none), enable.auto.commit (true), auto.commit.interval.ms (5000), "
    "session.timeout.ms (45000), heartbeat.interval.ms (3000), max.poll.interval.ms (300000, the "
    "rebalance timeout), group.instance.id (a static member: no LeaveGroup), isolation.level, "
    "metadata.max.age.ms (300000), partition.assignment.strategy (must name range), "
    "exclude.internal.topics (true), allow.auto.create.topics (true: a --topic's Metadata asks the broker "
    "to create it), retry.backoff.ms (100), retry.backoff.max.ms (1000), fetch.max.bytes (52428800), "
    "max.partition.fetch.bytes (1048576), check.crcs (true: a fetched batch or legacy message whose CRC does not match "
    "ends the command after the records before it, exit 2, as Kafka's consumer ends "
    "ConsoleConsumer); security.protocol, ssl.*, sasl.* as in --command-config. "
    "Kafka's other fetch, socket and metrics configs are taken without effect; a name Kafka's consumer does not "
    "know is warned about, as Kafka does."
)


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


def _warn(text: str) -> None:
    sys.stderr.write(f"kafkatool: WARNING: {text}\n")
    sys.stderr.flush()


@handle_errors
def consume(
    topic: str | None = typer.Option(None, "--topic", metavar="TOPIC", help="The topic to consume."),
    include: str | None = typer.Option(
        None,
        "--include",
        metavar="REGEX",
        help="Consume every topic whose whole name matches this regular expression (not with --topic; "
        "internal topics left out).",
    ),
    whitelist: str | None = typer.Option(
        None,
        "--whitelist",
        metavar="REGEX",
        help="DEPRECATED, use --include instead; ignored if --include specified.",
        hidden=True,
    ),
    group: str | None = typer.Option(
        None, "--group", metavar="GROUP", help="The consumer group to join (commits its offsets)."
    ),
    partition: int | None = typer.Option(
        None,
        "--partition",
        metavar="N",
        help="Only this partition (default: every partition; not with --group).",
    ),
    offset: str | None = typer.Option(
        None,
        "--offset",
        metavar="earliest|latest|N",
        help="Where to start: earliest, latest or an offset (an offset needs --partition). Default: "
        "latest live, the log start offset with --log-dir.",
    ),
    from_beginning: bool = typer.Option(
        False,
        "--from-beginning",
        help="Start at the earliest offset where there is no committed offset (auto.offset.reset=earliest; "
        "not with --offset).",
    ),
    max_messages: int | None = typer.Option(
        None, "--max-messages", metavar="N", help="Exit after N records (default: no limit)."
    ),
    timeout_ms: int | None = typer.Option(
        None, "--timeout-ms", metavar="MS", help="Exit when no record arrives for MS milliseconds."
    ),
    isolation_level: str | None = typer.Option(
        None,
        "--isolation-level",
        metavar="read_uncommitted|read_committed",
        help="read_committed: stop at the last stable offset and leave out aborted transactions' records "
        "(default: isolation.level, else read_uncommitted).",
        show_default=False,
    ),
    exit_at_end: bool = typer.Option(
        False,
        "--exit-at-end",
        help="Exit once every assigned partition reached its high watermark (read_committed: last "
        "stable offset) as read at the start, or when the group assigned it (kcat -e); while nothing "
        "is assigned (a group member given no partition, a topic not there yet, an --include that "
        "matches nothing) it waits.",
    ),
    prop: list[str] = typer.Option(None, "--property", metavar="KEY=VALUE", help=PROPERTY_HELP),
    consumer_property: list[str] = typer.Option(
        None, "--consumer-property", metavar="KEY=VALUE", help=CONSUMER_PROPERTY_HELP
    ),
    consumer_config: Path | None = typer.Option(
        None,
        "--consumer.config",
        metavar="FILE",
        help="Consumer properties file (java.util.Properties); --consumer-property wins over it.",
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help="The cluster to read from."
    ),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = typer.Option(
        None,
        "--log-dir",
        metavar="DIR",
        help="Read from a log dir or a backup instead of a cluster (repeatable), read-only.",
    ),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per record instead."),
) -> None:
    from kafkatool.assign import consume as C
    from kafkatool.assign import group_consumer as G
    from kafkatool.formats import message_formatter as F

    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    # ConsoleConsumer.ConsumerConfig's checks, in its order and words
    if include is None:
        include = whitelist  # ConsoleConsumer: --whitelist only where --include is not given
    if (topic is None) == (include is None):
        raise CommandError(
            "Exactly one of --include/--topic is required."
            + (
                " --whitelist is DEPRECATED use --include instead; ignored if --include specified."
                if whitelist is not None
                else ""
            )
        )
    if partition is not None:
        if topic is None:
            raise CommandError("The topic is required when partition is specified.")
        if from_beginning and offset is not None:
            raise CommandError("Options from-beginning and offset cannot be specified together.")
    elif offset is not None:
        raise CommandError("The partition is required when offset is specified.")
    if partition is not None and partition < 0:
        raise CommandError(f"--partition {partition}: a partition is a number from 0")
    start_at = C.parse_offset(offset) if offset is not None else None
    from_file = load_properties_file(consumer_config, "--consumer.config") if consumer_config else {}
    given = property_args(consumer_property, "--consumer-property")
    group_ids = []
    for g in (group, from_file.get("group.id"), given.get("group.id")):
        if g is not None and g not in group_ids:
            group_ids.append(g)
    if len(group_ids) > 1:
        raise CommandError(
            "The group ids provided in different places (directly using '--group', via '--consumer-property', "
            "or via '--consumer.config') do not match. Detected group ids: "
            + ", ".join(f"'{g}'" for g in group_ids)
        )
    if group_ids and partition is not None:
        raise CommandError("Options group and partition cannot be specified together.")
    props = {**from_file, **given}
    if group_ids:
        props["group.id"] = group_ids[0]
    reset = props.get("auto.offset.reset")
    if reset is not None and from_beginning and reset != "earliest":
        raise CommandError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', please remove one option"
        )
    if log_dir and (props or group_ids):
        raise CommandError("--group, --consumer-property and --consumer.config need --bootstrap-server")
    try:
        settings = G.consumer_settings(props)
    except C.ConsumeError as exc:
        raise CommandError(str(exc)) from None
    add_client_security(settings.security, "consumer configs")
    for note in settings.notes:
        _warn(note)
    if settings.auto_offset_reset is None:
        settings.auto_offset_reset = "earliest" if from_beginning else "latest"
    if isolation_level is None:
        isolation_level = settings.isolation_level or "read_uncommitted"
    if isolation_level not in C.ISOLATION_LEVELS:
        raise CommandError(
            f"--isolation-level {isolation_level!r}: expected read_uncommitted or read_committed"
        )
    if max_messages is not None and max_messages < 0:
        raise CommandError(f"--max-messages {max_messages}: must not be negative")
    if timeout_ms is not None and timeout_ms < 0:
        raise CommandError(f"--timeout-ms {timeout_ms}: must not be negative")
    pattern = None
    if include is not None:
        from kafkatool.assign.topics import topic_regex

        try:
            pattern = topic_regex(include, topic_filter=False)  # ConsoleConsumer: Pattern.compile(include)
        except C.KafkaAdminError as exc:
            raise CommandError(str(exc)) from None
    formatter = F.MessageFormatter(property_args(prop))
    render = F.json_line if json_out else formatter.format
    isolation = C.ISOLATION_LEVELS[isolation_level]
    reset_spec = {"earliest": C.EARLIEST_TIMESTAMP, "latest": C.LATEST_TIMESTAMP, "none": None}[
        settings.auto_offset_reset
    ]
    if start_at is not None:
        start = start_at
    elif partition is not None or log_dir:
        # assign + seek (ConsoleConsumer's --partition without --offset); the dirs from the start
        start = C.EARLIEST_TIMESTAMP if from_beginning or log_dir else C.LATEST_TIMESTAMP
    else:
        start = reset_spec  # subscribe: no committed offset, the reset policy
    out = sys.stdout.buffer
    count = 0
    limit = max_messages if max_messages is not None else -1

    def emit(records) -> int:
        """Write records until --max-messages; how many were written."""
        nonlocal count
        n = 0
        for r in records:
            if count == limit:
                break
            # counted before it is written, as ConsoleConsumer.process: a Ctrl-C that lands as
            # the write returns (the line already out) does not leave it out of the count
            count += 1
            n += 1
            out.write(render(r))
        out.flush()
        return n

    def report() -> None:
        sys.stderr.write(f"Processed a total of {count} messages\n")
        sys.stderr.flush()

    if log_dir:
        from kafkatool.commands.topic_sources import targets

        dirs = sorted({t.log_dir for t in targets(list(log_dir))})
        damaged: list = []

        def said(d) -> None:
            # damaged data read past: a line each, where it was met, and exit 1
            damaged.append(d)
            error_line(d.line())

        records = C.consume_offline(
            dirs, topic if pattern is None else pattern, partition, start, isolation, on_damage=said
        )
        try:
            first = next(records, None)  # bad input (no such topic) before anything is printed
        except C.ConsumeError as exc:
            raise CommandError(str(exc)) from None
        try:
            if first is not None:
                emit(itertools.chain([first], records))  # one flush at the end, not one per record
        finally:
            records.close()
            report()
        raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)

    from kafkatool.assign.kafka_client import KafkaAdmin

    with KafkaAdmin(bootstrap_server, client_id=settings.client_id) as admin:
        group_member = None
        try:
            if settings.group_id is not None:
                consumer = group_member = G.GroupConsumer(
                    admin,
                    settings,
                    topic=topic,
                    pattern=pattern,
                    isolation=isolation,
                    exit_at_end=exit_at_end,
                    log=_warn,
                )
            else:
                fetcher = C.LiveConsumer(
                    admin,
                    isolation,
                    exit_at_end=exit_at_end,
                    reset=reset_spec,
                    max_bytes=settings.fetch_max_bytes,
                    partition_max_bytes=settings.max_partition_fetch_bytes,
                    check_crcs=settings.check_crcs,
                )
                if pattern is not None:
                    consumer = C.PatternConsumer(
                        fetcher,
                        pattern,
                        start,
                        settings.metadata_max_age_ms,
                        settings.exclude_internal_topics,
                    )
                else:
                    consumer = C.TopicConsumer(
                        fetcher,
                        topic,
                        partition,
                        start,
                        auto_create=settings.allow_auto_create_topics,
                        backoff_ms=settings.retry_backoff_ms,
                        backoff_max_ms=settings.retry_backoff_max_ms,
                        log=_warn,
                    )
        except C.ConsumeError as exc:
            raise CommandError(str(exc)) from None
        code = EXIT_OK
        unconsumed: list = []
        previous_term = None
        if group_member is not None:
            # kill (SIGTERM) ends a member as Ctrl-C does, ConsoleConsumer's shutdown hook:
            # commit and LeaveGroup, not a member left to time out
            previous_term = signal.signal(signal.SIGTERM, _terminate)
        try:
            last = time.monotonic()
            # every round waits at most FETCH_MAX_WAIT_MS at the broker: the loop ends by an
            # option, the end of the data (--exit-at-end) or Ctrl-C, as ConsoleConsumer's
            while limit != count and not consumer.finished:
                wait = C.FETCH_MAX_WAIT_MS
                if timeout_ms is not None:
                    left = timeout_ms - (time.monotonic() - last) * 1000
                    if left <= 0:
                        break
                    wait = int(min(wait, left))
                got = consumer.poll(wait)
                if got:
                    last = time.monotonic()
                    unconsumed = got
                    unconsumed = got[emit(got) :]
                    if limit == count:
                        break
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        except C.ConsumeError as exc:
            error_line(str(exc))
            code = EXIT_USAGE
        finally:
            if group_member is not None:
                # ConsoleConsumer's cleanup: unprinted records given back, commit, LeaveGroup
                try:
                    group_member.close(unconsumed)
                except (C.ConsumeError, C.KafkaAdminError) as exc:
                    error_line(str(exc))
                    code = code or EXIT_USAGE
                except KeyboardInterrupt:
                    code = EXIT_INTERRUPTED
            report()
            if previous_term is not None:
                signal.signal(signal.SIGTERM, previous_term)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(
        "consume",
        help=HELP,
        short_help="Print a topic's records (kafka-console-consumer.sh, kcat -C), live or from log dirs.",
    )(consume)
