"""``kafkatool perf produce`` and ``perf consume``: kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh (Kafka 3.7's ProducerPerformance and ConsumerPerformance) on the
project's producer and consumer (assign/perf)."""

from __future__ import annotations

import random
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
)

HELP = """Load a cluster and measure it as Kafka's perf tools do: produce (kafka-producer-perf-test.sh)
and consume (kafka-consumer-perf-test.sh), with their options and output lines, on kafkatool's own
producer and consumer group member."""

PRODUCE_HELP = """Send --num-records records to a topic as kafka-producer-perf-test.sh (Kafka 3.7's
ProducerPerformance) does, and print its lines: every 5 s of acknowledgements "N records sent,
X records/sec (Y MB/sec), A ms avg latency, B ms max latency.", at the end the same with the
50th, 95th, 99th and 99.9th percentile latencies, computed as Kafka's Stats class does (latency:
integer milliseconds from send to acknowledgement; percentiles over every
numRecords / min(numRecords, 500000)-th acknowledgement).

Records have no key (the sticky partitioner spreads them). Payloads: --record-size random
upper-case letters (A-Z, as Kafka's; a seeded generator, not Java's SplittableRandom stream, whose
bytes would cost more than the send), or one of the --payload-file payloads (the file's UTF-8 text
split at --payload-delimiter, a Java regular expression, default a newline), chosen per record by
SplittableRandom(0) as Kafka's tool chooses them.

--throughput N holds about N records/s by Kafka's ThroughputThrottler rule (-1: no limit; 0, on
which Kafka's tool blocks forever, is refused). Producer configs as Kafka's tool takes them:
--producer.config FILE, then --producer-props KEY=VALUE ... over it (Kafka's form: several after
one option; a value holding '=' is refused, as Kafka does), client.id perf-producer-client unless
set, Kafka's producer defaults (linger.ms 0, batch.size 16384, acks all, idempotent) and checks;
security configs join --command-config's. --bootstrap-server sets bootstrap.servers (over the
configs).

The producer has no I/O thread: a batch goes when it is full or its linger.ms ran out, and never
before the previous round of requests took its own time again after its end, which is when
Kafka's sender thread would be free; meanwhile the records sent are appended, as in Kafka, where
the caller goes on while requests are in flight. --print-metrics is refused: this producer keeps
no Kafka client metrics.

Transactions as Kafka 3.7's tool runs them: with --transaction-duration-ms N above 0 the records
go in transactions of --transactional-id (default performance-producer-default-transactional-id,
which replaces a transactional.id of the producer configs, as in 3.7), each committed after the
record sent N ms or more after it began, the last at the end; the lines are the same. Where 3.7
runs none, or fails every send: a --transactional-id or a producer configs' transactional.id
without --transaction-duration-ms runs transactions of 3000 ms (Kafka 4.0's rule; 3.7 ignores
the option and fails every send with the config), a warning says so; a non-positive
--transaction-duration-ms with a transactional id is refused ("--transaction-duration-ms should
be greater than zero", 4.0's words), without one it means no transactions (3.7). transaction.timeout.ms
(60000) is the coordinator's abort of an open transaction. A transaction that cannot be committed
(a record the cluster refused) is aborted and ends the run; a producer fenced by another with the
same transactional id ends it too: one line on stderr with the reason, exit 1 (2 if no record was
acknowledged). Ctrl-C aborts the open transaction.

--json: one object per window and one summary (records, records_per_sec, mb_per_sec,
avg_latency_ms, max_latency_ms, and p50_ms, p95_ms, p99_ms, p999_ms and the payload bytes). A failed record is a line on
stderr (the first 100; Kafka prints each one's stack trace); records that failed because the
producer did (fenced ...) or their transaction was aborted are one line with their count; exit 1
(2 if none was acknowledged)."""

#: ProducerPerformance's --transactional-id default (Kafka 3.7)
DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
#: ProducerPerformance.DEFAULT_TRANSACTION_DURATION_MS (Kafka 4.0): a transactional id without a duration
DEFAULT_TRANSACTION_DURATION_MS = 3000

