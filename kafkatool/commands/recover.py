"""``kafkatool recover``: Kafka's start-up log recovery, on demand, keeping what it cuts."""

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

HELP = """Run Kafka's start-up recovery on a partition dir or a whole log dir, on demand.

Each PATH is a partition directory (topic-N) or a log directory (every partition
in it).  Exactly what a broker does after an unclean shutdown: finish or roll
back interrupted .cleaned/.swap/.deleted operations, delete orphaned index
files, then from each partition's checkpointed recovery point (or every
segment, with --all) validate every batch (size and CRC), truncate at the
first invalid one or at a partial or zero-filled tail, drop every later
segment, and rebuild the offset, time and transaction indexes, the producer
state snapshot and the leader-epoch cache.

Unlike Kafka, nothing is thrown away: the cut bytes are copied, before the
truncation, into a quarantine file, and dropped segments are moved there
whole, with a JSON sidecar naming the origin (file, byte range, offsets).
With --salvage, valid batches found after the damage (which Kafka discards)
are also written to a separate segment-shaped file.  Both end in .log so
`kafkatool dump-log` reads them.

Where: <partition dir>/kafkatool-quarantine/<UTC time>/.  A Kafka broker only
loads regular files of a partition dir and ignores its subdirectories, while
every directory directly under a log dir is taken for a partition (an
unparsable name takes the whole log dir offline); the folder inside the
partition dir is the place a broker safely ignores.  Remove it when done.

Indexes are rebuilt the way recovery rebuilds them (one entry per batch);
segments written by a follower index whole fetched chunks, so with --all they
show up as index rebuilds although nothing is wrong with them.

Refuses to modify a log dir whose .lock is held by a running process (a
broker); --dry-run only reports, and works on a live dir.

Findings: with --dry-run, anything recovery would cut or change; in a real
run, damage recovery leaves in place (below the recovery point without --all)."""


def register(app: typer.Typer) -> None:
    app.command(
        "recover", help=HELP, short_help="Run Kafka's log recovery on demand; quarantine what it cuts."
    )(recover)


@handle_errors
def recover(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Partition dirs or log dirs."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be done; change nothing."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    salvage: bool = typer.Option(
        False, "--salvage", help="Also keep valid batches found after the damage, in a separate .log file."
    ),
    all_segments: bool = typer.Option(
        False, "--all", help="Recover every segment, not only those from the checkpointed recovery point."
    ),
    index_interval_bytes: int | None = index_interval_option(),
    segment_index_bytes: int | None = typer.Option(
        None,
        "--segment-index-bytes",
        metavar="N",
        min=12,
        help="segment.index.bytes for every topic (default: each topic's own, or Kafka's 10485760).",
    ),
) -> None:
    from kafkatool.commands.topic_sources import TopicConfigs
    from kafkatool.log import recovery as RC
    from kafkatool.log.log import parse_topic_partition
    from kafkatool.log.manager import LogManager

    groups = group_targets(RC.resolve_targets, paths)
    configs = TopicConfigs.of_log_dirs(
        groups, {"index.interval.bytes": index_interval_bytes, "segment.index.bytes": segment_index_bytes}
    )
    warnings: list[str] = []
    totals = {
        "partitions": 0,
        "with_findings": 0,
        "cut_bytes": 0,
        "cuts": 0,
        "dropped_segments": 0,
        "file_actions": 0,
        "index_rebuilds": 0,
        "quarantined": 0,
        "salvaged_batches": 0,
        "damage_below_recovery_point": 0,
    }
    stamp = RC.utc_stamp()
    rows = []
    n_parts = sum(len(parts) for parts in groups.values())
    # the dirs' one owner: every lock taken up front (a real run is refused while a broker
    # holds any of them), the checkpoints read and rewritten
    manager = LogManager(list(groups), writable=not dry_run, load=False)
    with manager, progress(n_parts, "recovering", enabled=not json_out) as advance:
        for log_dir, parts in groups.items():
            new_ends: dict = {}
            state = manager.state_of(log_dir)
            if state.locked_by_other:
                warnings.append(f"{log_dir}: in use by a running process; this plan may already be stale")
            warnings.extend(state.warnings)
            for part in parts:
                tp_name = parse_topic_partition(part.name)
                rp = state.recovery_points.get(tp_name, 0) if tp_name else 0
                lso = state.log_start_offsets.get(tp_name, 0) if tp_name else 0
                if all_segments:
                    rp = 0
                config = configs.of_partition_dir(log_dir, part)
                plan = RC.plan_partition(part, config, recovery_point=rp, log_start_offset=lso)
                totals["partitions"] += 1
                if rp > 0 and not (plan.cuts or plan.dropped):
                    # Kafka's start-up recovery never looks below the recovery point;
                    # an operator who asks must still hear of damage there.
                    below = RC.plan_partition(part, config, recovery_point=0, log_start_offset=lso)
                    if below.cuts or below.dropped:
                        totals["damage_below_recovery_point"] += 1
                        first = below.cuts[0].segment if below.cuts else below.dropped[0].path
                        warnings.append(
                            f"{part}: damage below the recovery point {rp} (first in {Path(first).name}, "
                            f"{below.cut_bytes} bytes recovery from offset 0 would cut), which Kafka's "
                            "start-up recovery does not look at; run `kafkatool recover --all` to cut it"
                        )
                applied = None
                if plan.findings:
                    totals["with_findings"] += 1
                    if not dry_run:
                        manager.begin_changes(log_dir)
                        applied = RC.apply_plan(plan, config, salvage=salvage, stamp=stamp)
                        warnings.extend(applied.warnings)
                        if tp_name is not None and applied.log_end_offset is not None:
                            new_ends[tp_name] = applied.log_end_offset
                _account(totals, plan, applied)
                if json_out:
                    _emit(plan, applied, dry_run)
                elif plan.findings or applied:
                    rows.append((plan, applied))
                advance(1)
            if not dry_run and new_ends:
                manager.lower_to_log_ends(log_dir, new_ends)
    findings = totals["with_findings"] > 0
    remaining = totals["damage_below_recovery_point"] > 0
    summary = {
        "type": "summary",
        "path": str(paths[0]),
        "paths": [str(p) for p in paths],
        "dry_run": dry_run,
        "salvage": salvage,
        **totals,
        "warnings": warnings,
        "clean": not findings and not remaining,
    }
    if json_out:
        for w in warnings:
            emit_json({"type": "warning", "message": w})
        emit_json(summary)
    else:
        _render(rows, summary, dry_run, warnings)
    raise typer.Exit(modify_exit(dry_run=dry_run, would_change=findings, remaining=remaining))


