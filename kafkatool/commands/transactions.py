"""``kafkatool transactions``: Kafka 3.7's kafka-transactions.sh (TransactionsCommand) through a
cluster (``--bootstrap-server``), and offline from a broker's log dir or a backup of one
(``--log-dir``), which no other tool does: each partition's producer state rebuilt by the
broker's own start-up rule and the coordinator's ``__transaction_state`` replayed by its own
loader, so a hanging transaction (KIP-664) is found on a stopped broker's disk too.

The data comes from :mod:`kafkatool.broker.txn.live` or :mod:`kafkatool.broker.txn.offline`;
both are judged by :mod:`kafkatool.broker.txn.views` (the one find-hanging rule) and printed
here in TransactionsCommand's tables (ToolsUtils.prettyPrintTable) and words.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

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

HELP = (
    "Transactions like Kafka 3.7's kafka-transactions.sh: list, describe, describe-producers, abort "
    "and find-hanging through a cluster (--bootstrap-server); describe-producers, find-hanging, list "
    "and describe also offline from a broker's log dir or a backup of one (--log-dir, read-only, "
    "live or stopped), with each partition's producer state rebuilt as the broker rebuilds it at "
    "start-up and the transaction coordinator's state replayed from __transaction_state. Kafka's "
    "messages; a failure exits 2 (Kafka's tool: 1), find-hanging exits 1 when it finds one."
)
BOOTSTRAP_HELP = "The cluster to ask (host:port,...)."
LOG_DIR_HELP = (
    "Read a broker's log dir or a copy of one instead of a cluster (repeatable: every dir of the "
    "broker), read-only. Damaged data is read past (a batch failing its CRC as it is; where an "
    "entry does not parse, the rest of its segment left out), each damage one line on stderr "
    "naming the file, the byte and the offset, and the exit status is 1."
)
NOW_HELP = (
    "With --log-dir: the instant durations are measured from, epoch milliseconds or ISO-8601 "
    "(UTC unless a zone is given). Default: the newest record timestamp in the dirs (not the wall "
    "clock: a backup is judged as of when it was taken). Also the instant producer expiry "
    "(producer.id.expiration.ms) is judged at when the producer state is rebuilt."
)
DEBUG = " Enable debug logging for additional detail."

PRODUCER_HEADERS = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]
DESCRIBE_HEADERS = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]
LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
HANGING_HEADERS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
]
#: what an offline read adds to Kafka's columns
OFFLINE_PRODUCER_HEADERS = ["LastStableOffset"]
OFFLINE_HANGING_HEADERS = ["LastStableOffset", "TransactionalId", "CoordinatorState"]


def _bootstrap_option(required: bool = False):
    return typer.Option(
        ... if required else None, "--bootstrap-server", metavar="HOST:PORT", help=BOOTSTRAP_HELP
    )


def _log_dir_option():
    return typer.Option(None, "--log-dir", metavar="DIR", help=LOG_DIR_HELP)


def _now_option():
    return typer.Option(None, "--now", metavar="TIME", help=NOW_HELP)


def _json_option():
    return typer.Option(False, "--json", help=JSON_HELP)


class Failed(CommandError):
    """printErrorAndExit: Kafka's message, exit 2 (could not run)."""


def _fail(message: str, cause: Exception | None = None) -> Failed:
    if cause is not None:
        return Failed(f"{message}: {cause}.{DEBUG}")
    return Failed(message)


def _one_source(bootstrap_server: str | None, log_dir: list[Path] | None, now: str | None) -> None:
    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    if now is not None and not log_dir:
        raise CommandError("--now needs --log-dir (a cluster is asked now)")


def _admin(bootstrap_server: str):
    from kafkatool.assign.kafka_client import KafkaAdmin

    return KafkaAdmin(bootstrap_server, client_id="kafkatool-transactions")


def _offline(
    log_dir: list[Path],
    now: str | None,
    topic: str | None = None,
    partition: int | None = None,
    *,
    coordinator: bool = True,
    producers: bool = True,
):
    from kafkatool.broker.txn.offline import read
    from kafkatool.commands.topic_sources import parse_now, targets

    for d in log_dir:
        if not d.is_dir():
            raise CommandError(f"{d}: not a directory")
    now_ms = parse_now(now) if now is not None else None
    dirs = sorted({t.log_dir for t in targets(list(log_dir))})
    view = read(dirs, topic=topic, partition=partition, now_ms=now_ms, producers=producers)
    # damaged data the read met and read past, of what the command shows: a line each (the
    # caller exits 1)
    for d in (view.state_damage if coordinator else []) + view.damage:
        error_line(d.line())
    gap = view.coordinator_gap() if coordinator else None
    if gap is not None:  # the coordinator's view is partial: said once, on stderr
        sys.stderr.write(f"kafkatool: WARNING: {gap}\n")
        sys.stderr.flush()
    return view