CONSUME_HELP = """Read --messages records of a topic as kafka-consumer-perf-test.sh (Kafka 3.7's
ConsumerPerformance) does, as a member of the consumer group --group (default perf-consumer-N, N
random below 100000, as Kafka's), polling every 100 ms, from the group's committed offsets, else
the earliest (--from-latest: the latest) offset; then a commit and LeaveGroup. It stops at
--messages records or when no record came for --timeout ms (then Kafka's WARNING line on stdout
before the results, --json: on stderr; exit 0, as Kafka's tool).

Output: the header "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec" (--hide-header: none)
and one line of those values; with --show-detailed-stats the header "time, threadId, ..." and a
line every --reporting-interval ms while records come, and no final line, as Kafka's tool.
Times are --date-format (java.text.SimpleDateFormat, default yyyy-MM-dd HH:mm:ss:SSS) in the
machine's time zone; data is the records' key and value bytes; rebalance time is the time from
the start (then from each revocation) until the group assigned the partitions, fetch time the
rest. Unlike Kafka's tool, which counts every record of its last poll (up to max.poll.records
past --messages), exactly --messages records are counted and the rest is left uncommitted.

Consumer configs: --consumer.config FILE, then the options over it, as Kafka's tool: group.id,
auto.offset.reset, max.partition.fetch.bytes (--fetch-size, default 1048576), client.id
perf-consumer-client unless set; checked as `kafkatool consume` checks them. --json: one object
per window (with --show-detailed-stats) and the summary."""


def _invalid_prop(prop: str) -> CommandError:
    return CommandError(f"Invalid property: {prop}")


def _perf_props(items: list[str]) -> dict[str, str]:
    """ProducerPerformance.readProps: each item split at '=' into exactly two pieces (Java's
    split drops trailing empty pieces: "a=" is one piece), else "Invalid property"."""
    out = {}
    for prop in items:
        pieces = prop.split("=")
        while len(pieces) > 1 and pieces[-1] == "":
            pieces.pop()
        if len(pieces) != 2:
            raise _invalid_prop(prop)
        out[pieces[0]] = pieces[1]
    return out


def transaction_props(
    props: dict[str, str], transactional_id: str | None, duration_ms: int | None
) -> tuple[int, list[str]]:
    """ProducerPerformance's transaction options over the producer configs ``props`` (changed in
    place): the transaction duration (0: no transactions) and the warnings to print. Kafka 3.7:
    a duration above 0 turns transactions on with --transactional-id (its default included),
    which replaces the configs' transactional.id. Where 3.7 runs none although an id is given,
    Kafka 4.0's rule: transactions of 3000 ms; a duration not above 0 with an id is refused."""
    configured = props.get("transactional.id")
    if duration_ms is not None and duration_ms > 0:
        tid = transactional_id if transactional_id is not None else DEFAULT_TRANSACTIONAL_ID
        warnings = []
        if configured is not None and configured != tid:
            warnings.append(
                f"transactional.id={configured} of the producer configs is replaced by --transactional-id "
                f"({tid}), as Kafka 3.7's kafka-producer-perf-test.sh does"
            )
        props["transactional.id"] = tid
        return duration_ms, warnings
    if transactional_id is None and configured is None:
        return 0, []  # 3.7: no transactions (a duration of 0 or below among them)
    if duration_ms is not None:
        raise CommandError("--transaction-duration-ms should be greater than zero")
    if transactional_id is not None:
        props["transactional.id"] = transactional_id
    return DEFAULT_TRANSACTION_DURATION_MS, [
        f"transactional id {props['transactional.id']} without --transaction-duration-ms: transactions of "
        f"{DEFAULT_TRANSACTION_DURATION_MS} ms (Kafka 4.0's tool; 3.7's runs none with --transactional-id "
        "and fails every send with a transactional.id config)"
    ]


