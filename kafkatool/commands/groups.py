"""``kafkatool groups``: consumer groups like ``kafka-consumer-groups.sh``, and offline from a
log dir or a backup of one (``--log-dir``, ``--at``), which no other tool does.

The data comes from :mod:`kafkatool.broker.group.offline` (the coordinator's own load of
``__consumer_offsets``, replayed read-only); this module only chooses and prints.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    CommandError,
    console,
    emit_json,
    error_line,
    handle_errors,
)

HELP = (
    "Consumer groups like kafka-consumer-groups.sh: list, describe (offsets, lag, members, state) and "
    "export Kafka's reset CSV, offline from a broker's log dir or a backup of one (--log-dir), as of "
    "any instant (--at)."
)

LOG_DIR_HELP = (
    "A broker's log dir or a copy of one (repeatable: every dir of the broker): __consumer_offsets is "
    "read here, read-only, and lag is measured against the partitions in the same dirs."
)
AT_HELP = (
    "Show the groups as they stood at this instant: epoch milliseconds or ISO-8601 (UTC unless a zone "
    "is given), e.g. 2026-11-24T08:00:00. Later commits are ignored and offsets expired by then are "
    "dropped by the coordinator's rule; log end offsets are taken as of then."
)
RETENTION_HELP = (
    "offsets.retention.minutes of the broker that wrote the dir (Kafka's default: 10080, 7 days)."
)


def _read(log_dir: list[Path], at: str | None, retention_minutes: int):
    from kafkatool.broker.group.offline import read_groups
    from kafkatool.commands.topic_sources import parse_now, targets

    if not log_dir:
        raise CommandError("give --log-dir DIR (a broker's log dir or a backup of one)")
    for d in log_dir:
        if not d.is_dir():
            raise CommandError(f"{d}: not a directory")
    at_ms = parse_now(at, flag="--at") if at is not None else None
    if retention_minutes <= 0:
        raise CommandError(f"--offsets-retention-minutes {retention_minutes}: must be positive")
    # what the paths name, by LogManager's one rule (not Kafka data: exit 2)
    dirs = sorted({t.log_dir for t in targets(list(log_dir))})
    return read_groups(dirs, at_ms=at_ms, retention_ms=retention_minutes * 60_000)


def _select(groups: dict, group: list[str] | None, all_groups: bool) -> tuple[list, list[str]]:
    if bool(group) == all_groups:
        raise CommandError("give --group G (repeatable) or --all-groups")
    if all_groups:
        return [groups[g] for g in sorted(groups)], []
    found = [groups[g] for g in group if g in groups]
    missing = [g for g in group if g not in groups]
    return found, missing


def _table(rows: list[list[str]]) -> None:
    """kafka-consumer-groups.sh's layout: left-aligned columns, each as wide as its widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    console.print()
    for r in rows:
        console.print(" ".join(c.ljust(w) for c, w in zip(r[:-1], widths[:-1], strict=True)) + " " + r[-1])


def _dash(v) -> str:
    return "-" if v is None or v == "" else str(v)


def _members_json(og) -> list[dict]:
    return [
        {
            "consumer_id": m.member_id,
            "group_instance_id": m.instance_id,
            "host": m.host,
            "client_id": m.client_id,
            "partitions": [{"topic": t, "partition": p} for t, p in m.partitions],
        }
        for m in og.members
    ]


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
    if not og.members and og.rows:
        console.print(f"\nConsumer group '{og.group_id}' has no active members.")
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
                str(r.current_offset),
                _dash(r.log_end_offset),
                _dash(r.lag),
                _dash(m.member_id if m else None),
                _dash(m.host if m else None),
                _dash(m.client_id if m else None),
            ]
        )
    # members without committed offsets still show, as Kafka's tool shows them
    for m in og.members:
        if not any(r.member is m for r in og.rows) and not m.partitions:
            rows.append([og.group_id, "-", "-", "-", "-", "-", m.member_id, m.host, m.client_id])
    if len(rows) == 1:
        console.print(f"\nConsumer group '{og.group_id}' has no committed offsets.")
        return
    _table(rows)


def _show_members(og, verbose: bool, json_out: bool) -> None:
    if json_out:
        emit_json({"type": "members", "group": og.group_id, "state": og.state, "members": _members_json(og)})
        return
    if not og.members:
        console.print(f"\nConsumer group '{og.group_id}' has no active members.")
        return
    head = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if verbose else [])
    rows = [head]
    for m in og.members:
        row = [og.group_id, m.member_id, m.host, m.client_id, str(len(m.partitions))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for t, p in m.partitions:
                by_topic.setdefault(t, []).append(p)
            row.append(
                ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items())) or "-"
            )
        rows.append(row)
    _table(rows)


