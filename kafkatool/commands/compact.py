"""``kafkatool compact``: run Kafka's log cleaner on a stopped broker's partitions."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    CommandError,
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
from kafkatool.log import topic_settings as ts

HELP = """Compact partitions with Kafka's log cleaner.

PATH is a partition directory (topic-N) or a whole log directory.  The range
cleaned is Kafka's: from the cleaner-offset-checkpoint (or the log start) to
the first uncleanable offset (last stable offset, active segment,
min.compaction.lag.ms), rounded down to a segment.  The latest value of each
key wins; tombstones stay until their delete horizon (set to now +
delete.retention.ms the first time they are cleaned, so a second run after
that time removes them); keyless records, data of aborted transactions and
markers no longer needed go; empty batches stay where producer state needs
them.  Segments are regrouped under segment.bytes / segment.index.bytes.
Batches that keep all their records are copied byte for byte.

New segments are written as .cleaned, renamed .swap, then replace the old
ones (which are renamed .deleted and removed): a crash at any step leaves a
log that Kafka's loader (or the next run) brings back whole.  The
cleaner-offset-checkpoint is updated.  The original segments are kept as hard
links in <partition>/kafkatool-quarantine/<UTC time>/ unless --no-quarantine.

Settings: --delete-retention-ms, --min-compaction-lag-ms, --segment-bytes,
--cleanup-policy > --topic-config [TOPIC:]key=value > the topic's own configs
(see below) > --config server.properties (log.cleaner.delete.retention.ms,
log.cleaner.min.compaction.lag.ms, log.segment.bytes,
log.cleaner.dedupe.buffer.size...) > Kafka's defaults.

I/O: --io-max-bytes-per-second > log.cleaner.io.max.bytes.per.second as a
dynamic broker config of the broker (kafka-configs --entity-name ID), then of
the cluster-wide default (--entity-default), where the sources below keep them
> in --config server.properties > no limit; the same order for
log.cleaner.dedupe.buffer.size, log.cleaner.threads and
log.cleaner.io.buffer.load.factor (--dedupe-buffer-size).  As Kafka's
cleaner, the run has one throttle for all it reads and writes, across
partitions: every 300 ms it sleeps what brings the bytes back to the rate (the
summary says it and where it came from, and how long it slept).

{SOURCES}

Never removes what Kafka would keep: a topic whose cleanup.policy is known
(a source above describes the topic, or server.properties sets the policy) and
lacks compact is skipped, since compaction would drop records its policy
keeps; --cleanup-policy compact overrides that, and the output says which
policy it overrode.  A topic no source describes is compacted as asked (with
a note).
With --honor-dirty-ratio a partition is only cleaned when Kafka's cleaner
would pick it (min.cleanable.dirty.ratio, max.compaction.lag.ms).  High
watermark: replication-offset-checkpoint, else the log end offset.

