"""``kafkatool groups``: consumer groups like ``kafka-consumer-groups.sh``, through a cluster
(``--bootstrap-server``) and offline from a log dir or a backup of one (``--log-dir``, ``--at``),
which no other tool does.

The data comes from :mod:`kafkatool.broker.group.live` (the cluster's answers) or
:mod:`kafkatool.broker.group.offline` (the coordinator's own load of ``__consumer_offsets``,
replayed read-only), both as :mod:`kafkatool.broker.group.views`; this module only chooses and
prints, in ConsumerGroupCommand's layouts.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
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
    err_console,
    error_line,
    handle_errors,
    modify_exit,
)

HELP = (
    "Consumer groups like kafka-consumer-groups.sh: list, describe (offsets, lag, members, state), "
    "delete, delete-offsets and reset-offsets through a cluster (--bootstrap-server), and list, "
    "describe and export offline from a broker's log dir or a backup of one (--log-dir), as of any "
    "instant (--at)."
)

LOG_DIR_HELP = (
    "Read a broker's log dir or a copy of one instead of a cluster (repeatable: every dir of the "
    "broker): __consumer_offsets is read here, read-only, and lag is measured against the "
    "partitions in the same dirs. Damaged data is read past (a batch failing its CRC as it is; "
    "where an entry does not parse, the rest of its segment left out), each damage one line on "
    "stderr naming the file, the byte and the offset, and the exit status is 1."
)
AT_HELP = (
    "With --log-dir: the groups as they stood at this instant: epoch milliseconds or ISO-8601 "
    "(UTC unless a zone is given), e.g. 2026-11-24T08:00:00. Later commits are ignored, offsets "
    "expired by then are dropped by the coordinator's rule, log end offsets are taken as of then."
)
RETENTION_HELP = (
    "With --log-dir: offsets.retention.minutes of the broker that wrote the dir (Kafka's default: "
    "10080, 7 days)."
)
BOOTSTRAP_HELP = "The cluster to ask (host:port,...)."


def _bootstrap_option():
    return typer.Option(None, "--bootstrap-server", metavar="HOST:PORT", help=BOOTSTRAP_HELP)


def _log_dir_option():
    return typer.Option(None, "--log-dir", metavar="DIR", help=LOG_DIR_HELP)


def _at_option():
    return typer.Option(None, "--at", metavar="TIME", help=AT_HELP)


def _retention_option():
    return typer.Option(10080, "--offsets-retention-minutes", metavar="MIN", help=RETENTION_HELP)


def _one_source(bootstrap_server: str | None, log_dir: list[Path] | None, at: str | None) -> None:
    if bool(bootstrap_server) == bool(log_dir):
        raise CommandError("give exactly one of --bootstrap-server and --log-dir")
    if at is not None and not log_dir:
        raise CommandError("--at needs --log-dir (a cluster answers for now)")


def _read_offline(log_dir: list[Path], at: str | None, retention_minutes: int):
    from kafkatool.broker.group.offline import read_groups
    from kafkatool.commands.topic_sources import parse_now, targets

    for d in log_dir:
        if not d.is_dir():
            raise CommandError(f"{d}: not a directory")
    at_ms = parse_now(at, flag="--at") if at is not None else None
    if retention_minutes <= 0:
        raise CommandError(f"--offsets-retention-minutes {retention_minutes}: must be positive")
    # what the paths name, by LogManager's one rule (not Kafka data: exit 2)
    dirs = sorted({t.log_dir for t in targets(list(log_dir))})
    damage: list = []
    groups = read_groups(dirs, at_ms=at_ms, retention_ms=retention_minutes * 60_000, damage=damage)
    # what the read met and read past in __consumer_offsets: a line each, and exit 1
    for d in damage:
        error_line(d.line())
    return groups, bool(damage)


def _admin(bootstrap_server: str):
    from kafkatool.assign.kafka_client import KafkaAdmin

    return KafkaAdmin(bootstrap_server, client_id="kafkatool-groups")


def _views(bootstrap_server, log_dir, at, retention_minutes, group, all_groups):
    """(found views in order, names that do not exist, whether the log dirs' data was damaged)."""
    if bool(group) == all_groups:
        raise CommandError("give --group G (repeatable) or --all-groups")
    if log_dir:
        groups, damaged = _read_offline(log_dir, at, retention_minutes)
        names = sorted(groups) if all_groups else list(dict.fromkeys(group))
        return [groups[g] for g in names if g in groups], [g for g in names if g not in groups], damaged
    from kafkatool.broker.group import live

    with _admin(bootstrap_server) as admin:
        names = sorted(live.list_groups(admin)) if all_groups else list(dict.fromkeys(group))
        views = [live.describe(admin, g) for g in names]
    return [v for v in views if v.state != "Dead"], [v.group_id for v in views if v.state == "Dead"], False


def _dash(v) -> str:
    return "-" if v is None or v == "" else str(v)


def _print_rows(fmt_widths: list[int], rows: list[list[str]]) -> None:
    """Left-aligned columns (Java's %-Ns), the last one unpadded."""
    console.print()
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:-1], fmt_widths, strict=False)]
        console.print(" ".join([*cells, r[-1]]).rstrip())


