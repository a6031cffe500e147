"""``kafkatool retention``: apply Kafka's retention to a stopped broker's partitions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.table import Table

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    command_config_option,
    console,
    emit_json,
    handle_errors,
    progress,
)
from kafkatool.commands.topic_sources import (
    SOURCES_HELP,
    bootstrap_option,
    load_settings,
    maintenance_dir,
    now_option,
    parse_now,
    policy_override,
    policy_text,
    server_config_option,
    targets_and_configs,
    topic_config_option,
    warn,
    zookeeper_option,
)

HELP = """Delete whole segments the way a broker's retention does (UnifiedLog.deleteOldSegments).

PATH is a partition directory (topic-N) or a whole log directory.  Three
passes, oldest segment first, each stopping at the first segment that stays:
below the log start offset (log-start-offset-checkpoint; always), then
retention.bytes and retention.ms (only when cleanup.policy contains delete).
A segment's age is its largest record timestamp (time index), else the .log
mtime.  Only segments that end at or below the high watermark go; without a
replication-offset-checkpoint entry the log end offset stands in for it (the
output says so).  The last segment is never deleted (a broker would roll a
new one first; the output notes when it would have).

Settings: --retention-ms/--retention-bytes/--cleanup-policy > --topic-config
[TOPIC:]key=value (topic names) > the topic's own configs (see below) >
--config server.properties (broker names: log.retention.ms, .minutes, .hours,
log.retention.bytes, log.cleanup.policy...) > Kafka's defaults.  The output
says where each value came from.

{SOURCES}