@handle_errors
def produce(
    ctx: typer.Context,
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="Produce messages to this topic."),
    num_records: int = typer.Option(
        ..., "--num-records", metavar="NUM-RECORDS", help="Number of messages to produce."
    ),
    record_size: int | None = typer.Option(
        None,
        "--record-size",
        metavar="RECORD-SIZE",
        help="Message size in bytes (exactly one of --record-size and --payload-file).",
    ),
    payload_file: Path | None = typer.Option(
        None,
        "--payload-file",
        metavar="PAYLOAD-FILE",
        help="File to read the message payloads from (UTF-8 text); a payload is chosen at random per "
        "record (exactly one of --record-size and --payload-file).",
    ),
    payload_delimiter: str = typer.Option(
        "\\n",
        "--payload-delimiter",
        metavar="PAYLOAD-DELIMITER",
        help="The delimiter of --payload-file's payloads, a Java regular expression; \\n is a newline.",
    ),
    throughput: int = typer.Option(
        ...,
        "--throughput",
        metavar="THROUGHPUT",
        help="Throttle to approximately THROUGHPUT records/s; -1: no throttling.",
    ),
    producer_props: list[str] = typer.Option(
        None,
        "--producer-props",
        metavar="PROP-NAME=PROP-VALUE",
        help="Producer configs (bootstrap.servers, acks, linger.ms, batch.size, compression.type, ...); "
        "several may follow one --producer-props, as in Kafka; over --producer.config's.",
    ),
    producer_config: Path | None = typer.Option(
        None, "--producer.config", metavar="CONFIG-FILE", help="Producer config properties file."
    ),
    print_metrics: bool = typer.Option(
        False, "--print-metrics", help="Refused: kafkatool's producer keeps no Kafka client metrics."
    ),
    transactional_id: str | None = typer.Option(
        None,
        "--transactional-id",
        metavar="TRANSACTIONAL-ID",
        help=f"The transactional id of the transactions (default {DEFAULT_TRANSACTIONAL_ID}); without "
        f"--transaction-duration-ms, transactions of {DEFAULT_TRANSACTION_DURATION_MS} ms.",
    ),
    transaction_duration_ms: int | None = typer.Option(
        None,
        "--transaction-duration-ms",
        metavar="TRANSACTION-DURATION",
        help="The max age of each transaction: commitTransaction is called after this time has elapsed. "
        "Transactions are only enabled if this value is positive (or a transactional id is given).",
    ),
    bootstrap_server: str | None = typer.Option(
        None,
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="The cluster (bootstrap.servers, over the producer configs').",
    ),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per window and one summary."),
) -> None:
    from kafkatool.assign import perf as P
    from kafkatool.assign.kafka_client import KafkaAdmin
    from kafkatool.assign.producer import Producer
    from kafkatool.assign.producer_config import producer_settings

    extra = list(ctx.args)
    if extra and not producer_props:
        raise CommandError(f"unrecognized arguments: '{' '.join(extra)}'")
    for item in extra:
        if item.startswith("-"):
            raise CommandError(f"unrecognized arguments: '{item}'")
    if (record_size is None) == (payload_file is None):
        raise CommandError("either --record-size or --payload-file must be specified but not both.")
    if num_records < 1:
        raise CommandError(f"--num-records {num_records}: must be at least 1")
    if record_size is not None and record_size < 0:
        raise CommandError(f"--record-size {record_size}: must not be negative")
    if throughput == 0:
        raise CommandError(
            "--throughput 0: Kafka's tool would block after the first record forever; give a rate above 0 or -1"
        )
    if print_metrics:
        raise CommandError("--print-metrics: kafkatool's producer keeps no Kafka client metrics to print")
    if not producer_props and producer_config is None and bootstrap_server is None:
        raise CommandError("Either --producer-props or --producer.config must be specified.")
    props = load_properties_file(producer_config, "--producer.config") if producer_config is not None else {}
    props.update(_perf_props([*(producer_props or []), *extra]))
    props.setdefault("client.id", "perf-producer-client")
    duration, warnings = transaction_props(props, transactional_id, transaction_duration_ms)
    if bootstrap_server is not None:
        props["bootstrap.servers"] = bootstrap_server
    if not props.get("bootstrap.servers", "").strip():
        raise CommandError('Missing required configuration "bootstrap.servers" which has no default value.')
    settings = producer_settings(props)
    add_client_security(settings.security, "producer configs")
    for note in [*warnings, *settings.notes]:
        sys.stderr.write(f"kafkatool: warning: {note}\n")

    out = sys.stdout

    def say(text: str) -> None:
        # Kafka's lines on stdout; with --json stdout holds only the objects
        (sys.stderr if json_out else out).write(text + "\n")
        (sys.stderr if json_out else out).flush()

    delimiter = "\n" if payload_delimiter == "\\n" else payload_delimiter
    choices = P.read_payload_file(payload_file, delimiter, say) if payload_file is not None else []
    payloads = P.Payloads(record_size, choices)

    def on_window(w) -> None:
        if json_out:
            emit_json(w.json())
        else:
            out.write(w.line() + "\n")
        out.flush()

    shown = [0]

    def on_error(number: int, error: str) -> None:
        shown[0] += 1
        if shown[0] <= 100:
            error_line(f"record {number}: {error}")

    with KafkaAdmin(props["bootstrap.servers"].strip(), client_id=settings.client_id) as admin:
        stats = P.ProducerStats(num_records, 5000, on_window)
        run = P.ProduceRun(num_records, stats, on_error)
        producer = Producer(admin, topic, settings, partition=None, on_outcome=run.outcome)
        producer.start()
        result = run.run(producer, payloads, throughput, duration)
    if shown[0] > 100:
        error_line(f"{shown[0] - 100} more records failed")
    if result.transaction_error is not None:
        # one line: why the run's transactions ended (fenced, or the transaction it aborted)
        ended = "" if producer.fatal is not None else "transaction aborted: "
        shared = f", {result.shared} records failed with it" if result.shared else ""
        error_line(
            f"transactional id '{settings.transactional_id}': {ended}{result.transaction_error} "
            f"({producer.committed} transactions committed, {producer.aborted} aborted{shared})"
        )
    elif result.shared:
        error_line(f"{result.shared} records failed: {producer.fatal}")
    if json_out:
        emit_json(result.summary.json())
    else:
        out.write(result.summary.line() + "\n")
    out.flush()
    if result.interrupted:
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.failed or result.transaction_error is not None:
        raise typer.Exit(EXIT_FINDINGS if result.summary.records else EXIT_USAGE)
    raise typer.Exit(EXIT_OK)


