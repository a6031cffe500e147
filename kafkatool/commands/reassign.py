"""``kafkatool reassign``: plan, place, execute, verify, cancel and list partition reassignments.

Option names follow kafka-reassign-partitions.sh so that runbooks carry over;
the JSON files are Kafka's own formats.
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import sys
from collections.abc import Callable, Iterator
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
    handle_errors,
    zookeeper_option,
)
from kafkatool.log import fileops

HELP = (
    "Plan and run partition reassignments (kafka-reassign-partitions, with better plans).\n\n"
    'Files are Kafka\'s JSON formats: topics-to-move {"version":1,"topics":[{"topic":"a"}]} and reassignment '
    '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}. '
    "Execution goes through the brokers' admin API (--bootstrap-server host:port: AlterPartitionReassignments, "
    "as Kafka's tool since 2.4) or through ZooKeeper (--zookeeper host:port/chroot), the way ZK-mode "
    "controllers read /admin/reassign_partitions."
)

ZK_HELP = (
    "ZooKeeper connect string of the cluster: host:port,host:port/chroot (chroot optional), as "
    "zookeeper.connect."
)
ZK_TIMEOUT = 10.0
BOOTSTRAP_HELP = (
    "Brokers to bootstrap from: host:port[,host:port...]. Uses the admin API (KIP-455) instead of "
    "ZooKeeper; give this or --zookeeper."
)
ADMIN_TIMEOUT = 10.0
BROKER_LIST_HELP = (
    "Target brokers, in order: '0,1,2' or with racks '0:r1,1:r2,2:r1' (racks given here override "
    "the registrations). Kafka's placement takes brokers in this order (Kafka's --generate takes the "
    "cluster's order, usually by id)."
)
SIZES_HELP = (
    "Partition sizes for --strategy size: a JSON object "
    '{"partitions":[{"topic":"a","partition":0,"size":BYTES}]} or JSON lines as `fleet scan` writes them, '
    'one object per line {"type":"partition_size","topic":"a","partition":0,"broker":1,"size":BYTES} '
    "(other line types are skipped; the largest size of a partition across brokers is used). "
    "With another strategy the sizes only feed the report's byte counts."
)


def _library_errors(func: Callable) -> Callable:
    """AssignError, ZkError and KafkaAdminError -> one-line CommandError (exit 2)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from kafkatool.assign.errors import AssignError
        from kafkatool.assign.kafka_client import KafkaAdminError
        from kafkatool.zk.client import ZkError

        try:
            return func(*args, **kwargs)
        except (AssignError, ZkError) as exc:
            raise CommandError(str(exc)) from None
        except KafkaAdminError as exc:
            raise CommandError(f"{exc}") from None

    return wrapper