def _state_note(og) -> None:
    """ConsumerGroupCommand.shouldPrintMemberState's notes, on stderr as Kafka prints them."""
    if og.state == "Empty":
        err_console.print(f"\nConsumer group '{og.group_id}' has no active members.")
    elif og.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        err_console.print(f"\nWarning: Consumer group '{og.group_id}' is rebalancing.")


def _show_offsets(og, json_out: bool) -> None:
    if json_out:
        for r in og.rows:
            emit_json(
                {
                    "type": "offset",
                    "group": og.group_id,
                    "topic": r.topic,
                    "partition": r.partition,
                    "current_offset": r.current_offset,
                    "log_end_offset": r.log_end_offset,
                    "lag": r.lag,
                    "consumer_id": r.member.member_id if r.member else None,
                    "host": r.member.host if r.member else None,
                    "client_id": r.member.client_id if r.member else None,
                    "metadata": r.metadata,
                    "commit_timestamp": r.commit_timestamp,
                }
            )
        lags = [r.lag for r in og.rows if r.lag is not None]
        emit_json(
            {
                "type": "group",
                "group": og.group_id,
                "group_type": og.group_type,
                "state": og.state,
                "partitions": len(og.rows),
                "total_lag": sum(lags) if lags else None,
                "expired_offsets": og.expired,
            }
        )
        return
    _state_note(og)
    if not og.rows:
        return
    rows = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for r in og.rows:
        m = r.member
        rows.append(
            [
                og.group_id,
                r.topic,
                str(r.partition),
                _dash(r.current_offset),
                _dash(r.log_end_offset),
                _dash(r.lag),
                _dash(m.member_id if m else None),
                _dash(m.host if m else None),
                _dash(m.client_id if m else None),
            ]
        )
    # ConsumerGroupCommand.printOffsetFormat: group, topic, consumer id and host at least 15 wide
    w = [max(15, *(len(r[i]) for r in rows[1:])) for i in (0, 1, 6, 7)]
    _print_rows([w[0], w[1], 10, 15, 15, 15, w[2], w[3]], rows)