Never deletes what Kafka would keep: a topic whose cleanup.policy does not
contain delete (compacted topics, __consumer_offsets, __transaction_state)
loses no data to --retention-ms or --retention-bytes; only --cleanup-policy
delete (an explicit override of the topic's policy) makes retention apply to
it, and the output then says which policy, from which source, it overrode.

Deleting follows Kafka: files renamed .deleted, then removed (no
file.delete.delay.ms offline); producer snapshot likewise; log start offset
and recovery-point checkpoints rewritten atomically.  Removed segments are
kept as hard links in <partition>/kafkatool-quarantine/<UTC time>/ unless
--no-quarantine.  Refuses (exit 2) a log dir whose .lock is held by a running
broker or tool, and a partition that needs `kafkatool recover` first.

Findings: with --dry-run, segments that would be deleted."""
HELP = HELP.replace("{SOURCES}", SOURCES_HELP)


def register(app: typer.Typer) -> None:
    app.command("retention", help=HELP, short_help="Delete segments past retention (offline).")(retention)


def fmt_ts(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


SETTING_NAMES = ["cleanup.policy", "retention.ms", "retention.bytes"]


@handle_errors
def retention(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Partition dirs (topic-N) or log dirs."),
    retention_ms: int | None = typer.Option(
        None, "--retention-ms", help="retention.ms for every topic (-1: unlimited)."
    ),
    retention_bytes: int | None = typer.Option(
        None, "--retention-bytes", help="retention.bytes for every partition (-1: unlimited)."
    ),
    server_config: Path | None = server_config_option(),
    cleanup_policy: str | None = typer.Option(
        None,
        "--cleanup-policy",
        metavar="POLICY",
        help="Override every topic's cleanup.policy (delete, compact or delete,compact). "
        "Only this makes retention delete data of a topic whose own policy lacks delete.",
    ),
    topic_config: list[str] = topic_config_option(),
    zookeeper: str | None = zookeeper_option(),
    bootstrap_server: str | None = bootstrap_option(),
    command_config: str | None = command_config_option(),
    now: str | None = now_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be deleted."),
    no_quarantine: bool = typer.Option(
        False, "--no-quarantine", help="Do not keep the deleted segments in the quarantine folder."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    from kafkatool.log.maintenance import Quarantine, open_for_maintenance
    from kafkatool.log.retention import apply_retention, plan_retention

    now_ms = parse_now(now)
    props, overrides = load_settings(server_config, topic_config)
    flags = {
        "retention.ms": retention_ms,
        "retention.bytes": retention_bytes,
        "cleanup.policy": cleanup_policy,
    }
    groups, configs = targets_and_configs(paths, props, overrides, flags, zookeeper, bootstrap_server)
    for n in configs.notes:
        warn(json_out, "topic configs", n)
    total_parts = sum(len(g.partitions) for g in groups)
    summary = {"partitions": 0, "segments": 0, "bytes": 0, "quarantined": []}
    rows = []
    with progress(total_parts, "retention", enabled=not json_out and total_parts > 1) as advance:
        for g in groups:
            with maintenance_dir(g.log_dir, dry_run=dry_run, json_out=json_out, now_ms=now_ms) as (
                manager,
                state,
            ):
                for part_dir, tp in g.partitions:
                    resolved = configs.resolve(
                        g.log_dir, tp[0], in_cleaner_checkpoint=tp in state.cleaner_offsets
                    )
                    policy_notes, overrode = policy_guard(resolved, flags)
                    opened = open_for_maintenance(manager, part_dir, tp, resolved.config, now_ms)
                    with manager.closing(tp):
                        log = opened.log
                        plan = plan_retention(log, resolved.config, now_ms=now_ms)
                        quarantine = None
                        result = None
                        if not dry_run and plan.deletions:
                            quarantine = (
                                None if no_quarantine else Quarantine(part_dir, "kafkatool retention")
                            )
                            result = apply_retention(log, plan, quarantine=quarantine)
                    name = f"{tp[0]}-{tp[1]}"
                    summary["partitions"] += 1
                    summary["segments"] += len(plan.deletions)
                    summary["bytes"] += plan.bytes_deleted
                    if result is not None:
                        summary["quarantined"] += result.quarantined
                    notes = policy_notes + opened.notes + plan.notes
                    if json_out:
                        emit_json(
                            {
                                "type": "partition",
                                "partition": name,
                                "dir": str(part_dir),
                                "settings": resolved.describe(SETTING_NAMES),
                                "overrode": overrode,
                                "now": now_ms,
                                "high_watermark": plan.high_watermark,
                                "high_watermark_source": opened.hw_source,
                                "log_end_offset": plan.log_end_offset,
                                "log_start_offset_before": plan.log_start_before,
                                "log_start_offset_after": plan.log_start_after,
                                "segments_before": plan.segments_before,
                                "bytes_before": plan.size_before,
                                "notes": notes,
                                "dry_run": dry_run,
                            }
                        )
                        for d in plan.deletions:
                            emit_json(
                                {
                                    "type": "segment",
                                    "action": "would_delete" if dry_run else "deleted",
                                    "partition": name,
                                    **d.as_dict(),
                                }
                            )
                    else:
                        rows.append((name, part_dir, resolved, opened, plan, notes))
                    advance(1)
    if json_out:
        emit_json(
            {
                "type": "summary",
                "dry_run": dry_run,
                "partitions": summary["partitions"],
                "segments_deleted" if not dry_run else "segments_to_delete": summary["segments"],
                "bytes": summary["bytes"],
                "quarantined": summary["quarantined"],
            }
        )
    else:
        _render(rows, summary, dry_run, now_ms)
    if dry_run and summary["segments"]:
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_OK)


def policy_guard(resolved, flags: dict) -> tuple[list[str], list[dict]]:
    """Notes on what the topic's cleanup.policy keeps, and the overrides the operator named."""
    cfg = resolved.config
    policy = policy_text(resolved)
    source = resolved.source_of("cleanup.policy")
    notes, overrode = policy_override(
        resolved, "delete", "Kafka would not delete this topic's data by time or size"
    )
    if not cfg.delete:
        asked = [
            f"--{k.replace('.', '-')}"
            for k in ("retention.ms", "retention.bytes")
            if flags.get(k) is not None
        ]
        notes.append(
            f"cleanup.policy={policy} (from {source}) has no delete: retention.ms and retention.bytes "
            "do not apply, as in Kafka"
            + (
                f" ({', '.join(asked)} ignored; --cleanup-policy delete overrides the topic's policy)"
                if asked
                else ""
            )
        )
    elif not resolved.found_in:
        notes.append(
            f"no source holds topic {resolved.topic}'s configuration: Kafka's default cleanup.policy=delete "
            "assumed (give --zookeeper, --bootstrap-server or --topic-config if the topic has overrides)"
        )
    return notes, overrode


def _render(rows, summary, dry_run: bool, now_ms: int) -> None:
    verb = "would delete" if dry_run else "deleted"
    for name, part_dir, resolved, opened, plan, notes in rows:
        settings = ", ".join(
            f"{k}={v['value']} ({v['source']})" for k, v in resolved.describe(SETTING_NAMES).items()
        )
        console.print(f"[bold]{name}[/]  {part_dir}")
        console.print(f"  settings: {settings}")
        console.print(
            f"  high watermark {plan.high_watermark} (from {opened.hw_source}), log end offset {plan.log_end_offset}, "
            f"log start offset {plan.log_start_before} -> {plan.log_start_after}"
        )
        if plan.deletions:
            table = Table(show_edge=False, pad_edge=False, box=None)
            for col in ("segment", "offsets", "bytes", "largest timestamp", "reason"):
                table.add_column(col)
            for d in plan.deletions:
                table.add_row(
                    f"{d.base_offset:020d}.log",
                    f"{d.base_offset}..{d.next_offset - 1}",
                    str(d.size),
                    f"{fmt_ts(d.largest_timestamp)} ({d.timestamp_source})",
                    f"{d.reason}: {d.detail}",
                )
            console.print(f"  {verb}:")
            console.print(table)
        else:
            console.print("  nothing to delete")
        for n in notes:
            console.print(f"  [dim]note: {n}[/]")
    console.print(
        f"{summary['partitions']} partition(s): {verb} {summary['segments']} segment(s), {summary['bytes']} bytes"
        + (f"; kept in quarantine: {len(summary['quarantined'])} file(s)" if summary["quarantined"] else "")
        + f" (now = {fmt_ts(now_ms)})"
    )
