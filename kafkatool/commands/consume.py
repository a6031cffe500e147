"""``kafkatool consume``: kafka-console-consumer.sh (ConsoleConsumer with DefaultMessageFormatter)
and kcat -C, through a cluster or read-only from log dirs or a backup."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    command_config_option,
    error_line,
    handle_errors,
    property_args,
)

HELP = """Print a topic's records as kafka-console-consumer.sh does (ConsoleConsumer and its
DefaultMessageFormatter, Kafka 3.7: the same options, --property names, defaults and output
bytes), live through --bootstrap-server or read-only from log dirs (--log-dir).

Live, the tool assigns itself the partitions (every partition, or --partition) and reads
each at its leader (Fetch; a moved leader is followed through Metadata); there is no consumer
group (--group is out of scope: nothing is committed). The start is ListOffsets' latest
(the high watermark, or the last stable offset with read_committed) unless --from-beginning
or --offset; a position out of range restarts at the latest, as ConsoleConsumer's
auto.offset.reset=latest. It runs until --max-messages, --timeout-ms or --exit-at-end ends it,
or Ctrl-C (exit 130).

With --log-dir (repeatable: a broker's log dirs, a backup, a running broker's dir too; no lock,
nothing written) the same records come from the data on disk through the storage engine's
own read path, from the log start offset (or --offset) to the log end (read_uncommitted) or
the last stable offset (read_committed, from the replayed producer state), then it ends.

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


@handle_errors
def consume(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="The topic to consume."),
    partition: int | None = typer.Option(
        None, "--partition", metavar="N", help="Only this partition (default: every partition)."
    ),
    offset: str | None = typer.Option(
        None,
        "--offset",
        metavar="earliest|latest|N",
        help="Where to start: earliest, latest or an offset (an offset needs --partition). Default: "
        "latest live, the log start offset with --log-dir.",
    ),
    from_beginning: bool = typer.Option(
        False, "--from-beginning", help="Start at the earliest offset (not with --offset)."
    ),
    max_messages: int | None = typer.Option(
        None, "--max-messages", metavar="N", help="Exit after N records (default: no limit)."
    ),
    timeout_ms: int | None = typer.Option(
        None, "--timeout-ms", metavar="MS", help="Exit when no record arrives for MS milliseconds."
    ),
    isolation_level: str = typer.Option(
        "read_uncommitted",
        "--isolation-level",
        metavar="read_uncommitted|read_committed",
        help="read_committed: stop at the last stable offset and leave out aborted transactions' records.",
    ),
    exit_at_end: bool = typer.Option(
        False,
        "--exit-at-end",
        help="Exit at each partition's high watermark (read_committed: last stable offset) as read at "
        "the start (kcat -e).",
    ),
    prop: list[str] = typer.Option(None, "--property", metavar="KEY=VALUE", help=PROPERTY_HELP),
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
    from kafkatool.formats import message_formatter as F

    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    if partition is not None and from_beginning and offset is not None:
        raise CommandError("Options from-beginning and offset cannot be specified together.")
    if partition is None and offset is not None:
        raise CommandError("The partition is required when offset is specified.")
    if partition is not None and partition < 0:
        raise CommandError(f"--partition {partition}: a partition is a number from 0")
    if isolation_level not in C.ISOLATION_LEVELS:
        raise CommandError(
            f"--isolation-level {isolation_level!r}: expected read_uncommitted or read_committed"
        )
    if max_messages is not None and max_messages < 0:
        raise CommandError(f"--max-messages {max_messages}: must not be negative")
    if timeout_ms is not None and timeout_ms < 0:
        raise CommandError(f"--timeout-ms {timeout_ms}: must not be negative")
    formatter = F.MessageFormatter(property_args(prop))
    render = F.json_line if json_out else formatter.format
    isolation = C.ISOLATION_LEVELS[isolation_level]
    if offset is not None:
        start = C.parse_offset(offset)
    elif from_beginning or log_dir:
        start = C.EARLIEST_TIMESTAMP
    else:
        start = C.LATEST_TIMESTAMP
    out = sys.stdout.buffer
    count = 0
    limit = max_messages if max_messages is not None else -1

    def emit(records) -> bool:
        """Write records; True once --max-messages is reached."""
        nonlocal count
        for r in records:
            if count == limit:
                return True
            out.write(render(r))
            count += 1
        out.flush()
        return count == limit

    def report() -> None:
        sys.stderr.write(f"Processed a total of {count} messages\n")
        sys.stderr.flush()

    if log_dir:
        from kafkatool.commands.topic_sources import targets

        dirs = sorted({t.log_dir for t in targets(list(log_dir))})
        records = C.consume_offline(dirs, topic, partition, start, isolation)
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
        raise typer.Exit(EXIT_OK)

    from kafkatool.assign.kafka_client import KafkaAdmin

    with KafkaAdmin(bootstrap_server, client_id="console-consumer") as admin:
        try:
            consumer = C.LiveConsumer(admin, topic, partition, start, isolation, exit_at_end=exit_at_end)
        except C.ConsumeError as exc:
            raise CommandError(str(exc)) from None
        code = EXIT_OK
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
                    if emit(got):
                        break
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        except C.ConsumeError as exc:
            error_line(str(exc))
            code = EXIT_USAGE
        finally:
            report()
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(
        "consume",
        help=HELP,
        short_help="Print a topic's records (kafka-console-consumer.sh, kcat -C), live or from log dirs.",
    )(consume)