def _show_members(og, verbose: bool, json_out: bool) -> None:
    if json_out:
        members = [
            {
                "consumer_id": m.member_id,
                "group_instance_id": m.instance_id,
                "host": m.host,
                "client_id": m.client_id,
                "partitions": [{"topic": t, "partition": p} for t, p in m.partitions],
            }
            for m in og.members
        ]
        emit_json({"type": "members", "group": og.group_id, "state": og.state, "members": members})
        return
    _state_note(og)
    with_instance = any(m.instance_id for m in og.members)
    head = (
        ["GROUP", "CONSUMER-ID"]
        + (["GROUP-INSTANCE-ID"] if with_instance else [])
        + ["HOST", "CLIENT-ID", "#PARTITIONS"]
    )
    rows = [head + (["ASSIGNMENT"] if verbose else [""])]
    for m in og.members:
        row = (
            [og.group_id, m.member_id]
            + ([m.instance_id or ""] if with_instance else [])
            + [m.host, m.client_id]
        )
        row.append(str(len(m.partitions)))
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for t, p in m.partitions:
                by_topic.setdefault(t, []).append(p)
            row.append(
                ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))
                or "-"
            )
        else:
            row.append("")
        rows.append(row)
    mins = [15, 15] + ([17] if with_instance else []) + [15, 15, 15]
    widths = [max(mn, *(len(r[i]) for r in rows[1:])) if len(rows) > 1 else mn for i, mn in enumerate(mins)]
    _print_rows(widths, rows)