A record the decoder refuses (Kafka's DefaultRecord.readFrom rules: an int
varint longer than 5 bytes, a length past its batch...) stops that partition's
cleaning as it stops Kafka's cleaner, which then marks the partition
uncleanable: one line names the segment file, the batch offset and the byte
position; groups already swapped in stay, the other segments are left as
they were and its cleaner-offset-checkpoint entry is the offset that round
started from (not advanced; Kafka's doneCleaning writes it the same way); the
other partitions are compacted.  Each partition's checkpoint entry is written
as soon as that partition is done.

Findings: with --dry-run, a partition that would be compacted; a partition
whose data stopped the cleaner."""
HELP = HELP.replace("{SOURCES}", SOURCES_HELP)

SETTING_NAMES = [
    "cleanup.policy",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "segment.bytes",
    "segment.index.bytes",
]


def register(app: typer.Typer) -> None:
    app.command("compact", help=HELP, short_help="Compact partitions with Kafka's log cleaner (offline).")(
        compact
    )


@handle_errors
def compact(
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Partition dirs (topic-N) or log dirs."),
    delete_retention_ms: int | None = typer.Option(
        None, "--delete-retention-ms", help="delete.retention.ms: how long tombstones and markers survive."
    ),
    min_compaction_lag_ms: int | None = typer.Option(
        None, "--min-compaction-lag-ms", help="min.compaction.lag.ms: segments younger than this stay dirty."
    ),
    segment_bytes: int | None = typer.Option(
        None, "--segment-bytes", help="segment.bytes: size limit of a cleaned group."
    ),
    server_config: Path | None = server_config_option(),
    topic_config: list[str] = topic_config_option(),
    cleanup_policy: str | None = typer.Option(
        None,
        "--cleanup-policy",
        metavar="POLICY",
        help="Override every topic's cleanup.policy. Only this makes compact clean a topic whose own "
        "policy lacks compact.",
    ),
    zookeeper: str | None = zookeeper_option(),
    bootstrap_server: str | None = bootstrap_option(),
    command_config: str | None = command_config_option(),
    dedupe_buffer_size: int | None = typer.Option(
        None,
        "--dedupe-buffer-size",
        help="Offset map memory in bytes (log.cleaner.dedupe.buffer.size / threads).",
    ),
    io_max_bytes_per_second: float | None = typer.Option(
        None,
        "--io-max-bytes-per-second",
        help="log.cleaner.io.max.bytes.per.second: bytes read and written a second, the whole run.",
    ),
    honor_dirty_ratio: bool = typer.Option(
        False, "--honor-dirty-ratio", help="Only clean partitions Kafka's cleaner would pick now."
    ),
    now: str | None = now_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute and show the result without writing."),
    no_quarantine: bool = typer.Option(
        False, "--no-quarantine", help="Do not keep the pre-compaction segments in the quarantine folder."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    from kafkatool.broker.config import BROKER_CONFIGS, cleaner_io_rate
    from kafkatool.log.cleaner import cleanable_offsets
    from kafkatool.log.cleaner import compact as run_compact
    from kafkatool.log.maintenance import Quarantine, open_for_maintenance
    from kafkatool.log.offset_map import OffsetMap
    from kafkatool.log.throttle import Throttler

    now_ms = parse_now(now)
    props, overrides = load_settings(server_config, topic_config)
    flags = {
        "delete.retention.ms": delete_retention_ms,
        "min.compaction.lag.ms": min_compaction_lag_ms,
        "segment.bytes": segment_bytes,
        "cleanup.policy": cleanup_policy,
    }
    groups, configs = targets_and_configs(paths, props, overrides, flags, zookeeper, bootstrap_server)
    for n in configs.notes:
        warn(json_out, "topic configs", n)
    # the cleaner's broker settings as the broker of these dirs runs with them: the flag, then
    # its dynamic configs (the dirs' and --zookeeper's, taken as a broker takes them), then
    # server.properties, then Kafka's default
    try:
        if dedupe_buffer_size is not None:
            memory, memory_source = dedupe_buffer_size, ts.SOURCE_FLAG
            threads = 1
        else:
            memory, memory_source = configs.broker_setting("log.cleaner.dedupe.buffer.size")
            threads, _ = configs.broker_setting("log.cleaner.threads")
        load_factor, _ = configs.broker_setting("log.cleaner.io.buffer.load.factor")
        offset_map = OffsetMap.for_broker(int(memory), int(threads), load_factor)
        rate_name = "log.cleaner.io.max.bytes.per.second"
        stored = configs.broker_set_value(rate_name)
        if io_max_bytes_per_second is not None:
            rate, rate_source = cleaner_io_rate(str(io_max_bytes_per_second)), ts.SOURCE_FLAG
        elif stored is not None:
            rate, rate_source = cleaner_io_rate(stored[0]), stored[1]
        else:
            rate, rate_source = cleaner_io_rate(BROKER_CONFIGS[rate_name].default), ts.SOURCE_DEFAULT
    except (ts.SettingsError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    # the run's one throttle, as Kafka's LogCleaner has one for all its rounds and partitions
    throttler = Throttler(rate)
    total_parts = sum(len(g.partitions) for g in groups)
    totals = {
        "partitions": 0,
        "compacted": 0,
        "records_read": 0,
        "records_kept": 0,
        "bytes_before": 0,
        "bytes_after": 0,
        "uncleanable": 0,
    }
    quarantined: list[str] = []
    rows = []
    with progress(total_parts, "compacting", enabled=not json_out and total_parts > 1) as advance:
        for g in groups:
            with maintenance_dir(g.log_dir, dry_run=dry_run, json_out=json_out, now_ms=now_ms) as (
                manager,
                state,
            ):
                for part_dir, tp in g.partitions:
                    resolved = configs.resolve(
                        g.log_dir, tp[0], in_cleaner_checkpoint=tp in state.cleaner_offsets
                    )
                    skipped, policy_notes, overrode = compact_policy_guard(resolved)
                    opened = open_for_maintenance(manager, part_dir, tp, resolved.config, now_ms)
                    checkpoint = state.cleaner_offsets.get(tp)
                    result = None
                    quarantine = None
                    with manager.closing(tp):
                        log = opened.log
                        if skipped is None and honor_dirty_ratio:
                            rng = cleanable_offsets(log, resolved.config, checkpoint, now_ms)
                            skipped = rng.not_due_reason(resolved.config)
                        if skipped is None:
                            if not dry_run and not no_quarantine:
                                quarantine = Quarantine(part_dir, "kafkatool compact")
                            result = run_compact(
                                log,
                                resolved.config,
                                checkpoint=checkpoint,
                                now_ms=now_ms,
                                offset_map=offset_map,
                                write=not dry_run,
                                quarantine=quarantine,
                                throttler=throttler,
                            )
                            if not dry_run and result.checkpoint_after is not None:
                                if result.changes or result.checkpoint_after != checkpoint:
                                    manager.set_cleaner_offset(tp, result.checkpoint_after)
                    if not dry_run and result is not None:
                        # written as each partition is done (Kafka's doneCleaning), so a later
                        # partition's failure or a kill loses none of it
                        manager.checkpoint_cleaner_offsets()
                    if quarantine is not None:
                        quarantined += [str(p) for p in quarantine.files]
                    name = f"{tp[0]}-{tp[1]}"
                    totals["partitions"] += 1
                    if result is not None and result.error is not None:
                        totals["uncleanable"] += 1
                    if result is not None and result.changes:
                        totals["compacted"] += 1
                        for k in ("records_read", "records_kept", "bytes_before", "bytes_after"):
                            totals[k] += getattr(result.stats, k)
                    notes = (
                        policy_notes
                        + opened.notes
                        + (result.notes if result is not None else [])
                        + ([skipped] if skipped else [])
                    )
                    record = _record(
                        name, part_dir, resolved, opened, checkpoint, result, notes, dry_run, now_ms
                    )
                    record["overrode"] = overrode
                    if json_out:
                        emit_json(record)
                    else:
                        rows.append((record, result))
                    advance(1)
    summary = {
        "type": "summary",
        "dry_run": dry_run,
        **totals,
        "records_removed": totals["records_read"] - totals["records_kept"],
        "offset_map": {
            "slots": offset_map.slots,
            "max_keys": offset_map.max_entries,
            "memory_source": memory_source,
        },
        "quarantined": quarantined,
        "io_max_bytes_per_second": {"value": rate, "source": rate_source},
        "throttled_seconds": round(throttler.slept, 3),
    }
    if json_out:
        emit_json(summary)
    else:
        _render(rows, summary, dry_run)
    if (dry_run and totals["compacted"]) or totals["uncleanable"]:
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_OK)


def compact_policy_guard(resolved) -> tuple[str | None, list[str], list[dict]]:
    """(reason to skip, notes, overrides named): compaction never runs on a topic Kafka would not compact."""
    policy = policy_text(resolved)
    source = resolved.source_of("cleanup.policy")
    notes, overrode = policy_override(resolved, "compact", "Kafka would not compact this topic")
    if resolved.config.compact:
        return None, notes, overrode
    if source == ts.SOURCE_DEFAULT and not resolved.found_in:
        notes.append(
            f"no source holds topic {resolved.topic}'s configuration (Kafka's default is delete): "
            "compacting as asked"
        )
        return None, notes, overrode
    return (
        f"skipped: cleanup.policy={policy} (from {source}) has no compact, so Kafka keeps every record "
        "of this topic; --cleanup-policy compact overrides",
        notes,
        overrode,
    )


def _record(name, part_dir, resolved, opened, checkpoint, result, notes, dry_run, now_ms) -> dict:
    rec = {
        "type": "partition",
        "partition": name,
        "dir": str(part_dir),
        "action": ("would_compact" if dry_run else "compacted")
        if result is not None and result.changes
        else "nothing_to_do",
        "settings": resolved.describe(SETTING_NAMES),
        "now": now_ms,
        "high_watermark": opened.log.high_watermark,
        "high_watermark_source": opened.hw_source,
        "checkpoint_before": checkpoint,
        "checkpoint_after": result.checkpoint_after if result is not None else checkpoint,
        "notes": notes,
        "dry_run": dry_run,
    }
    if result is not None:
        rec["range"] = result.range.as_dict()
        rec["rounds"] = len(result.rounds)
        rec["stats"] = result.stats.as_dict()
        rec["groups"] = [g.as_dict() for r in result.rounds for g in r.groups]
        rec["error"] = result.error
    return rec


def _render(rows, summary, dry_run: bool) -> None:
    for rec, result in rows:
        console.print(f"[bold]{rec['partition']}[/]  {rec['dir']}")
        settings = ", ".join(f"{k}={v['value']} ({v['source']})" for k, v in rec["settings"].items())
        console.print(f"  settings: {settings}")
        console.print(f"  high watermark {rec['high_watermark']} (from {rec['high_watermark_source']})")
        if result is not None:
            r = result.range
            console.print(
                f"  cleanable range [{r.first_dirty}, {r.first_uncleanable}) (upper bound: {r.uncleanable_reason}), "
                f"dirty ratio {r.dirty_ratio:.3f}"
            )
        if result is not None and result.changes:
            s = result.stats.as_dict()
            table = Table(show_edge=False, pad_edge=False, box=None)
            table.add_column("")
            table.add_column("read", justify="right")
            table.add_column("kept", justify="right")
            table.add_column("removed", justify="right")
            table.add_row(
                "records", str(s["records_read"]), str(s["records_kept"]), str(s["records_removed"])
            )
            table.add_row(
                "tombstones",
                str(s["tombstones_read"]),
                str(s["tombstones_kept"]),
                str(s["tombstones_removed"]),
            )
            table.add_row(
                "bytes",
                str(s["bytes_before"]),
                str(s["bytes_after"]),
                str(s["bytes_before"] - s["bytes_after"]),
            )
            table.add_row("segments", str(s["segments_before"]), str(s["segments_after"]), "")
            console.print(table)
            extra = []
            for key, label in (
                ("aborted_batches_removed", "aborted batches removed"),
                ("markers_removed", "markers removed"),
                ("keyless_removed", "keyless records removed"),
                ("horizons_set", "delete horizons set"),
                ("empty_batches_kept", "empty batches kept"),
                ("batches_reencoded", "batches re-encoded"),
                ("batches_copied", "batches copied"),
            ):
                if s[key]:
                    extra.append(f"{label} {s[key]}")
            if extra:
                console.print("  " + ", ".join(extra))
            console.print(f"  cleaner checkpoint {rec['checkpoint_before']} -> {rec['checkpoint_after']}")
        elif result is None or result.error is None:
            console.print("  nothing to compact")
        if result is not None and result.error is not None:
            console.print(f"  [red]error:[/] {escape(result.error)}; the partition is left uncleanable")
        for n in rec["notes"]:
            console.print(f"  [dim]note: {n}[/]")
    verb = "would compact" if dry_run else "compacted"
    rate = summary["io_max_bytes_per_second"]
    console.print(
        f"{summary['partitions']} partition(s), {verb} {summary['compacted']}: records {summary['records_read']} -> "
        f"{summary['records_kept']}, bytes {summary['bytes_before']} -> {summary['bytes_after']}"
        + (f"; kept in quarantine: {len(summary['quarantined'])} file(s)" if summary["quarantined"] else "")
        + (f"; {summary['uncleanable']} left uncleanable" if summary["uncleanable"] else "")
        + (
            f"; throttled {summary['throttled_seconds']:.3f} s at {rate['value']:g} B/s ({rate['source']})"
            if rate["source"] != ts.SOURCE_DEFAULT
            else ""
        )
    )