def _table(headers: list[str], rows: list[list[str]]) -> None:
    from kafkatool.broker.txn.views import pretty_table

    sys.stdout.write(pretty_table(headers, rows))
    sys.stdout.flush()


def _none(v: int) -> str:
    return str(v) if v >= 0 else "None"


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


# ----------------------------------------------------------------------------- list


@handle_errors
def list_transactions(
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    json_out: bool = _json_option(),
) -> None:
    """List transactions: every transactional id each broker coordinates (ListTransactions at
    every broker); offline, those of the __transaction_state partitions in the dirs (the
    Coordinator column names the partition)."""
    from kafkatool.assign.kafka_client import KafkaAdminError

    _one_source(bootstrap_server, log_dir, None)
    rows: list[tuple[str, str, int, str]] = []
    damaged = False
    if log_dir:
        view = _offline(log_dir, None, producers=False)
        damaged = bool(view.state_damage)
        for tid, d in view.coordinator.items():
            rows.append((tid, str(d.coordinator), d.producer_id, d.state))
    else:
        from kafkatool.broker.txn import live

        try:
            with _admin(bootstrap_server) as admin:
                by_broker = live.list_transactions(admin)
        except KafkaAdminError as exc:
            raise _fail("Failed to list transactions", exc) from None
        for node, listings in by_broker.items():
            rows.extend((tid, str(node), pid, state) for tid, pid, state in listings)
    if json_out:
        for tid, coord, pid, state in rows:
            emit_json(
                {
                    "type": "transaction",
                    "transactional_id": tid,
                    "coordinator": int(coord) if coord.isdigit() else coord,
                    "producer_id": pid,
                    "state": state,
                }
            )
    else:
        _table(LIST_HEADERS, [[tid, coord, str(pid), state] for tid, coord, pid, state in rows])
    raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)


# ----------------------------------------------------------------------------- describe


@handle_errors
def describe(
    transactional_id: str = typer.Option(..., "--transactional-id", metavar="ID", help="transactional id"),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    now: str | None = _now_option(),
    json_out: bool = _json_option(),
) -> None:
    """Describe the state of an active transactional-id (FindCoordinator, then
    DescribeTransactions at its coordinator); offline, as the coordinator would load it from the
    __transaction_state partitions in the dirs. Exit 1 when the coordinator does not know it."""
    from kafkatool.assign.kafka_client import KafkaAdminError
    from kafkatool.broker.txn import live

    _one_source(bootstrap_server, log_dir, now)
    damaged = False
    if log_dir:
        view = _offline(log_dir, now, producers=False)
        desc = view.coordinator.get(transactional_id)
        now_ms = view.now_ms
        damaged = bool(view.state_damage)
    else:
        try:
            with _admin(bootstrap_server) as admin:
                desc = live.describe_transaction(admin, transactional_id)
        except KafkaAdminError as exc:
            raise _fail(
                f"Failed to describe transaction state of transactional-id `{transactional_id}`", exc
            ) from None
        now_ms = _now_ms()
    if desc is None:
        message = (
            f"Failed to describe transaction state of transactional-id `{transactional_id}`: "
            f"{live.not_found_message(transactional_id)}.{DEBUG}"
        )
        if json_out:
            emit_json({"type": "transaction", "transactional_id": transactional_id, "error": message})
        else:
            error_line(message)
        raise typer.Exit(EXIT_FINDINGS)
    duration = now_ms - desc.start_ms if desc.start_ms >= 0 else None
    parts = desc.partitions_in_java_order()
    if json_out:
        emit_json(
            {
                "type": "transaction",
                "coordinator": desc.coordinator,
                "transactional_id": transactional_id,
                "producer_id": desc.producer_id,
                "producer_epoch": desc.producer_epoch,
                "state": desc.state,
                "timeout_ms": desc.timeout_ms,
                "start_time_ms": desc.start_ms if desc.start_ms >= 0 else None,
                "duration_ms": duration,
                "partitions": [{"topic": t, "partition": p} for t, p in parts],
            }
        )
    else:
        row = [
            str(desc.coordinator),
            transactional_id,
            str(desc.producer_id),
            str(desc.producer_epoch),
            desc.state,
            str(desc.timeout_ms),
            str(desc.start_ms) if desc.start_ms >= 0 else "None",
            str(duration) if duration is not None else "None",
            ",".join(f"{t}-{p}" for t, p in parts),
        ]
        _table(DESCRIBE_HEADERS, [row])
    raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)


