"""``kafkatool rebuild-index``: rebuild segment indexes from the log, report differences, replace atomically."""

from __future__ import annotations

from pathlib import Path

import typer

from kafkatool.commands.common import (
    JSON_HELP,
    console,
    emit_json,
    group_targets,
    handle_errors,
    modify_exit,
    progress,
)
from kafkatool.commands.topic_sources import index_interval_option

HELP = """Rebuild the .index, .timeindex and .txnindex files of every segment from its .log.

Each PATH is a partition directory (topic-N) or a log directory (every partition
in it).  The indexes are rebuilt exactly as Kafka's recovery rebuilds them
(an offset-index entry for the batch starting more than index.interval.bytes
after the previous entry, keyed on the batch's last offset; time-index entries
when the max timestamp grows, plus the final one; aborted transactions from
the producer state, replayed from the latest snapshot), compared with the
files on disk, and every difference is reported.  Files that differ are
replaced atomically (written aside, fsynced, renamed, directory fsynced)
unless --dry-run.

The .log itself is never changed: if a segment has invalid bytes, the
rebuilt indexes cover its valid part and the damage is reported (run
`kafkatool recover`).  Segments written by a follower index whole fetched
chunks, so their indexes legitimately differ from a rebuild.

Refuses to modify a log dir whose .lock is held by a running process.

Findings: with --dry-run, an index that differs from its rebuild; in any run,
a damaged segment (rebuild-index does not repair the log: see recover)."""


def register(app: typer.Typer) -> None:
    app.command(
        "rebuild-index", help=HELP, short_help="Rebuild segment indexes from the log; report and replace."
    )(rebuild_index)


@handle_errors
def rebuild_index(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Partition dirs or log dirs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report differences; change nothing."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    index_interval_bytes: int | None = index_interval_option(),
) -> None:
    from kafkatool.commands.topic_sources import TopicConfigs
    from kafkatool.log.manager import LogManager
    from kafkatool.log.rebuild import rebuild_partition
    from kafkatool.log.recovery import resolve_targets

    groups = group_targets(resolve_targets, paths)
    configs = TopicConfigs.of_log_dirs(groups, {"index.interval.bytes": index_interval_bytes})
    warnings = []
    # the dirs' one owner: a real run takes every lock up front (refused while a broker holds one)
    manager = LogManager(list(groups), writable=not dry_run, load=False)
    for log_dir in groups:
        if manager.state_of(log_dir).locked_by_other:
            warnings.append(f"{log_dir}: in use by a running process; the active segments are still changing")
    totals = {
        "partitions": 0,
        "segments": 0,
        "indexes": 0,
        "different": 0,
        "replaced": 0,
        "damaged_segments": 0,
    }
    rows = []
    n_parts = sum(len(parts) for parts in groups.values())
    with manager, progress(n_parts, "rebuilding indexes", enabled=not json_out) as advance:
        for log_dir, parts in groups.items():
            for part in parts:
                totals["partitions"] += 1
                config = configs.of_partition_dir(log_dir, part)
                for seg in rebuild_partition(part, config, apply=not dry_run):
                    totals["segments"] += 1
                    totals["indexes"] += len(seg.diffs)
                    totals["different"] += len(seg.changed)
                    totals["replaced"] += len(seg.replaced)
                    if seg.damaged:
                        totals["damaged_segments"] += 1
                    if json_out:
                        for d in seg.changed:
                            emit_json(
                                {
                                    "type": "index_difference",
                                    "segment": str(seg.log_path),
                                    "base_offset": seg.base_offset,
                                    "replaced": str(d.path) in seg.replaced,
                                    **d.as_dict(),
                                }
                            )
                        if seg.damaged:
                            emit_json(_damage(seg))
                    elif seg.changed or seg.damaged:
                        rows.append(seg)
                advance(1)
    findings = totals["different"] > 0 or totals["damaged_segments"] > 0
    remaining = totals["damaged_segments"] > 0  # rebuild-index does not repair the log
    summary = {
        "type": "summary",
        "path": str(paths[0]),
        "paths": [str(p) for p in paths],
        "dry_run": dry_run,
        **totals,
        "warnings": warnings,
        "clean": not findings,
    }
    if json_out:
        for w in warnings:
            emit_json({"type": "warning", "message": w})
        emit_json(summary)
    else:
        _render(rows, summary, dry_run, warnings)
    raise typer.Exit(modify_exit(dry_run=dry_run, would_change=findings, remaining=remaining))


def _damage(seg) -> dict:
    s = seg.scan
    return {
        "type": "log_damage",
        "segment": str(seg.log_path),
        "base_offset": seg.base_offset,
        "valid_bytes": 0 if s.invalid_offset else s.valid_bytes,
        "file_bytes": s.file_size,
        "reason": s.stop_reason,
        "message": s.stop_message,
        "hint": "run `kafkatool recover` to truncate (and quarantine) the damaged part",
    }


def _render(rows, summary: dict, dry_run: bool, warnings: list[str]) -> None:
    for seg in rows:
        console.print(f"[bold]{seg.log_path}[/]")
        for d in seg.changed:
            action = (
                "replaced" if str(d.path) in seg.replaced else ("would replace" if dry_run else "differs")
            )
            where = ""
            if d.first_difference is not None:
                where = f"; first difference at slot {d.first_difference}: {d.existing_at} on disk, {d.rebuilt_at} rebuilt"
            state = "missing" if not d.exists else f"{d.existing_entries} entries, {d.existing_size} bytes"
            console.print(
                f"  [yellow]{action}[/] {d.path.name}: {state} -> {d.rebuilt_entries} entries, {d.rebuilt_size} bytes"
                f"{where}" + (f" ({d.note})" if d.note else "")
            )
        if seg.damaged:
            dm = _damage(seg)
            console.print(
                f"  [red]damaged log[/]: valid to byte {dm['valid_bytes']} of {dm['file_bytes']} "
                f"({dm['reason']}: {dm['message']}); {dm['hint']}"
            )
    for w in warnings:
        console.print(f"[yellow]warning[/]: {w}")
    state = "[green]all indexes match[/]" if summary["clean"] else "[yellow]findings[/]"
    console.print(
        f"rebuild-index{' (dry run)' if dry_run else ''}: {summary['partitions']} partitions, {summary['segments']} segments, "
        f"{summary['indexes']} indexes, {summary['different']} different, {summary['replaced']} replaced, "
        f"{summary['damaged_segments']} damaged segments; {state}"
    )
