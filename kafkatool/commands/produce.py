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
    add_client_security,
    command_config_option,
    emit_json,
    error_line,
    handle_errors,
    load_properties_file,
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
choose), an unkeyed one (every one with partitioner.ignore.keys=true) to a sticky partition, chosen at
random among those with a leader and kept until batch.size bytes went to it. The producer is
idempotent by default, as Kafka's: InitProducerId, sequence numbers, and a batch sent again after a
lost answer is recognised by the broker, never appended twice. When the broker lost acknowledged
batches (OUT_OF_ORDER_SEQUENCE_NUMBER for the next batch, UNKNOWN_PRODUCER_ID from an old broker) the
producer bumps its epoch and sends the batch again from sequence 0 (KIP-360), as Kafka's producer
does; PRODUCER_FENCED ends the run. Retriable errors and leader changes are followed (metadata
refreshed, retries times, retry.backoff.ms apart and doubling up to retry.backoff.max.ms); an
unreachable broker is waited for up to delivery.timeout.ms (120 s).

Producer configs as kafka-console-producer.sh merges them: --producer.config FILE, then each
--producer-property KEY=VALUE over it, then a dedicated option (--request-required-acks, --timeout,
--batch-size, --max-partition-memory-bytes, --request-timeout-ms, --message-send-max-retries,
--retry-backoff-ms, --socket-buffer-size, --max-memory-bytes, --metadata-expiry-ms, --max-block-ms)
when given; an option not given only fills in its default where the config is not set. Each is
applied as Kafka's producer applies it (request.timeout.ms also bounds the wait for any answer,
then the connection is dropped and the batch retried; send.buffer.bytes and receive.buffer.bytes
size the sockets; buffer.memory bounds what waits; metadata.max.age.ms refreshes the metadata;
max.block.ms bounds the start's wait for the topic). compression.type is always
--compression-codec's. Kafka's checks and messages: a conflict (enable.idempotence=true with acks
not all, retries=0 or max.in.flight.requests.per.connection over 5; delivery.timeout.ms below
linger.ms + request.timeout.ms) or a bad value is one line, exit 2. A config Kafka's producer does
not know is warned about ("... was supplied but isn't a known config.") and the run goes on, as in
Kafka; partitioner.class and interceptor.classes are refused, and so is transactional.id (Kafka's
console producer never calls initTransactions, so its producer refuses every send; transactions
are perf produce's --transaction-duration-ms). security.protocol, ssl.* and sasl.* join
--command-config's.

A record the cluster refuses (MESSAGE_TOO_LARGE, INVALID_RECORD with its record error) or a line
that cannot be parsed is one line on stderr naming its input line; a parse error ends the input
(what was read before it is sent). At the end a summary line on stderr: records acknowledged,
their batch bytes, errors. Exit 1 if a record failed, 2 if none could be sent."""

#: ConsoleProducer's dedicated options and the producer configs they set, in its
#: maybeMergeOptions order (--max-partition-memory-bytes after --batch-size: it wins when both
#: are given)
OPTION_CONFIGS = [
    ("linger_ms", "linger.ms"),
    ("acks", "acks"),
    ("request_timeout_ms", "request.timeout.ms"),
    ("retries", "retries"),
    ("retry_backoff_ms", "retry.backoff.ms"),
    ("socket_buffer_size", "send.buffer.bytes"),
    ("max_memory_bytes", "buffer.memory"),
    ("batch_size", "batch.size"),
    ("max_partition_memory_bytes", "batch.size"),
    ("metadata_expiry_ms", "metadata.max.age.ms"),
    ("max_block_ms", "max.block.ms"),
]


def _reader_props(reader_config: Path | None, prop: list[str]) -> dict[str, str]:
    """ConsoleProducer.getReaderProps: the --reader-config file, --property over it."""
    from kafkatool.assign.line_reader import check_properties

    props = {}
    if reader_config is not None:
        props = check_properties(
            load_properties_file(reader_config, "--reader-config"), f"--reader-config {reader_config}:"
        )
    props.update(check_properties(property_args(prop)))
    return props


def _settings(producer_config: Path | None, producer_property: list[str], codec: str, options: dict):
    """The producer's configs as ConsoleProducer.producerProps merges them and Kafka's producer
    checks them (assign/producer_config); security configs join --command-config's."""
    from kafkatool.assign.producer_config import (
        console_producer_props,
        producer_settings,
        refuse_console_transactions,
    )

    notes: list[str] = []
    file_props = (
        load_properties_file(producer_config, "--producer.config") if producer_config is not None else {}
    )
    items = property_args(producer_property, "--producer-property")
    config_options = [(config, options.get(key)) for key, config in OPTION_CONFIGS]
    props = console_producer_props(file_props, items, config_options, codec, notes)
    if options.get("idempotence") is not None:
        props["enable.idempotence"] = "true" if options["idempotence"] else "false"
    settings = producer_settings(props)
    refuse_console_transactions(settings)
    settings.notes[:0] = notes
    add_client_security(settings.security, "producer configs")
    return settings


@handle_errors
def produce(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="The topic to produce records to."),
    bootstrap_server: str | None = typer.Option(
        None,
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="The cluster to write to (required).",
    ),
    broker_list: str | None = typer.Option(
        None,
        "--broker-list",
        metavar="HOST:PORT[,HOST:PORT]",
        help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified "
        "(kafka-console-producer.sh's).",
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
    reader_config: Path | None = typer.Option(
        None,
        "--reader-config",
        metavar="FILE",
        help="LineMessageReader properties from a file; --property takes precedence over it.",
    ),
    line_reader: str | None = typer.Option(
        None,
        "--line-reader",
        metavar="CLASS",
        help="The reader class: LineMessageReader only (kafka.tools.ConsoleProducer$LineMessageReader, "
        "Kafka 3.7's default, or org.apache.kafka.tools.LineMessageReader, Kafka 4.0's).",
    ),
    producer_property: list[str] = typer.Option(
        None,
        "--producer-property",
        metavar="KEY=VALUE",
        help="A producer config (repeatable), over --producer.config's: acks, compression.type (replaced "
        "by --compression-codec, as kafka-console-producer.sh does), linger.ms, batch.size, "
        "enable.idempotence, retries, retry.backoff.ms, retry.backoff.max.ms, delivery.timeout.ms, "
        "request.timeout.ms, max.request.size, client.id, max.in.flight.requests.per.connection (requests written before their answers are read, default 5), "
        "partitioner.ignore.keys, buffer.memory, max.block.ms, metadata.max.age.ms, send.buffer.bytes, "
        "receive.buffer.bytes; security.protocol, ssl.*, sasl.* as in --command-config. Kafka 3.8's "
        "compression.gzip/lz4/zstd.level are warned about and not applied, as Kafka 3.7 does.",
    ),
    producer_config: Path | None = typer.Option(
        None,
        "--producer.config",
        metavar="FILE",
        help="Producer configs from a properties file; --producer-property takes precedence over it.",
    ),
    partition: int | None = typer.Option(
        None, "--partition", metavar="N", help="Write every record to this partition."
    ),
    acks: str | None = typer.Option(
        None,
        "--request-required-acks",
        metavar="ACKS",
        help="The acks of the produce requests: 0, 1, -1 or all (acks; default -1, ConsoleProducer's).",
        show_default=False,
    ),
    codec: str = typer.Option(
        "none",
        "--compression-codec",
        metavar="CODEC",
        help="none, gzip, snappy, lz4 or zstd (compression.type).",
    ),
    batch_size: int | None = typer.Option(
        None, "--batch-size", metavar="BYTES", help="Bytes per partition batch (batch.size; default 16384)."
    ),
    linger_ms: int | None = typer.Option(
        None,
        "--timeout",
        "--linger-ms",
        metavar="MS",
        help="How long a batch waits for more records before it is sent (linger.ms; ConsoleProducer's "
        "--timeout, default 1000).",
    ),
    request_timeout_ms: int | None = typer.Option(
        None,
        "--request-timeout-ms",
        metavar="MS",
        help="The brokers' ack timeout of a produce request and the producer's wait for any answer, "
        "after which it drops the connection and retries (request.timeout.ms; default 1500).",
    ),
    retries: int | None = typer.Option(
        None,
        "--message-send-max-retries",
        metavar="N",
        help="Retries of a batch answered with a retriable error (retries; default 3).",
    ),
    retry_backoff_ms: int | None = typer.Option(
        None,
        "--retry-backoff-ms",
        metavar="MS",
        help="The first wait before a retry (retry.backoff.ms; default 100, doubling up to "
        "retry.backoff.max.ms, 1000).",
    ),
    max_partition_memory_bytes: int | None = typer.Option(
        None,
        "--max-partition-memory-bytes",
        metavar="BYTES",
        help="batch.size, as --batch-size (ConsoleProducer's second option for it: it wins when both are "
        "given; default 16384).",
    ),
    max_memory_bytes: int | None = typer.Option(
        None,
        "--max-memory-bytes",
        metavar="BYTES",
        help="buffer.memory (default 33554432): the bytes of batches waiting to be sent or answered, each "
        "counted at least batch.size as Kafka's BufferPool allocates them; when they would pass it, what is "
        "waiting is sent before more is read (Kafka's producer blocks the reader and sends at once); a "
        "record larger than it is refused as Kafka refuses it.",
    ),
    socket_buffer_size: int | None = typer.Option(
        None,
        "--socket-buffer-size",
        metavar="BYTES",
        help="send.buffer.bytes, the SO_SNDBUF of the producer's connections (ConsoleProducer's default "
        "102400; -1: the OS's).",
    ),
    metadata_expiry_ms: int | None = typer.Option(
        None,
        "--metadata-expiry-ms",
        metavar="MS",
        help="metadata.max.age.ms (default 300000): the topic's metadata is asked for again when it is "
        "older (new partitions are used from then on).",
    ),
    max_block_ms: int | None = typer.Option(
        None,
        "--max-block-ms",
        metavar="MS",
        help="max.block.ms (default 60000): how long the start waits for the topic's metadata (a topic being "
        'created); then "Topic T not present in metadata after MS ms.", exit 2.',
    ),
    sync: bool = typer.Option(
        False, "--sync", help="Send each record alone and wait for its acknowledgement before the next."
    ),
    idempotence: bool | None = typer.Option(
        None,
        "--idempotence/--no-idempotence",
        help="Idempotent producer (enable.idempotence=true/false); default: on unless acks is not all, "
        "retries is 0 or max.in.flight.requests.per.connection is over 5, as Kafka's producer.",
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
    from kafkatool.assign.line_reader import (
        LineMessageReader,
        LineReaderError,
        LineSource,
        check_reader_class,
    )
    from kafkatool.assign.producer import CODECS, Outcome, Producer
    from kafkatool.formats.records import SimpleRecord

    bootstrap = bootstrap_server or broker_list
    if not bootstrap:
        raise CommandError("Missing required option(s) [bootstrap-server]")
    if line_reader is not None:
        check_reader_class(line_reader)
    reader = LineMessageReader(_reader_props(reader_config, prop))
    if codec.lower() not in CODECS:
        raise CommandError(f"--compression-codec {codec!r}: expected none, gzip, snappy, lz4 or zstd")
    options = {
        "linger_ms": linger_ms,
        "acks": acks,
        "request_timeout_ms": request_timeout_ms,
        "retries": retries,
        "retry_backoff_ms": retry_backoff_ms,
        "batch_size": batch_size,
        "max_partition_memory_bytes": max_partition_memory_bytes,
        "max_memory_bytes": max_memory_bytes,
        "socket_buffer_size": socket_buffer_size,
        "metadata_expiry_ms": metadata_expiry_ms,
        "max_block_ms": max_block_ms,
    }
    settings = _settings(
        producer_config,
        producer_property,
        codec.lower(),
        {**{k: None if v is None else str(v) for k, v in options.items()}, "idempotence": idempotence},
    )
    for note in settings.notes:
        sys.stderr.write(f"kafkatool: warning: {note}\n")

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
        with KafkaAdmin(
            bootstrap,
            client_id=settings.client_id,
            # request.timeout.ms bounds the wait for every answer (NetworkClient's request timeout)
            timeout=max(settings.request_timeout_ms, 1) / 1000,
            buffers=(settings.send_buffer, settings.receive_buffer),
        ) as admin:
            producer = Producer(admin, topic, settings, partition=partition, on_outcome=on_outcome, sync=sync)
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
                    if producer.fatal is not None:
                        source.eof = True  # KafkaProducer.send throws after a fatal error: the run ends
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
