"""``kafkatool produce``: kafka-console-producer.sh (ConsoleProducer with its LineMessageReader)
and kcat -P: records from standard input or a file, one a line, to a topic."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    command_config_option,
    emit_json,
    error_line,
    handle_errors,
    property_args,
)

HELP = """Write records to a topic, one per input line, as kafka-console-producer.sh (Kafka 3.7's
ConsoleProducer and LineMessageReader) and kcat -P do.

Lines come from standard input or --file; a line ends at \\n, \\r or \\r\\n, as Java's readLine
splits them, and its bytes are sent as they are (kafka-console-producer.sh replaces bytes that are
not UTF-8 with U+FFFD; kcat keeps them, and so does kafkatool). --property takes LineMessageReader's
properties: parse.key=true (KEY<key.separator>VALUE, key.separator a tab by default), parse.headers=true
(H1:V1,H2:V2<headers.delimiter>..., headers.delimiter a tab, headers.separator "," (a regular
expression), headers.key.separator ":"), null.marker (a key, value or header value equal to it is
sent as null), ignore.error=true (a line without its separator is sent without key or headers
instead of stopping the run).

Partitions: --partition, else Kafka's default partitioner: a keyed record goes to
murmur2(key) % partitions (Utils.murmur2, the partition Java's and librdkafka's murmur2 partitioners
choose), an unkeyed one to a sticky partition, chosen at random among those with a leader and kept
until --batch-size bytes went to it. The producer is idempotent by default when acks is all, as
Kafka's: InitProducerId, sequence numbers, and a batch sent again after a lost answer is
recognised by the broker, never appended twice. Retriable errors and leader changes are followed
(metadata refreshed, --message-send-max-retries times, --retry-backoff-ms apart and doubling up to
1 s); an unreachable broker is waited for up to 120 s (the producer's delivery.timeout.ms).

A record the cluster refuses (MESSAGE_TOO_LARGE, INVALID_RECORD with its record error) or a line
that cannot be parsed is one line on stderr naming its input line; a parse error ends the input
(what was read before it is sent). At the end a summary line on stderr: records acknowledged,
their batch bytes, errors. Exit 1 if a record failed, 2 if none could be sent."""

ACKS = {"0": 0, "1": 1, "-1": -1, "all": -1}


def _reader_props(prop: list[str]) -> dict[str, str]:
    from kafkatool.assign.line_reader import check_properties

    return check_properties(property_args(prop))


@handle_errors
def produce(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="The topic to produce records to."),
    bootstrap_server: str = typer.Option(
        ..., "--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help="The cluster to write to."
    ),
    command_config: str | None = command_config_option(),
    file: Path | None = typer.Option(
        None, "--file", metavar="FILE", help="Read the lines from FILE instead of standard input."
    ),
    prop: list[str] = typer.Option(
        None,
        "--property",
        metavar="KEY=VALUE",
        help="A LineMessageReader property (repeatable): parse.key, key.separator, parse.headers, "
        "headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error.",
    ),
    partition: int | None = typer.Option(
        None, "--partition", metavar="N", help="Write every record to this partition."
    ),
    acks: str = typer.Option(
        "-1",
        "--request-required-acks",
        metavar="ACKS",
        help="The acks of the produce requests: 0, 1, -1 or all (ConsoleProducer's default: -1).",
    ),
    codec: str = typer.Option(
        "none", "--compression-codec", metavar="CODEC", help="none, gzip, snappy, lz4 or zstd."
    ),
    batch_size: int = typer.Option(
        16384, "--batch-size", metavar="BYTES", help="Bytes per partition batch (batch.size)."
    ),
    linger_ms: int = typer.Option(
        1000,
        "--timeout",
        "--linger-ms",
        metavar="MS",
        help="How long a batch waits for more records before it is sent (linger.ms; ConsoleProducer's "
        "--timeout, default 1000).",
    ),
    request_timeout_ms: int = typer.Option(
        1500, "--request-timeout-ms", metavar="MS", help="The brokers' ack timeout of a produce request."
    ),
    retries: int = typer.Option(
        3,
        "--message-send-max-retries",
        metavar="N",
        help="Retries of a batch answered with a retriable error.",
    ),
    retry_backoff_ms: int = typer.Option(
        100, "--retry-backoff-ms", metavar="MS", help="The first wait before a retry (doubles up to 1 s)."
    ),
    sync: bool = typer.Option(
        False, "--sync", help="Send each record alone and wait for its acknowledgement before the next."
    ),
    idempotence: bool | None = typer.Option(
        None,
        "--idempotence/--no-idempotence",
        help="Idempotent producer (enable.idempotence); default: on when acks is all, as Kafka's producer.",
        show_default=False,
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="One JSON object per acknowledged record (line, partition, offset, timestamp), in input order.",
    ),
) -> None:
    """kafka-console-producer.sh / kcat -P: see HELP."""
    from kafkatool.assign.kafka_client import KafkaAdmin
    from kafkatool.assign.line_reader import LineMessageReader, LineReaderError, LineSource
    from kafkatool.assign.producer import CODECS, Outcome, Producer
    from kafkatool.formats.records import SimpleRecord

    reader = LineMessageReader(_reader_props(prop))
    if acks.strip().lower() not in ACKS:
        raise CommandError(f"--request-required-acks {acks!r}: expected 0, 1, -1 or all")
    acks_value = ACKS[acks.strip().lower()]
    if codec.lower() not in CODECS:
        raise CommandError(f"--compression-codec {codec!r}: expected none, gzip, snappy, lz4 or zstd")
    for name, value, low in (
        ("--batch-size", batch_size, 0),
        ("--timeout", linger_ms, 0),
        ("--request-timeout-ms", request_timeout_ms, 1),
        ("--message-send-max-retries", retries, 0),
        ("--retry-backoff-ms", retry_backoff_ms, 0),
    ):
        if value < low:
            raise CommandError(f"{name} {value}: must be at least {low}")
    if idempotence is None:
        idempotence = acks_value == -1
    elif idempotence and acks_value != -1:
        raise CommandError(
            "Must set acks to all in order to use the idempotent producer. Otherwise we cannot guarantee idempotence."
        )
    if idempotence and retries == 0:
        raise CommandError("Must set retries to non-zero when using the idempotent producer.")

    if file is not None:
        # a pipe (--file <(cmd)) is input as good as a file: only what cannot be read is refused
        stream = open(file, "rb")  # noqa: SIM115 (closed below)
    else:
        stream = sys.stdin.buffer

    order: list[int] = []  # record line numbers in input order
    outcomes: dict[int, Outcome] = {}
    emitted = 0
    counts = {"ok": 0, "failed": 0}

    def on_outcome(o: Outcome) -> None:
        outcomes[o.number] = o
        if o.error is not None:
            counts["failed"] += 1
            error_line(f"line {o.number}: {o.error}")
        else:
            counts["ok"] += 1
        flush_json()

    def flush_json() -> None:
        nonlocal emitted
        while emitted < len(order) and order[emitted] in outcomes:
            o = outcomes.pop(order[emitted])
            emitted += 1
            if json_out and o.error is None:
                emit_json(
                    {
                        "type": "record",
                        "topic": topic,
                        "line": o.number,
                        "partition": o.partition,
                        "offset": o.offset if o.offset >= 0 else None,
                        "timestamp": o.timestamp,
                    }
                )
                sys.stdout.flush()

    import time

    producer = None
    interrupted = False
    try:
        with KafkaAdmin(bootstrap_server, client_id="console-producer") as admin:
            producer = Producer(
                admin,
                topic,
                acks=acks_value,
                codec=CODECS[codec.lower()],
                batch_size=batch_size,
                linger_ms=0 if sync else linger_ms,
                request_timeout_ms=request_timeout_ms,
                retries=retries,
                retry_backoff_ms=retry_backoff_ms,
                idempotence=idempotence,
                partition=partition,
                on_outcome=on_outcome,
            )
            producer.start()
            source = LineSource(stream)
            try:
                while not source.eof:
                    deadline = producer.next_deadline()
                    timeout = None if deadline is None else deadline - time.monotonic()
                    for line in source.poll(timeout):
                        try:
                            parsed = reader.parse(line)
                        except LineReaderError as exc:
                            counts["failed"] += 1
                            error_line(str(exc))
                            source.eof = True
                            break
                        order.append(line.number)
                        producer.append(line.number, SimpleRecord(parsed.value, parsed.key, parsed.headers))
                        if sync:
                            producer.send_ready(flush=True)
                            if counts["failed"]:
                                source.eof = True  # Kafka's --sync: the first failure ends the run
                                break
                    producer.send_ready(flush=False)
                producer.send_ready(flush=True)
            except KeyboardInterrupt:
                # Ctrl-C: what was read is still sent, as ConsoleProducer's shutdown hook closes
                # (flushes) its producer; then the contract's 130
                interrupted = True
                producer.send_ready(flush=True)
    finally:
        if file is not None:
            stream.close()
    flush_json()
    sent = producer.sent_bytes if producer is not None else 0
    sys.stderr.write(f"kafkatool: {counts['ok']} records, {sent} bytes, {counts['failed']} errors\n")
    if interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if counts["failed"]:
        raise typer.Exit(EXIT_FINDINGS if counts["ok"] else EXIT_USAGE)
    raise typer.Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command(
        "produce", help=HELP, short_help="Write lines to a topic (kafka-console-producer.sh, kcat -P)."
    )(produce)