# ----------------------------------------------------------------------------- describe-producers


def _producer_json(pp, pr) -> dict:
    out = {
        "type": "producer",
        "topic": pp.topic,
        "partition": pp.partition,
        "producer_id": pr.producer_id,
        "producer_epoch": pr.producer_epoch,
        "coordinator_epoch": pr.coordinator_epoch if pr.coordinator_epoch >= 0 else None,
        "last_sequence": pr.last_sequence,
        "last_timestamp": pr.last_timestamp,
        "current_transaction_start_offset": pr.current_txn_start_offset if pr.open else None,
    }
    if pp.last_stable_offset is not None:
        out["last_stable_offset"] = pp.last_stable_offset
        out["log_end_offset"] = pp.log_end_offset
    return out


@handle_errors
def describe_producers(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="topic name"),
    partition: int = typer.Option(..., "--partition", metavar="N", help="partition number"),
    broker_id: int | None = typer.Option(
        None,
        "--broker-id",
        metavar="ID",
        help="optional broker id to describe the producer state on a specific replica",
    ),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    now: str | None = _now_option(),
    json_out: bool = _json_option(),
) -> None:
    """Describe the states of active producers for a topic partition (DescribeProducers at its
    leader, or at --broker-id). Offline (--log-dir): the partition's producer state rebuilt
    from its snapshot and log as the broker does at start-up, with one more column,
    LastStableOffset (the partition's: the first offset of its earliest open transaction, else
    its log end)."""
    _one_source(bootstrap_server, log_dir, now)
    damaged = False
    if log_dir:
        if broker_id is not None:
            raise CommandError("--broker-id needs --bootstrap-server (a log dir is one broker's)")
        view = _offline(log_dir, now, topic, partition, coordinator=False)
        damaged = bool(view.damage)
        if not view.partitions:
            raise Failed(
                f"Failed to describe producers for partition {topic}-{partition}: the log dirs hold no "
                f"partition {topic}-{partition}"
            )
        pp = view.partitions[0]
    else:
        from kafkatool.assign.kafka_client import KafkaAdminError
        from kafkatool.broker.txn import live

        where = f"broker {broker_id}" if broker_id is not None else "leader"
        try:
            with _admin(bootstrap_server) as admin:
                pp = live.describe_producers(admin, [(topic, partition)], broker_id)[(topic, partition)]
        except KafkaAdminError as exc:
            pp = exc
        if isinstance(pp, Exception):
            raise _fail(f"Failed to describe producers for partition {topic}-{partition} on {where}", pp)
    if json_out:
        for pr in pp.producers:
            emit_json(_producer_json(pp, pr))
        raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)
    offline = pp.last_stable_offset is not None
    rows = []
    for pr in pp.producers:
        row = [
            str(pr.producer_id),
            str(pr.producer_epoch),
            str(pr.coordinator_epoch if pr.coordinator_epoch >= 0 else -1),
            str(pr.last_sequence),
            str(pr.last_timestamp),
            _none(pr.current_txn_start_offset),
        ]
        if offline:
            row.append(str(pp.last_stable_offset))
        rows.append(row)
    _table(PRODUCER_HEADERS + (OFFLINE_PRODUCER_HEADERS if offline else []), rows)
    raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)


# ----------------------------------------------------------------------------- abort