def _account(totals: dict, plan, applied) -> None:
    totals["cuts"] += sum(1 for c in plan.cuts if c.bytes)
    totals["cut_bytes"] += plan.cut_bytes
    totals["dropped_segments"] += len(plan.dropped)
    totals["file_actions"] += len(plan.file_actions)
    totals["index_rebuilds"] += sum(1 for r in plan.recovered if r["index_changes"])
    if applied is not None:
        totals["quarantined"] += len(applied.quarantined)
        totals["salvaged_batches"] += sum(s["batches"] for s in applied.salvaged)


def _emit(plan, applied, dry_run: bool) -> None:
    part = str(plan.dir)
    verb = "would" if dry_run else "did"
    for a in plan.file_actions:
        emit_json({"type": "file_action", "partition": part, "done": not dry_run, **a})
    for r in plan.recovered:
        if r["index_changes"]:
            emit_json({"type": "index_rebuild", "partition": part, "done": not dry_run, **r})
    for c in plan.cuts:
        if c.bytes:
            emit_json({"type": "cut", "partition": part, "done": not dry_run, **c.as_dict()})
    for d in plan.dropped:
        emit_json({"type": "drop_segment", "partition": part, "done": not dry_run, **d.as_dict()})
    if applied is not None:
        for q in applied.quarantined:
            emit_json({"type": "quarantined", "partition": part, "file": q})
        for s in applied.salvaged:
            emit_json({"type": "salvaged", "partition": part, **s})
    if plan.findings:
        emit_json(
            {
                "type": "partition",
                "partition": part,
                "recovery_point": plan.recovery_point,
                "log_start_offset": plan.log_start_offset,
                "log_end_offset_before": plan.log_end_before,
                "log_end_offset_after": applied.log_end_offset if applied is not None else plan.log_end_after,
                "action": f"{verb} recover",
            }
        )


def _render(rows, summary: dict, dry_run: bool, warnings: list[str]) -> None:
    verb = "would" if dry_run else ""
    for plan, applied in rows:
        end_after = applied.log_end_offset if applied is not None else plan.log_end_after
        console.print(
            f"[bold]{plan.dir}[/]: recovery point {plan.recovery_point}, log end {plan.log_end_before} -> {end_after}"
        )
        for a in plan.file_actions:
            to = f" -> {a['to']}" if "to" in a else ""
            console.print(f"  {verb + ' ' if verb else ''}{a['action']} {a['file']}{to} ({a['reason']})")
        for c in plan.cuts:
            if not c.bytes:
                continue
            what = "zero-filled tail" if c.zero_tail else (c.message or c.reason)
            extra = ""
            if c.valid_after:
                extra = (
                    f"; {len(c.valid_after)} valid batches after the damage "
                    f"(offsets {c.valid_after[0].base_offset}..{c.valid_after[-1].last_offset})"
                )
            console.print(
                f"  [red]{verb + ' ' if verb else ''}cut[/] {c.segment} bytes [{c.start}, {c.file_size}) "
                f"= {c.bytes} bytes, keeping {c.batches_kept} batches up to offset {c.next_offset - 1}: {what}{extra}"
            )
        for d in plan.dropped:
            offs = (
                f"offsets {d.first_offset}..{d.last_offset}"
                if d.first_offset is not None
                else "no readable batch"
            )
            console.print(
                f"  [red]{verb + ' ' if verb else ''}drop[/] segment {d.path} ({d.size} bytes, {offs}): {d.reason}"
            )
        for r in plan.recovered:
            for ch in r["index_changes"]:
                console.print(
                    f"  {verb + ' ' if verb else ''}rebuild {ch['file']}: {ch['existing_entries']} -> "
                    f"{ch['rebuilt_entries']} entries, {ch['existing_bytes']} -> {ch['rebuilt_bytes']} bytes"
                    + (f" ({ch['note']})" if ch.get("note") else "")
                )
        if applied is not None:
            for q in applied.quarantined:
                console.print(f"  [yellow]kept[/] {q}")
            for s in applied.salvaged:
                console.print(
                    f"  [green]salvaged[/] {s['batches']} batches, offsets {s['offsets'][0]}..{s['offsets'][1]} -> {s['file']}"
                )
    for w in warnings:
        console.print(f"[yellow]warning[/]: {w}")
    state = (
        "[green]nothing to do[/]"
        if summary["clean"]
        else ("[yellow]findings[/]" if dry_run else "[yellow]recovered[/]")
    )
    console.print(
        f"recover{' (dry run)' if dry_run else ''}: {summary['partitions']} partitions, "
        f"{summary['with_findings']} with findings, {summary['cuts']} cuts, {summary['dropped_segments']} dropped segments, "
        f"{summary['cut_bytes']} bytes removed from the log, {summary['file_actions']} leftover files, "
        f"{summary['index_rebuilds']} segments with rebuilt indexes; {state}"
    )