def _show_state(og, json_out: bool) -> None:
    where = og.coordinator or f"__consumer_offsets-{og.partition}"
    if json_out:
        emit_json(
            {
                "type": "state",
                "group": og.group_id,
                "group_type": og.group_type,
                "coordinator": where,
                "assignment_strategy": og.assignor,
                "state": og.state,
                "members": len(og.members),
            }
        )
        return
    _state_note(og)
    head = "COORDINATOR (ID)" if og.coordinator else "COORDINATOR (PARTITION)"
    rows = [
        [head, "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [where, _dash(og.assignor), og.state, str(len(og.members))],
    ]
    rows = [["GROUP", *rows[0]], [og.group_id, *rows[1]]]
    _print_rows([max(15, len(og.group_id)), max(25, len(where), len(head)), 25, 20], rows)


# ----------------------------------------------------------------------------- list, describe


@handle_errors
def list_groups(
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    at: str | None = _at_option(),
    state: bool = typer.Option(False, "--state", help="Show each group's state."),
    group_type: bool = typer.Option(False, "--type", help="Show each group's type (classic or consumer)."),
    retention_minutes: int = _retention_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Every consumer group (kafka-consumer-groups.sh --list [--state] [--type])."""
    _one_source(bootstrap_server, log_dir, at)
    damaged = False
    if log_dir:
        offline, damaged = _read_offline(log_dir, at, retention_minutes)
        listed = {g: (v.group_type, v.state) for g, v in offline.items()}
    else:
        from kafkatool.broker.group import live

        with _admin(bootstrap_server) as admin:
            listed = {g: (x.group_type, x.state) for g, x in live.list_groups(admin).items()}
    if json_out:
        for gid in sorted(listed):
            emit_json({"type": "group", "group": gid, "group_type": listed[gid][0], "state": listed[gid][1]})
    elif not state and not group_type:
        for gid in sorted(listed):
            console.print(gid)
    else:
        # ConsumerGroupCommand.printGroupInfo: the group column max(15, longest) + 10, others 20
        width = max([15, *map(len, listed)]) + 10
        head = (
            ["GROUP".ljust(width)]
            + (["TYPE".ljust(20)] if group_type else [])
            + (["STATE".ljust(20)] if state else [])
        )
        console.print(" ".join(head).rstrip())
        for gid in sorted(listed):
            gt, st = listed[gid]
            cells = (
                [gid.ljust(width)]
                + ([gt.ljust(20)] if group_type else [])
                + ([st.ljust(20)] if state else [])
            )
            console.print(" ".join(cells).rstrip())
    raise typer.Exit(EXIT_FINDINGS if damaged else EXIT_OK)


@handle_errors
def describe(
    group: list[str] = typer.Option(
        None, "--group", metavar="GROUP", help="A group to describe (repeatable)."
    ),
    all_groups: bool = typer.Option(False, "--all-groups", help="Describe every group."),
    members: bool = typer.Option(False, "--members", help="Describe the members instead of the offsets."),
    state: bool = typer.Option(False, "--state", help="Describe the group's state instead of the offsets."),
    offsets: bool = typer.Option(
        False, "--offsets", help="Describe committed offsets, log end offsets and lag (the default)."
    ),
    verbose: bool = typer.Option(False, "--verbose", help="With --members: each member's assignment."),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    at: str | None = _at_option(),
    retention_minutes: int = _retention_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Committed offsets, log end offsets and lag per partition, members, or state
    (kafka-consumer-groups.sh --describe); exit 1 when a named group does not exist."""
    if members + state + offsets > 1:
        raise CommandError("give at most one of --members, --state and --offsets")
    _one_source(bootstrap_server, log_dir, at)
    found, missing, damaged = _views(bootstrap_server, log_dir, at, retention_minutes, group, all_groups)
    for og in found:
        if members:
            _show_members(og, verbose, json_out)
        elif state:
            _show_state(og, json_out)
        else:
            _show_offsets(og, json_out)
    for g in missing:
        if json_out:
            emit_json({"type": "group", "group": g, "state": "Dead", "error": "does not exist"})
        else:
            error_line(f"Consumer group '{g}' does not exist.")
    raise typer.Exit(EXIT_FINDINGS if missing or damaged else EXIT_OK)


@handle_errors
def export(
    group: list[str] = typer.Option(None, "--group", metavar="GROUP", help="A group to export (repeatable)."),
    all_groups: bool = typer.Option(False, "--all-groups", help="Export every group."),
    bootstrap_server: str | None = _bootstrap_option(),
    command_config: str | None = command_config_option(),
    log_dir: list[Path] = _log_dir_option(),
    at: str | None = _at_option(),
    retention_minutes: int = _retention_option(),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the CSV here (written aside, then renamed)."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The committed offsets as kafka-consumer-groups.sh --reset-offsets --export's CSV
    (topic,partition,offset for one group; group,topic,partition,offset for several), for
    `reset-offsets --from-file` (ours or Kafka's) against a live cluster: a backup's offsets
    restored."""
    from kafkatool.broker.group.views import reset_csv

    _one_source(bootstrap_server, log_dir, at)
    found, missing, damaged = _views(bootstrap_server, log_dir, at, retention_minutes, group, all_groups)
    plan = {og.group_id: og.committed for og in found}
    text = reset_csv(plan, with_group=all_groups or len(group or []) > 1)
    _write_aside(output, text)
    count = sum(len(x) for x in plan.values())
    if json_out:
        for gid, tps in plan.items():
            for (t, p), off in sorted(tps.items()):
                emit_json({"type": "offset", "group": gid, "topic": t, "partition": p, "offset": off})
        emit_json(
            {
                "type": "summary",
                "groups": len(found),
                "offsets": count,
                "output": str(output) if output else None,
            }
        )
    elif output is None:
        console.file.write(text)
    else:
        console.print(f"{count} offsets of {len(found)} groups written to {output}")
    for g in missing:
        error_line(f"Consumer group '{g}' does not exist.")
    raise typer.Exit(EXIT_FINDINGS if missing or damaged else EXIT_OK)


def _write_aside(output: Path | None, text: str) -> None:
    if output is None:
        return
    tmp = output.with_name(output.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(output)
    except OSError as exc:
        raise CommandError(f"{output}: {exc.strerror or exc}") from None


# ----------------------------------------------------------------------------- changes (live)


def _partition_args(admin, topics: list[str]) -> list[tuple[str, int]]:
    """--topic T (every partition) or T:0,1 (ConsumerGroupCommand.parseTopicPartitionsToReset)."""
    from kafkatool.broker.group import live

    named, whole = [], []
    for arg in topics:
        if ":" in arg:
            t, _, parts = arg.partition(":")
            try:
                named.extend((t, int(p)) for p in parts.split(","))
            except ValueError:
                raise CommandError(f"Invalid topic arg '{arg}', expected topic name and partitions") from None
        else:
            whole.append(arg)
    return named + (live.topic_partitions(admin, whole) if whole else [])


@handle_errors
def delete(
    group: list[str] = typer.Option(None, "--group", metavar="GROUP", help="A group to delete (repeatable)."),
    all_groups: bool = typer.Option(False, "--all-groups", help="Delete every group."),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", metavar="HOST:PORT", help=BOOTSTRAP_HELP),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Delete groups and their offsets (DeleteGroups); a group with members is refused (NON_EMPTY_GROUP)."""
    from kafkatool.assign.kafka_client import describe_error
    from kafkatool.broker.group import live

    if bool(group) == all_groups:
        raise CommandError("give --group G (repeatable) or --all-groups")
    with _admin(bootstrap_server) as admin:
        names = sorted(live.list_groups(admin)) if all_groups else list(dict.fromkeys(group))
        results = live.delete_groups(admin, names)
    failed = {g: c for g, c in results.items() if c}
    if json_out:
        for g, c in results.items():
            emit_json(
                {
                    "type": "group",
                    "group": g,
                    "deleted": not c,
                    "error_code": c,
                    "error": describe_error(c) if c else None,
                }
            )
    elif not failed:
        console.print(f"Deletion of requested consumer groups ('{', '.join(results)}') was successful.")
    else:
        error_line("Deletion of some consumer groups failed:")
        for g, c in failed.items():
            console.print(f"* Group '{g}' could not be deleted due to: {describe_error(c)}")
        ok = [g for g, c in results.items() if not c]
        if ok:
            console.print(f"\nThese consumer groups were deleted successfully: '{', '.join(ok)}'")
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


@handle_errors
def delete_offsets(
    group: str = typer.Option(..., "--group", metavar="GROUP", help="The group."),
    topic: list[str] = typer.Option(..., "--topic", metavar="TOPIC[:P,...]", help="Topic (repeatable)."),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", metavar="HOST:PORT", help=BOOTSTRAP_HELP),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Delete a group's committed offsets of topics or partitions (OffsetDelete); refused for a
    topic the group's members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC)."""
    from kafkatool.assign.kafka_client import describe_error
    from kafkatool.broker.group import live
    from kafkatool.protocol.errors import ErrorCode as E

    with _admin(bootstrap_server) as admin:
        tps = _partition_args(admin, topic)
        top, per = live.delete_offsets(admin, group, tps)
    bad = top or any(per.values())
    if json_out:
        for (t, p), c in sorted(per.items()):
            emit_json(
                {
                    "type": "offset",
                    "group": group,
                    "topic": t,
                    "partition": p,
                    "error_code": c,
                    "error": describe_error(c) if c else None,
                }
            )
        emit_json(
            {
                "type": "summary",
                "group": group,
                "error_code": top,
                "error": describe_error(top) if top else None,
            }
        )
    else:
        if top == 0:
            console.print(f"Request succeed for deleting offsets with topic {', '.join(topic)} group {group}")
        elif top == E.GROUP_ID_NOT_FOUND:
            error_line(f"'{group}' does not exist.")
        elif top == E.NON_EMPTY_GROUP:
            error_line(
                f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty."
            )
        elif top in (E.UNKNOWN_TOPIC_OR_PARTITION, E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_SUBSCRIBED_TO_TOPIC):
            error_line("Encounter some partition level error, see the follow-up details:")
        else:
            error_line(f"Encounter some unknown error: {describe_error(top)}")
        rows = [["TOPIC", "PARTITION", "STATUS"]]
        for (t, p), c in sorted(per.items()):
            rows.append([t, str(p), f"Error: {describe_error(c)}" if c else "Successful"])
        _print_rows([30, 15], rows)
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def _duration_ms(value: str) -> int:
    """ISO-8601 PnDTnHnMn.nS (Java's Duration.parse), in milliseconds."""
    m = _DURATION.match(value.strip())
    if not m or value.strip().upper() in ("P", "PT"):
        raise CommandError(
            f"--by-duration {value!r}: expected an ISO-8601 duration such as PT1H30M or P1DT2H"
        )
    d, h, mi, s = m.groups()
    delta = timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))
    return int(delta.total_seconds() * 1000)


def reset_spec(
    kind: str, to_offset: int | None, shift_by: int | None, to_datetime: str | None, by_duration: str | None
):
    """The reset scenario ``kind`` (an option name without its dashes) with its value, as
    ConsumerGroupCommand and StreamsResetter read their options: --to-datetime by
    Utils.getDateTime (here: epoch ms or ISO-8601, UTC unless a zone is given), --by-duration
    by Duration.parse, from now. The one reading of reset options (groups reset-offsets,
    streams-reset); a --from-file plan is read_reset_plan's."""
    from kafkatool.broker.group import live
    from kafkatool.commands.topic_sources import parse_now

    spec = live.ResetSpec("to-datetime" if kind == "by-duration" else kind)
    if kind == "to-offset":
        spec.value = to_offset
    elif kind == "shift-by":
        spec.value = shift_by
    elif kind == "to-datetime":
        spec.value = parse_now(to_datetime, flag="--to-datetime")
    elif kind == "by-duration":
        spec.value = int(datetime.now(UTC).timestamp() * 1000) - _duration_ms(by_duration)
    return spec


def read_reset_plan(
    path: Path, groups: list[str], *, group_column: bool = True
) -> dict[str, dict[tuple[str, int], int]]:
    """--from-file: a reset plan CSV (views.parse_reset_csv, ConsumerGroupCommand's format;
    ``group_column`` False: TOPIC,PARTITION,OFFSET lines only, StreamsResetter's); an unreadable
    or malformed file is one line naming it (and the line)."""
    from kafkatool.broker.group.views import parse_reset_csv
    from kafkatool.log.file_records import read_regular

    raw = read_regular(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: byte {exc.start}: not UTF-8") from None
    try:
        return parse_reset_csv(text, groups, source=str(path), group_column=group_column)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


@handle_errors
def reset_offsets(
    group: list[str] = typer.Option(None, "--group", metavar="GROUP", help="A group to reset (repeatable)."),
    all_groups: bool = typer.Option(False, "--all-groups", help="Reset every group."),
    topic: list[str] = typer.Option(
        None,
        "--topic",
        metavar="TOPIC[:P,...]",
        help="Scope: a topic or some of its partitions (repeatable).",
    ),
    all_topics: bool = typer.Option(
        False, "--all-topics", help="Scope: every partition the group has committed."
    ),
    to_earliest: bool = typer.Option(False, "--to-earliest", help="Reset to the log start offset."),
    to_latest: bool = typer.Option(False, "--to-latest", help="Reset to the log end offset."),
    to_current: bool = typer.Option(
        False, "--to-current", help="Reset to the committed offset (the log end where none)."
    ),
    to_offset: int | None = typer.Option(
        None, "--to-offset", metavar="N", help="Reset to offset N (clamped into the log)."
    ),
    shift_by: int | None = typer.Option(
        None, "--shift-by", metavar="N", help="Move the committed offset by N (may be negative)."
    ),
    to_datetime: str | None = typer.Option(
        None,
        "--to-datetime",
        metavar="ISO",
        help="Reset to the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss, UTC unless a zone is given).",
    ),
    by_duration: str | None = typer.Option(
        None,
        "--by-duration",
        metavar="PnDTnHnM",
        help="Reset to the first offset at or after now minus this duration.",
    ),
    from_file: Path | None = typer.Option(
        None,
        "--from-file",
        metavar="CSV",
        help="Reset to the offsets of a CSV (--export's or Kafka's format).",
    ),
    execute: bool = typer.Option(False, "--execute", help="Commit the new offsets (without it: a dry run)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show the new offsets (the default)."),
    export_csv: bool = typer.Option(False, "--export", help="Print the new offsets as Kafka's reset CSV."),
    bootstrap_server: str = typer.Option(..., "--bootstrap-server", metavar="HOST:PORT", help=BOOTSTRAP_HELP),
    command_config: str | None = command_config_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Move a group's committed offsets, like kafka-consumer-groups.sh --reset-offsets: a dry run
    unless --execute; only a group with no active members (Empty or Dead)."""
    from kafkatool.broker.group import live
    from kafkatool.broker.group.views import reset_csv

    if bool(group) == all_groups:
        raise CommandError("give --group G (repeatable) or --all-groups")
    if execute and dry_run:
        raise CommandError("give --execute or --dry-run, not both")
    chosen = [
        n
        for n, v in (
            ("to-earliest", to_earliest),
            ("to-latest", to_latest),
            ("to-current", to_current),
            ("to-offset", to_offset is not None),
            ("shift-by", shift_by is not None),
            ("to-datetime", to_datetime is not None),
            ("by-duration", by_duration is not None),
            ("from-file", from_file is not None),
        )
        if v
    ]
    if len(chosen) != 1:
        raise CommandError(
            "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, "
            "--to-datetime, --by-duration, --from-file"
        )
    if from_file is None and bool(topic) == all_topics:
        raise CommandError("One of the reset scopes should be defined: --all-topics, --topic.")
    spec = reset_spec(chosen[0], to_offset, shift_by, to_datetime, by_duration)
    plans: dict[str, dict[tuple[str, int], int]] = {}
    if from_file is not None:
        plans = read_reset_plan(from_file, list(group or []))

    def warn(note) -> None:
        text = live.group_command_warning(note)
        if text and not json_out:
            err_console.print(f"WARN {text}")

    result: dict[str, dict[tuple[str, int], int]] = {}
    refused = []
    changing: set[str] = set()
    failed: dict[str, dict[tuple[str, int], int]] = {}
    with _admin(bootstrap_server) as admin:
        names = sorted(live.list_groups(admin)) if all_groups else list(dict.fromkeys(group))
        for gid in names:
            view = live.describe(admin, gid)
            if view.state not in live.INACTIVE:
                error_line(
                    f"Assignments can only be reset if the group '{gid}' is inactive, but the current state is {view.state}."
                )
                refused.append(gid)
                continue
            if spec.kind == "from-file":
                if gid not in plans:
                    error_line(f"No reset plan for group {gid} found")
                    result[gid] = {}
                    continue
                spec.plan = plans[gid]
                scope = sorted(plans[gid])
            elif all_topics:
                scope = sorted(view.committed)
            else:
                scope = _partition_args(admin, list(topic))
            new = live.plan_reset(admin, view, scope, spec, warn)
            result[gid] = new
            if any(view.committed.get(tp) != off for tp, off in new.items()):
                changing.add(gid)
            if execute and new:
                errors = {tp: c for tp, c in live.commit_offsets(admin, gid, new).items() if c}
                if errors:
                    failed[gid] = errors
    with_group = all_groups or len(group or []) > 1
    if json_out:
        for gid, tps in result.items():
            for (t, p), off in sorted(tps.items()):
                err = failed.get(gid, {}).get((t, p))
                emit_json(
                    {
                        "type": "offset",
                        "group": gid,
                        "topic": t,
                        "partition": p,
                        "new_offset": off,
                        "executed": execute and not err,
                        "error_code": err or 0,
                    }
                )
        emit_json({"type": "summary", "groups": len(result), "refused": refused, "dry_run": not execute})
    elif export_csv:
        console.file.write(reset_csv(result, with_group=with_group))
    else:
        rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        for gid, tps in result.items():
            for (t, p), off in sorted(tps.items()):
                rows.append([gid, t, str(p), str(off)])
        if len(rows) > 1:
            _print_rows([30, 30, 10], rows)
    from kafkatool.assign.kafka_client import describe_error

    for gid, errors in failed.items():
        for (t, p), c in sorted(errors.items()):
            error_line(f"group '{gid}': committing {t}-{p} failed: {describe_error(c)}")
    if refused or failed:
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(modify_exit(dry_run=not execute, would_change=bool(changing), remaining=False))


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="groups", help=HELP, no_args_is_help=True)
    sub.command("list")(list_groups)
    sub.command("describe")(describe)
    sub.command("export")(export)
    sub.command("delete")(delete)
    sub.command("delete-offsets")(delete_offsets)
    sub.command("reset-offsets")(reset_offsets)
    app.add_typer(sub, name="groups")