@handle_errors
def abort(
    topic: str = typer.Option(..., "--topic", metavar="TOPIC", help="topic name"),
    partition: int = typer.Option(..., "--partition", metavar="N", help="partition number"),
    start_offset: int | None = typer.Option(
        None,
        "--start-offset",
        metavar="N",
        help="start offset of the transaction to abort (brokers on versions 3.0 and above: only this is required)",
    ),
    producer_id: int | None = typer.Option(
        None, "--producer-id", metavar="ID", help="producer id (brokers older than 3.0: with the next two)"
    ),
    producer_epoch: int | None = typer.Option(None, "--producer-epoch", metavar="N", help="producer epoch"),
    coordinator_epoch: int | None = typer.Option(
        None, "--coordinator-epoch", metavar="N", help="coordinator epoch"
    ),
    bootstrap_server: str = _bootstrap_option(required=True),
    command_config: str | None = command_config_option(),
    json_out: bool = _json_option(),
) -> None:
    """Abort a hanging transaction (requires administrative privileges: CLUSTER_ACTION): an
    ABORT marker written by the partition's leader (WriteTxnMarkers), as Admin.abortTransaction.
    With --start-offset the producer whose open transaction starts there is found with
    DescribeProducers first; a coordinator epoch of -1 (none yet) is sent as 0."""
    from kafkatool.assign.kafka_client import KafkaAdminError
    from kafkatool.broker.txn import live

    tp = (topic, partition)
    if start_offset is None and producer_id is None:
        raise CommandError(
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
            "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    if start_offset is None:
        if producer_epoch is None:
            raise CommandError("Missing required argument --producer-epoch")
        if coordinator_epoch is None:
            raise CommandError("Missing required argument --coordinator-epoch")
    for name, v, lo, hi in (
        ("--producer-epoch", producer_epoch, -(2**15), 2**15 - 1),
        ("--coordinator-epoch", coordinator_epoch, -(2**31), 2**31 - 1),
    ):
        if v is not None and not lo <= v <= hi:
            raise CommandError(f"{name} {v}: out of range [{lo}, {hi}]")
    with _admin(bootstrap_server) as admin:
        if start_offset is None:
            spec = (producer_id, producer_epoch, max(coordinator_epoch, 0))
        else:
            try:
                pp = live.describe_producers(admin, [tp])[tp]
            except KafkaAdminError as exc:
                pp = exc
            if isinstance(pp, Exception):
                raise _fail(f"Failed to validate producer state for partition {topic}-{partition}", pp)
            found = next((pr for pr in pp.producers if pr.current_txn_start_offset == start_offset), None)
            if found is None:
                raise Failed(
                    f"Could not find any open transactions starting at offset {start_offset} on partition "
                    f"{topic}-{partition}"
                )
            spec = (found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0))
        try:
            live.abort_transaction(admin, tp, *spec)
        except KafkaAdminError as exc:
            raise _fail(f"Failed to abort transaction {live.abort_spec_text(tp, *spec)}", exc) from None
    if json_out:
        emit_json(
            {
                "type": "abort",
                "topic": topic,
                "partition": partition,
                "producer_id": spec[0],
                "producer_epoch": spec[1],
                "coordinator_epoch": spec[2],
                "aborted": True,
            }
        )
    raise typer.Exit(EXIT_OK)


# ----------------------------------------------------------------------------- find-hanging


def _live_hanging(bootstrap_server, broker_id, topic, partition, max_ms):
    from kafkatool.assign.kafka_client import KafkaAdminError
    from kafkatool.broker.txn import live
    from kafkatool.broker.txn import views as V

    with _admin(bootstrap_server) as admin:
        try:
            tps = live.partitions_to_search(admin, topic, partition, broker_id)
        except KafkaAdminError as exc:
            what = "Failed to list topics" if topic is None else "Failed to describe 1 topics"
            raise _fail(what, exc) from None
        found = []
        for i in range(0, len(tps), 500):  # MAX_BATCH_SIZE
            batch = tps[i : i + 500]
            try:
                answers = live.describe_producers(admin, batch, broker_id)
            except KafkaAdminError as exc:
                answers = {batch[0]: exc}
            bad = next((a for a in answers.values() if isinstance(a, Exception)), None)
            broker = f"Optional[{broker_id}]" if broker_id is not None else "Optional.empty"
            if bad is not None:
                raise _fail(
                    f"Failed to describe producers for {len(batch)} partitions on broker {broker}", bad
                )
            found += V.candidates(list(answers.values()), _now_ms(), max_ms)
        groups = V.by_producer(found)
        try:
            tids, descriptions = live.coordinator_view(admin, set(groups))
        except live.SearchError as exc:
            raise _fail(exc.what, exc.cause) from None
        return V.hanging(groups, tids, descriptions), _now_ms()