def _show_state(og, json_out: bool) -> None:
    coordinator = f"__consumer_offsets-{og.partition}"
    if json_out:
        emit_json(
            {
                "type": "state",
                "group": og.group_id,
                "group_type": og.group_type,
                "coordinator_partition": og.partition,
                "assignment_strategy": og.assignor,
                "state": og.state,
                "members": len(og.members),
            }
        )
        return
    rows = [
        ["GROUP", "COORDINATOR (PARTITION)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        [og.group_id, coordinator, _dash(og.assignor), og.state, str(len(og.members))],
    ]
    _table(rows)


@handle_errors
def list_groups(
    log_dir: list[Path] = typer.Option(None, "--log-dir", metavar="DIR", help=LOG_DIR_HELP),
    at: str | None = typer.Option(None, "--at", metavar="TIME", help=AT_HELP),
    state: bool = typer.Option(False, "--state", help="Show each group's state."),
    group_type: bool = typer.Option(False, "--type", help="Show each group's type (classic or consumer)."),
    retention_minutes: int = typer.Option(
        10080, "--offsets-retention-minutes", metavar="MIN", help=RETENTION_HELP
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Every consumer group (kafka-consumer-groups.sh --list)."""
    groups = _read(log_dir, at, retention_minutes)
    rows = [["GROUP"] + (["TYPE"] if group_type else []) + (["STATE"] if state else [])]
    for gid in sorted(groups):
        og = groups[gid]
        if json_out:
            emit_json({"type": "group", "group": gid, "group_type": og.group_type, "state": og.state})
            continue
        if not state and not group_type:
            console.print(gid)
            continue
        rows.append([gid] + ([og.group_type] if group_type else []) + ([og.state] if state else []))
    if not json_out and len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            console.print(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    raise typer.Exit(EXIT_OK)


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
    log_dir: list[Path] = typer.Option(None, "--log-dir", metavar="DIR", help=LOG_DIR_HELP),
    at: str | None = typer.Option(None, "--at", metavar="TIME", help=AT_HELP),
    retention_minutes: int = typer.Option(
        10080, "--offsets-retention-minutes", metavar="MIN", help=RETENTION_HELP
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Committed offsets, log end offsets and lag per partition, members, or state
    (kafka-consumer-groups.sh --describe); exit 1 when a named group does not exist."""
    if members + state + offsets > 1:
        raise CommandError("give at most one of --members, --state and --offsets")
    groups = _read(log_dir, at, retention_minutes)
    found, missing = _select(groups, group, all_groups)
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
    raise typer.Exit(EXIT_FINDINGS if missing else EXIT_OK)


@handle_errors
def export(
    group: list[str] = typer.Option(None, "--group", metavar="GROUP", help="A group to export (repeatable)."),
    all_groups: bool = typer.Option(False, "--all-groups", help="Export every group."),
    log_dir: list[Path] = typer.Option(None, "--log-dir", metavar="DIR", help=LOG_DIR_HELP),
    at: str | None = typer.Option(None, "--at", metavar="TIME", help=AT_HELP),
    retention_minutes: int = typer.Option(
        10080, "--offsets-retention-minutes", metavar="MIN", help=RETENTION_HELP
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write the CSV here (written aside, then renamed)."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The committed offsets as kafka-consumer-groups.sh --reset-offsets --export's CSV
    (topic,partition,offset; group,topic,partition,offset for several groups), for
    `kafka-consumer-groups.sh --reset-offsets --from-file` against a live cluster."""
    from kafkatool.broker.group.offline import reset_csv

    groups = _read(log_dir, at, retention_minutes)
    found, missing = _select(groups, group, all_groups)
    many = all_groups or len(group or []) > 1
    text = reset_csv(found, with_group=many)
    if output is not None:
        tmp = output.with_name(output.name + ".tmp")
        try:
            tmp.write_text(text)
            tmp.replace(output)
        except OSError as exc:
            raise CommandError(f"{output}: {exc.strerror or exc}") from None
    if json_out:
        for og in found:
            for r in og.rows:
                emit_json(
                    {
                        "type": "offset",
                        "group": og.group_id,
                        "topic": r.topic,
                        "partition": r.partition,
                        "offset": r.current_offset,
                    }
                )
        emit_json(
            {
                "type": "summary",
                "groups": len(found),
                "offsets": sum(len(og.rows) for og in found),
                "output": str(output) if output else None,
            }
        )
    elif output is None:
        console.file.write(text)
    else:
        console.print(
            f"{sum(len(og.rows) for og in found)} offsets of {len(found)} groups written to {output}"
        )
    for g in missing:
        error_line(f"Consumer group '{g}' does not exist.")
    raise typer.Exit(EXIT_FINDINGS if missing else EXIT_OK)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="groups", help=HELP, no_args_is_help=True)
    sub.command("list")(list_groups)
    sub.command("describe")(describe)
    sub.command("export")(export)
    app.add_typer(sub, name="groups")