def _read(path: Path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@contextlib.contextmanager
def _connect(zookeeper: str | None) -> Iterator:
    """The same connection (and chroot discovery) as ``kafkatool zk``."""
    from kafkatool.commands.zk import connect

    with connect(zookeeper, ZK_TIMEOUT) as zk:
        yield zk


@contextlib.contextmanager
def _admin(bootstrap_server: str) -> Iterator:
    from kafkatool.assign.kafka_client import KafkaAdmin

    with KafkaAdmin(bootstrap_server, timeout=ADMIN_TIMEOUT) as admin:
        yield admin


def _use_api(zookeeper: str | None, bootstrap_server: str | None) -> bool:
    """True for the admin API (a --zookeeper from $KAFKATOOL_ZOOKEEPER alone has already
    yielded to an explicit --bootstrap-server: commands/common.py)."""
    if bootstrap_server is None:
        if zookeeper is None:
            raise CommandError(
                "--zookeeper host:port[/chroot] is required (or set KAFKATOOL_ZOOKEEPER), "
                "or --bootstrap-server host:port for the admin API"
            )
        return False
    if zookeeper is not None:
        raise CommandError("give --zookeeper or --bootstrap-server, not both")
    return True


def _bootstrap_option(extra_help: str = ""):
    return typer.Option(None, "--bootstrap-server", "-b", help=BOOTSTRAP_HELP + extra_help)


def _zk_option(extra_help: str = ""):
    return zookeeper_option(ZK_HELP + extra_help)


def _assignment_doc(assignment) -> dict:
    from kafkatool.assign.formats import format_reassignment

    return json.loads(format_reassignment(assignment))


# ---------------------------------------------------------------- report rendering


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def _render_report(rep: dict) -> None:
    from rich.table import Table

    sized = rep.get("bytes_moved") is not None
    console.print(
        f"Plan: {rep['partitions_changed']} partition(s) changed, {rep['replicas_moved']} replica(s) moved"
        + (f" ({_fmt_bytes(rep['bytes_moved'])})" if sized else "")
        + f", {rep['leaders_changed']} preferred leader(s) changed."
    )
    table = Table(title="Per broker (before -> after)", title_justify="left")
    for col in ("broker", "rack", "replicas", "leaders") + (("bytes",) if sized else ()):
        table.add_column(col, justify="left" if col == "rack" else "right")
    for row in rep["per_broker"]:
        cells = [
            str(row["broker"]) + ("" if row.get("target", True) else " (leaving)"),
            row.get("rack") or "-",
            f"{row['replicas_before']} -> {row['replicas_after']}",
            f"{row['leaders_before']} -> {row['leaders_after']}",
        ]
        if sized:
            cells.append(f"{_fmt_bytes(row['bytes_before'])} -> {_fmt_bytes(row['bytes_after'])}")
        table.add_row(*cells)
    console.print(table)
    if rep.get("per_rack"):
        racks = Table(title="Per rack (before -> after)", title_justify="left")
        for col in ("rack", "brokers", "replicas", "leaders") + (("bytes",) if sized else ()):
            racks.add_column(col, justify="left" if col == "rack" else "right")
        for row in rep["per_rack"]:
            cells = [
                row["rack"],
                str(row["brokers"]),
                f"{row['replicas_before']} -> {row['replicas_after']}",
                f"{row['leaders_before']} -> {row['leaders_after']}",
            ]
            if sized:
                cells.append(f"{_fmt_bytes(row['bytes_before'])} -> {_fmt_bytes(row['bytes_after'])}")
            racks.add_row(*cells)
        console.print(racks)
    parts = []
    for metric, b in rep["balance"].items():
        fmt = _fmt_bytes if metric == "bytes" else str
        parts.append(
            f"{metric} spread {fmt(b['before']['spread'])} -> {fmt(b['after']['spread'])} "
            f"(min {fmt(b['after']['min'])}, max {fmt(b['after']['max'])})"
        )
    console.print("Balance over the target brokers: " + "; ".join(parts) + ".")


# ---------------------------------------------------------------- generate


def _read_current(topics, zookeeper, bootstrap_server, current_file, *, with_state=False):
    """(current assignment of ``topics``, registered brokers or None, ISR or None, leaders or
    None) from the one source given: ZooKeeper (topic znodes, and with ``with_state`` the
    partition state znodes), Metadata, or a --current file (no brokers, ISR and leaders
    unknown)."""
    from kafkatool.assign import formats

    if zookeeper is not None:
        from kafkatool.assign import zk_reassign

        with _connect(zookeeper) as zk:
            registered = zk_reassign.read_brokers(zk)
            current = zk_reassign.read_current(zk, topics)
            isr, leaders = zk_reassign.read_isr_and_leaders(zk, topics) if with_state else (None, None)
        return current, registered, isr, leaders
    if bootstrap_server is not None:
        from kafkatool.assign import api_reassign

        with _admin(bootstrap_server) as admin:
            current, isr, leaders = api_reassign.read_current_isr_and_leaders(admin, topics)
            registered = api_reassign.read_brokers(admin.metadata_cached())
        return current, registered, *((isr, leaders) if with_state else (None, None))
    targets = formats.parse_reassignment(_read(current_file), str(current_file))
    allc = formats.targets_to_assignment(targets)
    missing = [t for t in topics if not any(tp[0] == t for tp in allc)]
    if missing:
        raise CommandError(
            f"{current_file}: topic{'s' if len(missing) > 1 else ''} not found: {', '.join(missing)}"
        )
    return {tp: r for tp, r in allc.items() if tp[0] in set(topics)}, None, None, None


def _where_args(zookeeper, bootstrap_server) -> list[str]:
    """The cluster options of a printed command: those generate read from, else a placeholder."""
    if bootstrap_server is not None:
        return ["--bootstrap-server", bootstrap_server]
    if zookeeper is not None:
        return ["--zookeeper", zookeeper]
    return ["--bootstrap-server", "HOST:PORT"]


def _election_command(partitions, zookeeper, bootstrap_server) -> list[str]:
    """The leader-election command line that makes the demotion's new orders take effect."""
    args = ["kafkatool", "leader-election", "--election-type", "preferred"]
    args += _where_args(zookeeper, bootstrap_server)
    if len(partitions) == 1:
        ((t, p),) = partitions
        return [*args, "--topic", t, "--partition", str(p)]
    return [*args, "--path-to-json-file", "ELECTION.json"]


def _demote(
    topics_to_move_json_file,
    zookeeper,
    bootstrap_server,
    current_file,
    demote_brokers,
    followers,
    sizes_file,
    output,
    as_json,
) -> None:
    import shlex

    from kafkatool.assign import formats, plan
    from kafkatool.assign.demote import plan_demotion
    from kafkatool.assign.election import format_election_json
    from kafkatool.assign.model import Broker, parse_broker_list

    topics = formats.parse_topics_to_move(_read(topics_to_move_json_file), str(topics_to_move_json_file))
    demoted_list = parse_broker_list(demote_brokers)
    if any(b.rack is not None for b in demoted_list):
        raise CommandError(f"--demote-brokers {demote_brokers!r}: broker ids only, no racks")
    demoted = [b.id for b in demoted_list]
    sizes = formats.parse_sizes(_read(sizes_file), str(sizes_file)) if sizes_file else None
    current, registered, isr, leaders = _read_current(
        topics, zookeeper, bootstrap_server, current_file, with_state=True
    )
    holding = {b for replicas in current.values() for b in replicas}
    unknown = [b for b in demoted if b not in holding and (registered is None or b not in registered)]
    if unknown:
        raise CommandError(
            f"--demote-brokers: broker{'s' if len(unknown) > 1 else ''} {','.join(map(str, unknown))} "
            f"hold{'' if len(unknown) > 1 else 's'} no replica of these topics"
            + (" and is not registered" if registered is not None and len(unknown) == 1 else "")
            + (" and are not registered" if registered is not None and len(unknown) > 1 else "")
        )
    notes = []
    if isr is None:
        notes.append("ISR unknown (--current): every replica is assumed in sync.")
    if leaders is None:
        notes.append("Leaders unknown (--current): every partition is assumed led by its first replica.")
    result = plan_demotion(
        current, demoted, isr, None if registered is None else set(registered), leaders, followers
    )
    proposed = result.proposed
    racks = {b: r.rack for b, r in (registered or {}).items()}
    brokers = [Broker(b, racks.get(b)) for b in sorted(holding)]
    rep = plan.report(current, proposed, brokers, sizes).to_dict()
    proposed_text = formats.format_reassignment(proposed)
    shown_current = {tp: current[tp] for tp in proposed}
    if output is not None and proposed:
        fileops.atomic_write(output, (proposed_text + "\n").encode(), mode=0o600)
    where = _where_args(zookeeper, bootstrap_server)
    execute = [
        "kafkatool",
        "reassign",
        "execute",
        "--reassignment-json-file",
        str(output or "PLAN.json"),
        *where,
    ]
    elect = result.elect
    command = _election_command(elect, zookeeper, bootstrap_server) if elect else None
    election = format_election_json(elect) if elect else None
    left = [
        {"topic": x.tp[0], "partition": x.tp[1], "replicas": x.replicas, "isr": x.isr, "reason": x.reason}
        for x in result.left
    ]
    if as_json:
        emit_json(
            {
                "type": "plan",
                "strategy": "demote",
                "demoted_brokers": demoted,
                "exclude_follower_demotion": not followers,
                "current": json.loads(formats.format_reassignment(shown_current)),
                "proposed": json.loads(proposed_text),
                "report": rep,
                "left": left,
                "election": json.loads(election) if election else None,
                "election_command": shlex.join(command) if command else None,
                "execute_command": shlex.join(execute) if proposed else None,
                "notes": notes,
            }
        )
        raise typer.Exit(EXIT_FINDINGS if left else EXIT_OK)
    for note in notes:
        console.print(f"Note: {note}")
    names = f"broker{'s' if len(demoted) > 1 else ''} {','.join(map(str, demoted))}"
    if proposed:
        print(f"Current partition replica assignment\n{formats.format_reassignment(shown_current)}\n")
        print(f"Proposed partition reassignment configuration\n{proposed_text}\n")
    elif left:
        console.print(
            f"No partition of these topics can move its preferred leader off {names}: nothing to change."
        )
    elif not followers and any(b in demoted for replicas in current.values() for b in replicas):
        console.print(
            f"No partition of these topics has {names} as its preferred leader: no order to change."
        )
    elif any(b in demoted for replicas in current.values() for b in replicas):
        console.print(f"Every partition of these topics already lists {names} last: no order to change.")
    else:
        console.print(f"No partition of these topics has a replica on {names}: nothing to change.")
    _render_report(rep)
    if left:
        print(f"{len(left)} partition(s) keep a demoted broker as preferred leader (left as they are):")
        for x in result.left:
            print(f"  {x.tp[0]}-{x.tp[1]} replicas {x.replicas}: {x.reason}")
    if proposed:
        print(
            f"The plan moves no data: executed, it changes the order of the replicas only ({names} "
            + ("last" if followers else "no longer first")
            + "):\n"
            f"{shlex.join(execute)}"
        )
    if command:
        print(
            ("then a" if proposed else "A")
            + f" preferred leader election moves leadership off {names} to the first replicas (where they "
            "are alive and in sync):"
        )
        print(shlex.join(command))
        if len(elect) > 1:
            print(f"with ELECTION.json holding:\n{election}")
    raise typer.Exit(EXIT_FINDINGS if left else EXIT_OK)


def generate(
    topics_to_move_json_file: Path = typer.Option(
        ..., "--topics-to-move-json-file", help='Topics to move: {"version":1,"topics":[{"topic":"a"}]}.'
    ),
    broker_list: str | None = typer.Option(
        None, "--broker-list", help=BROKER_LIST_HELP + " Required, except with --demote-brokers."
    ),
    zookeeper: str | None = _zk_option(
        " Source of the current assignment and racks (and, for --demote-brokers, of the ISR: the "
        "partitions' state znodes)."
    ),
    bootstrap_server: str | None = _bootstrap_option(
        " Source of the current assignment, racks and ISR (Metadata)."
    ),
    command_config: str | None = command_config_option(),
    current_file: Path | None = typer.Option(
        None,
        "--current",
        help="Read the current assignment from this reassignment-format JSON file instead of ZooKeeper "
        "(e.g. the 'Current partition replica assignment' Kafka printed). The ISR is then unknown: "
        "--demote-brokers assumes every replica in sync.",
    ),
    strategy: str | None = typer.Option(
        None,
        "--strategy",
        help="kafka (the default): Kafka's own placement (AdminUtils; ignores where replicas are now). "
        "minimal: balance replica and leader counts per broker and rack moving as few replicas as "
        "possible. size: balance bytes per broker (needs --sizes): from the heaviest broker, move the "
        "replica that best halves its gap to a lighter one, or swap two replicas (one each way) where "
        "no single move helps, until the brokers are within 2% of the mean apart.",
    ),
    replication_factor: int | None = typer.Option(
        None,
        "--replication-factor",
        metavar="N",
        help="Give every partition of the topics exactly N replicas on the --broker-list brokers, raising "
        "or lowering (Kafka has no tool for it). With --strategy minimal or size every replica that can "
        "stay stays and preferred leaders are kept: lowering drops followers (never data moved; those "
        "off the target brokers first, racks kept spread, from the most loaded brokers), raising adds "
        "followers where replicas (minimal; then preferred leaders) or bytes (size) are lowest, on racks "
        "the partition lacks first (Kafka's rack-aware rule); replicas off the target brokers move. "
        "Then the replica counts (minimal) or bytes (size: the pass --strategy size balances with) are "
        "evened out by moves that copy nothing more: an added replica moves on, or a partition keeps a "
        "replica it was dropping instead of one it keeps (never a preferred leader). "
        "With --strategy kafka, Kafka's placement of N replicas from scratch. Only added replicas count "
        "as data moved. Refused as Kafka refuses it when N exceeds the target brokers.",
    ),
    demote_brokers: str | None = typer.Option(
        None,
        "--demote-brokers",
        metavar="ID,ID",
        help="Instead of placing replicas: move preferred leadership off these brokers (e.g. before "
        "maintenance) without moving data, as Cruise Control's demote_broker with "
        "exclude_follower_demotion=false (--exclude-follower-demotion for its default): every partition "
        "holding a demoted broker lists the demoted "
        "brokers last (in their old order), so none is the preferred leader, nor early in the order an "
        "election after a failure takes. A partition whose first replica is not demoted keeps it; one "
        "whose first replica is demoted gets the in-sync replica on another (registered, when the "
        "cluster is read) broker that keeps preferred leaders best balanced first (Cruise Control: the "
        "next replica, in sync or not). A partition whose every replica is demoted, or whose first "
        "replica is demoted with no such replica (or an unknown ISR), is left and reported (exit 1); "
        "under-replicated partitions are not skipped (Cruise Control's skip_urp_demotion). Prints the "
        "preferred leader election that makes the new order take effect once the plan is executed: the "
        "partitions whose first replica changes and those a demoted broker leads now (the current "
        "leaders from the cluster; with --current each partition is assumed led by its first replica). "
        "Takes no --broker-list, --strategy, --replication-factor, --seed or --start-index.",
    ),
    exclude_follower_demotion: bool = typer.Option(
        False,
        "--exclude-follower-demotion",
        help="With --demote-brokers: change only the partitions whose preferred leader is demoted (the "
        "new one first, the demoted one last, every other replica in its place), as Cruise Control's "
        "exclude_follower_demotion=true (its default): a demoted broker that is only a follower keeps "
        "its place, so a failover election may still pick it; fewer partitions change.",
    ),
    sizes_file: Path | None = typer.Option(None, "--sizes", help=SIZES_HELP),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="Seed of the java.util.Random that draws each topic's start index and shift (--strategy "
        "kafka; topics in name order). Without it a random seed is drawn and printed.",
    ),
    start_index: int | None = typer.Option(
        None,
        "--start-index",
        help="Fixed start index (and shift) for every topic, as Kafka's fixedStartIndex.",
    ),
    disable_rack_aware: bool = typer.Option(False, "--disable-rack-aware", help="Ignore racks."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Also write the proposed reassignment JSON to this file (atomically)."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Propose a reassignment of the given topics onto the given brokers.

    Prints Kafka's two blocks (current, proposed) and what the plan moves: replicas, bytes, preferred leaders, and the balance per broker and rack before and after. --strategy minimal and size propose only the partitions that change. --replication-factor N changes the topics' replication factor; --demote-brokers moves preferred leadership off brokers (exit 1 when a partition keeps a demoted preferred leader).
    """
    del command_config  # applied by the option itself (one place: commands/common.py)
    _generate(**locals())


@handle_errors
@_library_errors
def _generate(
    topics_to_move_json_file,
    broker_list,
    zookeeper,
    bootstrap_server,
    current_file,
    strategy,
    replication_factor,
    demote_brokers,
    exclude_follower_demotion,
    sizes_file,
    seed,
    start_index,
    disable_rack_aware,
    output,
    as_json,
) -> None:
    from kafkatool.assign import formats, plan
    from kafkatool.assign.kafka_placement import replication_factor_error
    from kafkatool.assign.model import Broker, check_racks, parse_broker_list

    if sum(x is not None for x in (zookeeper, bootstrap_server, current_file)) != 1:
        raise CommandError("give exactly one of --zookeeper, --bootstrap-server and --current")
    if demote_brokers is not None:
        given = [
            name
            for name, value in (
                ("--broker-list", broker_list),
                ("--strategy", strategy),
                ("--replication-factor", replication_factor),
                ("--seed", seed),
                ("--start-index", start_index),
            )
            if value is not None
        ]
        if given:
            raise CommandError(
                f"--demote-brokers moves no replica: {', '.join(given)} "
                f"do{'es' if len(given) == 1 else ''} not apply"
            )
        _demote(
            topics_to_move_json_file,
            zookeeper,
            bootstrap_server,
            current_file,
            demote_brokers,
            not exclude_follower_demotion,
            sizes_file,
            output,
            as_json,
        )
        return
    if exclude_follower_demotion:
        raise CommandError("--exclude-follower-demotion goes with --demote-brokers")
    if broker_list is None:
        raise CommandError("--broker-list is required (except with --demote-brokers)")
    strategy = strategy or "kafka"
    if strategy not in ("kafka", "minimal", "size"):
        raise CommandError(f"--strategy must be kafka, minimal or size, not {strategy!r}")
    if strategy == "size" and sizes_file is None:
        raise CommandError("--strategy size needs --sizes FILE")
    if strategy != "kafka" and (seed is not None or start_index is not None):
        raise CommandError("--seed and --start-index apply to --strategy kafka only")
    if start_index is not None and seed is not None:
        raise CommandError("give --seed or --start-index, not both")
    if start_index is not None and start_index < 0:
        raise CommandError(f"--start-index must be >= 0, not {start_index}")
    topics = formats.parse_topics_to_move(_read(topics_to_move_json_file), str(topics_to_move_json_file))
    wanted = parse_broker_list(broker_list)
    if replication_factor is not None:
        message = replication_factor_error(replication_factor, len(wanted))
        if message is not None:
            raise CommandError(message)
    sizes = formats.parse_sizes(_read(sizes_file), str(sizes_file)) if sizes_file else None
    other_racks: dict[int, str | None] = {}
    current, registered, _isr, _leaders = _read_current(topics, zookeeper, bootstrap_server, current_file)
    if registered is not None:
        unknown = [b.id for b in wanted if b.id not in registered]
        if unknown:
            raise CommandError(
                f"--broker-list: unknown broker id{'s' if len(unknown) > 1 else ''} "
                f"{','.join(map(str, unknown))} (registered: {','.join(map(str, sorted(registered))) or 'none'})"
            )
        given_racks = any(b.rack is not None for b in wanted)
        brokers = [b if given_racks else Broker(b.id, registered[b.id].rack) for b in wanted]
        other_racks = {b: r.rack for b, r in registered.items()}
    else:
        brokers = wanted
    rack_aware = check_racks(brokers, rack_aware=not disable_rack_aware)
    if not rack_aware:
        brokers = [Broker(b.id) for b in brokers]

    used_seed = None
    if strategy == "kafka":
        from kafkatool.assign.kafka_placement import reassign_as_kafka

        if start_index is None and seed is None:
            seed = secrets.randbits(63)
        proposed = reassign_as_kafka(
            current, brokers, seed=seed, start_index=start_index, replication_factor=replication_factor
        )
        used_seed = seed if start_index is None else None
        shown_current = current
    else:
        if replication_factor is not None:
            from kafkatool.assign.factor import plan_replication_factor

            new = plan_replication_factor(
                current,
                brokers,
                replication_factor,
                strategy=strategy,
                sizes=sizes,
                rack_aware=rack_aware,
                other_racks=other_racks,
            )
        elif strategy == "minimal":
            from kafkatool.assign.minimal import plan_minimal

            new = plan_minimal(current, brokers, rack_aware=rack_aware, other_racks=other_racks)
        else:
            from kafkatool.assign.by_size import plan_by_size

            new = plan_by_size(current, brokers, sizes, rack_aware=rack_aware, other_racks=other_racks)
        proposed = {tp: r for tp, r in new.items() if r != current[tp]}
        shown_current = {tp: current[tp] for tp in proposed}
    rep = plan.report(current, proposed, brokers, sizes).to_dict()
    proposed_text = formats.format_reassignment(proposed)
    if output is not None and proposed:
        fileops.atomic_write(output, (proposed_text + "\n").encode(), mode=0o600)
    if as_json:
        obj = {"type": "plan", "strategy": strategy}
        if used_seed is not None:
            obj["seed"] = used_seed
        if start_index is not None:
            obj["start_index"] = start_index
        if replication_factor is not None:
            obj["replication_factor"] = replication_factor
        obj["current"] = json.loads(formats.format_reassignment(shown_current))
        obj["proposed"] = json.loads(proposed_text)
        obj["report"] = rep
        emit_json(obj)
        return
    if not proposed:
        if replication_factor is not None:
            console.print(
                f"Every partition of these topics has {replication_factor} replicas on the target brokers: "
                "nothing to move."
            )
        else:
            console.print("The brokers are already balanced for these topics: nothing to move.")
        _render_report(rep)
        return
    # Kafka's two blocks first, byte for byte, so scripts that cut them out keep working.
    print(f"Current partition replica assignment\n{formats.format_reassignment(shown_current)}\n")
    print(f"Proposed partition reassignment configuration\n{proposed_text}\n")
    if used_seed is not None:
        console.print(f"(placement seed {used_seed}: pass --seed {used_seed} to get this plan again)")
    _render_report(rep)
    if rep.get("partitions_without_size"):
        console.print(
            f"Note: {rep['partitions_without_size']} partition(s) had no size and count as 0 bytes."
        )


# ---------------------------------------------------------------- place


def place(
    brokers: str | None = typer.Option(
        None,
        "--brokers",
        "--broker-list",
        help=BROKER_LIST_HELP + " With --zookeeper: default all registered brokers, sorted by id (as ZK "
        "topic creation and add-partitions take them).",
    ),
    partitions: int = typer.Option(
        ..., "--partitions", help="Number of partitions to place (with --topic: to add to it)."
    ),
    replication_factor: int | None = typer.Option(
        None, "--replication-factor", help="Replicas per partition (with --topic: partition 0's count)."
    ),
    start_index: int | None = typer.Option(
        None,
        "--start-index",
        help="Kafka's fixedStartIndex: index of the first partition's leader in the broker order; fixes "
        "the replica shift to the same value, exactly as Kafka does. With --topic: Kafka's add-partitions "
        "rule, the index of the first broker whose id >= partition 0's first replica.",
    ),
    replica_shift: int | None = typer.Option(
        None, "--replica-shift", help="Pin the replica shift separately (needs --start-index)."
    ),
    first_partition: int | None = typer.Option(
        None,
        "--first-partition",
        help="Id of the first partition: 0 for a new topic; with --topic the existing partition count.",
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        help="Without --start-index: seed of the java.util.Random drawing start and shift (random if omitted).",
    ),
    zookeeper: str | None = _zk_option(" Read brokers and racks (and --topic) from the cluster."),
    topic: str | None = typer.Option(
        None,
        "--topic",
        help="With --zookeeper: place partitions added to this existing topic exactly as ZK-mode Kafka's "
        "add-partitions does (brokers by id, RF and start index from partition 0, ids after the last).",
    ),
    disable_rack_aware: bool = typer.Option(False, "--disable-rack-aware", help="Ignore racks."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Kafka's placement for a new topic or for added partitions.

    The same assignment as Kafka's AdminUtils computes, bit for bit. Brokers are taken in the order given, as Kafka's tool takes --broker-list (ZK topic creation and add-partitions sort them by id). The human view ends with a kafka-topics --replica-assignment string.
    """
    _place(**locals())


@handle_errors
@_library_errors
def _place(
    brokers,
    partitions,
    replication_factor,
    start_index,
    replica_shift,
    first_partition,
    seed,
    zookeeper,
    topic,
    disable_rack_aware,
    as_json,
) -> None:
    from kafkatool.assign.kafka_placement import (
        JavaRandom,
        add_partitions_start_index,
        assign_replicas,
        draw_start_and_shift,
        validate_placement_args,
    )
    from kafkatool.assign.model import Broker, check_racks, parse_broker_list

    if topic is not None and zookeeper is None:
        raise CommandError("--topic needs --zookeeper")
    if brokers is None and zookeeper is None:
        raise CommandError("give --brokers (or --zookeeper to use the registered brokers)")
    if replica_shift is not None and start_index is None:
        raise CommandError("--replica-shift needs --start-index")
    if start_index is not None and seed is not None:
        raise CommandError("give --seed or --start-index, not both")
    if first_partition is not None and first_partition < 0:
        raise CommandError(f"--first-partition must be >= 0, not {first_partition}")
    blist = parse_broker_list(brokers) if brokers is not None else None
    if zookeeper is not None:
        from kafkatool.assign import zk_reassign

        with _connect(zookeeper) as zk:
            registered = zk_reassign.read_brokers(zk)
            existing = zk_reassign.read_current(zk, [topic]) if topic is not None else None
        if blist is None:
            blist = [registered[b] for b in sorted(registered)]
        else:
            unknown = [b.id for b in blist if b.id not in registered]
            if unknown:
                raise CommandError(
                    f"--brokers: unknown broker id{'s' if len(unknown) > 1 else ''} "
                    f"{','.join(map(str, unknown))} (registered: {','.join(map(str, sorted(registered)))})"
                )
            if not any(b.rack for b in blist):
                blist = [Broker(b.id, registered[b.id].rack) for b in blist]
        if existing is not None:
            if (topic, 0) not in existing:
                raise CommandError(f"topic {topic}: partition 0 is missing, Kafka cannot add partitions")
            p0 = existing[(topic, 0)]
            if replication_factor is None:
                replication_factor = len(p0)
            if first_partition is None:
                first_partition = len(existing)
            if start_index is None and seed is None:
                start_index = add_partitions_start_index([b.id for b in blist], p0)
    if replication_factor is None:
        raise CommandError("--replication-factor is required (except with --topic)")
    first_partition = first_partition or 0
    rack_aware = check_racks(blist, rack_aware=not disable_rack_aware)
    used_seed = None
    if start_index is None:
        used_seed = seed if seed is not None else secrets.randbits(63)
        validate_placement_args(blist, partitions, replication_factor)
        start_index, replica_shift = draw_start_and_shift(len(blist), JavaRandom(used_seed))
    result = assign_replicas(
        blist,
        partitions,
        replication_factor,
        start_index=start_index,
        shift=replica_shift,
        first_partition=first_partition,
        rack_aware=rack_aware,
    )
    shift = start_index if replica_shift is None else replica_shift
    replica_assignment = ",".join(":".join(map(str, result[p])) for p in sorted(result))
    if as_json:
        obj = {
            "partitions": [{"partition": p, "replicas": r} for p, r in sorted(result.items())],
            "start_index": start_index,
            "replica_shift": shift,
            "rack_aware": rack_aware,
            "replica_assignment": replica_assignment,
        }
        if used_seed is not None:
            obj["seed"] = used_seed
        emit_json(obj)
        return
    from rich.table import Table

    table = Table(title_justify="left")
    table.add_column("partition", justify="right")
    table.add_column("replicas")
    for p, r in sorted(result.items()):
        table.add_row(str(p), ",".join(map(str, r)))
    console.print(table)
    note = (
        f"start index {start_index}, replica shift {shift}, {'rack-aware' if rack_aware else 'rack-unaware'}"
    )
    if used_seed is not None:
        note += f", seed {used_seed}"
    console.print(note)
    console.print(f"--replica-assignment {replica_assignment}")


# ---------------------------------------------------------------- execute


def execute(
    reassignment_json_file: Path = typer.Option(
        ..., "--reassignment-json-file", help="The reassignment to start."
    ),
    zookeeper: str | None = _zk_option(),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    additional: bool = typer.Option(
        False,
        "--additional",
        help="Proceed although reassignments are in flight (through ZooKeeper only the throttle of the "
        "in-flight /admin/reassign_partitions can change: resubmit the same file; through the API a new "
        "target replaces the in-flight one, and resubmitting the same file changes the throttle).",
    ),
    throttle: int = typer.Option(
        -1,
        "--throttle",
        help="Replication throttle in B/s: sets leader/follower.replication.throttled.rate on every "
        "source and destination broker and the topics' *.throttled.replicas lists, as Kafka's tool does, "
        "and records them so that verify/cancel clear them. Must exceed the moving partitions' ingest "
        "rate or the move never converges.",
    ),
    replica_alter_log_dirs_throttle: int = typer.Option(
        -1,
        "--replica-alter-log-dirs-throttle",
        help="Throttle in B/s of moves between log dirs of one broker (log_dirs pins, --bootstrap-server "
        "only): sets replica.alter.log.dirs.io.max.bytes.per.second on the brokers with pins.",
    ),
    timeout: int = typer.Option(
        10000,
        "--timeout",
        help="Milliseconds to keep retrying the start of log dir moves while the replica does not exist "
        "on its broker yet (--bootstrap-server), as Kafka's tool.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Validate and show what would be written; write nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Start a reassignment through the admin API or ZooKeeper.

    With --bootstrap-server: the throttles are SET with IncrementalAlterConfigs (topic *.throttled.replicas lists, broker rates), then AlterPartitionReassignments goes to the controller, and log_dirs pins start with AlterReplicaLogDirs, as Kafka's tool does. With --zookeeper: creates /admin/reassign_partitions in one atomic ZooKeeper multi-op with the throttle configs and their change notifications. Either way the throttles set are recorded so that verify/cancel clear them, and the current assignment is printed to keep for rollback.
    """
    del command_config  # applied by the option itself (one place: commands/common.py)
    _execute(**locals())


@handle_errors
@_library_errors
def _execute(
    reassignment_json_file,
    zookeeper,
    bootstrap_server,
    additional,
    throttle,
    replica_alter_log_dirs_throttle,
    timeout,
    dry_run,
    as_json,
) -> None:
    from kafkatool.assign import formats

    if timeout <= 0:
        raise CommandError(f"--timeout must be > 0 ms, not {timeout}")
    targets = formats.parse_reassignment(_read(reassignment_json_file), str(reassignment_json_file))
    log_dir_rate = replica_alter_log_dirs_throttle if replica_alter_log_dirs_throttle >= 0 else None
    if _use_api(zookeeper, bootstrap_server):
        from kafkatool.assign import api_reassign

        with _admin(bootstrap_server) as admin:
            result = api_reassign.execute(
                admin,
                targets,
                additional=additional,
                throttle=throttle if throttle >= 0 else None,
                log_dir_throttle=log_dir_rate,
                timeout=timeout / 1000,
                dry_run=dry_run,
            )
    else:
        from kafkatool.assign import zk_reassign

        if log_dir_rate is not None:
            raise CommandError("--replica-alter-log-dirs-throttle needs --bootstrap-server (log dir moves)")
        with _connect(zookeeper) as zk:
            result = zk_reassign.execute(
                zk,
                targets,
                additional=additional,
                throttle=throttle if throttle >= 0 else None,
                dry_run=dry_run,
            )
    pins = getattr(result, "log_dirs", {})
    no_controller = bootstrap_server is None and getattr(result, "controller", 0) is None
    if no_controller:
        warning = (
            "no controller is registered (/controller is absent): the reassignment "
            + ("would be" if dry_run else "is")
            + " written to /admin/reassign_partitions but nothing moves until a controller is elected"
        )
        if as_json:
            emit_json({"type": "warning", "message": warning})
        else:
            sys.stderr.write(f"kafkatool: WARNING: {warning}\n")
    if as_json:
        obj = {
            "type": "execute",
            "dry_run": dry_run,
            "rollback": _assignment_doc(result.current),
            "submitted": _assignment_doc(result.submitted) if result.submitted else None,
            "throttles_only": result.throttles_only,
            "throttles": result.throttles.to_dict(),
        }
        if bootstrap_server is None:
            obj["controller"] = getattr(result, "controller", None)
        if bootstrap_server is not None:
            obj["log_dirs"] = [
                {"topic": t, "partition": p, "broker": b, "log_dir": d}
                for (t, p), by_broker in sorted(pins.items())
                for b, d in sorted(by_broker.items())
            ]
            obj["throttle_record"] = getattr(result, "record", None)
        emit_json(obj)
        return
    print(
        "Current partition replica assignment\n\n"
        f"{formats.format_reassignment(result.current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if throttle >= 0:
        print(
            "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
        )
        verb = "would be" if dry_run else "was"
        print(f"The inter-broker throttle limit {verb} set to {throttle} B/s")
    if log_dir_rate is not None and pins:
        verb = "would be" if dry_run else "was"
        print(f"The replica-alter-dir throttle limit {verb} set to {log_dir_rate} B/s")
    names = ",".join(f"{t}-{p}" for t, p in sorted(result.submitted))
    if dry_run:
        console.print("Dry run: nothing written.")
        if result.submitted:
            print(
                f"Would start partition reassignment{'s' if len(result.submitted) != 1 else ''} for {names}"
            )
    elif result.throttles_only:
        print("Throttles updated for the in-flight reassignment.")
    else:
        print(
            f"Successfully started partition reassignment{'s' if len(result.submitted) != 1 else ''} for {names}"
        )
    moves = [f"{t}-{p}-{b}" for (t, p), by_broker in sorted(pins.items()) for b in sorted(by_broker)]
    if moves:
        verb = "Would start" if dry_run else "Successfully started"
        print(f"{verb} log directory move{'s' if len(moves) != 1 else ''} for: {','.join(moves)}")


def _cleared_json(cleared) -> dict | None:
    """The throttles verify and cancel cleared (or kept, and why), as their JSON shows them."""
    if cleared is None:
        return None
    return {"brokers": cleared.brokers, "topics": cleared.topics, "skipped": cleared.skipped_reason}


# ---------------------------------------------------------------- verify


def verify(
    reassignment_json_file: Path = typer.Option(
        ..., "--reassignment-json-file", help="The reassignment to check."
    ),
    zookeeper: str | None = _zk_option(),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    preserve_throttles: bool = typer.Option(False, "--preserve-throttles", help="Do not clear throttles."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Report which throttles would be cleared; write nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Check a reassignment; exit 1 while it is in progress.

    Prints the status of each partition of the file. Exits 1 while moves are in progress or a replica set differs (Kafka's tool exits 0). Once nothing reassigns anywhere in the cluster, clears the throttles: the keys Kafka's tool clears plus those execute recorded.
    """
    del command_config  # applied by the option itself (one place: commands/common.py)
    _verify(**locals())


@handle_errors
@_library_errors
def _verify(
    reassignment_json_file, zookeeper, bootstrap_server, preserve_throttles, dry_run, as_json
) -> None:
    from kafkatool.assign import formats

    targets = formats.parse_reassignment(_read(reassignment_json_file), str(reassignment_json_file))
    if _use_api(zookeeper, bootstrap_server):
        from kafkatool.assign import api_reassign

        with _admin(bootstrap_server) as admin:
            result = api_reassign.verify(
                admin, targets, preserve_throttles=preserve_throttles, dry_run=dry_run
            )
    else:
        from kafkatool.assign import zk_reassign

        with _connect(zookeeper) as zk:
            result = zk_reassign.verify(zk, targets, preserve_throttles=preserve_throttles, dry_run=dry_run)
    cleared = result.cleared
    if as_json:
        for s in result.statuses:
            emit_json(
                {
                    "type": "partition",
                    "topic": s.tp[0],
                    "partition": s.tp[1],
                    "status": s.status,
                    "current": s.current,
                    "target": s.target,
                }
            )
        for m in getattr(result, "moves", []):
            emit_json(
                {
                    "type": "log_dir",
                    "topic": m.tp[0],
                    "partition": m.tp[1],
                    "broker": m.broker,
                    "status": m.status,
                    "current": m.current,
                    "future": m.future,
                    "target": m.target,
                }
            )
        emit_json(
            {
                "type": "summary",
                "done": result.done,
                "cluster_reassigning": result.cluster_active,
                "dry_run": dry_run,
                "throttles_cleared": _cleared_json(cleared),
            }
        )
    else:
        print("Status of partition reassignment:")
        for s in result.statuses:
            print(s.message())
        moves = getattr(result, "moves", [])
        if moves:
            print("Reassignment of replicas between log dirs:")  # Kafka: "Status of replica movement"
            for m in moves:
                print(m.message())
        if cleared is not None:
            if cleared.skipped_reason:
                print(f"Throttles kept: {cleared.skipped_reason}.")
            else:
                verb = "Would clear" if dry_run else "Cleared"
                b, t = cleared.brokers, cleared.topics
                print(
                    f"{verb} broker-level throttles on broker{'s' if len(b) != 1 else ''} {','.join(map(str, b)) or '(none set)'}"
                )
                print(
                    f"{verb} topic-level throttles on topic{'s' if len(t) != 1 else ''} {','.join(t) or '(none set)'}"
                )
    raise typer.Exit(EXIT_OK if result.done else EXIT_FINDINGS)


# ---------------------------------------------------------------- cancel


def cancel(
    reassignment_json_file: Path = typer.Option(
        ..., "--reassignment-json-file", help="The reassignment whose in-flight partitions to cancel."
    ),
    zookeeper: str | None = _zk_option(),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    preserve_throttles: bool = typer.Option(False, "--preserve-throttles", help="Do not clear throttles."),
    force_controller_election: bool = typer.Option(
        False,
        "--force-controller-election",
        help="With --zookeeper and a registered controller: also DELETE /controller, forcing a controller "
        "election that moves partition leadership across the whole cluster. Never the default.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be reverted; write nothing."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Cancel the in-flight partitions of a reassignment.

    With --bootstrap-server (the way to cancel on a running cluster): sends a null target for each (AlterPartitionReassignments): the controller reverts them to their original replicas and deletes the adding ones. With --zookeeper: reverts their topic znodes to the original replicas and drops them from /admin/reassign_partitions in one multi-op, then clears the throttles. A running ZK-mode controller keeps in-flight reassignments in memory and takes no cancel through ZooKeeper, so when a controller is registered --zookeeper refuses (exit 2) unless --force-controller-election is given.

    WARNING: --force-controller-election also deletes /controller in the same multi-op so that a new controller loads the reverted state. That election moves every partition leadership the old controller managed, in the whole cluster, not only the cancelled partitions. Use it only when the admin API is not available. With no controller registered nothing is deleted: the next controller loads the reverted state. Replicas already created on the adding brokers are listed: ZK-mode brokers do not delete them.
    """
    del command_config  # applied by the option itself (one place: commands/common.py)
    _cancel(**locals())


@handle_errors
@_library_errors
def _cancel(
    reassignment_json_file,
    zookeeper,
    bootstrap_server,
    preserve_throttles,
    force_controller_election,
    dry_run,
    as_json,
) -> None:
    from kafkatool.assign import formats

    targets = formats.parse_reassignment(_read(reassignment_json_file), str(reassignment_json_file))
    if _use_api(zookeeper, bootstrap_server):
        from kafkatool.assign import api_reassign

        with _admin(bootstrap_server) as admin:
            result = api_reassign.cancel(
                admin, targets, preserve_throttles=preserve_throttles, dry_run=dry_run
            )
    else:
        from kafkatool.assign import zk_reassign

        with _connect(zookeeper) as zk:
            result = zk_reassign.cancel(
                zk,
                targets,
                preserve_throttles=preserve_throttles,
                dry_run=dry_run,
                force_controller_election=force_controller_election,
            )
    cleared = result.cleared
    if as_json:
        emit_json(
            {
                "type": "cancel",
                "dry_run": dry_run,
                "cancelled": [
                    {"topic": t, "partition": p, "replicas": r}
                    for (t, p), r in sorted(result.cancelled.items())
                ],
                "stray_replicas": [
                    {"topic": t, "partition": p, "brokers": r} for (t, p), r in sorted(result.stray.items())
                ],
                "controller_moved": result.controller_moved,
                "cancelled_log_dir_moves": [
                    {"topic": tp[0], "partition": tp[1], "broker": b, "log_dir": d}
                    for tp, b, d in getattr(result, "cancelled_moves", [])
                ],
                "throttles_cleared": _cleared_json(cleared),
            }
        )
        return
    names = ",".join(f"{t}-{p}" for t, p in sorted(result.cancelled))
    if result.cancelled:
        verb = "Would cancel" if dry_run else "Successfully cancelled"
        n = len(result.cancelled)
        print(f"{verb} partition reassignment{'s' if n != 1 else ''} for: {names}")
        if result.controller_moved:
            print(
                ("Would delete" if dry_run else "Deleted")
                + " /controller so that a new controller loads the reverted assignment."
            )
        for (t, p), brokers in sorted(result.stray.items()):
            print(
                f"{t}-{p}: replicas may remain on broker(s) {','.join(map(str, brokers))}; delete them there."
            )
    else:
        print("None of the specified partition reassignments are active.")
    stopped = [f"{tp[0]}-{tp[1]}-{b}" for tp, b, _d in getattr(result, "cancelled_moves", [])]
    if stopped:
        verb = "Would cancel" if dry_run else "Successfully cancelled"
        print(f"{verb} log directory move{'s' if len(stopped) != 1 else ''} for: {','.join(stopped)}")
    if cleared is not None:
        if cleared.skipped_reason:
            print(f"Throttles kept: {cleared.skipped_reason}.")
        else:
            verb = "Would clear" if dry_run else "Cleared"
            print(
                f"{verb} throttles on brokers {','.join(map(str, cleared.brokers)) or '(none set)'} and topics {','.join(cleared.topics) or '(none set)'}"
            )


# ---------------------------------------------------------------- list


def list_(
    zookeeper: str | None = _zk_option(),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """List the reassignments in flight.

    With --bootstrap-server: ListPartitionReassignments of the whole cluster. With --zookeeper: partitions whose topic znode lists adding/removing replicas, and the entries of /admin/reassign_partitions the controller has not started yet.
    """
    del command_config  # applied by the option itself (one place: commands/common.py)
    _list(**locals())


@handle_errors
@_library_errors
def _list(zookeeper, bootstrap_server, as_json) -> None:
    if _use_api(zookeeper, bootstrap_server):
        from kafkatool.assign import api_reassign

        with _admin(bootstrap_server) as admin:
            items = api_reassign.list_reassignments(admin)
    else:
        from kafkatool.assign import zk_reassign

        with _connect(zookeeper) as zk:
            items, _ = zk_reassign.list_reassignments(zk)
    if as_json:
        for it in items:
            emit_json(
                {
                    "type": "reassignment",
                    "topic": it.tp[0],
                    "partition": it.tp[1],
                    "replicas": it.replicas,
                    "adding": it.adding,
                    "removing": it.removing,
                    "target": it.target,
                    "source": it.source,
                }
            )
        return
    if not items:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for it in items:
        line = it.message()
        if it.source == "znode":
            line += " (submitted in /admin/reassign_partitions, not started by the controller yet)"
        print(line)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(
        name="reassign",
        help=HELP,
        no_args_is_help=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    sub.command("generate")(generate)
    sub.command("place")(place)
    sub.command("execute")(execute)
    sub.command("verify")(verify)
    sub.command("cancel")(cancel)
    sub.command("list")(list_)
    app.add_typer(sub, name="reassign")