@handle_errors
def consume(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="The topic to consume from."),
    messages: int = typer.Option(
        ..., "--messages", metavar="COUNT", help="The number of messages to consume."
    ),
    bootstrap_server: str | None = typer.Option(
        None, "--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help="The server(s) to connect to."
    ),
    broker_list: str | None = typer.Option(
        None,
        "--broker-list",
        metavar="HOST:PORT[,HOST:PORT]",
        help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified.",
    ),
    command_config: str | None = command_config_option(),
    group: str | None = typer.Option(
        None, "--group", metavar="GID", help="The group id to consume on (default perf-consumer-N, N random)."
    ),
    fetch_size: int = typer.Option(
        1048576,
        "--fetch-size",
        metavar="SIZE",
        help="The amount of data to fetch in a single request per partition (max.partition.fetch.bytes).",
    ),
    from_latest: bool = typer.Option(
        False,
        "--from-latest",
        help="Without a committed offset, start at the latest offset instead of the earliest.",
    ),
    socket_buffer_size: int = typer.Option(
        2097152,
        "--socket-buffer-size",
        metavar="SIZE",
        help="The size of the TCP receive buffer (receive.buffer.bytes; taken without effect).",
    ),
    threads: int | None = typer.Option(
        None, "--threads", metavar="COUNT", help="DEPRECATED AND IGNORED: Number of processing threads."
    ),
    num_fetch_threads: int | None = typer.Option(
        None,
        "--num-fetch-threads",
        metavar="COUNT",
        help="DEPRECATED AND IGNORED: Number of fetcher threads.",
    ),
    consumer_config: Path | None = typer.Option(
        None, "--consumer.config", metavar="CONFIG-FILE", help="Consumer config properties file."
    ),
    print_metrics: bool = typer.Option(
        False, "--print-metrics", help="Refused: kafkatool's consumer keeps no Kafka client metrics."
    ),
    show_detailed_stats: bool = typer.Option(
        False,
        "--show-detailed-stats",
        help="Report stats every --reporting-interval (and no final line, as Kafka's tool).",
    ),
    timeout: int = typer.Option(
        10000,
        "--timeout",
        metavar="MS",
        help="The maximum allowed time in milliseconds between returned records.",
    ),
    reporting_interval: int = typer.Option(
        5000,
        "--reporting-interval",
        metavar="INTERVAL-MS",
        help="Interval in milliseconds of the progress lines.",
    ),
    date_format: str = typer.Option(
        "yyyy-MM-dd HH:mm:ss:SSS",
        "--date-format",
        metavar="FORMAT",
        help="The format of the time fields (java.text.SimpleDateFormat's letters).",
    ),
    hide_header: bool = typer.Option(False, "--hide-header", help="Skip printing the header."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per window and one summary."),
) -> None:
    from kafkatool.assign import consume as C
    from kafkatool.assign import group_consumer as G
    from kafkatool.assign import perf as P
    from kafkatool.assign.kafka_client import KafkaAdmin
    from kafkatool.formats.java_format import SimpleDateFormat

    start_ms = P.now_ms()
    out = sys.stdout
    bootstrap = bootstrap_server or broker_list
    if not bootstrap:
        raise CommandError('Missing required argument "[bootstrap-server]"')
    if threads is not None or num_fetch_threads is not None:
        (sys.stderr if json_out else out).write(
            "WARNING: option [threads] and [num-fetch-threads] have been deprecated and will be ignored by the test\n"
        )
    if messages < 0:
        raise CommandError(f"--messages {messages}: must not be negative")
    if reporting_interval <= 0:
        raise CommandError("Reporting interval must be greater than 0.")
    if timeout < 0:
        raise CommandError(f"--timeout {timeout}: must not be negative")
    if fetch_size < 0:
        raise CommandError(f"--fetch-size {fetch_size}: must not be negative")
    if print_metrics:
        raise CommandError("--print-metrics: kafkatool's consumer keeps no Kafka client metrics to print")
    dates = SimpleDateFormat(date_format)
    # ConsumerPerfOptions.props: the file, then the options over it
    props = load_properties_file(consumer_config, "--consumer.config") if consumer_config else {}
    props["bootstrap.servers"] = bootstrap
    props["group.id"] = group if group is not None else f"perf-consumer-{random.randrange(100_000)}"
    props["receive.buffer.bytes"] = str(socket_buffer_size)
    props["max.partition.fetch.bytes"] = str(fetch_size)
    props["auto.offset.reset"] = "latest" if from_latest else "earliest"
    props["check.crcs"] = "false"
    props.setdefault("client.id", "perf-consumer-client")
    try:
        settings = G.consumer_settings(props)
    except C.ConsumeError as exc:
        raise CommandError(str(exc)) from None
    add_client_security(settings.security, "consumer configs")
    for note in settings.notes:
        sys.stderr.write(f"kafkatool: WARNING: {note}\n")
    isolation = C.ISOLATION_LEVELS[settings.isolation_level or "read_uncommitted"]

    def on_window(w) -> None:
        if json_out:
            emit_json(w.json())
        else:
            out.write(w.line(dates) + "\n")
        out.flush()

    code = EXIT_OK
    with KafkaAdmin(bootstrap, client_id=settings.client_id) as admin:
        try:
            C.topic_partitions(admin.metadata([topic], keep=True), topic, None)
        except C.ConsumeError as exc:
            raise CommandError(str(exc)) from None
        if not hide_header and not json_out:
            out.write((P.DETAILED_HEADER if show_detailed_stats else P.HEADER) + "\n")
            out.flush()
        timer = P.RebalanceTimer(start_ms)
        member = G.GroupConsumer(
            admin,
            settings,
            topic=topic,
            pattern=None,
            isolation=isolation,
            log=lambda text: sys.stderr.write(f"kafkatool: WARNING: {text}\n"),
            listener=timer,
        )
        result = None
        try:
            result = P.run_consumer(
                member,
                timer,
                start_ms,
                messages,
                timeout,
                reporting_interval,
                on_window if show_detailed_stats else None,
            )
        except C.ConsumeError as exc:
            error_line(str(exc))
            code = EXIT_USAGE
        finally:
            try:
                member.close(result.unconsumed if result is not None else [])
            except (C.ConsumeError, C.KafkaAdminError) as exc:
                error_line(str(exc))
                code = code or EXIT_USAGE
    if result is None:
        raise typer.Exit(code)
    if result.timed_out:
        (sys.stderr if json_out else out).write(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({timeout} ms) "
            "exceeded. You can use the --timeout option to increase the timeout.\n"
        )  # ConsumerPerformance: stdout, and the run ends as any other (exit 0)
    if json_out:
        emit_json(result.summary.json())
    elif not show_detailed_stats:
        out.write(result.summary.line(dates) + "\n")
    out.flush()
    if result.interrupted:
        code = EXIT_INTERRUPTED
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="perf", help=HELP, no_args_is_help=True)
    sub.command(
        "produce",
        help=PRODUCE_HELP,
        short_help="Load a topic and measure it (kafka-producer-perf-test.sh).",
        context_settings={"allow_extra_args": True},
    )(produce)
    sub.command(
        "consume",
        help=CONSUME_HELP,
        short_help="Consume and measure (kafka-consumer-perf-test.sh).",
    )(consume)
    app.add_typer(sub, name="perf")