@handle_errors
def find_hanging(
    broker_id: int | None = typer.Option(
        None, "--broker-id", metavar="ID", help="broker id to search for hanging transactions"
    ),
    topic: str | None = typer.Option(
        None,
        "--topic",
        metavar="TOPIC",
        help="topic name to limit search to (required if --partition is specified)",
    ),
    partition: int | None = typer.Option(None, "--partition", metavar="N", help="partition number"),
    max_transaction_timeout: int = typer.Option(
        15,
        "--max-transaction-timeout",
        metavar="MIN",
        help="maximum transaction timeout in minutes to limit the scope of the search (15 minutes by default)",
    ),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    now: str | None = _now_option(),
    json_out: bool = _json_option(),
) -> None:
    """Find hanging transactions (KIP-664), by Kafka's rule: a producer's open transaction on a
    partition, its last write older than --max-transaction-timeout, that its coordinator does
    not hold as ongoing there (no transactional id holds the producer id, the id is not found,
    or the partition is not among its transaction's partitions): the coordinator will never
    write its marker, so it pins the partition's last stable offset (read_committed consumers
    stall, the cleaner stops there) until `transactions abort` ends it. Exit 1 when one is found.

    Offline (--log-dir, every partition in the dirs or --topic's): the same rule on the producer
    state rebuilt as the broker rebuilds it at start-up and on the coordinator's state replayed
    from the __transaction_state partitions in the dirs. What differs: "now" is the newest record
    timestamp in the dirs unless --now is given; a transaction coordinated elsewhere (a cluster
    broker holds only some __transaction_state partitions, or none) cannot be checked and is
    reported with CoordinatorState "-" (the coordinator's view is incomplete: a warning names the
    partitions missing from the topic's partition count, as the dir's embedded metadata or KRaft
    log keeps it, else transaction.state.log.num.partitions' default 50; list and describe say
    the same);
    three columns are added: LastStableOffset, TransactionalId, CoordinatorState."""
    from kafkatool.broker.txn import views as V

    _one_source(bootstrap_server, log_dir, now)
    if partition is not None and topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    max_ms = max_transaction_timeout * 60_000
    offline = bool(log_dir)
    note = gap = None
    damaged = False
    if offline:
        if broker_id is not None:
            raise CommandError("--broker-id needs --bootstrap-server (a log dir is one broker's)")
        view = _offline(log_dir, now, topic, partition)
        damaged = bool(view.state_damage or view.damage)
        if topic is not None and not view.partitions:
            raise Failed(f"the log dirs hold no partition of topic '{topic}'")
        groups = V.by_producer(V.candidates(view.partitions, view.now_ms, max_ms))
        tids = view.transactional_ids(set(groups))
        result = V.hanging(groups, tids, {tid: view.coordinator.get(tid) for tid in tids.values()})
        now_ms = view.now_ms
        gap = view.coordinator_gap()  # _offline warned of it
        if view.state_partitions or not result:
            note = None if gap is None else f"WARNING: {gap}"
        else:
            note = (
                "note: the log dirs hold no __transaction_state partition: no transactional id is known "
                "here, so every open transaction older than the timeout is reported (its coordinator, "
                "elsewhere, may hold it as ongoing)"
            )
    else:
        if topic is None and broker_id is None:
            raise CommandError(
                "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"
            )
        result, now_ms = _live_hanging(bootstrap_server, broker_id, topic, partition, max_ms)
    if json_out:
        for o in result:
            pr = o.producer
            row = {
                "type": "hanging",
                "topic": o.topic,
                "partition": o.partition,
                "producer_id": pr.producer_id,
                "producer_epoch": pr.producer_epoch,
                "coordinator_epoch": pr.coordinator_epoch,
                "start_offset": pr.current_txn_start_offset,
                "last_timestamp": pr.last_timestamp,
                "duration_min": V.duration_minutes(now_ms, pr.last_timestamp),
                "transactional_id": o.transactional_id,
                "coordinator_state": o.coordinator_state,
            }
            if offline:
                row["last_stable_offset"] = o.last_stable_offset
            emit_json(row)
        emit_json({"type": "summary", "hanging": len(result), "now_ms": now_ms, "coordinator_note": note})
    else:
        rows = []
        for o in result:
            pr = o.producer
            row = [
                o.topic,
                str(o.partition),
                str(pr.producer_id),
                str(pr.producer_epoch),
                str(pr.coordinator_epoch if pr.coordinator_epoch >= 0 else -1),
                str(pr.current_txn_start_offset),
                str(pr.last_timestamp),
                str(V.duration_minutes(now_ms, pr.last_timestamp)),
            ]
            if offline:
                row += [str(o.last_stable_offset), o.transactional_id or "-", o.coordinator_state or "-"]
            rows.append(row)
        _table(HANGING_HEADERS + (OFFLINE_HANGING_HEADERS if offline else []), rows)
        if note and not note.startswith("WARNING"):
            sys.stderr.write(note + "\n")
    raise typer.Exit(EXIT_FINDINGS if result or damaged else EXIT_OK)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="transactions", help=HELP, no_args_is_help=True)
    sub.command("list")(list_transactions)
    sub.command("describe")(describe)
    sub.command("describe-producers")(describe_producers)
    sub.command("abort")(abort)
    sub.command("find-hanging")(find_hanging)
    app.add_typer(sub, name="transactions")
